"""Arms of a run: the skill as it is, and the baseline it is compared with.

``--eval-baseline`` runs every scenario, each trial, a second time in a baseline arm:

- ``without-skill``: the prompt holds the task and the inputs only, and a sandbox has no
  ``/workspace/skill``;
- ``same``: the identical arm again (an A/A run), which measures the noise floor;
- any other value is a git ref (``v1.2.0``, ``HEAD~3``): the skill's files as they are at
  that commit, so that two versions of a skill are compared.

The run's own arm has the empty name; an arm's name goes into the cache keys of a baseline
arm only, so that the own arm's keys stay those of a run without a baseline.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import tarfile
import threading
from dataclasses import dataclass
from pathlib import Path

from pytest_openkata.contracts.errors import OpenkataError
from pytest_openkata.core.tile import TILE_FILE, has_context, is_tile_dir
from pytest_openkata.infra.tempfiles import new_temp_folder

__all__ = [
    "OWN_ARM",
    "RESERVED_NAMES",
    "SAME",
    "WITHOUT_SKILL",
    "WITH_SKILL",
    "Arm",
    "ArmError",
    "baseline_arm",
    "skill_at_ref",
]

WITHOUT_SKILL = "without-skill"
SAME = "same"
WITH_SKILL = "with-skill"
"""The own arm's name where a report names both arms (a CSV row's ``arm``)."""

RESERVED_NAMES = frozenset({WITHOUT_SKILL, SAME, WITH_SKILL, "none", "off"})
"""Names that mean an arm, or no baseline, wherever an arm is named (``--eval-baseline``, the
reports): no variant of a variants file may be labelled so, in any case."""


class ArmError(OpenkataError):
    """A baseline arm cannot be made (an unknown ref, a skill that did not exist there)."""


@dataclass(frozen=True)
class Arm:
    """``name`` is ``""`` for the run's own arm; ``skill`` is where the skill's files come
    from: the skill folder (True), another copy of it (a folder: at a git ref, or a variant's
    fixture), or nowhere (False). An arm made from a variants file has its variant's
    ``label`` (:mod:`pytest_openkata.core.variants`), and ``activation``: a line before the
    task tells the agent to use the skills installed for it."""

    name: str
    skill: Path | bool = True
    label: str = ""
    activation: bool = False

    @property
    def is_baseline(self) -> bool:
        return bool(self.name)


OWN_ARM = Arm("")

_extract_lock = threading.Lock()


def _git(folder: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            ["git", "-C", str(folder), *args], capture_output=True, check=False, timeout=120
        )
    except FileNotFoundError:
        raise ArmError("git is not installed") from None
    except subprocess.TimeoutExpired:
        raise ArmError(f"git {args[0]} did not finish within 120 s") from None


def _first_line(data: bytes) -> str:
    text = data.decode("utf-8", "replace").strip()
    return text.splitlines()[0] if text else ""


def skill_at_ref(skill_dir: Path, ref: str, folder: Path) -> Path:
    """The skill's files as they are at git ref ``ref``, extracted once under ``folder``
    (by commit, so that every process of a run and later runs share one copy). Every failure
    is an :class:`ArmError`.

    The files come from ``git archive``, so a ``.gitattributes`` ``export-ignore`` or
    ``export-subst`` of the repository applies to them, as to a release archive."""
    try:
        return _extracted(skill_dir, ref, folder)
    except (OSError, tarfile.TarError, ValueError) as exc:
        raise ArmError(f"{ref}: the skill's files cannot be extracted: {exc}") from exc


def _extracted(skill_dir: Path, ref: str, folder: Path) -> Path:
    top = _git(skill_dir, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise ArmError(f"{ref}: the skill is not in a git repository")
    root = Path(top.stdout.decode().strip())
    found = _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if found.returncode != 0:
        raise ArmError(f"{ref}: no such git ref (a tag, branch or commit)")
    commit = found.stdout.decode().strip()
    rel = skill_dir.resolve().relative_to(root.resolve()).as_posix()
    key = hashlib.sha256(f"{commit}\0{rel}".encode()).hexdigest()[:20]
    target = folder / key
    copy = target / rel
    with _extract_lock:
        if has_context(copy):
            return copy
        listed = _git(root, "ls-tree", "--name-only", commit, "--", rel)
        if listed.returncode != 0 or not listed.stdout.strip():
            raise ArmError(f"{ref}: {rel} does not exist at {ref} ({commit[:12]})")
        archive = _git(root, "archive", "--format=tar", commit, "--", rel)
        if archive.returncode != 0:
            raise ArmError(f"{ref}: git archive: {_first_line(archive.stderr)}")
        folder.mkdir(parents=True, exist_ok=True)
        staging = new_temp_folder(folder)
        try:
            with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
                tar.extractall(staging, filter="data")
            if not has_context(staging / rel):
                needed = TILE_FILE if is_tile_dir(skill_dir) else "SKILL.md"
                raise ArmError(f"{ref}: {rel} has no {needed} at {ref}")
            try:
                os.rename(staging, target)
            except OSError:  # another process extracted it meanwhile
                if not has_context(copy):
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return copy


def baseline_arm(setting: str, skill_dir: Path, refs_folder: Path) -> Arm | None:
    """The baseline arm ``--eval-baseline`` names for a skill; None when there is none."""
    if not setting:
        return None
    if setting == WITHOUT_SKILL:
        return Arm(WITHOUT_SKILL, False)
    if setting == SAME:
        return Arm(SAME, True)
    return Arm(setting, skill_at_ref(skill_dir, setting, refs_folder))
