"""``pytest --eval-validate`` on direct scenarios: the solution in ``solution/answer.md`` must
score 100 % and an empty agent below 50 %, graded by the real judge flow against a scripted
endpoint that judges by what the answer says."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.endpoint import RecordedRequest, Reply, ScriptedEndpoint
from tests.support.evals import (
    CRITERION_LINE,
    eval_args,
    reports_under,
    write_scenario,
    write_skill,
)

ANSWER = re.compile(r"## Agent Response\n\n(.*?)\n\n## Evaluation Criteria", re.DOTALL)
FENCE = re.compile(r"<<<(?:END )?AGENT OUTPUT [0-9a-f]+>>>\n?")


class AnswerJudge:
    """A judge that passes a criterion when the agent's answer holds its marker (a criterion
    without a marker passes on anything); agent calls are refused, so that a validation that
    asked the model would error."""

    def __init__(self, markers: dict[str, str]) -> None:
        self.markers = markers
        self.answers: list[str] = []
        self.agent_calls = 0

    def __call__(self, request: RecordedRequest) -> Reply:
        messages = request.json["messages"]
        if messages[0]["role"] != "system":
            self.agent_calls += 1
            return Reply(status=400, body="validation must not call the agent model")
        text = messages[-1]["content"]
        found = ANSWER.search(text)
        answer = FENCE.sub("", found.group(1)).rstrip("\n") if found else ""
        self.answers.append(answer)
        verdicts = [
            {"name": name, "pass": self.markers.get(name, "") in answer, "reason": "read it"}
            for name, _points in CRITERION_LINE.findall(text)
        ]
        return Reply.chat(json.dumps(verdicts))


@pytest.fixture
def judge(endpoint: ScriptedEndpoint) -> AnswerJudge:
    made = AnswerJudge({"names-day": "Monday", "lists-people": "Ana"})
    endpoint.respond_with(made)
    return made


def _scenario(root: Path, name: str, criteria: dict[str, int], answer: str | None) -> Path:
    skill = root / "skills" / "notes"
    if not skill.exists():
        skill = write_skill(root, "notes", {})
    folder = write_scenario(skill, name, criteria)
    if answer is not None:
        (folder / "solution").mkdir()
        (folder / "solution" / "answer.md").write_text(answer)
    return folder


def test_a_good_scenario_validates_without_calling_the_agent_and_writes_no_report(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, judge: AnswerJudge
) -> None:
    _scenario(
        pytester.path,
        "scenario-0",
        {"names-day": 6, "lists-people": 4},
        "The meeting is on Monday; Ana will attend.\n",
    )

    result = pytester.runpytest("--eval-validate", "skills", *eval_args(endpoint.base_url), "-v")

    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "openkata: backend=http * mode=validate (solutions and an empty agent; no report)",
            "*SUBPASSED[[]solution scores 100%[]]*",
            "*SUBPASSED[[]empty agent scores below 50%[]]*",
            "*= openkata validation =*",
            "skills/notes/evals::scenario-0: solution 100% ok; empty agent 0% ok",
        ]
    )
    assert judge.agent_calls == 0
    assert sorted(judge.answers) == [
        "",
        "The meeting is on Monday; Ana will attend.",
    ]  # the empty agent, the solution
    assert reports_under(pytester.path) == []
    assert not (pytester.path / ".openkata").exists()
    assert "openkata eval summary" not in result.stdout.str()


def test_a_solution_that_misses_fails_and_names_what_it_missed(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, judge: AnswerJudge
) -> None:
    _scenario(
        pytester.path,
        "scenario-0",
        {"names-day": 6, "lists-people": 4},
        "The meeting is on Monday, nobody else.\n",
    )

    result = pytester.runpytest("--eval-validate", "skills", *eval_args(endpoint.base_url))

    result.assert_outcomes(failed=2)  # the item and its solution subtest
    result.stdout.fnmatch_lines(
        [
            "*the solution scores 60%; it misses: lists-people: read it",
            "skills/notes/evals::scenario-0: solution 60% FAIL; empty agent 0% ok",
        ]
    )


def test_a_scenario_passed_by_doing_nothing_lists_what_passes_on_nothing(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, judge: AnswerJudge
) -> None:
    # "polite" and "short" have no marker: they pass whatever the answer says.
    _scenario(pytester.path, "scenario-0", {"names-day": 4, "polite": 3, "short": 3}, None)
    _scenario(
        pytester.path,
        "scenario-1",
        {"names-day": 8, "short": 2},
        "The meeting moved to Monday morning.\n",
    )

    result = pytester.runpytest("--eval-validate", "skills", *eval_args(endpoint.base_url))

    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines_random(
        [
            "*an agent that does nothing scores 60%; pass on nothing: polite, short",
            "skills/notes/evals::scenario-0: no solution; empty agent 60% FAIL; pass on nothing: "
            "polite, short",
            "skills/notes/evals::scenario-1: solution 100% ok; empty agent 20% ok; pass on "
            "nothing: short",
        ]
    )


def test_a_judge_that_passes_everything_on_nothing_fails_the_empty_agent_verdict(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, judge: AnswerJudge
) -> None:
    _scenario(pytester.path, "scenario-0", {"polite": 5, "short": 5}, None)

    result = pytester.runpytest("--eval-validate", "skills", *eval_args(endpoint.base_url))

    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*the judge passes every criterion on an agent that does nothing (a run rejects that "
            "as a suspicious result and errors the scenario)",
            "skills/notes/evals::scenario-0: no solution; empty agent 100% FAIL; pass on "
            "nothing: every judged criterion",
        ]
    )


def test_a_judge_that_fails_is_an_error_not_a_failed_verdict(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint
) -> None:
    _scenario(
        pytester.path, "scenario-0", {"names-day": 10}, "The meeting moved to Monday morning.\n"
    )
    endpoint.respond_with(lambda request: Reply(status=400, body="judge is down"))

    result = pytester.runpytest("--eval-validate", "skills", *eval_args(endpoint.base_url))

    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*validation error: *judge*"])


def test_a_direct_scenario_with_only_a_script_says_what_its_solution_should_be(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, judge: AnswerJudge
) -> None:
    folder = _scenario(pytester.path, "scenario-0", {"names-day": 10}, None)
    (folder / "solution").mkdir()
    (folder / "solution" / "solve.sh").write_text("echo Monday\n")

    result = pytester.runpytest("--eval-validate", "skills", *eval_args(endpoint.base_url))

    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*validation error: solution: solution/answer.md not found: a direct scenario's*"]
    )


def test_validation_runs_under_xdist_and_deselects_other_tests(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, judge: AnswerJudge
) -> None:
    _scenario(
        pytester.path, "scenario-0", {"names-day": 10}, "The meeting moved to Monday morning.\n"
    )
    _scenario(
        pytester.path, "scenario-1", {"lists-people": 10}, "Ana and Bo will both attend it.\n"
    )
    pytester.makepyfile(test_other="def test_other():\n    raise AssertionError\n")

    result = pytester.runpytest(
        "--eval-validate", "-n", "2", "skills", "test_other.py", *eval_args(endpoint.base_url)
    )

    result.assert_outcomes(passed=2)  # test_other, which would fail, did not run
    result.stdout.fnmatch_lines_random(
        [
            "skills/notes/evals::scenario-0: solution 100% ok; empty agent 0% ok",
            "skills/notes/evals::scenario-1: solution 100% ok; empty agent 0% ok",
        ]
    )
