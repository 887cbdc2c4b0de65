"""Trigger evals end to end: a stand-in for Claude Code (printing Claude Code's stream-json
events as a plan says) runs each query with the skill installed among others; each query is
an item, passes by the rule, and the skill's precision, recall and F1 reach the terminal, the
run log and the trigger report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.evals import write_skill
from tests.support.scripted_claude import ScriptedClaude, install_scripted_claude

SHOULD_A = "Rename every zebra in the inventory."
SHOULD_B = "Count the zebras and unicorns."
NOT_A = "What is the weather like?"
NOT_B = "Write a haiku about autumn."


@pytest.fixture
def claude(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ScriptedClaude:
    standin, path = install_scripted_claude(tmp_path / "bin")
    monkeypatch.setenv("PATH", path)
    return standin


def _skill_with_queries(root: Path, queries: list[dict[str, object]]) -> Path:
    skill = write_skill(root, "zoo", {})
    (skill / "SKILL.md").write_text("---\nname: zoo\ndescription: zebra inventories\n---\n# Zoo\n")
    (skill / "references").mkdir()
    (skill / "references" / "rules.md").write_text("Zebras first.\n")
    evals = skill / "evals"
    evals.mkdir(exist_ok=True)
    (evals / "trigger_queries.json").write_text(json.dumps(queries))
    other = root / "skills" / "weather"
    other.mkdir(parents=True)
    (other / "SKILL.md").write_text("---\nname: weather\ndescription: forecasts\n---\n")
    return skill


def _run(pytester: pytest.Pytester, *extra: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "skills/zoo",
        "--eval-backend", "claude",
        "--eval-trigger-skills", "skills/weather",
        "-p", "no:cacheprovider",
        "-rA",
        *extra,
    )  # fmt: skip


QUERIES = [
    {"query": SHOULD_A, "should_trigger": True},
    {"query": SHOULD_B, "should_trigger": True},
    {"query": NOT_A, "should_trigger": False},
    {"query": NOT_B, "should_trigger": False, "note": "extra keys are ignored"},
]


def test_each_query_runs_three_times_with_the_skill_installed_and_is_judged_by_the_rule(
    pytester: pytest.Pytester, claude: ScriptedClaude
) -> None:
    _skill_with_queries(pytester.path, QUERIES)
    claude.plan(
        "zoo",
        {
            SHOULD_A: ["load", "load", "skip"],  # 2 of 3: passes
            SHOULD_B: ["skip", "skip", "load"],  # 1 of 3: fails
            NOT_A: ["load", "skip", "skip"],  # 1 of 3: passes
            NOT_B: ["load", "load", "skip"],  # 2 of 3: fails
        },
    )

    result = _run(pytester, "--eval-markdown", "run.md", "--eval-html", "run.html")

    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.assert_outcomes(passed=2, failed=2)
    out = result.stdout.str()
    assert "PASSED skills/zoo/evals::trigger-01" in out
    assert "FAILED skills/zoo/evals::trigger-02" in out
    assert "PASSED skills/zoo/evals::trigger-03" in out
    assert "FAILED skills/zoo/evals::trigger-04" in out
    assert "trigger-02 should load the skill, and it loaded in 1 of 3 runs" in out
    # TP 3, FN 3, FP 3, TN 3: precision = recall = F1 = 0.5; Wilson's 3 of 6 is 0.19..0.81.
    assert (
        "skills/zoo: 2 of 4 trigger queries passed; precision 0.50 [0.19, 0.81], "
        "recall 0.50 [0.19, 0.81], F1 0.50 [0.19, 0.81]"
    ) in out

    calls = claude.calls()
    assert len(calls) == 12
    for call in calls:
        # The prompt is the query alone; the skill and the other one are where Claude Code
        # looks, discovered without --bare.
        assert call["prompt"].strip() in {SHOULD_A, SHOULD_B, NOT_A, NOT_B}
        assert "Zebras first" not in call["prompt"]
        assert call["files"] == [
            ".claude/skills/weather/SKILL.md",
            ".claude/skills/zoo/SKILL.md",
            ".claude/skills/zoo/references/rules.md",
        ]
        assert "--bare" not in call["argv"]
        assert call["argv"][call["argv"].index("--setting-sources") + 1] == "project"

    [log] = (pytester.path / ".openkata" / "runs").glob("*.jsonl")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    extras = {r["kind"]: [] for r in records if r["record"] == "extra"}
    for record in records:
        if record["record"] == "extra":
            extras[record["kind"]].append(record["data"])
    by_name = {q["name"]: q for q in extras["trigger_query"]}
    assert by_name["trigger-02"]["activations"] == ["not loaded", "not loaded", "loaded"]
    assert by_name["trigger-04"]["passed"] is False
    [skill] = extras["trigger_skill"]
    assert (skill["true_positives"], skill["false_negatives"]) == (3, 3)
    assert (skill["false_positives"], skill["true_negatives"]) == (3, 3)
    assert skill["precision"] == skill["recall"] == skill["f1"] == 0.5

    [report] = (pytester.path / ".openkata" / "runs").glob("*-triggers.json")
    data = json.loads(report.read_text())
    assert data["trigger_runs"] == 3
    assert data["skills"] == [skill]
    assert [q["name"] for q in data["queries"]] == [f"trigger-0{i}" for i in range(1, 5)]
    assert str(pytester.path) not in report.read_text()  # no machine path

    markdown = (pytester.path / "run.md").read_text()
    assert "## Trigger evals" in markdown
    assert "- skills/zoo: 2 of 4 trigger queries passed; precision 0.50 \\[0.19, 0.81\\]" in (
        markdown
    )
    # Only the queries that failed the rule are listed, with how often they loaded.
    assert "| skills/zoo: trigger-02 | yes | 1 of 3 runs | Count the zebras and unicorns. |" in (
        markdown
    )
    assert "| skills/zoo: trigger-04 | no | 2 of 3 runs | Write a haiku about autumn. |" in (
        markdown
    )
    assert "trigger-01" not in markdown
    page = (pytester.path / "run.html").read_text()
    assert "<h2>Trigger evals</h2>" in page
    assert (
        '<tr><td>skills/zoo: trigger-04</td><td>no</td><td class="num">2 of 3 runs</td>'
        "<td>Write a haiku about autumn.</td></tr>"
    ) in page


def test_k_selects_queries_by_name_and_by_kind(
    pytester: pytest.Pytester, claude: ScriptedClaude
) -> None:
    _skill_with_queries(pytester.path, QUERIES)
    claude.plan("zoo", {NOT_A: ["skip"], NOT_B: ["skip"], SHOULD_A: ["load"]})

    by_kind = _run(pytester, "-k", "should_not_trigger")
    by_name = _run(pytester, "-k", "trigger-01")

    by_kind.assert_outcomes(passed=2, deselected=2)
    by_name.assert_outcomes(passed=1, deselected=3)
    prompts = [call["prompt"].strip() for call in claude.calls()]
    assert sorted(set(prompts)) == sorted({NOT_A, NOT_B, SHOULD_A})


def test_a_run_without_events_errors_the_query_and_a_custom_rule_applies(
    pytester: pytest.Pytester, claude: ScriptedClaude
) -> None:
    _skill_with_queries(pytester.path, QUERIES[:2])
    claude.plan("zoo", {SHOULD_A: ["load", "silent"], SHOULD_B: ["load", "skip"]})

    result = _run(pytester, "--eval-trigger-runs", "2", "--eval-trigger-loads-needed", "1")

    result.assert_outcomes(passed=1, errors=1)
    out = result.stdout.str()
    assert "ERROR at setup of zoo::trigger-01" in out
    assert "run 2: the agent gave no events, so whether zoo loaded is unknown" in out
    # The errored query counts neither way: the metrics are those of trigger-02 alone.
    assert "skills/zoo: 1 of 1 trigger queries passed" in out


def test_waza_trigger_tests_are_read_and_a_broken_file_names_the_file_and_the_entry(
    pytester: pytest.Pytester, claude: ScriptedClaude
) -> None:
    skill = _skill_with_queries(pytester.path, QUERIES[:1])
    (skill / "evals" / "trigger_queries.json").unlink()
    (skill / "evals" / "trigger_tests.yaml").write_text(
        "skill: zoo\n"
        "should_trigger_prompts:\n"
        f"  - prompt: {SHOULD_A}\n    reason: names the zebras\n    confidence: high\n"
        "should_not_trigger_prompts:\n"
        f"  - prompt: {NOT_A}\n    reason: unrelated\n"
    )
    claude.plan("zoo", {SHOULD_A: ["load"], NOT_A: ["skip"]})

    good = _run(pytester)

    good.assert_outcomes(passed=2)
    assert "skills/zoo: 2 of 2 trigger queries passed; precision 1.00" in good.stdout.str()

    (skill / "evals" / "trigger_tests.yaml").write_text(
        "skill: zoo\nshould_trigger_prompts:\n  - reason: no prompt\n"
    )
    broken = _run(pytester)

    broken.assert_outcomes(errors=1)
    assert (
        "trigger queries: evals/trigger_tests.yaml: should_trigger_prompts[0].prompt: "
        "required: a non-empty string"
    ) in broken.stdout.str()
    said = [line for line in broken.stdout.lines if "trigger queries:" in line]
    assert said
    assert not [line for line in said if str(pytester.path) in line]


def test_finished_runs_come_from_the_cache_until_the_skill_changes(
    pytester: pytest.Pytester, claude: ScriptedClaude
) -> None:
    skill = _skill_with_queries(pytester.path, QUERIES[:1])
    claude.plan("zoo", {SHOULD_A: ["load"]})
    args = ("skills/zoo", "--eval-backend", "claude", "--eval-trigger-runs", "2")

    first = pytester.runpytest_subprocess(*args)
    again = pytester.runpytest_subprocess(*args)
    (skill / "SKILL.md").write_text("---\nname: zoo\ndescription: changed\n---\n")
    changed = pytester.runpytest_subprocess(*args)

    for result in (first, again, changed):
        result.assert_outcomes(passed=1)
    assert len(claude.calls()) == 4  # two runs, none again, two for the changed skill


def test_a_backend_without_a_skills_folder_errors_every_query_saying_why(
    pytester: pytest.Pytester,
) -> None:
    _skill_with_queries(pytester.path, QUERIES[:2])

    result = pytester.runpytest_subprocess(
        "skills/zoo", "--eval-backend", "command", "--eval-agent-command", "cat"
    )

    result.assert_outcomes(errors=2)
    assert (
        "trigger query error: trigger queries install the skill: skill_delivery installed needs "
        "an agent that discovers skills in its working folder; command declares no skills folder"
    ) in result.stdout.str()


def test_outcomes_reach_the_summary_from_an_xdist_worker(
    pytester: pytest.Pytester, claude: ScriptedClaude
) -> None:
    _skill_with_queries(pytester.path, QUERIES[:2])
    claude.plan("zoo", {SHOULD_A: ["load"], SHOULD_B: ["load", "skip"]})

    result = _run(pytester, "-n", "1", "--eval-trigger-runs", "2")

    result.assert_outcomes(passed=1, failed=1)
    assert (
        "skills/zoo: 1 of 2 trigger queries passed; precision 1.00 [0.44, 1.00], "
        "recall 0.75 [0.30, 0.95]"
    ) in result.stdout.str()
