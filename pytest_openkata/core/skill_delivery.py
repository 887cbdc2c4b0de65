"""How the skill reaches the agent: pasted into the prompt, or installed where the agent looks.

``prompt`` (the default) is the reference runner's way: the skill's files are part of the
prompt (:mod:`pytest_openkata.core.prompt`). ``installed`` puts the skill's folder (a tile: each
of its skills) into the folder where the agent CLI discovers skills by itself
(:class:`~pytest_openkata.contracts.agents.DiscoversSkills`), and the prompt is the task alone:
the agent must decide by itself to load the skill, as it would for a user. Only an agent CLI
that declares such a folder can be given a skill that way; any other is a configuration error.

The installed files are the agent's tools, not its work: in a sandbox they go into the
workspace as the agent's own files, which the workspace diff leaves out; on the host they go
into a temporary working folder made for each call and removed afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from pytest_openkata.contracts.agents import AgentCLI, DiscoversSkills
from pytest_openkata.contracts.errors import AgentConfigError
from pytest_openkata.core.files import SkillReader, skill_files
from pytest_openkata.core.tile import is_tile_dir, load_tile
from pytest_openkata.infra.tempfiles import run_folder

__all__ = [
    "DELIVERIES",
    "INSTALLED",
    "PROMPT",
    "InstalledFile",
    "SkillDelivery",
    "discovering_agent",
    "installed_folder",
    "installed_skill_files",
]

SkillDelivery = Literal["prompt", "installed"]
PROMPT: SkillDelivery = "prompt"
INSTALLED: SkillDelivery = "installed"
DELIVERIES: tuple[SkillDelivery, ...] = (PROMPT, INSTALLED)

InstalledFile = tuple[str, bytes]
"""A file of an installed skill: its ``/``-separated path relative to the agent's working
folder, and its content."""


def discovering_agent(agent: AgentCLI) -> tuple[AgentCLI, str]:
    """The agent as it runs with installed skills, and the folder it discovers them in.
    Raises :class:`AgentConfigError` for an agent that declares no such folder."""
    if not isinstance(agent, DiscoversSkills):
        raise AgentConfigError(
            f"skill_delivery installed needs an agent that discovers skills in its working "
            f"folder; {agent.name} declares no skills folder: use an agent such as claude or "
            "codex (or, for scenarios, skill_delivery prompt)"
        )
    return agent.discovering(), agent.skills_folder.strip("/")


def _one_skill(name: str, skill_dir: Path, reader: SkillReader) -> list[InstalledFile]:
    """A skill folder's SKILL.md and its ``references/``, ``scripts/`` and ``assets/`` (the
    files the prompt delivery pastes), under ``name/``."""
    found = []
    data = reader.read(skill_dir / "SKILL.md")
    if data is not None:
        found.append((f"{name}/SKILL.md", data))
    for source, rel, path in skill_files(skill_dir):
        data = reader.read(path)
        if data is not None:
            found.append((f"{name}/{source}/{rel}", data))
    return found


def installed_skill_files(
    skills_folder: str, skill_dir: Path, source: Path | None = None
) -> list[InstalledFile]:
    """The files that install the skill of ``skill_dir`` under ``skills_folder``: a skill's
    folder as ``<skills_folder>/<folder name>/``, a tile's skills each under its own name.

    ``source`` is where the files are read (another copy of the skill, at a git ref); the
    names come from ``skill_dir``. Symlinks that lead out of the skill are never followed."""
    source = skill_dir if source is None else source
    reader = SkillReader(source)
    found: list[InstalledFile] = []
    if is_tile_dir(skill_dir):
        for name, skill_md in load_tile(source).skills:
            found += _one_skill(name, skill_md.parent, reader)
    else:
        found = _one_skill(skill_dir.name, source, reader)
    return [(f"{skills_folder}/{rel}", data) for rel, data in found]


@contextmanager
def installed_folder(files: Sequence[InstalledFile]) -> Iterator[Path]:
    """A temporary working folder holding ``files``, removed when the context ends (whatever
    the agent left in it), or as the interpreter exits when the scenario thread using it is
    still running then (an interrupted run does not wait for its daemon threads)."""
    with run_folder("skills") as name:
        folder = Path(name)
        for rel, data in files:
            path = folder.joinpath(*rel.split("/"))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        yield folder
