"""Kiro CLI (``kiro-cli``), the reference runner's agent (spec sections 5a and 6).

Plain mode (the judge) runs ``kiro-cli chat --no-interactive --model M``. Agent mode adds
``--agent eval-agent`` and must run in a folder holding ``.kiro/agents/eval-agent.json``: on the
host that is :func:`prepare_agent_dir` (pass ``functools.partial(prepare_agent_dir, skill)`` as
the backend's ``cwd_factory``), in the sandbox the workspace gets :data:`EVAL_AGENT_SANDBOX`.
``--trust-all-tools`` is given in the sandbox only: on the host, kiro-cli's headless mode has
nobody to approve a tool call, so only the tools it trusts by default can run (section 13 item
11; the host's eval-agent.json stays the reference's, with no ``tools`` key). ``--model`` is
passed in every mode, the sandbox included (fix of section 13 item 8). The prompt is read from
standard input: kiro-cli reads it there when no prompt argument is given (and ignores standard
input when one is).

The answer is cleaned as the reference cleans it (:func:`~.clean_output`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from pytest_openkata.contracts.agents import AgentInvocation, AgentSettings, Mount
from pytest_openkata.infra.gojson import encode_string
from pytest_openkata.infra.tempfiles import run_folder
from pytest_openkata.infra.text import clean_output

__all__ = [
    "AGENT_DIR_PREFIX",
    "EVAL_AGENT_DIRECT",
    "EVAL_AGENT_NAME",
    "EVAL_AGENT_SANDBOX",
    "KIRO_CLI",
    "KIRO_INSTALL_HINT",
    "AgentDir",
    "KiroAgent",
    "agent_config_json",
    "prepare_agent_dir",
]

KIRO_CLI = "kiro-cli"
KIRO_INSTALL_HINT = "Install: https://docs.kiro.dev/install"
EVAL_AGENT_NAME = "eval-agent"
AGENT_DIR_KIND = "eval-agent"
AGENT_DIR_PREFIX = f"openkata-{AGENT_DIR_KIND}-"
AGENT_CONFIG_PATH = Path(".kiro", "agents", f"{EVAL_AGENT_NAME}.json")

_RESOURCES = [
    "file://skill/SKILL.md",
    "file://skill/references/**",
    "file://skill/scripts/**",
    "file://skill/assets/**",
]
_SANDBOX_TOOLS = ["fs_read", "fs_write", "execute_bash", "grep", "glob"]

EVAL_AGENT_DIRECT: dict[str, Any] = {"name": EVAL_AGENT_NAME, "resources": list(_RESOURCES)}
"""The host's agent config (spec 5a step 3): no ``tools`` key."""

EVAL_AGENT_SANDBOX: dict[str, Any] = {
    "allowedTools": list(_SANDBOX_TOOLS),
    "name": EVAL_AGENT_NAME,
    "resources": list(_RESOURCES),
    "tools": list(_SANDBOX_TOOLS),
}
"""The sandbox's agent config (spec section 6 step 8)."""


def agent_config_json(config: Mapping[str, Any]) -> str:
    """``config`` as Go's ``json.Marshal`` writes it: compact, keys sorted, HTML-safe escapes,
    no trailing newline."""
    return _compact(config)


def _compact(value: object) -> str:
    if isinstance(value, Mapping):
        members = (f"{encode_string(key)}:{_compact(value[key])}" for key in sorted(value))
        return "{" + ",".join(members) + "}"
    if isinstance(value, str):
        return encode_string(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, Sequence):
        return "[" + ",".join(_compact(item) for item in value) + "]"
    raise TypeError(f"agent config values are strings, lists and objects, not {value!r}")


class AgentDir:
    """A temporary ``openkata-eval-agent-*`` folder for kiro's agent mode (spec 5a steps 1-4).

    It holds ``.kiro/agents/eval-agent.json`` (0644, :data:`EVAL_AGENT_DIRECT`) and a symlink
    ``skill`` to the absolute skill path. Created at once; removed by :meth:`cleanup` or at the
    end of a ``with`` block, which gives the folder's path.
    """

    def __init__(self, skill_dir: Path, config: Mapping[str, Any] = EVAL_AGENT_DIRECT) -> None:
        self._tmp = run_folder(AGENT_DIR_KIND)
        self.path = Path(self._tmp.name)
        try:
            _populate(self.path, skill_dir, config)
        except BaseException:
            self._tmp.cleanup()
            raise

    @property
    def name(self) -> str:
        return self._tmp.name

    def cleanup(self) -> None:
        self._tmp.cleanup()

    def __enter__(self) -> Path:
        return self.path

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def _populate(root: Path, skill_dir: Path, config: Mapping[str, Any]) -> None:
    agents = root / AGENT_CONFIG_PATH.parent
    agents.mkdir(parents=True)
    for folder in (agents.parent, agents):
        folder.chmod(0o755)
    config_file = root / AGENT_CONFIG_PATH
    config_file.write_text(agent_config_json(config), encoding="utf-8")
    config_file.chmod(0o644)
    # The reference ignores a failed symlink; the agent then simply finds no skill.
    with contextlib.suppress(OSError):
        (root / "skill").symlink_to(os.path.abspath(skill_dir))


def prepare_agent_dir(skill_dir: Path) -> AgentDir:
    """A fresh agent folder for one kiro agent-mode run on the host (spec 5a steps 1-4, 6)."""
    return AgentDir(skill_dir)


@dataclass(frozen=True)
class KiroAgent:
    """``kiro-cli chat``; see the module docstring."""

    executable: str = KIRO_CLI
    name: str = field(default=KIRO_CLI, init=False)
    install_hint: str = field(default=KIRO_INSTALL_HINT, init=False)
    output_in_errors: bool = field(default=False, init=False)
    # As the reference mounts them: kiro-cli's login lives in ~/.kiro, AWS profiles in ~/.aws.
    credential_mounts: tuple[Mount, ...] = field(
        default=(("~/.aws", "/root/.aws"), ("~/.kiro", "/root/.kiro")), init=False
    )

    @property
    def endpoint(self) -> str:
        return "kiro"

    @classmethod
    def from_settings(cls, settings: AgentSettings) -> KiroAgent:
        return cls(settings.executable or KIRO_CLI)

    def invocation(
        self, *, model: str, workspace_agent: bool, sandboxed: bool = False
    ) -> AgentInvocation:
        argv = [self.executable, "chat"]
        if workspace_agent or sandboxed:
            argv += ["--agent", EVAL_AGENT_NAME]
        if sandboxed:
            argv.append("--trust-all-tools")
        argv.append("--no-interactive")
        if model:  # as in the reference, an empty model leaves kiro-cli its default
            argv += ["--model", model]
        return AgentInvocation(argv)

    def clean(self, output: str) -> str:
        return clean_output(output)

    def workspace_files(self) -> tuple[tuple[str, bytes], ...]:
        """The sandbox's ``.kiro/agents/eval-agent.json`` (spec section 6 step 8)."""
        return ((AGENT_CONFIG_PATH.as_posix(), agent_config_json(EVAL_AGENT_SANDBOX).encode()),)

    def host_folder(self, skill_dir: Path) -> AgentDir:
        """A fresh agent folder for an agent-mode run on the host (spec 5a steps 1-4)."""
        return prepare_agent_dir(skill_dir)


if TYPE_CHECKING:  # the protocol this provider implements, checked by mypy
    from pytest_openkata.contracts.agents import AgentCLI

    _implements: type[AgentCLI] = KiroAgent
