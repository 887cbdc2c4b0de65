"""Harbor tasks: a folder with ``task.toml``, ``instruction.md``, ``environment/`` (a
Dockerfile), ``tests/test.sh`` and ``solution/solve.sh``.

A folder that is a task is one scenario; a folder whose subfolders are tasks (a dataset) is
one scenario per task, each named by its folder. ``instruction.md`` is the task. The verifier
becomes one ``command`` check: ``tests/`` is kept as the scenario's check files and copied to
``/tests`` in the sandbox after the agent finished (never before, so the agent cannot read
it), ``test.sh`` runs, and the check passes when the reward it wrote to
``/logs/verifier/reward.txt`` is 1 (a partial reward fails it). ``solution/`` is kept as the
scenario's reference solution, ``environment/Dockerfile`` or ``[environment].docker_image`` as
the sandbox's image, ``cpus``, ``memory_mb`` and ``allow_internet`` as its needs, and
``build_timeout_sec`` (Harbor's default of 600 s when absent) as the bound on the
Dockerfile's build (scenario.json's ``build_timeout_sec``; an error about it names this
task.toml key, :attr:`HarborFormat.scenario_keys`). Multi-step
tasks, GPUs, MCP servers and environment variables for the verifier or the solution are
errors: this plugin cannot honour them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from pytest_openkata.core.formats.model import (
    EvalScenario,
    FormatError,
    SandboxNeeds,
    ScenarioSource,
    validated_checks,
)
from pytest_openkata.core.formats.reading import (
    check_keys,
    files_of,
    inside,
    mapping_at,
    read_toml,
)

__all__ = ["REWARD_FILE", "HarborFormat", "is_task", "verifier_command"]

NAME = "harbor"
TASK_FILE = "task.toml"
INSTRUCTION = "instruction.md"
REWARD_FILE = "/logs/verifier/reward.txt"
VERIFIER_TIMEOUT = 600.0  # Harbor's default verifier timeout, in seconds
BUILD_TIMEOUT = 600.0  # Harbor's default bound on the environment's build, in seconds
TOP_KEYS = ("version", "metadata", "verifier", "agent", "solution", "environment", "source")
TOP_UNSUPPORTED = {
    "schema_version": "multi-step tasks",
    "steps": "multi-step tasks",
    "min_reward": "multi-step tasks",
}
ENVIRONMENT_KEYS = (
    "build_timeout_sec",
    "docker_image",
    "cpus",
    "memory_mb",
    "memory",
    "storage_mb",
    "storage",
    "allow_internet",
    "gpus",
    "gpu_types",
)


def is_task(folder: Path) -> bool:
    return (folder / TASK_FILE).is_file() and (folder / INSTRUCTION).is_file()


def verifier_command() -> str:
    """The shell command that copies the task's ``tests/`` (the scenario's ``checks/tests``)
    to ``/tests``, runs ``test.sh`` and passes (exit 0) only on a reward of 1."""
    return "\n".join(
        [
            "rm -rf /tests && mkdir -p /tests /logs/verifier",
            'cp -R "$OPENKATA_CHECKS/tests/." /tests/',
            f"rm -f {REWARD_FILE}",
            "if command -v bash >/dev/null; then bash /tests/test.sh; else sh /tests/test.sh; fi",
            f"reward=$(cat {REWARD_FILE} 2>/dev/null || echo missing)",
            'echo "reward: $reward"',
            "awk -v r=\"$reward\" 'BEGIN { exit !(r ~ /^[ \\t]*[0-9.]+[ \\t]*$/ && r + 0 >= 1) }'",
        ]
    )


class HarborFormat:
    """The reader of Harbor task folders."""

    name = NAME
    # The files whose folder collection asks this format about (EvalFormat.files).
    files = ("task.toml",)
    # scenario.json's keys that come from task.toml, as errors about them name them there.
    scenario_keys: ClassVar[Mapping[str, str]] = {
        "build_timeout_sec": "environment.build_timeout_sec"
    }

    def detect(self, folder: Path) -> bool:
        return is_task(folder) or any(is_task(child) for child in _children(folder))

    def scenarios(self, folder: Path) -> list[ScenarioSource]:
        tasks = [folder] if is_task(folder) else [c for c in _children(folder) if is_task(c)]
        return [ScenarioSource(NAME, task.name, task / TASK_FILE) for task in tasks]

    def load(self, source: ScenarioSource) -> EvalScenario:
        path = source.path
        task_dir = path.parent
        data = mapping_at(NAME, path, read_toml(NAME, path), "")
        check_keys(NAME, path, data, "", known=TOP_KEYS, unsupported=TOP_UNSUPPORTED)
        verifier = _table(path, data, "verifier", ("timeout_sec",), env=True)
        _table(path, data, "agent", ("timeout_sec",))
        _table(path, data, "solution", (), env=True)
        environment = mapping_at(NAME, path, data.get("environment"), "environment")
        check_keys(
            NAME,
            path,
            environment,
            "environment",
            known=ENVIRONMENT_KEYS,
            unsupported={"mcp_servers": "MCP servers", "env": "environment variables"},
        )
        if environment.get("gpus"):
            raise FormatError(
                NAME, path, "GPUs are not supported by this plugin", "environment.gpus"
            )
        instruction = (task_dir / INSTRUCTION).read_text(encoding="utf-8", errors="replace")
        if not instruction.strip():
            raise FormatError(
                NAME, task_dir / INSTRUCTION, "is empty: the task needs an instruction"
            )
        tests_dir = task_dir / "tests"
        if not (tests_dir / "test.sh").is_file():
            raise FormatError(NAME, tests_dir / "test.sh", "file not found (the task's verifier)")
        timeout = float(verifier.get("timeout_sec", VERIFIER_TIMEOUT))
        check = {
            "name": "tests/test.sh",
            "description": f"the verifier's reward ({REWARD_FILE}) is 1",
            "type": "command",
            "run": verifier_command(),
            "timeout": timeout,
            "max_score": 1,
        }
        # Both folders are sent on whole (the build's context, the solution's files): through
        # the same guard as tests/, never through a link out of the task's folder.
        environment_dir = inside(NAME, path, task_dir / "environment", "environment", unit=task_dir)
        dockerfile = inside(
            NAME, path, environment_dir / "Dockerfile", "environment", unit=task_dir
        )
        solution = inside(NAME, path, task_dir / "solution", "solution", unit=task_dir)
        internet = environment.get("allow_internet", True)
        return EvalScenario(
            source=source,
            task=instruction,
            description=str(
                mapping_at(NAME, path, data.get("metadata"), "metadata").get("description", "")
            ),
            checks=validated_checks(path, [check]),
            check_files=tuple(files_of(NAME, path, tests_dir, "tests", "tests")),
            sandbox=SandboxNeeds(
                sandbox=True,
                network="" if internet else "none",
                cpus=_number(path, environment, "cpus"),
                memory_mb=_memory(path, environment),
                image=str(environment.get("docker_image") or ""),
                dockerfile=dockerfile if dockerfile.is_file() else None,
                build_timeout_sec=_number(path, environment, "build_timeout_sec") or BUILD_TIMEOUT,
            ),
            solution=solution if (solution / "solve.sh").is_file() else None,
        )


def _children(folder: Path) -> list[Path]:
    try:
        return sorted(c for c in folder.iterdir() if c.is_dir() and not c.is_symlink())
    except OSError:
        return []


def _table(path: Path, data: Any, key: str, known: tuple[str, ...], *, env: bool = False) -> Any:
    table = mapping_at(NAME, path, data.get(key), key)
    unsupported = {}
    if env:
        unsupported["env"] = "environment variables"
    check_keys(NAME, path, table, key, known=known, unsupported=unsupported)
    return table


def _number(path: Path, table: Any, key: str) -> float | None:
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise FormatError(NAME, path, "must be a positive number", f"environment.{key}")
    return float(value)


def _memory(path: Path, table: Any) -> int | None:
    """``memory_mb``, or the older ``memory`` such as ``"2G"`` or ``"512M"``."""
    if "memory_mb" in table:
        value = _number(path, table, "memory_mb")
        return None if value is None else int(value)
    text = str(table.get("memory", "")).strip().upper()
    if not text:
        return None
    units = {"G": 1024, "M": 1}
    if text[-1:] in units and text[:-1].isdigit():
        return int(text[:-1]) * units[text[-1]]
    raise FormatError(NAME, path, f"not a size such as 2G or 512M: {text!r}", "environment.memory")
