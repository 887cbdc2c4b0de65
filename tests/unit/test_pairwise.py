"""The pairwise judge's answer contract and the figures of a pairwise comparison: exact
counts and intervals on constructed verdict tables, a malformed answer always an error."""

from __future__ import annotations

import json

import pytest

from pytest_openkata.contracts.results import (
    PAIRWISE_BASELINE,
    PAIRWISE_SKILL,
    PAIRWISE_TIE,
    CallStats,
    PairwiseTrial,
    PairwiseVerdict,
    ScenarioResult,
    TrialResult,
)
from pytest_openkata.core.pairwise import (
    CriterionNoise,
    noise_summary,
    pairwise_summary,
    scenario_pairwise,
    skill_pairwise,
)
from pytest_openkata.core.pairwise_judge import (
    PairwiseJudgeError,
    ask_pairwise,
    pairwise_request,
    parse_pairwise,
)
from pytest_openkata.core.scenario import Criterion
from pytest_openkata.providers.backends.http import OpenAIChatBackend
from tests.support.endpoint import Reply, ScriptedEndpoint
from tests.support.http import loopback_client

NAMES = ("correct", "clear")
CRITERIA = [Criterion(name, f"checks {name}", 50) for name in NAMES]


def _answer(**better: str) -> str:
    return json.dumps(
        {name: {"better": label, "reason": f"r {name}"} for name, label in better.items()}
    )


# --- the answer contract ---------------------------------------------------------------------


def test_an_answer_keyed_by_every_criterion_gives_its_labels_and_reasons() -> None:
    raw = "```json\n" + _answer(correct="a", clear="TIE") + "\n```"

    assert parse_pairwise(raw, NAMES) == {
        "correct": ("A", "r correct"),
        "clear": ("tie", "r clear"),
    }


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("Answer A is better.", "not one JSON object"),
        ('[{"name": "correct", "better": "A"}]', "not one JSON object"),
        ('Sure: {"correct": {"better": "A", "reason": ""}}', "not one JSON object"),
        (_answer(correct="A"), "no verdict for criterion 'clear'"),
        (_answer(correct="A", clear="B", extra="A"), "criterion 'extra' is not in the checklist"),
        (
            '{"correct": {"better": "A", "reason": ""}, "clear": {"better": "B", "reason": ""},'
            ' "correct": {"better": "B", "reason": ""}}',
            "criterion 'correct' is given twice",
        ),
        (_answer(correct="both", clear="A"), '\'correct\': "better" must be "A", "B" or "tie"'),
        (
            '{"correct": {"better": "A", "reason": 3}, "clear": {"better": "B", "reason": ""}}',
            "'correct': \"reason\" must be a string",
        ),
        ('{"correct": "A", "clear": "B"}', "'correct': not an object"),
    ],
)
def test_an_answer_that_breaks_the_contract_is_an_error_never_a_verdict(raw: str, why: str) -> None:
    with pytest.raises(PairwiseJudgeError) as caught:
        parse_pairwise(raw, NAMES)

    assert str(caught.value) == f"malformed pairwise answer: {why}"


def test_a_made_up_criterion_is_quoted_bounded_in_the_error() -> None:
    made_up = "x" * 5000
    raw = _answer(correct="A", clear="B")[:-1] + f', "{made_up}": {{"better": "A"}}}}'

    with pytest.raises(PairwiseJudgeError) as caught:
        parse_pairwise(raw, NAMES)

    assert str(caught.value) == (
        f"malformed pairwise answer: criterion '{'x' * 60}…' is not in the checklist"
    )


def test_a_malformed_answer_is_asked_once_more_and_the_second_one_counts() -> None:
    with ScriptedEndpoint() as endpoint, loopback_client(30) as client:
        endpoint.enqueue(Reply.chat("A, clearly."), Reply.chat(_answer(correct="B", clear="A")))
        judge = OpenAIChatBackend(client, base_url=endpoint.base_url, api_key="", model="j")
        request = pairwise_request("first answer", "second answer", "", CRITERIA)

        verdicts = ask_pairwise(judge, request)

        assert verdicts == {"correct": ("B", "r correct"), "clear": ("A", "r clear")}
        assert [r.json["messages"][-1]["content"] for r in endpoint.requests] == [request.user] * 2


def test_two_malformed_answers_are_an_error() -> None:
    with ScriptedEndpoint() as endpoint, loopback_client(30) as client:
        endpoint.enqueue(Reply.chat("A."), Reply.chat(_answer(correct="A")))
        judge = OpenAIChatBackend(client, base_url=endpoint.base_url, api_key="", model="j")

        with pytest.raises(PairwiseJudgeError) as caught:
            ask_pairwise(judge, pairwise_request("one", "two", "", CRITERIA))

        assert str(caught.value) == (
            "failed after retry: malformed pairwise answer: no verdict for criterion 'clear'"
        )


# --- the figures -----------------------------------------------------------------------------


def _verdict(name: str, skill_first: str, baseline_first: str) -> PairwiseVerdict:
    return PairwiseVerdict(name, skill_first, baseline_first)


def _result(*trials: PairwiseTrial | None) -> ScenarioResult:
    def trial(index: int, pairwise: PairwiseTrial | None) -> TrialResult:
        return TrialResult(index, [], 0, 100, 0.0, False, pairwise=pairwise)

    own = [trial(i, p) for i, p in enumerate(trials, start=1)]
    baseline = ScenarioResult("s", "s", "sc", "", [], 0, 100, 0.0, False, arm="without-skill")
    return ScenarioResult("s", "s", "sc", "", [], 0, 100, 0.0, False, trials=own, baseline=baseline)


S, B, T = PAIRWISE_SKILL, PAIRWISE_BASELINE, PAIRWISE_TIE

# Three trials of two criteria: the skill wins 3, loses 1, ties 2 (one said tie in both
# orders, one changed with the order, which is a tie and noise).
TABLE = _result(
    PairwiseTrial((_verdict("correct", S, S), _verdict("clear", S, S)), usage=CallStats(calls=2)),
    PairwiseTrial((_verdict("correct", S, S), _verdict("clear", B, B)), usage=CallStats(cached=2)),
    PairwiseTrial((_verdict("correct", S, B), _verdict("clear", T, T)), usage=CallStats(calls=2)),
)


def test_wins_losses_ties_and_noise_of_a_constructed_table() -> None:
    figures = scenario_pairwise(TABLE)

    assert figures is not None
    assert (figures.wins, figures.losses, figures.ties) == (3, 1, 2)
    assert (figures.trials, figures.comparisons, figures.disagreements) == (3, 6, 1)
    assert figures.preference == 0.75
    # Wilson's interval of 3 in 4 by hand: (p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n).
    assert figures.interval == pytest.approx((0.300642, 0.954413), abs=1e-6)
    assert figures.noise == pytest.approx(1 / 6)
    assert figures.criteria == (CriterionNoise("correct", 3, 1), CriterionNoise("clear", 3, 0))
    assert noise_summary(figures) == "correct 1 of 3"
    assert figures.usage == CallStats(calls=4, cached=2)
    assert pairwise_summary(figures) == (
        "skill better 3, baseline better 1, tie 2 of 6 criterion comparisons over 3 trials; "
        "skill preferred in 75% of the decided (95% CI 30-95%); judge noise 17% (1 of 6 "
        "changed with the order)"
    )


def test_a_judge_that_always_prefers_the_first_answer_decides_nothing() -> None:
    swayed = _result(PairwiseTrial((_verdict("correct", S, B), _verdict("clear", S, B))))

    figures = scenario_pairwise(swayed)

    assert figures is not None
    assert (figures.wins, figures.losses, figures.ties, figures.disagreements) == (0, 0, 2, 2)
    assert figures.preference is None
    assert figures.interval is None
    assert figures.noise == 1.0
    assert "preferred" not in pairwise_summary(figures)


def test_an_errored_comparison_is_counted_apart_and_the_skill_adds_its_scenarios_up() -> None:
    failed = _result(
        PairwiseTrial(error="pairwise judge (skill-first): boom", usage=CallStats(calls=1)),
        PairwiseTrial((_verdict("correct", B, B), _verdict("clear", S, S))),
        None,  # a trial that errored in an arm is not compared
    )

    figures = scenario_pairwise(failed)
    total = skill_pairwise([TABLE, failed, _result(None)])

    assert figures is not None
    assert figures.trials == 1
    assert figures.errors == ("pairwise judge (skill-first): boom",)
    assert total is not None
    assert (total.wins, total.losses, total.ties, total.trials) == (4, 2, 2, 4)
    assert total.criteria == ()
    assert total.errors == figures.errors
    assert scenario_pairwise(_result(None)) is None


def test_pairwise_verdicts_survive_the_trip_between_processes() -> None:
    # What an xdist worker sends and the run log holds: the same verdicts come back.
    assert ScenarioResult.from_dict(TABLE.to_dict()) == TABLE
