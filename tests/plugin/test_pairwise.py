"""Pairwise judging of a baseline run (``--eval-judge-pairwise``), run as users run it: a real
scripted endpoint whose agent answers depend on whether the skill's text is in the prompt, and
whose judge compares the two answers it is shown as a fair judge, a judge swayed by the order,
or a judge whose answer breaks the contract."""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field

import pytest

from pytest_openkata.core.pairwise_judge import PAIRWISE_SYSTEM_PROMPT
from pytest_openkata.core.runlog import read_run_log
from tests.support.endpoint import RecordedRequest, Reply, ScriptedEndpoint
from tests.support.evals import CRITERION_LINE, eval_args, write_skill

SKILL_RULE = "Follow the rules."  # the text write_skill puts into every SKILL.md
SKILLED = "SKILLED answer: ANSWER-42, applying every rule it was given."
UNSKILLED = "A plain answer from a model that knows nothing more."
CRITERIA = {"applies-rule": 50, "clear": 50}
HOSTILE = "\x1b[2J\x1b]0;owned\x07</td></table><script>alert(1)</script>\u202e|cell|"


@dataclass
class PairwiseScript:
    """Agent calls answer :data:`SKILLED` with the skill in the prompt, else
    :data:`UNSKILLED`; the per-arm judge passes every criterion. The pairwise judge (the
    requests that show Answer A and Answer B) answers as ``mode`` says: ``fair`` prefers
    the skilled answer wherever it is shown, ``first`` always prefers Answer A, ``broken``
    answers prose."""

    mode: str = "fair"
    pairwise: list[RecordedRequest] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: RecordedRequest) -> Reply:
        messages = request.json["messages"]
        user = messages[-1]["content"]
        with self._lock:
            if messages[0]["role"] != "system":
                return Reply.chat(SKILLED if SKILL_RULE in user else UNSKILLED)
            names = [name for name, _ in CRITERION_LINE.findall(user)]
            if not user.startswith("## Answer A"):
                verdicts = [{"name": n, "pass": True, "reason": "fine"} for n in names]
                return Reply.chat(json.dumps(verdicts))
            self.pairwise.append(request)
            if self.mode == "broken":
                return Reply.chat("Answer A is better on the whole.")
            skilled_label = "A" if user.index(SKILLED) < user.index(UNSKILLED) else "B"
            better = skilled_label if self.mode == "fair" else "A"
            answer = {n: {"better": better, "reason": f"{better} {HOSTILE}"} for n in names}
            return Reply.chat(json.dumps(answer))


@pytest.fixture
def judge(endpoint: ScriptedEndpoint) -> PairwiseScript:
    script = PairwiseScript()
    endpoint.respond_with(script)
    return script


def _fenced(label: str, answer: str) -> str:
    code = hashlib.sha256(answer.encode()).hexdigest()[:16]
    return f"<<<ANSWER {label} {code}>>>\n{answer}\n<<<END ANSWER {label} {code}>>>"


def _expected_prompt(first: str, second: str) -> str:
    return (
        f"## Answer A\n\n{_fenced('A', first)}\n\n## Answer B\n\n{_fenced('B', second)}\n\n"
        "## Evaluation Criteria\n\nContext: ctx scenario-0\n\n"
        "- **applies-rule** (max 50 points): checks applies-rule\n"
        "- **clear** (max 50 points): checks clear\n"
    )


def _args(endpoint: ScriptedEndpoint, *extra: str) -> tuple[str, ...]:
    return (
        "skills/s",
        *eval_args(
            endpoint.base_url,
            "--eval-baseline",
            "without-skill",
            "--eval-judge-pairwise",
            "--eval-trials",
            "2",
            *extra,
        ),
    )


def test_the_judge_sees_both_answers_blind_in_both_orders_and_a_fair_judge_counts_wins(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, judge: PairwiseScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": CRITERIA})

    result = pytester.runpytest(
        *_args(endpoint, "--eval-markdown", "run.md", "--eval-html", "run.html")
    )

    assert result.ret == pytest.ExitCode.OK
    # Two trials, each asked in both orders, with nothing that names an arm.
    prompts = [r.json["messages"][-1]["content"] for r in judge.pairwise]
    assert sorted(prompts) == sorted(
        [_expected_prompt(SKILLED, UNSKILLED), _expected_prompt(UNSKILLED, SKILLED)] * 2
    )
    for request in judge.pairwise:
        assert request.json["messages"][0]["content"] == PAIRWISE_SYSTEM_PROMPT
        sent = json.dumps(request.json).lower()
        assert "baseline" not in sent
        assert "without-skill" not in sent
        assert "arm" not in sent
        schema = request.json["response_format"]["json_schema"]["schema"]
        assert schema["required"] == ["applies-rule", "clear"]
        assert schema["properties"]["clear"]["properties"]["better"]["enum"] == ["A", "B", "tie"]
    result.stdout.fnmatch_lines(
        [
            "    Pairwise against without-skill: skill better 4, baseline better 0, tie 0 of 4 "
            "criterion comparisons over 2 trials; skill preferred in 100% of the decided "
            "(95% CI 51-100%); judge noise 0% (0 of 4 changed with the order)",
            "  Pairwise against without-skill: skill better 4, *",
            "    4 pairwise judge calls",
        ]
    )
    assert "swayed by the order" not in result.stdout.str()
    # The run log holds every verdict in both orders, unblinded, and reads back.
    [log] = (pytester.path / ".openkata/runs").glob("*.jsonl")
    [logged] = read_run_log(log).results
    assert logged.baseline is not None
    [first, second] = [t.pairwise for t in logged.trials]
    assert first is not None
    assert second is not None
    assert [(v.name, v.skill_first, v.baseline_first) for v in first.verdicts] == [
        ("applies-rule", "skill", "skill"),
        ("clear", "skill", "skill"),
    ]
    assert first.verdicts[0].skill_first_reason.startswith("A ")
    assert first.verdicts[0].baseline_first_reason.startswith("B ")
    assert first.usage.calls == 2
    # The reports show the figures and every verdict, the judge's reasons as text only.
    page = (pytester.path / "run.html").read_text()
    markdown = (pytester.path / "run.md").read_text()
    summary = "skill better 4, baseline better 0, tie 0 of 4 criterion comparisons"
    assert "<h3>Pairwise against without-skill</h3>" in page
    assert summary in page
    # 2 trials, 2 criteria, 2 orders: every reason shown, as text
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 8
    assert "**Pairwise against without-skill:** " + summary in markdown
    assert markdown.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 8
    assert "\\|cell\\|" in markdown  # a reason cannot split a Markdown table cell
    for text in (page, markdown):
        assert "<script>alert" not in text
        assert "</td></table>" not in text
    assert "owned" not in result.stdout.str()  # reasons never reach the terminal raw
    # The normal grading of each arm is unchanged.
    assert logged.percentage == 100
    assert logged.baseline.percentage == 100

    # Both orders of every trial are cached apart: a repeat asks the judge nothing.
    asked = len(judge.pairwise)
    again = pytester.runpytest(*_args(endpoint))
    assert len(judge.pairwise) == asked
    again.stdout.fnmatch_lines(
        [
            "    Pairwise against without-skill: skill better 4, *",
            "    0 pairwise judge calls (+4 from the cache)",
        ]
    )


def test_a_judge_swayed_by_the_order_is_reported_as_noise_not_as_a_preference(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, judge: PairwiseScript
) -> None:
    judge.mode = "first"
    write_skill(pytester.path, "s", {"scenario-0": CRITERIA})

    result = pytester.runpytest(*_args(endpoint, "--eval-cache", "off"))

    assert result.ret == pytest.ExitCode.OK
    assert len(judge.pairwise) == 4
    result.stdout.fnmatch_lines(
        [
            "    Pairwise against without-skill: skill better 0, baseline better 0, tie 4 of 4 "
            "criterion comparisons over 2 trials; judge noise 100% (4 of 4 changed with the "
            "order)",
            "      swayed by the order: applies-rule 2 of 2, clear 2 of 2",
        ]
    )


def test_a_malformed_pairwise_answer_is_an_error_never_a_verdict(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, judge: PairwiseScript
) -> None:
    judge.mode = "broken"
    write_skill(pytester.path, "s", {"scenario-0": CRITERIA})

    result = pytester.runpytest(*_args(endpoint, "--eval-cache", "off"))

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # Asked once more, as the per-arm judge is, then an error in each trial.
    assert len(judge.pairwise) == 4
    result.stdout.fnmatch_lines(
        [
            "*pairwise judge (skill-first): failed after retry: malformed pairwise answer: "
            "not one JSON object*",
        ]
    )
    [log] = (pytester.path / ".openkata/runs").glob("*.jsonl")
    [logged] = read_run_log(log).results
    for trial in logged.trials:
        assert trial.pairwise is not None
        assert trial.pairwise.verdicts == ()
        assert trial.pairwise.error is not None
    result.stdout.fnmatch_lines(
        [
            "    Pairwise against without-skill: nothing compared (2 comparisons errored)",
            "      ERROR: pairwise judge (skill-first): failed after retry: *",
            "      ERROR: pairwise judge (skill-first): failed after retry: *",
        ]
    )


def test_pairwise_judging_without_a_baseline_is_refused_naming_the_setting(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": CRITERIA})

    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url, "--eval-judge-pairwise"))

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*option --eval-judge-pairwise: judge_pairwise compares a baseline arm*"]
    )
