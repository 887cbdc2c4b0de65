"""waza: an ``eval.yaml`` whose ``tasks`` are globs of task files (YAML).

waza's own parsers reject keys outside its schema, so this reader does too, and a key or
grader the schema has but this plugin cannot honour is an error naming it. Each task file is
one scenario named by its ``id``. The task's ``inputs`` give the prompt (``prompt``, or
``prompt_file`` relative to the task file), files (``path`` relative to the task's
``context_dir``; without one, to waza's default ``fixtures/`` beside ``eval.yaml`` when that
folder is there, else to the eval's folder; or inline ``content``), a ``context.fixture`` folder
copied into the workspace, ``follow_up_prompts`` and a ``responder`` (the simulated user).
Graders, the eval's and then the task's, become judged criteria (``prompt``) or exact checks
(``text``, ``file``, ``json_schema``, ``program``, ``code``, ``behavior``,
``action_sequence``, ``skill_invocation``, ``tool_constraint`` and ``diff``'s ``contains``),
each grader's ``weight`` (default 1) shared by the checks it becomes;
``expected.output_contains`` and its kin are checks too. ``config.trials_per_task`` gives the
trials. Which agent, model and timeouts run is the run's own settings: those keys are read
and left to them.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pytest_openkata.core.formats.model import (
    DirectoryFixture,
    EvalScenario,
    FormatError,
    InputFile,
    JudgedCriterion,
    ScenarioSource,
    integer_weights,
    validated_checks,
)
from pytest_openkata.core.formats.reading import (
    check_keys,
    escaped,
    files_of,
    inside,
    mapping_at,
    read_json_file,
    read_yaml,
    relative_inside,
    unit_of,
)
from pytest_openkata.core.scenario import SimulatedUser

__all__ = ["EVAL_FILE", "WazaFormat", "is_waza_eval"]

NAME = "waza"
EVAL_FILE = "eval.yaml"
RUN_SETTINGS = "the agent, model and timeouts are the run's settings"

EVAL_KEYS = (
    "name",
    "description",
    "skill",
    "scenario",
    "schemaVersion",
    "version",
    "config",
    "graders",
    "metrics",
    "tasks",
)
EVAL_UNSUPPORTED = {
    "hooks": "lifecycle hooks",
    "mcp_mocks": "MCP mock servers",
    "command_mocks": "command mocks",
    "inputs": "global template variables",
    "tasks_from": "tasks from a CSV dataset",
    "range": "a range of tasks",
    "baseline": "a baseline run (use the run's baseline setting)",
}
CONFIG_KEYS = (
    "trials_per_task",
    "timeout_seconds",
    "first_event_timeout_seconds",
    "parallel",
    "workers",
    "fail_fast",
    "executor",
    "model",
    "reasoning_effort",
    "max_attempts",
    "group_by",
    "judge_model",
    "judge_reasoning_effort",
    "inject_skill_body",
)
CONFIG_UNSUPPORTED = {
    "skill_directories": "other skill folders",
    "instruction_files": "instruction files",
    "trigger_skill_routing": "trigger routing",
    "disabled_skills": "disabled skills",
    "required_skills": "required skills",
    "mcp_servers": "MCP servers",
}
TASK_KEYS = (
    "id",
    "name",
    "description",
    "enabled",
    "golden",
    "context_dir",
    "timeout_seconds",
    "first_event_timeout_seconds",
    "tags",
    "inputs",
    "expected",
    "graders",
)
TASK_UNSUPPORTED = {
    "skill_directories": "other skill folders",
    "instruction_files": "instruction files",
}
INPUT_KEYS = ("prompt", "prompt_file", "context", "files", "follow_up_prompts", "responder")
INPUT_UNSUPPORTED = {
    "repos": "git worktrees in the workspace",
    "workdir": "a working folder other than the workspace",
    "environment": "environment variables for the agent",
}
EXPECTED_KEYS = ("output_contains", "output_not_contains", "behavior")
EXPECTED_UNSUPPORTED = {
    "outcomes": "outcome predicates",
    "tool_calls": "tool-call patterns",
    "should_trigger": "trigger expectations (trigger evals)",
}
GRADER_KEYS = ("name", "type", "assertions", "rubric", "weight", "config")
GRADER_UNSUPPORTED_TYPES = {
    "trigger": "trigger graders (trigger evals)",
}
ORDERS = {"exact_match": "exact", "in_order_match": "in_order", "any_order_match": "any_order"}


def is_waza_eval(data: Any) -> bool:
    """Whether a parsed ``eval.yaml`` is waza's: its ``tasks`` are file globs (Skillgrade's
    are mappings)."""
    tasks = data.get("tasks") if isinstance(data, Mapping) else None
    return isinstance(tasks, list) and all(isinstance(t, str) for t in tasks) and "config" in data


class WazaFormat:
    """The reader of waza's ``eval.yaml`` and its task files."""

    name = NAME
    # The files whose folder collection asks this format about (EvalFormat.files).
    files = ("eval.yaml",)

    def detect(self, folder: Path) -> bool:
        path = folder / EVAL_FILE
        if not path.is_file():
            return False
        try:
            return is_waza_eval(read_yaml(NAME, path))
        except FormatError:
            return False

    def scenarios(self, folder: Path) -> list[ScenarioSource]:
        path = folder / EVAL_FILE
        spec = self._spec(path)
        sources: list[ScenarioSource] = []
        for glob in spec.get("tasks") or []:
            for task_file in sorted(folder.glob(glob)):
                task = self._task(task_file)
                if task.get("enabled", True) is False:
                    continue
                sources.append(ScenarioSource(NAME, str(task["id"]), task_file, listed_in=path))
        if not sources:
            raise FormatError(NAME, path, "no task file matches these globs", "tasks")
        names = [s.name for s in sources]
        twice = next((n for n in names if names.count(n) > 1), None)
        if twice is not None:
            raise FormatError(NAME, path, f"two task files have the id {twice!r}", "tasks")
        return sources

    def load(self, source: ScenarioSource) -> EvalScenario:
        eval_path = source.listed_in or source.path.parent / EVAL_FILE
        spec = self._spec(eval_path)
        path = source.path
        task = self._task(path)
        inputs_map = mapping_at(NAME, path, task.get("inputs"), "inputs")
        check_keys(
            NAME, path, inputs_map, "inputs", known=INPUT_KEYS, unsupported=INPUT_UNSUPPORTED
        )
        unit = unit_of(eval_path)  # what the task's files may be read from
        prompt = self._prompt(path, inputs_map, unit)
        context_dir = _context_dir(eval_path, task)
        inputs, fixtures = self._inputs(path, inputs_map, context_dir, unit)
        if "follow_up_prompts" in inputs_map and "responder" in inputs_map:
            raise FormatError(
                NAME, path, "give follow_up_prompts or a responder, not both", "inputs.responder"
            )
        follow_ups = inputs_map.get("follow_up_prompts") or []
        if not isinstance(follow_ups, list) or not all(isinstance(p, str) for p in follow_ups):
            raise FormatError(NAME, path, "must be a list of prompts", "inputs.follow_up_prompts")
        graded: list[tuple[str, dict[str, Any], float]] = []
        for where, file, graders in (
            ("graders", eval_path, spec.get("graders")),
            ("graders", path, task.get("graders")),
        ):
            if graders is None:
                continue
            if not isinstance(graders, list):
                raise FormatError(NAME, file, "must be a list of graders", where)
            for index, grader in enumerate(graders):
                graded += _grader(file, f"{where}[{index}]", grader)
        expected = mapping_at(NAME, path, task.get("expected"), "expected")
        check_keys(
            NAME, path, expected, "expected", known=EXPECTED_KEYS, unsupported=EXPECTED_UNSUPPORTED
        )
        graded += _expected(path, expected)
        if not graded:
            raise FormatError(NAME, path, "the task has no grader this plugin can run", "graders")
        weights = integer_weights([w for _, _, w in graded])
        criteria, checks = [], []
        for (kind, item, _), weight in zip(graded, weights, strict=True):
            if kind == "criterion":
                criteria.append(JudgedCriterion(item["name"], item["description"], weight))
            else:
                checks.append({**item, "max_score": weight})
        config = mapping_at(NAME, eval_path, spec.get("config"), "config")
        trials = config.get("trials_per_task")
        return EvalScenario(
            source=source,
            task=prompt,
            description=str(task.get("description") or task.get("name") or ""),
            criteria=tuple(criteria),
            checks=validated_checks(path, checks),
            inputs=tuple(inputs),
            fixtures=tuple(fixtures),
            trials=trials if isinstance(trials, int) and trials > 0 else None,
            follow_ups=tuple(follow_ups),
            simulated_user=_responder(path, inputs_map.get("responder")),
        )

    def _spec(self, path: Path) -> Mapping[str, Any]:
        spec = mapping_at(NAME, path, read_yaml(NAME, path), "")
        check_keys(NAME, path, spec, "", known=EVAL_KEYS, unsupported=EVAL_UNSUPPORTED)
        config = mapping_at(NAME, path, spec.get("config"), "config")
        check_keys(NAME, path, config, "config", known=CONFIG_KEYS, unsupported=CONFIG_UNSUPPORTED)
        tasks = spec.get("tasks")
        if not isinstance(tasks, list) or not all(isinstance(t, str) and t for t in tasks):
            raise FormatError(NAME, path, "must be a list of task file globs", "tasks")
        return spec

    def _task(self, path: Path) -> Mapping[str, Any]:
        task = mapping_at(NAME, path, read_yaml(NAME, path), "")
        check_keys(NAME, path, task, "", known=TASK_KEYS, unsupported=TASK_UNSUPPORTED)
        if not isinstance(task.get("id"), str | int) or str(task.get("id")).strip() == "":
            raise FormatError(NAME, path, "every task needs an id", "id")
        return task

    def _prompt(self, path: Path, inputs: Mapping[str, Any], unit: Path) -> str:
        if "prompt" in inputs and "prompt_file" in inputs:
            raise FormatError(NAME, path, "give prompt or prompt_file, not both", "inputs")
        if "prompt_file" in inputs:
            prompt_path = path.parent / str(inputs["prompt_file"])
            inside(NAME, path, prompt_path, "inputs.prompt_file", unit=unit)
            if not prompt_path.is_file():
                raise FormatError(
                    NAME,
                    path,
                    f"prompt file not found: {inputs['prompt_file']}",
                    "inputs.prompt_file",
                )
            prompt: Any = prompt_path.read_text(encoding="utf-8", errors="replace")
        else:
            prompt = inputs.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise FormatError(
                NAME, path, "every task needs a prompt or a prompt_file", "inputs.prompt"
            )
        return prompt

    def _inputs(
        self, path: Path, inputs: Mapping[str, Any], context_dir: Path, unit: Path
    ) -> tuple[list[InputFile], list[DirectoryFixture]]:
        files: list[InputFile] = []
        for index, raw_ref in enumerate(inputs.get("files") or []):
            field = f"inputs.files[{index}]"
            ref = mapping_at(NAME, path, raw_ref, field)
            check_keys(NAME, path, ref, field, known=("path", "content"))
            given = ref.get("path")
            if not isinstance(given, str) or not given:
                raise FormatError(NAME, path, "every file needs a path", f"{field}.path")
            where = relative_inside(NAME, path, given, f"{field}.path")
            if "content" in ref:
                files.append(InputFile(where, str(ref["content"]).encode()))
            else:
                files += files_of(
                    NAME, path, context_dir / given, where, f"{field}.path", unit=unit
                )
        fixtures: list[DirectoryFixture] = []
        context = mapping_at(NAME, path, inputs.get("context"), "inputs.context")
        fixture = context.get("fixture")
        if fixture:
            fixture_field = "inputs.context.fixture"
            source = inside(NAME, path, context_dir / str(fixture), fixture_field, unit=unit)
            if source.is_dir():
                fixtures.append(DirectoryFixture("fixture", source, "."))
            else:
                files += files_of(NAME, path, source, source.name, fixture_field, unit=unit)
        return files, fixtures


def _context_dir(eval_path: Path, task: Mapping[str, Any]) -> Path:
    """The folder a task's files are relative to: its ``context_dir``; without one, waza's
    default (``fixtures/`` beside ``eval.yaml``) when that folder is there, else the eval's
    folder."""
    given = task.get("context_dir")
    if given:
        return eval_path.parent / str(given)
    fixtures = eval_path.parent / "fixtures"
    return fixtures if fixtures.is_dir() else eval_path.parent


def _responder(path: Path, value: Any) -> SimulatedUser | None:
    """waza's responder as the simulated user: its instructions, and ``max_followups`` as
    its most replies (its ``model`` is the run's ``simulated_user_model`` setting)."""
    if value is None:
        return None
    responder = mapping_at(NAME, path, value, "inputs.responder")
    check_keys(
        NAME, path, responder, "inputs.responder", known=("model", "instructions", "max_followups")
    )
    instructions = responder.get("instructions")
    if not isinstance(instructions, str) or not instructions.strip():
        raise FormatError(NAME, path, "must be a non-empty text", "inputs.responder.instructions")
    turns = responder.get("max_followups")
    if isinstance(turns, bool) or not isinstance(turns, int) or turns < 1:
        raise FormatError(
            NAME, path, "must be a whole number of at least 1", "inputs.responder.max_followups"
        )
    return SimulatedUser(instructions, turns)


def _weight(path: Path, field: str, grader: Mapping[str, Any]) -> float:
    weight = grader.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int | float) or weight <= 0:
        raise FormatError(NAME, path, "must be a positive number", f"{field}.weight")
    return float(weight)


def _grader(path: Path, field: str, grader: Any) -> list[tuple[str, dict[str, Any], float]]:
    """One grader as (kind, item, weight) triples: a judged criterion or ``checks.json``
    objects sharing the grader's weight."""
    grader = mapping_at(NAME, path, grader, field)
    check_keys(NAME, path, grader, field, known=GRADER_KEYS)
    name, kind = grader.get("name"), grader.get("type")
    if not isinstance(name, str) or not name:
        raise FormatError(NAME, path, "every grader needs a name", f"{field}.name")
    if kind in GRADER_UNSUPPORTED_TYPES:
        raise FormatError(
            NAME,
            path,
            f"grader type {kind!r} is not supported by this plugin: "
            f"{GRADER_UNSUPPORTED_TYPES[kind]}",
            f"{field}.type",
        )
    weight = _weight(path, field, grader)
    config = mapping_at(NAME, path, grader.get("config"), f"{field}.config")
    where = f"{field}.config"
    if kind == "code" and grader.get("assertions"):
        # A task's grader may give its assertions beside config; waza takes those then.
        config = {**config, "assertions": grader["assertions"]}
        where = field
    elif grader.get("assertions"):
        raise FormatError(
            NAME,
            path,
            f"assertions are a code grader's expressions, not a {kind} grader's",
            f"{field}.assertions",
        )
    if kind == "prompt":
        check_keys(NAME, path, config, where, known=("prompt", "model", "continue_session", "mode"))
        if config.get("mode", "independent") != "independent":
            raise FormatError(
                NAME, path, "pairwise prompt grading is not supported", f"{where}.mode"
            )
        text = config.get("prompt") or grader.get("rubric")
        if not isinstance(text, str) or not text.strip():
            raise FormatError(NAME, path, "a prompt grader needs its prompt", f"{where}.prompt")
        return [("criterion", {"name": name, "description": text}, weight)]
    reader = CHECK_GRADERS.get(str(kind))
    if reader is None:
        raise FormatError(NAME, path, f"unknown grader type {kind!r}", f"{field}.type")
    checks = reader(path, name, config, where)
    share = weight / len(checks)
    return [("check", check, share) for check in checks]


def _program_check(
    path: Path, name: str, config: Mapping[str, Any], where: str
) -> list[dict[str, Any]]:
    check_keys(NAME, path, config, where, known=("command", "args", "timeout"))
    command = config.get("command")
    if not isinstance(command, str) or not command:
        raise FormatError(NAME, path, "a program grader needs its command", f"{where}.command")
    run = shlex.join([command, *map(str, config.get("args") or [])])
    timeout = float(config.get("timeout", 30))
    return [{"name": name, "type": "command", "run": run, "timeout": timeout}]


def _code_checks(
    path: Path, name: str, config: Mapping[str, Any], where: str
) -> list[dict[str, Any]]:
    """One ``output_expression`` check per assertion, named by the grader and the
    expression: each is one point of the grader's weight, so its score is the assertions
    that hold over all of them, as waza scores it."""
    from pytest_openkata.core import expressions  # here: it loads simpleeval

    check_keys(NAME, path, config, where, known=("assertions",))
    assertions = config.get("assertions")
    if not isinstance(assertions, list) or not assertions:
        raise FormatError(
            NAME, path, "a code grader needs a list of assertions", f"{where}.assertions"
        )
    checks: list[dict[str, Any]] = []
    names: set[str] = set()
    for index, assertion in enumerate(assertions):
        field = f"{where}.assertions[{index}]"
        if not isinstance(assertion, str) or not assertion.strip():
            raise FormatError(NAME, path, "an assertion is a Python expression", field)
        try:
            expressions.parse(assertion)
        except expressions.ExpressionError as exc:
            raise FormatError(NAME, path, str(exc), field) from None
        check_name = f"{name}: {' '.join(assertion.split())}"
        if check_name in names:  # the same assertion twice: each counts, as in waza
            check_name += f" [{index + 1}]"
        names.add(check_name)
        checks.append({"name": check_name, "type": "output_expression", "expression": assertion})
    return checks


def _sequence_check(
    path: Path, name: str, config: Mapping[str, Any], where: str
) -> list[dict[str, Any]]:
    check_keys(NAME, path, config, where, known=("matching_mode", "expected_actions"))
    order = ORDERS.get(str(config.get("matching_mode")))
    if order is None:
        raise FormatError(
            NAME, path, "choose one of: " + ", ".join(ORDERS), f"{where}.matching_mode"
        )
    tools = list(config.get("expected_actions") or [])
    return [{"name": name, "type": "tool_sequence", "tools": tools, "order": order}]


def _numbered(name: str, checks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Checks named after their grader: the grader's name alone for one, numbered for more."""
    if len(checks) == 1:
        return [{**checks[0], "name": name}]
    return [{**c, "name": f"{name} [{i + 1}]"} for i, c in enumerate(checks)]


def _text_checks(
    path: Path, name: str, config: Mapping[str, Any], where: str
) -> list[dict[str, Any]]:
    known = (
        "contains",
        "not_contains",
        "contains_cs",
        "not_contains_cs",
        "regex_match",
        "regex_not_match",
    )
    check_keys(NAME, path, config, where, known=known)
    checks = []
    for key in known:
        for value in config.get(key) or []:
            if key.endswith("_cs"):
                pattern = escaped(str(value))
            elif key.startswith("regex"):
                pattern = str(value)
            else:
                pattern = "(?i)" + escaped(str(value))
            check: dict[str, Any] = {"type": "output_regex", "pattern": pattern}
            if key.startswith("not_") or key == "regex_not_match":
                check["absent"] = True
            checks.append(check)
    if not checks:
        raise FormatError(NAME, path, "a text grader needs something to look for", where)
    return _numbered(name, checks)


def _regex_checks(
    path: Path, name: str, config: Mapping[str, Any], where: str
) -> list[dict[str, Any]]:
    """waza's earlier ``regex`` grader: patterns the output must match (``must_match``) and
    must not (``must_not_match``), each one point of the grader's weight, as waza scores the
    patterns that hold over all of them."""
    known = ("must_match", "must_not_match")
    check_keys(NAME, path, config, where, known=known)
    checks: list[dict[str, Any]] = []
    for key in known:
        patterns = config.get(key) or []
        if not isinstance(patterns, list):
            raise FormatError(NAME, path, "must be a list of patterns", f"{where}.{key}")
        for index, pattern in enumerate(patterns):
            if not isinstance(pattern, str) or not pattern:
                raise FormatError(NAME, path, "must be a pattern", f"{where}.{key}[{index}]")
            check: dict[str, Any] = {"type": "output_regex", "pattern": pattern}
            if key == "must_not_match":
                check["absent"] = True
            checks.append(check)
    if not checks:
        raise FormatError(NAME, path, "a regex grader needs a pattern to look for", where)
    return _numbered(name, checks)


def _file_checks(
    path: Path, name: str, config: Mapping[str, Any], where: str
) -> list[dict[str, Any]]:
    check_keys(
        NAME, path, config, where, known=("must_exist", "must_not_exist", "content_patterns")
    )
    checks: list[dict[str, Any]] = []
    checks += [{"type": "file", "path": str(p)} for p in config.get("must_exist") or []]
    checks += [
        {"type": "file", "path": str(p), "absent": True} for p in config.get("must_not_exist") or []
    ]
    for index, raw_spec in enumerate(config.get("content_patterns") or []):
        field = f"{where}.content_patterns[{index}]"
        spec = mapping_at(NAME, path, raw_spec, field)
        check_keys(NAME, path, spec, field, known=("path", "must_match", "must_not_match"))
        for pattern in spec.get("must_match") or []:
            checks.append(
                {"type": "file_regex", "path": str(spec.get("path")), "pattern": str(pattern)}
            )
        for pattern in spec.get("must_not_match") or []:
            checks.append(
                {
                    "type": "file_regex",
                    "path": str(spec.get("path")),
                    "pattern": str(pattern),
                    "absent": True,
                }
            )
    if not checks:
        raise FormatError(NAME, path, "a file grader needs files or patterns", where)
    return _numbered(name, checks)


def _schema_check(
    path: Path, name: str, config: Mapping[str, Any], where: str
) -> list[dict[str, Any]]:
    check_keys(NAME, path, config, where, known=("schema", "schema_file"))
    schema = config.get("schema")
    if "schema_file" in config:
        schema_path = path.parent / str(config["schema_file"])
        schema = read_json_file(NAME, inside(NAME, path, schema_path, f"{where}.schema_file"))
    if not isinstance(schema, Mapping):
        raise FormatError(NAME, path, "a json_schema grader needs a schema object", where)
    return [{"name": name, "type": "json_schema", "schema": dict(schema)}]


def _behavior_checks(
    path: Path, name: str, config: Mapping[str, Any], where: str
) -> list[dict[str, Any]]:
    check_keys(
        NAME,
        path,
        config,
        where,
        known=("max_tool_calls", "max_tokens", "required_tools", "forbidden_tools"),
        unsupported={"max_duration_ms": "a time limit graded as a check"},
    )
    checks: list[dict[str, Any]] = []
    for key in ("max_tool_calls", "max_tokens"):
        if key in config:
            checks.append({"type": key, "max": config[key]})
    checks += [{"type": "tool_used", "tool": str(t)} for t in config.get("required_tools") or []]
    checks += [
        {"type": "tool_not_used", "tool": str(t)} for t in config.get("forbidden_tools") or []
    ]
    if not checks:
        raise FormatError(NAME, path, "a behavior grader needs a rule", where)
    return _numbered(name, checks)


def _skill_checks(
    path: Path, name: str, config: Mapping[str, Any], where: str
) -> list[dict[str, Any]]:
    check_keys(
        NAME,
        path,
        config,
        where,
        known=("mode", "required_skills", "forbidden_skills", "allow_extra"),
    )
    required = list(config.get("required_skills") or [])
    if config.get("forbidden_skills") or len(required) != 1:
        raise FormatError(
            NAME,
            path,
            "only one required skill (the skill under test) can be checked: whether it was loaded",
            f"{where}.required_skills" if len(required) != 1 else f"{where}.forbidden_skills",
        )
    return [{"name": name, "type": "skill_activated", "activated": True}]


def _tool_checks(
    path: Path, name: str, config: Mapping[str, Any], where: str
) -> list[dict[str, Any]]:
    check_keys(NAME, path, config, where, known=("expect_tools", "reject_tools"))
    checks: list[dict[str, Any]] = []
    for key, kind in (("expect_tools", "tool_used"), ("reject_tools", "tool_not_used")):
        for index, raw_rule in enumerate(config.get(key) or []):
            field = f"{where}.{key}[{index}]"
            rule = mapping_at(NAME, path, raw_rule, field)
            check_keys(
                NAME,
                path,
                rule,
                field,
                known=("tool", "command_pattern"),
                unsupported={"skill_pattern": "a skill pattern", "path_pattern": "a path pattern"},
            )
            check = {"type": kind, "tool": str(rule.get("tool"))}
            if rule.get("command_pattern"):
                check["pattern"] = str(rule["command_pattern"])
            checks.append(check)
    if not checks:
        raise FormatError(NAME, path, "a tool_constraint grader needs tools", where)
    return _numbered(name, checks)


def _diff_checks(
    path: Path, name: str, config: Mapping[str, Any], where: str
) -> list[dict[str, Any]]:
    check_keys(
        NAME,
        path,
        config,
        where,
        known=("expected_files",),
        unsupported={"context_dir": "snapshot folders", "update_snapshots": "snapshot updates"},
    )
    checks: list[dict[str, Any]] = []
    for index, raw_spec in enumerate(config.get("expected_files") or []):
        field = f"{where}.expected_files[{index}]"
        spec = mapping_at(NAME, path, raw_spec, field)
        check_keys(
            NAME,
            path,
            spec,
            field,
            known=("path", "contains"),
            unsupported={"snapshot": "comparison with a snapshot file"},
        )
        for text in spec.get("contains") or []:
            checks.append(
                {
                    "type": "file_regex",
                    "path": str(spec.get("path")),
                    "pattern": escaped(str(text)),
                }
            )
    if not checks:
        raise FormatError(NAME, path, "a diff grader needs expected files", where)
    return _numbered(name, checks)


def _expected(path: Path, expected: Mapping[str, Any]) -> list[tuple[str, dict[str, Any], float]]:
    checks: list[dict[str, Any]] = []
    for text in expected.get("output_contains") or []:
        checks.append(
            {
                "name": f"output contains {text!r}",
                "type": "output_regex",
                "pattern": "(?i)" + escaped(str(text)),
            }
        )
    for text in expected.get("output_not_contains") or []:
        checks.append(
            {
                "name": f"output lacks {text!r}",
                "type": "output_regex",
                "pattern": "(?i)" + escaped(str(text)),
                "absent": True,
            }
        )
    if expected.get("behavior") is not None:
        behavior = mapping_at(NAME, path, expected["behavior"], "expected.behavior")
        check_keys(
            NAME,
            path,
            behavior,
            "expected.behavior",
            known=(
                "max_tool_calls",
                "max_tokens",
                "max_iterations",
                "required_tools",
                "forbidden_tools",
            ),
            unsupported={"max_response_time_ms": "a time limit graded as a check"},
        )
        rules = {k: v for k, v in behavior.items() if k != "max_iterations"}
        if rules:
            checks += _behavior_checks(path, "expected behavior", rules, "expected.behavior")
        if "max_iterations" in behavior:
            checks.append(
                {
                    "name": "expected max turns",
                    "type": "max_turns",
                    "max": behavior["max_iterations"],
                }
            )
    return [("check", check, 1.0) for check in checks]


CHECK_GRADERS: dict[str, Callable[[Path, str, Mapping[str, Any], str], list[dict[str, Any]]]] = {
    "code": _code_checks,
    "text": _text_checks,
    "regex": _regex_checks,
    "file": _file_checks,
    "json_schema": _schema_check,
    "program": _program_check,
    "behavior": _behavior_checks,
    "action_sequence": _sequence_check,
    "skill_invocation": _skill_checks,
    "tool_constraint": _tool_checks,
    "diff": _diff_checks,
}
