"""Deterministic checks (``checks.json``): loading, verdicts and the checks grader.

Every test uses real files under ``tmp_path`` and hand-built evidence; nothing is mocked.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import regex as regex_package

from pytest_openkata.contracts.results import (
    SCENARIO_ERROR,
    AgentResult,
    CriterionResult,
    FileContent,
    WorkspaceDiff,
)
from pytest_openkata.contracts.transcripts import SkillLoad, Step, Transcript
from pytest_openkata.core.checks import (
    DEFAULT_PATTERN_TIMEOUT,
    Check,
    CheckError,
    CommandOutcome,
    Evidence,
    evaluate_check,
    matches,
    workspace_path,
)
from pytest_openkata.core.scenario import ScenarioLoadError, load_checks, load_scenario
from pytest_openkata.providers.graders import GradeError, GradingContext, GradingTask
from pytest_openkata.providers.graders.checks import ChecksGrader, workspace_before
from tests.support.evals import write_scenario, write_skill

SHOWN = "evals/scenario-x/checks.json"


# --- helpers -----------------------------------------------------------------------------------


def checks_file(tmp_path: Path, content: Any) -> Path:
    """``skills/s/evals/scenario-x/checks.json`` holding ``content`` (a str is written as is)."""
    folder = tmp_path / "skills" / "s" / "evals" / "scenario-x"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "checks.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return path


def load(tmp_path: Path, content: Any, *, sandboxed: bool = True) -> tuple[Check, ...]:
    return load_checks(checks_file(tmp_path, content), sandboxed=sandboxed)


def load_error(tmp_path: Path, content: Any, *, sandboxed: bool = True) -> str:
    with pytest.raises(ScenarioLoadError) as info:
        load(tmp_path, content, sandboxed=sandboxed)
    return str(info.value)


def item(kind: str, name: str = "c", **fields: Any) -> dict[str, Any]:
    return {"name": name, "description": f"about {name}", "max_score": 2, "type": kind, **fields}


def make_check(kind: str, **fields: Any) -> Check:
    fields.setdefault("name", "c")
    fields.setdefault("description", "d")
    fields.setdefault("max_score", 3)
    return Check(type=kind, **fields)


def regex(pattern: str) -> regex_package.Pattern[str]:
    return regex_package.compile(pattern, regex_package.MULTILINE)


def workspace(
    before: dict[str, bytes],
    *,
    added: dict[str, bytes] | None = None,
    modified: dict[str, bytes] | None = None,
    deleted: list[str] | None = None,
    output: str = "done",
) -> Evidence:
    diff = WorkspaceDiff(
        added=[(p, FileContent(d)) for p, d in (added or {}).items()],
        modified=[(p, FileContent(d)) for p, d in (modified or {}).items()],
        deleted=list(deleted or []),
        unchanged=[p for p in before if p not in (modified or {}) and p not in (deleted or [])],
    )
    return Evidence(output=output, before=before, diff=diff)


def assert_verdict(result: CriterionResult, check: Check, passed: bool) -> None:
    assert result.kind == "check"
    assert result.name == check.name
    assert result.passed is passed
    assert result.max_score == check.max_score
    assert result.score == (check.max_score if passed else 0)


# --- loading: every type -----------------------------------------------------------------------


def test_command_check_loads_with_default_and_given_timeout(tmp_path: Path) -> None:
    checks = load(
        tmp_path,
        [
            item("command", "tests", run="pytest -q"),
            item("command", "lint", run="ruff check .", timeout=5),
            item("command", "slow", run="make", timeout=1.5),
        ],
    )
    assert [c.name for c in checks] == ["tests", "lint", "slow"]
    tests, lint, slow = checks
    assert (tests.type, tests.run, tests.timeout) == ("command", "pytest -q", 60.0)
    assert (tests.description, tests.max_score) == ("about tests", 2)
    assert isinstance(lint.timeout, float)
    assert lint.timeout == 5.0
    assert slow.timeout == 1.5
    assert all(c.reads_workspace for c in checks)


def test_file_check_loads_path_and_absent(tmp_path: Path) -> None:
    present, gone = load(
        tmp_path,
        [item("file", "has", path="notes.md"), item("file", "gone", path="tmp.txt", absent=True)],
    )
    assert (present.type, present.path, present.absent) == ("file", "notes.md", False)
    assert (gone.path, gone.absent) == ("tmp.txt", True)
    assert present.pattern is None
    assert present.schema is None


def test_file_regex_check_compiles_a_multiline_pattern(tmp_path: Path) -> None:
    (check,) = load(tmp_path, [item("file_regex", path="a.md", pattern="^## Notes$", absent=True)])
    assert check.path == "a.md"
    assert check.absent is True
    assert isinstance(check.pattern, regex_package.Pattern)
    assert check.pattern.pattern == "^## Notes$"
    assert check.pattern.flags & regex_package.MULTILINE
    assert check.pattern.search("# Title\n## Notes\nbody") is not None


def test_output_regex_check_loads(tmp_path: Path) -> None:
    (check,) = load(tmp_path, [item("output_regex", pattern=r"^\d+ tests?$")], sandboxed=False)
    assert check.type == "output_regex"
    assert check.path == ""
    assert check.absent is False
    assert check.pattern is not None
    assert check.pattern.flags & regex_package.MULTILINE
    assert check.pattern.search("ran\n12 tests\nok")
    assert not check.reads_workspace


def test_json_schema_check_loads_inline_schema_and_optional_path(tmp_path: Path) -> None:
    schema = {"type": "object", "required": ["ok"]}
    on_output, on_file = load(
        tmp_path,
        [
            item("json_schema", "out", schema=schema),
            item("json_schema", "f", schema=schema, path="r.json"),
        ],
    )
    assert on_output.schema == schema
    assert on_output.path == ""
    assert not on_output.reads_workspace
    assert on_file.schema == schema
    assert on_file.path == "r.json"
    assert on_file.reads_workspace


def test_diff_check_loads_globs_as_tuples(tmp_path: Path) -> None:
    both, only_changed, only_unchanged = load(
        tmp_path,
        [
            item("diff", "both", changed=["src/*.py", "docs"], unchanged=["tests"]),
            item("diff", "ch", changed=["a"]),
            item("diff", "un", unchanged=["b", "c"]),
        ],
    )
    assert both.changed == ("src/*.py", "docs")
    assert both.unchanged == ("tests",)
    assert isinstance(both.changed, tuple)
    assert isinstance(both.unchanged, tuple)
    assert only_changed.changed == ("a",)
    assert only_changed.unchanged == ()
    assert only_unchanged.changed == ()
    assert only_unchanged.unchanged == ("b", "c")


def test_an_empty_list_loads_as_no_checks(tmp_path: Path) -> None:
    assert load(tmp_path, []) == ()


# --- loading: errors ---------------------------------------------------------------------------


def test_not_valid_json(tmp_path: Path) -> None:
    message = load_error(tmp_path, "[{")
    assert message.startswith(f"{SHOWN}: not valid JSON")
    assert str(tmp_path) not in message


def test_top_level_must_be_a_list(tmp_path: Path) -> None:
    message = load_error(tmp_path, {"checks": []})
    assert message == f"{SHOWN}: (top level): must be a list of checks"


def test_an_item_must_be_an_object(tmp_path: Path) -> None:
    message = load_error(tmp_path, [item("output_regex", pattern="x"), "file"])
    assert message == f"{SHOWN}: [1]: must be an object"


def test_missing_type(tmp_path: Path) -> None:
    message = load_error(tmp_path, [{"name": "t", "max_score": 1}])
    assert message.startswith(f"{SHOWN}: [0] ('t').type: is required; choose one of: ")
    assert "file_regex" in message
    assert "json_schema" in message


def test_unknown_type(tmp_path: Path) -> None:
    message = load_error(tmp_path, [item("regex", "t", pattern="x")])
    assert message.startswith(f"{SHOWN}: [0] ('t').type: unknown check type \"regex\"")
    assert (
        "choose one of: command, file, file_regex, output_regex, output_expression, "
        "json_schema, diff, skill_activated" in message
    )


@pytest.mark.parametrize("kind", [["file"], {"file": True}])
def test_a_type_that_is_not_a_string_is_a_load_error(tmp_path: Path, kind: Any) -> None:
    message = load_error(tmp_path, [{"name": "t", "max_score": 1, "type": kind, "path": "a"}])
    assert message.startswith(f"{SHOWN}: [0] ('t').type: unknown check type")


def test_a_typo_beside_the_right_key_suggests_it(tmp_path: Path) -> None:
    message = load_error(tmp_path, [item("file", "f", path="a", pathh="a")])
    assert message.startswith(f"{SHOWN}: [0] ('f').pathh: unknown key for a ")
    assert "file" in message
    assert message.endswith("; did you mean 'path'?")


def test_an_unknown_key_far_from_any_lists_the_known_keys(tmp_path: Path) -> None:
    message = load_error(tmp_path, [item("output_regex", "o", pattern="x", zzzzzz=1)])
    assert message.startswith(f"{SHOWN}: [0] ('o').zzzzzz: unknown key for a ")
    assert "output_regex" in message
    assert "did you mean" not in message
    assert "known keys: " in message
    assert "pattern" in message
    assert "absent" in message


def test_a_typo_of_a_required_key_suggests_it(tmp_path: Path) -> None:
    message = load_error(tmp_path, [item("file", "f", pathh="notes.md")])
    assert "did you mean 'path'" in message


def test_file_check_without_path(tmp_path: Path) -> None:
    message = load_error(tmp_path, [item("file", "f")])
    assert message == f"{SHOWN}: [0] ('f').path: is required"


@pytest.mark.parametrize(
    ("value", "shown"), [(0, "0"), (-1, "-1"), (1.5, "1.5"), ("10", '"10"'), (True, "true")]
)
def test_max_score_must_be_a_positive_integer(tmp_path: Path, value: Any, shown: str) -> None:
    bad = {**item("output_regex", "o", pattern="x"), "max_score": value}
    message = load_error(tmp_path, [bad])
    assert message == f"{SHOWN}: [0] ('o').max_score: must be a positive integer (got {shown})"


def test_missing_max_score(tmp_path: Path) -> None:
    message = load_error(tmp_path, [{"name": "o", "type": "output_regex", "pattern": "x"}])
    assert message == f"{SHOWN}: [0] ('o').max_score: is required"


def test_empty_name(tmp_path: Path) -> None:
    message = load_error(tmp_path, [item("output_regex", "", pattern="x")])
    assert message == f"{SHOWN}: [0].name: must not be empty"


def test_empty_pattern_and_empty_run(tmp_path: Path) -> None:
    assert load_error(tmp_path, [item("output_regex", "o", pattern="")]) == (
        f"{SHOWN}: [0] ('o').pattern: must not be empty"
    )
    assert load_error(tmp_path, [item("command", "r", run="")]) == (
        f"{SHOWN}: [0] ('r').run: must not be empty"
    )


def test_a_pattern_too_large_to_compile_names_the_check_and_pattern(tmp_path: Path) -> None:
    message = load_error(
        tmp_path, [item("output_regex", "huge", pattern="(?:(?:a{1000}){1000}){3}")]
    )
    assert message == (
        f"{SHOWN}: [0] ('huge').pattern: the pattern's counted repeats would write out more "
        "than 100,000 items when it is compiled: repeat less, or use an open repeat (*, +) "
        "where the count does not matter"
    )


def test_a_bad_regex_names_the_check_and_pattern(tmp_path: Path) -> None:
    message = load_error(
        tmp_path,
        [
            item("output_regex", "ok", pattern="x"),
            item("file_regex", "has-notes", path="n", pattern="("),
        ],
    )
    assert message.startswith(f"{SHOWN}: [1] ('has-notes').pattern: not a valid regular expression")


def test_an_invalid_json_schema(tmp_path: Path) -> None:
    message = load_error(tmp_path, [item("json_schema", "s", schema={"type": 5})])
    assert message.startswith(f"{SHOWN}: [0] ('s').schema: not a valid JSON schema: ")


def test_a_schema_that_is_not_an_object(tmp_path: Path) -> None:
    message = load_error(tmp_path, [item("json_schema", "s", schema=[1])])
    assert message.startswith(f"{SHOWN}: [0] ('s').schema: must be an object")


def test_a_diff_check_needs_a_glob(tmp_path: Path) -> None:
    for fields in ({}, {"changed": [], "unchanged": []}):
        message = load_error(tmp_path, [item("diff", "d", **fields)])
        assert message == f"{SHOWN}: [0] ('d'): a diff check needs changed or unchanged globs"


def test_a_command_timeout_must_be_a_number(tmp_path: Path) -> None:
    message = load_error(tmp_path, [item("command", "r", run="true", timeout="10")])
    assert message == f"{SHOWN}: [0] ('r').timeout: must be a number of seconds (got \"10\")"


def test_a_zero_timeout_is_an_error(tmp_path: Path) -> None:
    message = load_error(tmp_path, [item("command", "r", run="true", timeout=0)])
    assert message.startswith(f"{SHOWN}: [0] ('r').timeout: ")


def test_a_zero_timeout_message_does_not_ask_for_an_integer(tmp_path: Path) -> None:
    message = load_error(tmp_path, [item("command", "r", run="true", timeout=0)])
    assert "integer" not in message


def test_absent_must_be_a_boolean(tmp_path: Path) -> None:
    message = load_error(tmp_path, [item("file", "f", path="a", absent="yes")])
    assert message == f"{SHOWN}: [0] ('f').absent: must be true or false (got \"yes\")"


def test_a_duplicate_check_name(tmp_path: Path) -> None:
    message = load_error(
        tmp_path,
        [item("output_regex", "same", pattern="a"), item("file", "same", path="b")],
    )
    assert message == f"{SHOWN}: [1] ('same').name: duplicate check name 'same'"


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"type": "command", "run": "make test"}, "type"),
        ({"type": "file", "path": "a"}, "type"),
        ({"type": "file_regex", "path": "a", "pattern": "x"}, "type"),
        ({"type": "diff", "changed": ["src"]}, "type"),
        ({"type": "json_schema", "schema": {}, "path": "r.json"}, "path"),
    ],
)
def test_workspace_checks_need_a_sandbox(
    tmp_path: Path, fields: dict[str, Any], where: str
) -> None:
    check = {"name": "w", "max_score": 1, **fields}
    message = load_error(tmp_path, [check], sandboxed=False)
    assert message.startswith(f"{SHOWN}: [0] ('w').{where}: a ")
    assert "reads the workspace, which only a sandboxed scenario has" in message
    (loaded,) = load(tmp_path, [check], sandboxed=True)
    assert loaded.type == fields["type"]
    assert loaded.reads_workspace


def test_the_json_schema_path_message_reads_well(tmp_path: Path) -> None:
    check = item("json_schema", "w", schema={}, path="r.json")
    message = load_error(tmp_path, [check], sandboxed=False)
    assert "with a path check" not in message


def test_output_checks_are_allowed_in_a_direct_scenario(tmp_path: Path) -> None:
    checks = load(
        tmp_path,
        [
            item("output_regex", "o", pattern="ok"),
            item("json_schema", "j", schema={"type": "object"}),
        ],
        sandboxed=False,
    )
    assert [c.type for c in checks] == ["output_regex", "json_schema"]


def test_the_internal_field_name_is_not_a_key(tmp_path: Path) -> None:
    load_error(tmp_path, [item("json_schema", "j", json_schema={"type": "object"})])


# --- load_scenario -----------------------------------------------------------------------------


def scenario_with(
    tmp_path: Path, criteria: dict[str, int], checks: Any | None, *, sandbox: bool = False
) -> Path:
    skill = write_skill(tmp_path, "demo", {})
    folder = write_scenario(skill, "scenario-x", criteria, sandbox=sandbox)
    if checks is not None:
        (folder / "checks.json").write_text(json.dumps(checks), encoding="utf-8")
    return folder


def test_an_empty_checklist_loads_with_checks(tmp_path: Path) -> None:
    folder = scenario_with(tmp_path, {}, [item("output_regex", "o", pattern="x")])
    scenario = load_scenario(folder)
    assert scenario.criteria == ()
    assert [c.name for c in scenario.checks] == ["o"]


def test_an_empty_checklist_without_checks_json_errors(tmp_path: Path) -> None:
    folder = scenario_with(tmp_path, {}, None)
    with pytest.raises(ScenarioLoadError) as info:
        load_scenario(folder)
    assert str(info.value).startswith("evals/scenario-x/criteria.json: checklist: ")
    assert "checks.json" in str(info.value)


def test_an_empty_checklist_with_an_empty_checks_list_errors(tmp_path: Path) -> None:
    folder = scenario_with(tmp_path, {}, [])
    with pytest.raises(ScenarioLoadError) as info:
        load_scenario(folder)
    assert str(info.value).startswith("evals/scenario-x/criteria.json: checklist: ")


def test_a_check_named_like_a_criterion_errors(tmp_path: Path) -> None:
    folder = scenario_with(tmp_path, {"clear": 3}, [item("output_regex", "clear", pattern="x")])
    with pytest.raises(ScenarioLoadError) as info:
        load_scenario(folder)
    assert str(info.value) == (
        "evals/scenario-x/checks.json: check name 'clear' is also a criterion of criteria.json"
    )


def test_scenario_checks_keep_their_order_beside_criteria(tmp_path: Path) -> None:
    checks = [
        item("file", "z-file", path="out.txt"),
        item("command", "a-cmd", run="true"),
        item("diff", "m-diff", changed=["out.txt"]),
    ]
    folder = scenario_with(tmp_path, {"judged": 4}, checks, sandbox=True)
    scenario = load_scenario(folder)
    assert [c.name for c in scenario.criteria] == ["judged"]
    assert [c.name for c in scenario.checks] == ["z-file", "a-cmd", "m-diff"]
    assert [c.type for c in scenario.checks] == ["file", "command", "diff"]


def test_a_direct_scenario_with_a_workspace_check_errors(tmp_path: Path) -> None:
    folder = scenario_with(tmp_path, {"judged": 4}, [item("file", "f", path="a")], sandbox=False)
    with pytest.raises(ScenarioLoadError) as info:
        load_scenario(folder)
    assert str(info.value).startswith("evals/scenario-x/checks.json: [0] ('f').type: ")


# --- evaluate_check: file ----------------------------------------------------------------------

BEFORE = {"notes.md": b"# Notes\nsome text\n", "src/app.py": b"print(1)\n", "empty.txt": b""}


def test_file_passes_on_a_non_empty_file(tmp_path: Path) -> None:
    check = make_check("file", path="notes.md")
    result = evaluate_check(check, workspace(BEFORE))
    assert_verdict(result, check, True)
    assert result.reason == "notes.md is a file of 18 bytes"


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("missing.md", "missing.md does not exist"),
        ("empty.txt", "empty.txt is empty"),
        ("src", "src is a directory, not a file"),
    ],
)
def test_file_fails_on_what_is_not_a_file(path: str, reason: str) -> None:
    check = make_check("file", path=path)
    result = evaluate_check(check, workspace(BEFORE))
    assert_verdict(result, check, False)
    assert result.reason == reason
    absent = make_check("file", path=path, absent=True)
    assert_verdict(evaluate_check(absent, workspace(BEFORE)), absent, True)


def test_a_path_prefix_that_is_no_folder_does_not_exist() -> None:
    check = make_check("file", path="sr")
    assert evaluate_check(check, workspace(BEFORE)).reason == "sr does not exist"


def test_file_absent_fails_when_the_file_is_there() -> None:
    check = make_check("file", path="./notes.md", absent=True)
    result = evaluate_check(check, workspace(BEFORE))
    assert_verdict(result, check, False)
    assert "notes.md is a file" in result.reason


# --- evaluate_check: files after the agent -----------------------------------------------------


def test_files_after_apply_the_diff() -> None:
    evidence = workspace(
        BEFORE,
        added={"new/out.txt": b"made"},
        modified={"src/app.py": b"print(2)\n"},
        deleted=["notes.md"],
    )
    files = evidence.files_after()
    assert set(files) == {"src/app.py", "empty.txt", "new/out.txt"}
    assert files["src/app.py"].data == b"print(2)\n"
    assert files["new/out.txt"].data == b"made"
    assert files["empty.txt"].data == b""


def test_file_checks_see_the_workspace_after_the_agent() -> None:
    evidence = workspace(
        BEFORE,
        added={"new/out.txt": b"made"},
        modified={"empty.txt": b"now filled"},
        deleted=["notes.md"],
    )
    for path, passed in [("notes.md", False), ("new/out.txt", True), ("empty.txt", True)]:
        check = make_check("file", path=path)
        assert_verdict(evaluate_check(check, evidence), check, passed)
    check = make_check("file", path="new")
    assert evaluate_check(check, evidence).reason == "new is a directory, not a file"
    modified = make_check("file_regex", path="src/app.py", pattern=regex("print"))
    assert_verdict(evaluate_check(modified, evidence), modified, True)
    changed = workspace(BEFORE, modified={"src/app.py": b"pass\n"})
    assert_verdict(evaluate_check(modified, changed), modified, False)


@pytest.mark.parametrize(
    "check",
    [
        make_check("file", path="a"),
        make_check("file_regex", path="a", pattern=regex("x")),
        make_check("json_schema", path="a", schema={}),
        make_check("diff", changed=("a",)),
    ],
    ids=["file", "file_regex", "json_schema", "diff"],
)
def test_no_workspace_is_an_error(check: Check) -> None:
    with pytest.raises(CheckError, match="no workspace"):
        evaluate_check(check, Evidence(output="done"))


def test_files_after_without_diff_is_an_error() -> None:
    with pytest.raises(CheckError, match="no workspace"):
        Evidence(output="x", before={"a": b"1"}).files_after()


# --- evaluate_check: file_regex ----------------------------------------------------------------

TEXT = {"report.md": b"# Report\nStatus: done\n## Details\nall good\n"}


def test_file_regex_matches_at_line_starts() -> None:
    check = make_check("file_regex", path="report.md", pattern=regex("^## Details$"))
    result = evaluate_check(check, workspace(TEXT))
    assert_verdict(result, check, True)
    assert result.reason == "report.md matches '^## Details$': '## Details'"


def test_file_regex_fails_when_the_pattern_is_not_there() -> None:
    check = make_check("file_regex", path="report.md", pattern=regex("^Status: failed"))
    result = evaluate_check(check, workspace(TEXT))
    assert_verdict(result, check, False)
    assert result.reason == "report.md does not match '^Status: failed'"


def test_file_regex_absent_passes_when_the_pattern_is_not_in_the_file() -> None:
    check = make_check("file_regex", path="report.md", pattern=regex("TODO"), absent=True)
    assert_verdict(evaluate_check(check, workspace(TEXT)), check, True)
    there = make_check("file_regex", path="report.md", pattern=regex("^all"), absent=True)
    assert_verdict(evaluate_check(there, workspace(TEXT)), there, False)


@pytest.mark.parametrize("absent", [False, True])
def test_file_regex_fails_on_a_missing_file_even_when_absent(absent: bool) -> None:
    check = make_check("file_regex", path="gone.md", pattern=regex("TODO"), absent=absent)
    result = evaluate_check(check, workspace(TEXT))
    assert_verdict(result, check, False)
    assert result.reason == "gone.md does not exist"


def test_file_regex_fails_on_an_empty_file_even_when_absent() -> None:
    check = make_check("file_regex", path="e", pattern=regex("x"), absent=True)
    result = evaluate_check(check, workspace({"e": b""}))
    assert_verdict(result, check, False)
    assert result.reason == "e is empty"


def test_file_regex_on_a_truncated_file_is_an_error() -> None:
    full = b"line\n" * 100
    content = FileContent(
        full[:20], truncated=True, full_size=len(full), sha256=hashlib.sha256(full).hexdigest()
    )
    evidence = Evidence(
        output="done",
        before={"big.log": b"old"},
        diff=WorkspaceDiff(modified=[("big.log", content)]),
    )
    check = make_check("file_regex", path="big.log", pattern=regex("^line$"))
    with pytest.raises(CheckError, match=r"big\.log has 500 bytes, more than the workspace"):
        evaluate_check(check, evidence)


@pytest.mark.parametrize("data", [b"\x00\x01\x02abc", b"\xff\xfe not utf-8"])
def test_file_regex_on_a_binary_file_is_an_error(data: bytes) -> None:
    check = make_check("file_regex", path="blob.bin", pattern=regex("abc"))
    with pytest.raises(CheckError, match="binary"):
        evaluate_check(check, workspace({"blob.bin": data}))


# --- evaluate_check: output_regex --------------------------------------------------------------


def test_output_regex_matches_the_output() -> None:
    check = make_check("output_regex", pattern=regex(r"^(\d+) passed$"))
    result = evaluate_check(check, Evidence(output="collected\n12 passed\n"))
    assert_verdict(result, check, True)
    assert "'12 passed'" in result.reason
    assert_verdict(evaluate_check(check, Evidence(output="12 passed, 1 failed")), check, False)


def test_output_regex_absent() -> None:
    check = make_check("output_regex", pattern=regex("(?i)error"), absent=True)
    assert_verdict(evaluate_check(check, Evidence(output="all fine")), check, True)
    assert_verdict(evaluate_check(check, Evidence(output="an Error here")), check, False)


@pytest.mark.parametrize("output", ["", "  \n\t \n"])
@pytest.mark.parametrize("absent", [False, True])
def test_output_regex_fails_on_an_empty_output(output: str, absent: bool) -> None:
    check = make_check("output_regex", pattern=regex("x"), absent=absent)
    result = evaluate_check(check, Evidence(output=output))
    assert_verdict(result, check, False)
    assert result.reason == "the agent's output is empty"


def test_a_pattern_that_backtracks_on_the_output_finishes() -> None:
    """The pattern that held a run for ten minutes under Python's re (nested quantifiers on an
    80-character answer that fails at its end) now gives its verdict."""
    check = make_check("output_regex", pattern=regex(r"^(\w+\s?)*$"))
    output = "word " * 15 + "endings!"
    assert_verdict(evaluate_check(check, Evidence(output=output)), check, False)


@pytest.mark.parametrize("kind", ["output_regex", "file_regex"])
def test_a_pattern_that_does_not_finish_in_its_time_is_an_error_of_the_scenario(
    kind: str,
) -> None:
    check = make_check(kind, pattern=regex("^(a|aa)+$"), timeout=0.2, path="out.txt")
    text = "a" * 80 + "b"
    evidence = Evidence(output=text)
    if kind == "file_regex":
        evidence = workspace({}, added={"out.txt": text.encode()})

    with pytest.raises(CheckError) as raised:
        evaluate_check(check, evidence)

    where = "the agent's output" if kind == "output_regex" else "out.txt"
    assert str(raised.value) == (
        f"the pattern '^(a|aa)+$' did not finish searching {where} within 0.2 s (it backtracks "
        "without end on this text; set the check's timeout for a longer search)"
    )
    assert raised.value.kind == SCENARIO_ERROR


def test_a_pattern_checks_timeout_is_read_and_must_be_positive(tmp_path: Path) -> None:
    (check,) = load(tmp_path, [item("output_regex", pattern="x", timeout=2.5)], sandboxed=False)
    assert check.timeout == 2.5
    (default,) = load(tmp_path, [item("file_regex", path="a", pattern="x")])
    assert default.timeout == DEFAULT_PATTERN_TIMEOUT
    assert "must be a positive number of seconds (got 0)" in load_error(
        tmp_path, [item("output_regex", pattern="x", timeout=0)], sandboxed=False
    )


# --- evaluate_check: json_schema ---------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "required": ["count", "items"],
    "properties": {
        "count": {"type": "integer"},
        "items": {"type": "array", "items": {"type": "string"}},
    },
}


def test_json_schema_on_plain_json_output() -> None:
    check = make_check("json_schema", schema=SCHEMA)
    result = evaluate_check(check, Evidence(output='  {"count": 1, "items": ["a"]}\n'))
    assert_verdict(result, check, True)
    assert result.reason == "the agent's output matches the schema"


def test_json_schema_on_one_fenced_block() -> None:
    check = make_check("json_schema", schema=SCHEMA)
    output = 'Here it is:\n```json\n{"count": 2, "items": ["a", "b"]}\n```\nBye.'
    assert_verdict(evaluate_check(check, Evidence(output=output)), check, True)


def test_json_schema_on_two_fenced_blocks_is_not_json() -> None:
    check = make_check("json_schema", schema=SCHEMA)
    block = '```json\n{"count": 2, "items": []}\n```\n'
    result = evaluate_check(check, Evidence(output=block + "and\n" + block))
    assert_verdict(result, check, False)
    assert "is not JSON" in result.reason


def test_json_schema_on_text_is_not_json() -> None:
    check = make_check("json_schema", schema=SCHEMA)
    result = evaluate_check(check, Evidence(output="The count is one."))
    assert_verdict(result, check, False)
    assert result.reason.startswith("the agent's output is not JSON")


def test_json_schema_on_an_empty_output() -> None:
    check = make_check("json_schema", schema=SCHEMA)
    result = evaluate_check(check, Evidence(output=" \n"))
    assert_verdict(result, check, False)
    assert result.reason == "the agent's output is empty"


def test_json_schema_violation_names_the_path() -> None:
    check = make_check("json_schema", schema=SCHEMA)
    result = evaluate_check(check, Evidence(output='{"count": 1, "items": ["a", 7]}'))
    assert_verdict(result, check, False)
    assert result.reason.startswith("the agent's output at items/1: ")
    assert "7 is not of type 'string'" in result.reason
    root = evaluate_check(check, Evidence(output='{"count": 1}'))
    assert root.reason.startswith("the agent's output at (root): ")
    assert "'items' is a required property" in root.reason


def test_json_schema_on_a_file() -> None:
    check = make_check("json_schema", schema=SCHEMA, path="/workspace/out/r.json")
    good = workspace({}, added={"out/r.json": b'{"count": 0, "items": []}'})
    result = evaluate_check(check, good)
    assert_verdict(result, check, True)
    assert result.reason == "out/r.json matches the schema"
    bad = workspace({}, added={"out/r.json": b'{"count": "zero", "items": []}'})
    result = evaluate_check(check, bad)
    assert_verdict(result, check, False)
    assert result.reason.startswith("out/r.json at count: ")
    missing = evaluate_check(check, workspace({"other": b"x"}))
    assert_verdict(missing, check, False)
    assert missing.reason == "out/r.json does not exist"
    text = evaluate_check(check, workspace({}, added={"out/r.json": b"not json"}))
    assert_verdict(text, check, False)
    assert text.reason.startswith("out/r.json is not JSON")


def test_json_schema_on_a_file_ignores_the_output() -> None:
    check = make_check("json_schema", schema=SCHEMA, path="r.json")
    evidence = workspace({"r.json": b"[]"}, output='{"count": 1, "items": []}')
    assert_verdict(evaluate_check(check, evidence), check, False)


# --- evaluate_check: diff ----------------------------------------------------------------------

TREE = {
    "src/pkg/core.py": b"a",
    "src/pkg/util.py": b"b",
    "docs/index.md": b"c",
    "tests/test_core.py": b"d",
    "README.md": b"e",
}


@pytest.mark.parametrize(
    "evidence",
    [
        workspace(TREE, added={"src/pkg/new.py": b"n"}),
        workspace(TREE, modified={"src/pkg/core.py": b"z"}),
        workspace(TREE, deleted=["src/pkg/util.py"]),
    ],
    ids=["added", "modified", "deleted"],
)
def test_diff_changed_matches_added_modified_deleted(evidence: Evidence) -> None:
    check = make_check("diff", changed=("src/*.py",))
    result = evaluate_check(check, evidence)
    assert_verdict(result, check, True)
    assert result.reason.startswith("changed: src/pkg/")


def test_diff_changed_fails_when_nothing_matching_changed() -> None:
    check = make_check("diff", changed=("src/*.py", "docs"))
    result = evaluate_check(check, workspace(TREE, modified={"docs/index.md": b"z"}))
    assert_verdict(result, check, False)
    assert result.reason == "nothing matching 'src/*.py' changed"
    untouched = evaluate_check(check, workspace(TREE))
    assert (
        untouched.reason == "nothing matching 'src/*.py' changed; nothing matching 'docs' changed"
    )


def test_diff_a_folder_name_matches_files_under_it() -> None:
    check = make_check("diff", changed=("docs",))
    assert_verdict(evaluate_check(check, workspace(TREE, added={"docs/a/b.md": b"x"})), check, True)
    slash = make_check("diff", changed=("docs/",))
    assert_verdict(evaluate_check(slash, workspace(TREE, added={"docs/a/b.md": b"x"})), slash, True)
    assert_verdict(evaluate_check(check, workspace(TREE, added={"docsy.md": b"x"})), check, False)


def test_matches() -> None:
    assert matches("src/pkg/core.py", "*.py")
    assert matches("src/pkg/core.py", "src/*")
    assert matches("src/pkg/core.py", "src")
    assert matches("src/pkg/core.py", "src/pkg/")
    assert matches("README.md", "README.md")
    assert not matches("srcx/a.py", "src")
    assert not matches("src/pkg/core.py", "*.md")
    assert not matches("readme.md", "README.md")


def test_diff_unchanged_passes_when_untouched() -> None:
    check = make_check("diff", unchanged=("tests", "README.md"))
    result = evaluate_check(check, workspace(TREE, modified={"src/pkg/core.py": b"z"}))
    assert_verdict(result, check, True)
    assert result.reason == "changed: src/pkg/core.py"
    nothing = evaluate_check(check, workspace(TREE))
    assert nothing.reason == "changed: nothing"


def test_diff_unchanged_fails_naming_the_touched_file() -> None:
    check = make_check("diff", changed=("src",), unchanged=("tests",))
    result = evaluate_check(
        check,
        workspace(TREE, modified={"src/pkg/core.py": b"z"}, deleted=["tests/test_core.py"]),
    )
    assert_verdict(result, check, False)
    assert result.reason == "tests/test_core.py changed (unchanged: 'tests')"
    added = evaluate_check(check, workspace(TREE, added={"tests/test_new.py": b"x"}))
    assert_verdict(added, check, False)
    assert "tests/test_new.py changed (unchanged: 'tests')" in added.reason


def test_diff_unchanged_glob_matching_no_file_is_an_error_of_the_scenario() -> None:
    check = make_check("diff", unchanged=("tset",))
    with pytest.raises(
        CheckError, match="unchanged: 'tset' matches no file of the workspace"
    ) as info:
        evaluate_check(check, workspace(TREE, added={"tset/x": b"1"}))
    # The scenario's own checks.json, the same every run: published, not held back.
    assert info.value.kind == "scenario"


def test_diff_pass_reason_is_bounded_to_five_paths() -> None:
    added = {f"out/{i}.txt": b"x" for i in range(8)}
    check = make_check("diff", changed=("out",))
    result = evaluate_check(check, workspace(TREE, added=added))
    assert_verdict(result, check, True)
    assert result.reason == "changed: out/0.txt, out/1.txt, out/2.txt, out/3.txt, out/4.txt …"


# --- evaluate_check: command -------------------------------------------------------------------


def command_evidence(outcome: CommandOutcome | None, name: str = "c") -> Evidence:
    return Evidence(output="done", commands={} if outcome is None else {name: outcome})


def test_command_exit_zero_passes_with_the_output_tail() -> None:
    check = make_check("command", run="pytest -q")
    result = evaluate_check(check, command_evidence(CommandOutcome(0, "collected 3\n\n3 passed\n")))
    assert_verdict(result, check, True)
    assert result.reason == "exit status 0: collected 3 | 3 passed"


def test_command_exit_zero_without_output() -> None:
    check = make_check("command", run="true")
    result = evaluate_check(check, command_evidence(CommandOutcome(0, "")))
    assert result.reason == "exit status 0: no output"


def test_command_exit_one_fails() -> None:
    check = make_check("command", run="pytest -q")
    result = evaluate_check(check, command_evidence(CommandOutcome(1, "1 failed\n")))
    assert_verdict(result, check, False)
    assert result.reason == "exit status 1: 1 failed"


@pytest.mark.parametrize(("code", "why"), [(127, "not found"), (126, "not executable")])
def test_command_that_cannot_start_is_an_error(code: int, why: str) -> None:
    check = make_check("command", run="nosuchtool")
    outcome = CommandOutcome(code, "sh: nosuchtool: oops\n")
    with pytest.raises(CheckError) as info:
        evaluate_check(check, command_evidence(outcome))
    assert str(info.value) == (
        f"command cannot start ({why}, exit status {code}): sh: nosuchtool: oops"
    )


def test_command_timed_out_is_an_error_of_the_run() -> None:
    check = make_check("command", run="sleep 100", timeout=2.5)
    with pytest.raises(CheckError, match=r"command timed out after 2\.5 s") as info:
        evaluate_check(check, command_evidence(CommandOutcome(None, "", timed_out=True)))
    assert info.value.kind == "infrastructure"


def test_command_without_outcome_is_an_error() -> None:
    check = make_check("command", run="true")
    with pytest.raises(CheckError, match="did not run"):
        evaluate_check(check, command_evidence(CommandOutcome(0, "ok"), name="other"))


def test_command_reason_tail_is_bounded() -> None:
    lines = [f"line {i}" for i in range(50)]
    check = make_check("command", run="x")
    result = evaluate_check(check, command_evidence(CommandOutcome(1, "\n".join(lines))))
    assert result.reason == "exit status 1: " + " | ".join(lines[-5:])
    assert "line 44" not in result.reason
    long = evaluate_check(check, command_evidence(CommandOutcome(0, "a" * 3000 + "END")))
    assert_verdict(long, check, True)
    assert long.reason.startswith("exit status 0: …")
    assert long.reason.endswith("END")
    assert len(long.reason) < 500


# --- workspace_path ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("x", "x"),
        ("./x", "x"),
        ("/workspace/x", "x"),
        ("x/", "x"),
        ("./src/a.py", "src/a.py"),
        ("/workspace/src/", "src"),
        ("src\\a.py", "src/a.py"),
        ("  notes.md  ", "notes.md"),
    ],
)
def test_workspace_path(given: str, expected: str) -> None:
    assert workspace_path(given) == expected


def test_check_paths_are_normalised_before_lookup() -> None:
    for path in ("./notes.md", "/workspace/notes.md", "notes.md/"):
        check = make_check("file", path=path)
        assert_verdict(evaluate_check(check, workspace(BEFORE)), check, True)


# --- ChecksGrader ------------------------------------------------------------------------------


class NeverJudge:
    """A judge the checks grader must never call."""

    model = "never"
    endpoint = "never://"

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def complete(self, system: str, user: str, *, schema: Any = None) -> str:
        self.calls.append((system, user))
        raise AssertionError("the checks grader called the judge")


def grading_task(
    folder: Path,
    agent: AgentResult,
    judge: NeverJudge,
    *,
    commands: dict[str, CommandOutcome] | None = None,
    redact: Any = None,
) -> GradingTask:
    context = (
        GradingContext(judge=judge) if redact is None else GradingContext(judge, redact=redact)
    )
    return GradingTask(
        scenario=load_scenario(folder),
        agent=agent,
        trial=1,
        context=context,
        commands=commands or {},
    )


def test_grader_grades_a_direct_scenarios_output_checks(tmp_path: Path) -> None:
    checks = [
        item("output_regex", "says-done", pattern="^done$"),
        item("output_regex", "no-error", pattern="error", absent=True),
        item("json_schema", "json", schema={"type": "object"}),
    ]
    folder = scenario_with(tmp_path, {"judged": 4}, checks, sandbox=False)
    judge = NeverJudge()
    grading = ChecksGrader().grade(grading_task(folder, AgentResult("x", "work\ndone\n"), judge))
    assert [(r.name, r.passed, r.score, r.kind) for r in grading.criteria] == [
        ("says-done", True, 2, "check"),
        ("no-error", True, 2, "check"),
        ("json", False, 0, "check"),
    ]
    assert judge.calls == []
    assert grading.usage.calls == 0


def test_grader_without_checks_grades_nothing(tmp_path: Path) -> None:
    folder = scenario_with(tmp_path, {"judged": 4}, None)
    judge = NeverJudge()
    grading = ChecksGrader().grade(grading_task(folder, AgentResult("x", "done"), judge))
    assert grading.criteria == []
    assert judge.calls == []


def test_grader_turns_a_check_error_into_a_grade_error(tmp_path: Path) -> None:
    checks = [item("output_regex", "first", pattern="x"), item("command", "tests", run="make test")]
    folder = scenario_with(tmp_path, {"judged": 4}, checks, sandbox=True)
    judge = NeverJudge()
    task = grading_task(folder, AgentResult("x", "x", changes=WorkspaceDiff()), judge)
    with pytest.raises(GradeError) as info:
        ChecksGrader().grade(task)
    assert str(info.value) == "checks.json: [1] ('tests'): its command did not run"
    assert info.value.judge_error is False
    assert info.value.kind == "infrastructure"
    assert judge.calls == []


def test_a_check_that_does_not_fit_its_scenario_is_a_grade_error_of_the_scenario(
    tmp_path: Path,
) -> None:
    checks = [item("diff", "src-kept", unchanged=["src"])]
    folder = scenario_with(tmp_path, {"judged": 4}, checks, sandbox=True)
    task = grading_task(folder, AgentResult("x", "x", changes=WorkspaceDiff()), NeverJudge())
    with pytest.raises(GradeError) as info:
        ChecksGrader().grade(task)
    assert str(info.value) == (
        "checks.json: [0] ('src-kept'): unchanged: 'src' matches no file of the workspace"
    )
    assert info.value.kind == "scenario"


def mask(text: str) -> str:
    return text.replace("hunter2", "***")


def test_grader_masks_a_secret_in_a_commands_output(tmp_path: Path) -> None:
    checks = [item("command", "env", run="env")]
    folder = scenario_with(tmp_path, {"judged": 4}, checks, sandbox=True)
    agent = AgentResult("x", "x", changes=WorkspaceDiff())
    outcome = CommandOutcome(0, "TOKEN=hunter2\n")
    task = grading_task(folder, agent, NeverJudge(), commands={"env": outcome}, redact=mask)
    (result,) = ChecksGrader().grade(task).criteria
    assert result.passed is True
    assert result.reason == "exit status 0: TOKEN=***"
    failing = {"env": CommandOutcome(127, "sh: hunter2: not found")}
    task = grading_task(folder, agent, NeverJudge(), commands=failing, redact=mask)
    with pytest.raises(GradeError) as info:
        ChecksGrader().grade(task)
    assert "hunter2" not in str(info.value)
    assert str(info.value).startswith("checks.json: [0] ('env'): command cannot start")
    assert "sh: ***: not found" in str(info.value)


def test_grader_reads_the_workspace_before_from_the_scenario(tmp_path: Path) -> None:
    skill = write_skill(tmp_path, "demo", {})
    folder = write_scenario(
        skill, "scenario-x", {"judged": 4}, sandbox=True, inputs={"a.txt": "hi"}
    )
    checks = [
        item("file", "kept", path="a.txt"),
        item("file", "task", path="task.md"),
        item("file", "no-skill", path="skill/SKILL.md", absent=True),
        item("diff", "inputs-kept", unchanged=["a.txt"]),
    ]
    (folder / "checks.json").write_text(json.dumps(checks), encoding="utf-8")
    scenario = load_scenario(folder)
    before = workspace_before(scenario)
    assert before == {"task.md": b"Do the task of scenario-x.\n", "a.txt": b"hi"}
    agent = AgentResult("x", "x", changes=WorkspaceDiff(unchanged=["a.txt", "task.md"]))
    grading = ChecksGrader().grade(grading_task(folder, agent, NeverJudge()))
    assert [(r.name, r.passed) for r in grading.criteria] == [
        ("kept", True),
        ("task", True),
        ("no-skill", True),
        ("inputs-kept", True),
    ]
    deleted = AgentResult("x", "x", changes=WorkspaceDiff(deleted=["a.txt"]))
    grading = ChecksGrader().grade(grading_task(folder, deleted, NeverJudge()))
    assert [(r.name, r.passed) for r in grading.criteria] == [
        ("kept", False),
        ("task", True),
        ("no-skill", True),
        ("inputs-kept", False),
    ]


@pytest.mark.parametrize("depth", [900, 5000])
def test_json_nested_deeper_than_python_reads_fails_the_check_instead_of_the_run(
    depth: int,
) -> None:
    # Arrays of arrays all the way down: validating one level asks for the next.
    check = make_check("json_schema", schema={"type": "array", "items": {"$ref": "#"}})
    result = evaluate_check(check, Evidence(output="[" * depth + "]" * depth))
    assert result.passed is False
    assert result.reason.startswith("the agent's output is JSON nested too deeply to be ")


# --- skill_activated ---------------------------------------------------------------------------


def test_a_skill_activated_check_loads_whether_the_skill_must_be_loaded(tmp_path: Path) -> None:
    must, must_not = load(
        tmp_path,
        [item("skill_activated", "loads"), item("skill_activated", "stays", activated=False)],
    )
    assert (must.type, must.activated) == ("skill_activated", True)
    assert must_not.activated is False
    assert not must.reads_workspace  # a direct scenario's agent can load a skill too


def _told(*loads: SkillLoad) -> Evidence:
    transcript = Transcript("claude stream-json", skills_loaded=loads)
    return Evidence(output="done", transcript=transcript, skills=("review", "org/review"))


def test_a_skill_activated_check_passes_when_the_agent_or_a_subagent_loaded_the_skill() -> None:
    check = make_check("skill_activated")

    assert_verdict(evaluate_check(check, _told(SkillLoad("review"))), check, True)
    assert_verdict(evaluate_check(check, _told(SkillLoad("Review", "t2"))), check, True)
    failed = evaluate_check(check, _told(SkillLoad("other-skill")))
    assert_verdict(failed, check, False)
    assert failed.reason == "the agent did not load the skill"


def test_a_skill_that_must_not_load_fails_when_it_did() -> None:
    check = make_check("skill_activated", activated=False)

    assert_verdict(evaluate_check(check, _told(SkillLoad("review"))), check, False)
    assert_verdict(evaluate_check(check, _told()), check, True)


@pytest.mark.parametrize(
    "transcript",
    [None, Transcript("direct", turns=1)],
    ids=["no events", "a model backend"],
)
def test_without_the_agents_events_the_check_errors_naming_the_agent(
    transcript: Transcript | None,
) -> None:
    evidence = Evidence(output="done", transcript=transcript, skills=("review",), agent="kiro-cli")

    with pytest.raises(CheckError, match="kiro-cli gave no events to tell whether it loaded"):
        evaluate_check(make_check("skill_activated"), evidence)


# --- trajectory checks ---------------------------------------------------------------------------

TRAJECTORY = Transcript(
    "claude stream-json",
    steps=(
        Step.message("assistant", "Looking around."),
        Step.tool_call("Read", '{"file_path": "/workspace/skill/references/api.md"}'),
        Step.tool_call("Bash", '{"command": "pytest -q"}', status="ok"),
        Step.tool_call("Write", '{"file_path": "MSG.txt"}', status="ok"),
    ),
    files_read=("/workspace/skill/references/api.md",),
    turns=3,
    input_tokens=900,
    output_tokens=100,
)


def _run(check: Check, transcript: Transcript | None = TRAJECTORY) -> CriterionResult:
    return evaluate_check(check, Evidence(output="done", transcript=transcript, agent="codex"))


def test_trajectory_checks_load_with_their_fields(tmp_path: Path) -> None:
    used, sequence, read, most = load(
        tmp_path,
        [
            item("tool_used", "used", tool="bash", pattern="pytest"),
            item("tool_sequence", "seq", tools=["Read", "Write"], order="exact"),
            item("file_read", "read", path="references/*.md"),
            item("max_turns", "turns", max=5),
        ],
    )
    assert (used.tool, used.pattern is not None) == ("bash", True)
    assert (sequence.tools, sequence.order) == (("Read", "Write"), "exact")
    assert read.path == "references/*.md"
    assert most.limit == 5


def test_a_bad_order_or_a_negative_limit_names_the_field(tmp_path: Path) -> None:
    assert "[0] ('seq').order" in load_error(
        tmp_path, [item("tool_sequence", "seq", tools=["a"], order="sorted")]
    )
    assert "[0] ('most').max" in load_error(tmp_path, [item("max_tool_calls", "most", max=-1)])


@pytest.mark.parametrize(
    ("fields", "passed"),
    [
        ({"type": "tool_used", "tool": "bash"}, True),
        ({"type": "tool_used", "tool": "BASH", "pattern": "pytest -q"}, True),
        ({"type": "tool_used", "tool": "bash", "pattern": "ruff"}, False),
        ({"type": "tool_used", "tool": "WebFetch"}, False),
        ({"type": "tool_not_used", "tool": "WebFetch"}, True),
        ({"type": "tool_not_used", "tool": "bash"}, False),
        ({"type": "tool_sequence", "tools": ("Read", "Write")}, True),
        ({"type": "tool_sequence", "tools": ("Write", "Read")}, False),
        ({"type": "tool_sequence", "tools": ("Write", "Read"), "order": "any_order"}, True),
        ({"type": "tool_sequence", "tools": ("Read", "Write"), "order": "exact"}, False),
        ({"type": "tool_sequence", "tools": ("Read", "Bash", "Write"), "order": "exact"}, True),
        ({"type": "file_read", "path": "references/*.md"}, True),
        ({"type": "file_read", "path": "SKILL.md"}, False),
        ({"type": "max_tool_calls", "limit": 3}, True),
        ({"type": "max_tool_calls", "limit": 2}, False),
        ({"type": "max_turns", "limit": 3}, True),
        ({"type": "max_tokens", "limit": 999}, False),
    ],
)
def test_a_trajectory_check_reads_the_transcript(fields: dict[str, Any], passed: bool) -> None:
    kind = fields.pop("type")
    if "pattern" in fields:
        fields["pattern"] = regex(fields["pattern"])
    check = make_check(kind, **fields)

    assert_verdict(_run(check), check, passed)


@pytest.mark.parametrize("kind", ["tool_used", "file_read", "max_tool_calls", "max_turns"])
def test_a_trajectory_check_without_the_agents_events_is_an_error_naming_it(kind: str) -> None:
    check = make_check(kind, tool="bash", path="x", limit=1)

    with pytest.raises(CheckError, match="codex gave no events"):
        _run(check, None)


def test_limits_the_agent_did_not_report_are_errors() -> None:
    silent = Transcript("codex exec --json")

    with pytest.raises(CheckError, match="did not report its turns"):
        _run(make_check("max_turns", limit=1), silent)
    with pytest.raises(CheckError, match="did not report its tokens"):
        _run(make_check("max_tokens", limit=1), silent)


def test_a_cut_transcript_cannot_tell_a_tool_was_not_used_but_counts_every_call() -> None:
    cut = replace(TRAJECTORY, cut_steps=600, tool_call_count=1003)

    with pytest.raises(CheckError, match="left out 600 steps"):
        _run(make_check("tool_not_used", tool="WebFetch"), cut)
    with pytest.raises(CheckError, match="left out 600 steps"):
        _run(make_check("tool_sequence", tools=("Read", "Write")), cut)
    assert_verdict(_run(make_check("tool_used", tool="bash"), cut), make_check("tool_used"), True)
    calls = make_check("max_tool_calls", limit=500)
    assert_verdict(_run(calls, cut), calls, False)


def test_file_read_is_an_error_for_an_agent_that_reports_commands_not_reads() -> None:
    codex = replace(TRAJECTORY, source="codex exec --json")

    with pytest.raises(CheckError, match="codex reports the commands it ran"):
        _run(make_check("file_read", path="references/*.md"), codex)


@pytest.mark.parametrize(
    ("glob", "passed"),
    [
        ("references/*.md", True),
        ("./references/api.md", True),
        ("/workspace/skill/references/api.md", True),
        ("ferences/*.md", False),
        ("api.md", True),
        ("pi.md", False),
    ],
)
def test_a_relative_file_glob_matches_below_a_folder_not_inside_a_name(
    glob: str, passed: bool
) -> None:
    check = make_check("file_read", path=glob)

    assert_verdict(_run(check), check, passed)


# --- a re-judged trial (core.recorded): the workspace checks keep their recorded verdicts ----


def test_a_rejudged_trial_runs_its_output_checks_again_and_keeps_its_workspace_verdicts(
    tmp_path: Path,
) -> None:
    checks = [item("output_regex", "says-done", pattern="^done$"), item("file", "wrote", path="a")]
    folder = scenario_with(tmp_path, {"judged": 4}, checks, sandbox=True)
    recorded = CriterionResult("wrote", True, 2, 2, "a exists", kind="check")
    # No workspace: a file check graded live here would error (the recorded run has none).
    task = replace(
        grading_task(folder, AgentResult("x", "done\n"), NeverJudge()),
        recorded_checks={"wrote": recorded},
    )

    grading = ChecksGrader().grade(task)

    assert [(r.name, r.passed, r.reason) for r in grading.criteria] == [
        ("says-done", True, "the agent's output matches '^done$': 'done'"),
        ("wrote", True, "a exists"),
    ]


def test_a_rejudged_workspace_check_without_its_recorded_verdict_errors_the_trial(
    tmp_path: Path,
) -> None:
    checks = [item("file", "wrote", path="a")]
    folder = scenario_with(tmp_path, {"judged": 4}, checks, sandbox=True)
    task = replace(
        grading_task(folder, AgentResult("x", "done\n"), NeverJudge()), recorded_checks={}
    )

    with pytest.raises(GradeError) as info:
        ChecksGrader().grade(task)

    assert str(info.value).startswith(
        "checks.json: [0] ('wrote'): reads the workspace, which a run log does not keep"
    )
    assert info.value.kind == "scenario"
