"""Skillgrade: an ``eval.yaml`` with ``version``, ``defaults`` and ``tasks`` (each a mapping
with ``name`` and ``instruction``).

Each task is one scenario named by its ``name``. ``instruction`` and ``rubric`` are text or a
file beside ``eval.yaml`` (read when the value names a file there). ``workspace`` entries copy
a file or folder (``src``) to ``dest`` in the workspace (``chmod: "+x"`` makes it executable);
a ``dest`` outside the workspace is an error. A ``deterministic`` grader becomes a ``command``
check that runs ``setup`` then ``run`` and passes when the JSON it prints has a ``score`` of
1; an ``llm_rubric`` grader a judged criterion; weights scale to whole points. The files its
commands name beside ``eval.yaml`` are kept as check files and copied into the workspace only
when the grader runs. ``trials``, ``threshold``, ``docker`` (``base`` as the image, ``setup``
as setup commands) and ``environment`` (``cpus``, ``memory_mb``) come from ``defaults`` and
may be overridden per task. The agent, provider, timeout and grader model are the run's own
settings. A workspace entry may also be a path alone (placed under its file name) or give its
``content`` instead of a ``src``. Keys Skillgrade has that would change what the agent meets
and that this plugin cannot honour (``env``, ``trialConfig``, ``agentWorkingDir``,
``environment.mounts``) are errors naming them; keys it does not have are passed over, as
Skillgrade's own loader passes over them, and named in :attr:`EvalScenario.ignored_keys` for
lint to warn of.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_openkata.core.formats.model import (
    EvalScenario,
    FormatError,
    InputFile,
    JudgedCriterion,
    SandboxNeeds,
    ScenarioSource,
    integer_weights,
    validated_checks,
)
from pytest_openkata.core.formats.reading import (
    check_keys,
    files_of,
    inside,
    mapping_at,
    read_yaml,
    relative_inside,
)
from pytest_openkata.core.formats.waza import EVAL_FILE, is_waza_eval

__all__ = ["SkillgradeFormat", "score_command"]

NAME = "skillgrade"
TOP_KEYS = ("version", "skill", "defaults", "tasks")
SHARED_KEYS = (
    "agent",
    "provider",
    "trials",
    "timeout",
    "threshold",
    "grader_model",
    "docker",
    "environment",
)
TASK_KEYS = ("name", "instruction", "workspace", "graders", *SHARED_KEYS)
# Keys Skillgrade reads (in defaults and in a task) that this plugin cannot honour.
SHARED_UNSUPPORTED = {
    "env": "environment variables for the agent; this plugin gives the agent its own",
    "trialConfig": "per-trial setup, cleanup and env; give setup commands in docker.setup",
    "agentWorkingDir": "the agent works in the workspace this plugin makes",
}
ENVIRONMENT_UNSUPPORTED = {"mounts": "host folders are never mounted into the sandbox"}
GRADER_KEYS = ("type", "run", "setup", "weight", "rubric", "model", "name")
GRADER_TIMEOUT = 300.0


def score_command(run: str, setup: str = "") -> str:
    """The shell command of a deterministic grader: the grader's files copied into the
    workspace (they were kept out of the agent's sight until now), ``setup`` and ``run``,
    passing (exit 0) only when the ``score`` of the JSON that ``run`` prints is 1."""
    lines = ['if [ -n "${OPENKATA_CHECKS:-}" ]; then cp -R "$OPENKATA_CHECKS/." . ; fi']
    if setup.strip():
        lines.append(f"{{\n{setup.strip()}\n}} >&2 || exit 1")
    lines += [
        f"out=$(\n{run.strip()}\n)",
        "printf '%s\\n' \"$out\"",
        "score=$(printf '%s' \"$out\" | tr -d '\\n' | sed -n "
        "'s/.*\"score\"[[:space:]]*:[[:space:]]*\\([0-9.eE+-]*\\).*/\\1/p')",
        'awk -v s="$score" \'BEGIN { exit !(s != "" && s + 0 >= 1) }\'',
    ]
    return "\n".join(lines)


class SkillgradeFormat:
    """The reader of Skillgrade's ``eval.yaml``."""

    name = NAME
    # The files whose folder collection asks this format about (EvalFormat.files).
    files = ("eval.yaml",)

    def detect(self, folder: Path) -> bool:
        path = folder / EVAL_FILE
        if not path.is_file():
            return False
        try:
            data = read_yaml(NAME, path)
        except FormatError:
            return False
        tasks = data.get("tasks") if isinstance(data, Mapping) else None
        return isinstance(tasks, list) and not is_waza_eval(data)

    def scenarios(self, folder: Path) -> list[ScenarioSource]:
        path = folder / EVAL_FILE
        tasks = self._tasks(path)
        sources = [
            ScenarioSource(NAME, str(task["name"]), path, f"tasks[{index}]")
            for index, task in enumerate(tasks)
        ]
        names = [s.name for s in sources]
        twice = next((n for n in names if names.count(n) > 1), None)
        if twice is not None:
            raise FormatError(NAME, path, f"two tasks are named {twice!r}", "tasks")
        return sources

    def load(self, source: ScenarioSource) -> EvalScenario:
        path = source.path
        folder = path.parent
        index = int(source.key.removeprefix("tasks[").rstrip("]"))
        ignored: list[str] = []
        data = self._data(path, ignored)
        defaults = mapping_at(NAME, path, data.get("defaults"), "defaults")
        task = self._tasks(path, ignored, index)[index]
        where = source.key
        merged = {**defaults, **{k: v for k, v in task.items() if k in SHARED_KEYS}}
        instruction = _text_or_file(path, folder, task.get("instruction"), f"{where}.instruction")
        inputs = self._workspace(path, folder, task.get("workspace"), f"{where}.workspace", ignored)
        graded: list[tuple[dict[str, Any], float]] = []
        check_files: dict[str, InputFile] = {}
        graders = task.get("graders")
        if not isinstance(graders, list) or not graders:
            raise FormatError(NAME, path, "every task needs graders", f"{where}.graders")
        for number, grader in enumerate(graders):
            field = f"{where}.graders[{number}]"
            graded.append(self._grader(path, folder, grader, field, number=number, ignored=ignored))
            for grader_file in _grader_files(path, folder, grader, field):
                check_files[grader_file.path] = grader_file
        weights = integer_weights([w for _, w in graded])
        criteria, checks = [], []
        for (item, _), weight in zip(graded, weights, strict=True):
            if item["type"] == "criterion":
                criteria.append(JudgedCriterion(item["name"], item["description"], weight))
            else:
                checks.append({**item, "max_score": weight})
        docker = mapping_at(NAME, path, merged.get("docker"), "defaults.docker")
        check_keys(NAME, path, docker, "docker", known=("base", "setup"), ignored=ignored)
        environment = mapping_at(NAME, path, merged.get("environment"), "defaults.environment")
        check_keys(
            NAME,
            path,
            environment,
            "environment",
            known=("cpus", "memory_mb"),
            unsupported=ENVIRONMENT_UNSUPPORTED,
            ignored=ignored,
        )
        setup = str(docker.get("setup") or "").strip()
        trials = merged.get("trials")
        threshold = merged.get("threshold")
        return EvalScenario(
            source=source,
            task=instruction,
            criteria=tuple(criteria),
            checks=validated_checks(path, checks),
            check_files=tuple(check_files.values()),
            inputs=tuple(inputs),
            setup=(setup,) if setup else (),
            sandbox=SandboxNeeds(
                sandbox=True,
                cpus=float(environment["cpus"]) if "cpus" in environment else None,
                memory_mb=int(environment["memory_mb"]) if "memory_mb" in environment else None,
                image=str(docker.get("base") or ""),
            ),
            trials=trials if isinstance(trials, int) and trials > 0 else None,
            threshold=float(threshold) if isinstance(threshold, int | float) else None,
            ignored_keys=tuple(dict.fromkeys(ignored)),
        )

    def _data(self, path: Path, ignored: list[str] | None = None) -> Mapping[str, Any]:
        """The file's top mapping; the keys it does not know at its top and in ``defaults``
        are added to ``ignored``."""
        passed_over: list[str] = []
        data = mapping_at(NAME, path, read_yaml(NAME, path), "")
        check_keys(NAME, path, data, "", known=TOP_KEYS, ignored=passed_over)
        defaults = mapping_at(NAME, path, data.get("defaults"), "defaults")
        check_keys(
            NAME,
            path,
            defaults,
            "defaults",
            known=SHARED_KEYS,
            unsupported=SHARED_UNSUPPORTED,
            ignored=passed_over,
        )
        if ignored is not None:
            ignored += passed_over
        return data

    def _tasks(
        self, path: Path, ignored: list[str] | None = None, of: int | None = None
    ) -> list[Mapping[str, Any]]:
        """The file's tasks; the keys the task ``of`` does not know are added to
        ``ignored``."""
        tasks = self._data(path).get("tasks")
        if not isinstance(tasks, list) or not tasks:
            raise FormatError(NAME, path, "must be a list of tasks", "tasks")
        for index, task in enumerate(tasks):
            field = f"tasks[{index}]"
            mapping_at(NAME, path, task, field)
            if index == of:  # each task's keys are its own scenario's error, not the file's
                check_keys(
                    NAME,
                    path,
                    task,
                    field,
                    known=TASK_KEYS,
                    unsupported=SHARED_UNSUPPORTED,
                    ignored=ignored,
                )
            if not isinstance(task.get("name"), str) or not task["name"].strip():
                raise FormatError(NAME, path, "every task needs a name", f"{field}.name")
        return tasks

    def _workspace(
        self, path: Path, folder: Path, entries: Any, field: str, ignored: list[str]
    ) -> list[InputFile]:
        if entries is None:
            return []
        if not isinstance(entries, list):
            raise FormatError(NAME, path, "must be a list of files", field)
        files: list[InputFile] = []
        for index, given in enumerate(entries):
            where = f"{field}[{index}]"
            shorthand = isinstance(given, str) and given.strip()  # a path alone: its file name
            raw = {"src": given, "dest": Path(given).name} if shorthand else given
            entry = mapping_at(NAME, path, raw, where)
            known = ("src", "content", "dest", "chmod")
            check_keys(NAME, path, entry, where, known=known, ignored=ignored)
            found = self._workspace_entry(path, folder, entry, where)
            chmod = str(entry.get("chmod") or "")
            if chmod and chmod not in ("+x", "755", "0755"):
                raise FormatError(
                    NAME, path, 'only "+x" can be given to a workspace file', f"{where}.chmod"
                )
            if chmod:
                found = [InputFile(f.path, f.content, True) for f in found]
            files += found
        return files

    def _workspace_entry(
        self, path: Path, folder: Path, entry: Mapping[str, Any], where: str
    ) -> list[InputFile]:
        """The files of one workspace entry: its ``src`` file or folder, or its ``content``
        as the file ``dest``."""
        src, dest, content = entry.get("src"), entry.get("dest"), entry.get("content")
        if content is not None:
            if src is not None:
                raise FormatError(NAME, path, "give src or content, not both", where)
            if not isinstance(content, str):
                raise FormatError(NAME, path, "must be the file's text", f"{where}.content")
            if not isinstance(dest, str) or not dest.strip():
                raise FormatError(
                    NAME, path, "an entry with content needs its dest", f"{where}.dest"
                )
            place = relative_inside(NAME, path, dest, f"{where}.dest")
            return [InputFile(place, content.encode())]
        if not isinstance(src, str) or not src:
            raise FormatError(
                NAME, path, "every workspace entry needs its src or content", f"{where}.src"
            )
        dest_path = relative_inside(NAME, path, str(dest or Path(src).name), f"{where}.dest")
        return files_of(NAME, path, folder / src, dest_path, f"{where}.src")

    def _grader(
        self, path: Path, folder: Path, raw: Any, field: str, *, number: int, ignored: list[str]
    ) -> tuple[dict[str, Any], float]:
        grader = mapping_at(NAME, path, raw, field)
        check_keys(NAME, path, grader, field, known=GRADER_KEYS, ignored=ignored)
        weight = grader.get("weight", 1)
        if isinstance(weight, bool) or not isinstance(weight, int | float) or weight <= 0:
            raise FormatError(NAME, path, "must be a positive number", f"{field}.weight")
        kind = grader.get("type")
        name = str(grader.get("name") or f"{kind} {number + 1}")
        if kind == "llm_rubric":
            rubric = _text_or_file(path, folder, grader.get("rubric"), f"{field}.rubric")
            return {"type": "criterion", "name": name, "description": rubric}, float(weight)
        if kind == "deterministic":
            run = grader.get("run")
            if not isinstance(run, str) or not run.strip():
                raise FormatError(
                    NAME, path, "a deterministic grader needs its run command", f"{field}.run"
                )
            setup = str(grader.get("setup") or "")
            command = score_command(run, setup)
            check = {
                "name": name,
                "type": "command",
                "run": command,
                "timeout": GRADER_TIMEOUT,
                "description": f"the score printed by {run.strip()!r} is 1",
            }
            return check, float(weight)
        raise FormatError(
            NAME,
            path,
            f"grader type {kind!r} is not supported; choose deterministic or llm_rubric",
            f"{field}.type",
        )


def _grader_files(path: Path, folder: Path, grader: Any, field: str) -> list[InputFile]:
    """The files beside ``eval.yaml`` that a deterministic grader's commands name (each word
    of ``run`` and ``setup`` that is a file or folder there), at the same relative paths."""
    if not isinstance(grader, Mapping) or grader.get("type") != "deterministic":
        return []
    words = f"{grader.get('run') or ''} {grader.get('setup') or ''}".split()
    found: list[InputFile] = []
    for word in words:
        candidate = folder / word
        if word.startswith(("-", "/")) or ".." in word.split("/") or not candidate.exists():
            continue
        place = relative_inside(NAME, path, word, field)
        found += files_of(NAME, path, candidate, place, field)
    return found


def _text_or_file(path: Path, folder: Path, value: Any, field: str) -> str:
    """A text value, or the content of the file beside ``eval.yaml`` that it names."""
    if not isinstance(value, str) or not value.strip():
        raise FormatError(NAME, path, "must be a non-empty text or file name", field)
    candidate = folder / value.strip()
    if "\n" not in value.strip() and len(value) < 1024 and candidate.is_file():
        inside(NAME, path, candidate, field)
        return candidate.read_text(encoding="utf-8", errors="replace")
    return value
