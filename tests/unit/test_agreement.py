"""Judge agreement on constructed verdicts: Cohen's κ against hand-computed values, perfect,
chance-level and undefined agreement, the pairing of two runs and of a run with human labels,
self-consistency from votes, the labels file's errors, and hostile text in the views."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_openkata.commands.agreement import main as agreement_main
from pytest_openkata.contracts.results import ScenarioResult
from pytest_openkata.core.agreement import (
    AgreementError,
    agreement_report,
    below_min_kappa,
    cohens_kappa,
    pair_labels,
    pair_runs,
    self_consistency,
)
from pytest_openkata.core.agreement_view import (
    ANSWER_EXCERPT_CHARS,
    agreement_document,
    agreement_text,
)
from pytest_openkata.core.run_agreement import AGREEMENT_EXTRA, is_run_log
from pytest_openkata.core.runlog import LoggedRun, RunInfo, log_lines, parse_run_log
from pytest_openkata.core.verdict_labels import LabelsError, parse_labels
from pytest_openkata.providers.reporters.html import render_html
from pytest_openkata.providers.reporters.markdown import render_markdown
from tests.support.results import ROOT, SETTINGS, checked, judged, logged, scenario

# ---------------------------------------------------------------------------------------------
# Cohen's κ of 2x2 tables: (both pass, first only passes, second only passes, both fail).


def test_kappa_of_a_constructed_table_is_the_hand_computed_value() -> None:
    # n = 50, proportions p11 = .4, p12 = .1, p21 = .2, p22 = .3.
    # Observed agreement p_o = .4 + .3 = .7.
    # Margins: first rater pass .5, fail .5; second rater pass .6, fail .4.
    # Chance agreement p_e = .5 * .6 + .5 * .4 = .5.
    # κ = (p_o - p_e) / (1 - p_e) = .2 / .5 = .4.
    # Large-sample variance (Fleiss, Cohen and Everitt 1969), with 1 - κ = .6:
    #   A = Σ p_ii (1 - (p_i. + p_.i)(1 - κ))^2
    #     = .4 (1 - 1.1 * .6)^2 + .3 (1 - .9 * .6)^2 = .4 * .1156 + .3 * .2116 = .10972
    #   B = (1 - κ)^2 Σ_{i≠j} p_ij (p_.i + p_j.)^2
    #     = .36 (.1 * (.6 + .5)^2 + .2 * (.4 + .5)^2) = .36 * (.121 + .162) = .10188
    #   C = (κ - p_e (1 - κ))^2 = (.4 - .3)^2 = .01
    #   var = (A + B - C) / (n (1 - p_e)^2) = .2016 / 12.5 = .016128; SE = .126996
    # 95 % interval: .4 ± 1.959964 * .126996 = [.151092, .648908].
    kappa = cohens_kappa((20, 5, 10, 15))

    assert kappa.n == 50
    assert kappa.raw == pytest.approx(0.7)
    assert kappa.kappa == pytest.approx(0.4)
    assert kappa.std_error == pytest.approx(0.126996, abs=1e-6)
    assert (kappa.low, kappa.high) == pytest.approx((0.151092, 0.648908), abs=1e-6)
    assert kappa.undefined == ""


def test_perfect_agreement_is_kappa_one() -> None:
    # p_o = 1; p_e = .5 * .5 + .5 * .5 = .5; κ = (1 - .5) / (1 - .5) = 1. The variance's
    # terms: A = .5 (1 - 1 * 0)^2 * 2 = 1, B = 0, C = (1 - 0)^2 = 1: SE 0.
    kappa = cohens_kappa((6, 0, 0, 6))

    assert (kappa.kappa, kappa.std_error, kappa.low, kappa.high) == (1.0, 0.0, 1.0, 1.0)
    assert kappa.raw == 1.0


def test_chance_level_agreement_is_kappa_zero_with_its_interval() -> None:
    # Every cell 3 of 12 (.25): p_o = .5, p_e = .5 * .5 + .5 * .5 = .5, κ = 0.
    # A = Σ .25 (1 - 1 * 1)^2 = 0; B = 1 * (.25 * 1^2 + .25 * 1^2) = .5; C = (0 - .5)^2 = .25.
    # var = (0 + .5 - .25) / (12 * .25) = 1/12; SE = .288675; interval ± .565793.
    kappa = cohens_kappa((3, 3, 3, 3))

    assert kappa.kappa == pytest.approx(0.0)
    assert kappa.std_error == pytest.approx(0.288675, abs=1e-6)
    assert (kappa.low, kappa.high) == pytest.approx((-0.565793, 0.565793), abs=1e-6)


def test_worse_than_chance_is_negative_and_its_interval_stops_at_minus_one() -> None:
    # p_o = 0; margins: first pass 3/5, second pass 2/5; p_e = .6 * .4 + .4 * .6 = .48;
    # κ = (0 - .48) / .52 = -.923077; the interval's lower end (κ - 1.96 SE) is below -1.
    kappa = cohens_kappa((0, 3, 2, 0))

    assert kappa.kappa == pytest.approx(-0.923077, abs=1e-6)
    assert kappa.low == -1.0
    assert kappa.high is not None
    assert kappa.high < 0


@pytest.mark.parametrize(
    ("table", "why"), [((7, 0, 0, 0), "every verdict pass"), ((0, 0, 0, 4), "every verdict fail")]
)
def test_kappa_is_undefined_when_both_sides_give_one_verdict_throughout(
    table: tuple[int, int, int, int], why: str
) -> None:
    # p_o = p_e = 1: κ = 0 / 0.
    kappa = cohens_kappa(table)

    assert (kappa.kappa, kappa.std_error, kappa.low, kappa.high) == (None, None, None, None)
    assert kappa.undefined == why
    assert kappa.raw == 1.0


@pytest.mark.parametrize(
    "table",
    [
        (3, 1, 0, 0),  # first always passes: p_e = 1 * .75 + 0 * .25 = .75 = p_o
        (8, 2, 0, 0),
        (9, 1, 0, 0),
        (19, 1, 0, 0),
        (2, 0, 1, 0),  # second always passes
        (0, 1, 0, 9),  # second always fails
        (0, 4, 0, 0),  # first always passes, second always fails: p_o = p_e = 0
    ],
)
def test_one_side_constant_the_other_not_is_zero_by_construction_and_gated(
    table: tuple[int, int, int, int],
) -> None:
    # Whatever the floats of the asymptotic error make of such a table, κ is 0 with no
    # interval: the constant side told nothing apart. The gate counts it (0 < any minimum).
    kappa = cohens_kappa(table)

    assert (kappa.kappa, kappa.std_error, kappa.low, kappa.high) == (0.0, None, None, None)
    assert kappa.by_construction
    assert kappa.undefined == ""


def test_a_judge_that_passes_everything_fails_the_gate() -> None:
    strong = _run("strong.jsonl", scenario("scenario-a", *_verdicts(True, True, False, False)))
    lenient = _run("lenient.jsonl", scenario("scenario-a", *_verdicts(True, True, True, True)))
    report = agreement_report(pair_runs(strong, lenient))

    text = agreement_text(report, 0.5)
    document = agreement_document(report, 0.5)

    # y: table (2, 0, 2, 0); the lenient side gave "pass" throughout: κ 0, no interval.
    assert "skills/s::scenario-a [1] y  n=4  agreement 50%  κ 0.00 (one side gave one " in text
    assert "FAILED: κ below 0.5 on 1 of 2 criteria:" in text
    y = document["criteria"][1]
    assert (y["kappa"], y["ci95"], y["one_side_constant"]) == (0.0, None, True)


# ---------------------------------------------------------------------------------------------
# Two runs of the same answers.


def _run(source: str, *results: object, judge_model: str = "gpt-4o") -> LoggedRun:
    run = logged(list(results))  # type: ignore[arg-type]
    settings = {**run.info.settings, "judge_model": judge_model}
    return replace(run, source=source, info=replace(run.info, settings=settings))


def _verdicts(*passes: bool) -> list[list]:
    return [
        [judged("x", 1, True), judged("y", 2, passed, "yes" if passed else "no")]
        for passed in passes
    ]


def test_two_runs_pair_criterion_by_criterion_and_give_kappa_per_criterion_and_scenario() -> None:
    strong = _run("strong.jsonl", scenario("scenario-a", *_verdicts(True, True, False, False)))
    cheap = _run(
        "cheap.jsonl",
        scenario("scenario-a", *_verdicts(True, False, False, False)),
        judge_model="small",
    )

    report = agreement_report(pair_runs(strong, cheap))

    assert report.first == "judge gpt-4o (strong.jsonl)"
    assert report.second == "judge small (cheap.jsonl)"
    x, y = report.criteria
    # x: passed by both on all four trials: undefined.
    assert (x.criterion, x.kappa.table, x.kappa.undefined) == (
        "x",
        (4, 0, 0, 0),
        "every verdict pass",
    )
    # y: table (1, 1, 0, 2): p_o = 3/4; margins first .5/.5, second .25/.75;
    # p_e = .5 * .25 + .5 * .75 = .5; κ = (.75 - .5) / .5 = .5.
    assert y.kappa.table == (1, 1, 0, 2)
    assert y.kappa.kappa == pytest.approx(0.5)
    [disagreement] = y.disagreements
    assert (disagreement.trial, disagreement.first.reason, disagreement.second.reason) == (
        2,
        "yes",
        "no",
    )
    assert disagreement.answer == "the agent's answer"
    # The scenario pools both: table (5, 1, 0, 2): p_o = 7/8; first pass 6/8, second 5/8;
    # p_e = .75 * .625 + .25 * .375 = .5625; κ = (.875 - .5625) / .4375 = .714286.
    [whole] = report.scenarios
    assert whole.kappa.kappa == pytest.approx(0.714286, abs=1e-6)
    assert report.most_disagreed(5) == [y]
    assert below_min_kappa(report, 0.6) == [y]  # x is undefined: never below
    assert below_min_kappa(report, 0.5) == []


def test_pairs_leave_out_other_answers_errors_one_sided_trials_and_reworded_criteria() -> None:
    first = _run(
        "a.jsonl",
        scenario("scenario-a", [judged("x", 1, True)], "the agent crashed", [judged("x", 1, True)]),
        scenario("scenario-b", [judged("old", 1, True), judged("z", 1, False)]),
        scenario("scenario-c", [judged("x", 1, True)], output="one answer"),
        scenario("scenario-d", [judged("x", 1, True), checked("file", 1, True, "exists")]),
    )
    second = _run(
        "b.jsonl",
        scenario("scenario-a", [judged("x", 1, False)], [judged("x", 1, True)]),
        scenario("scenario-b", [judged("new", 1, True), judged("z", 1, False)]),
        scenario("scenario-c", [judged("x", 1, True)], output="another answer"),
        scenario("scenario-d", [judged("x", 1, True), checked("file", 1, True, "exists")]),
        scenario("scenario-e", [judged("x", 1, True)]),
    )

    pairing = pair_runs(first, second)

    paired = [(p.scenario, p.trial, p.criterion) for p in pairing.pairs]
    # The check of scenario-d is not a judge's verdict: it is never paired.
    assert paired == [("scenario-a", 1, "x"), ("scenario-b", 1, "z"), ("scenario-d", 1, "x")]
    assert pairing.left_out == {
        "trials that errored in either run": 1,
        "criteria reworded or missing in the second run": 1,
        "trials whose answers differ between the runs": 1,
        "trials in the first run only": 1,  # trial 3 of scenario-a
        "trials in the second run only": 1,  # scenario-e
    }


def test_runs_that_share_no_judged_answer_are_an_error_saying_why() -> None:
    first = _run("a.jsonl", scenario("scenario-a", [judged("x", 1, True)], output="one"))
    second = _run("b.jsonl", scenario("scenario-a", [judged("x", 1, True)], output="two"))

    with pytest.raises(
        AgreementError,
        match=r"a.jsonl and b.jsonl share no judged answer: 1 trials whose answers differ",
    ):
        pair_runs(first, second)


def test_self_consistency_is_read_from_the_votes_of_each_trial() -> None:
    # Three votes a trial. (2 of 3): pairs agreeing (2*1 + 1*0) / (3*2) = 1/3, split;
    # (3 of 3) and (0 of 3): 1, unanimous. Mean agreement (1/3 + 1 + 1) / 3 = 7/9.
    run = _run(
        "a.jsonl",
        scenario(
            "scenario-a",
            [replace(judged("x", 1, True), votes=(2, 3))],
            [replace(judged("x", 1, True), votes=(3, 3))],
            [replace(judged("x", 1, False), votes=(0, 3))],
        ),
    )

    consistency = self_consistency(run)

    [x] = consistency.criteria
    assert (x.trials, x.split) == (3, 1)
    assert x.agreement == pytest.approx(7 / 9)
    assert consistency.agreement == pytest.approx(7 / 9)


def test_one_vote_a_trial_measures_no_self_consistency() -> None:
    consistency = self_consistency(_run("a.jsonl", scenario("scenario-a", *_verdicts(True))))

    assert (consistency.criteria, consistency.agreement) == ((), None)
    assert "nothing to measure" in agreement_text(
        agreement_report(
            pair_runs(*(_run(n, scenario("scenario-a", *_verdicts(True))) for n in "ab")),
            [consistency],
        )
    )


# ---------------------------------------------------------------------------------------------
# Human labels.


def _label(**fields: object) -> str:
    base = {
        "skill_dir": "skills/s",
        "scenario": "scenario-a",
        "trial": 1,
        "criterion_index": 1,
        "criterion": "y",
        "verdict": "fail",
    }
    return json.dumps({**base, **fields})


def test_labels_pair_with_the_judge_of_a_run() -> None:
    run = _run("run.jsonl", scenario("scenario-a", *_verdicts(True, False)))
    text = "\n".join(
        [
            _label(reviewer="ana", note="the deadline is missing"),
            "",
            _label(trial=2, criterion_index=0, criterion="x", verdict="pass"),
        ]
    )

    pairing = pair_labels(run, parse_labels(text, source="labels.jsonl"), "labels.jsonl")

    assert pairing.second == "human labels (labels.jsonl)"
    first, second = pairing.pairs
    assert (first.first.passed, first.second.passed, first.second.reviewer) == (True, False, "ana")
    assert first.second.reason == "the deadline is missing"
    assert (second.trial, second.criterion, second.agreed) == (2, "x", True)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", r"labels.jsonl: line 2: not JSON"),
        ("[1, 2]", r"labels.jsonl: line 2: a label must be a JSON object"),
        (_label(verdit="pass"), r"labels.jsonl: line 2: unknown key 'verdit'"),
        (json.dumps({"skill_dir": "skills/s"}), r"labels.jsonl: line 2: field scenario is missing"),
        (_label(verdict="PASS"), r"line 2: field verdict: 'PASS' is not \"pass\" or \"fail\""),
        (_label(verdict=True), r"line 2: field verdict: True is not"),
        (_label(trial=0), r"line 2: field trial: 0 is not a whole number from 1"),
        (_label(trial="1"), r"line 2: field trial: '1' is not a whole number from 1"),
        (_label(criterion_index=-1), r"line 2: field criterion_index: -1 is not a whole number"),
        (_label(skill_dir="/home/me/skills/s"), r"line 2: field skill_dir: .* is not relative"),
        (_label(scenario=""), r"line 2: field scenario is empty"),
        (_label(note=3), r"line 2: field note: 3 is not text"),
        (
            _label(),
            r"line 2: criterion 1 of trial 1 of skills/s::scenario-a is labelled a second "
            r"time \(first on line 1\)",
        ),
    ],
)
def test_a_bad_label_is_an_error_naming_the_file_and_the_line(line: str, message: str) -> None:
    with pytest.raises(LabelsError, match=message):
        parse_labels(_label() + "\n" + line + "\n", source="labels.jsonl")


def test_an_empty_labels_file_is_an_error() -> None:
    with pytest.raises(LabelsError, match=r"labels\.jsonl: holds no labels"):
        parse_labels("\n\n", source="labels.jsonl")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (_label(trial=3), r"line 1: run.jsonl holds no trial 3 of skills/s::scenario-a"),
        (
            _label(arm="without-skill"),
            r"holds no trial 1 of skills/s::scenario-a \(baseline arm without-skill\)",
        ),
        (
            _label(criterion_index=2),
            r"line 1: trial 1 of skills/s::scenario-a has 2 criteria; criterion_index 2 is "
            r"past them",
        ),
        (
            _label(criterion="y (reworded)"),
            r"line 1: criterion 1 of trial 1 of skills/s::scenario-a is 'y' in run.jsonl, "
            r"not 'y \(reworded\)'",
        ),
    ],
)
def test_a_label_that_does_not_fit_the_run_is_an_error_naming_its_line(
    line: str, message: str
) -> None:
    run = _run("run.jsonl", scenario("scenario-a", *_verdicts(True, False)))

    with pytest.raises(LabelsError, match=message):
        pair_labels(run, parse_labels(line, source="labels.jsonl"), "labels.jsonl")


def test_a_label_on_a_deterministic_check_is_an_error() -> None:
    run = _run(
        "run.jsonl", scenario("scenario-a", [judged("x", 1, True), checked("file", 1, True, "ok")])
    )

    with pytest.raises(LabelsError, match="is a deterministic check, not a judged criterion"):
        pair_labels(run, parse_labels(_label(criterion="file", verdict="pass")), "labels.jsonl")


# ---------------------------------------------------------------------------------------------
# The views: hostile text, secrets and bounds.


def test_hostile_answers_and_reasons_are_masked_bounded_and_shown_not_obeyed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secret = "sk-agreement-0123456789"
    monkeypatch.setenv("OPENKATA_TEST_API_KEY", secret)
    answer = f"\x1b]0;owned\x07\x1b[2J key {secret} \u202e" + "long " * 400
    hostile = [judged("x\x1b[31m", 1, True, f"because \r{secret}\x00")]
    first = _run("a.jsonl", scenario("scenario-a", hostile, output=answer))
    second = _run(
        "b.jsonl",
        scenario("scenario-a", [judged("x\x1b[31m", 1, False, "no\ud800")], output=answer),
    )
    report = agreement_report(pair_runs(first, second))

    text = agreement_text(report, 0.5)
    document = json.dumps(agreement_document(report, 0.5), ensure_ascii=False)

    for shown in (text, document):
        assert secret not in shown
        assert "***" in shown
    for raw in ("\x1b", "\r", "\u202e", "\x00"):
        assert raw not in text
    assert "\\x1b[31m" in text  # shown, not obeyed
    answer_line = next(line for line in text.splitlines() if "answer:" in line)
    assert len(answer_line) < ANSWER_EXCERPT_CHARS + 200
    assert "more characters]" in answer_line
    data = json.loads(document)
    [criterion] = data["criteria"]
    [disagreement] = criterion["disagreements"]
    assert len(disagreement["answer"]) < ANSWER_EXCERPT_CHARS + 50
    assert disagreement["second"]["reason"] == "no\ufffd"
    # One pair, one disagreement: table (0, 1, 0, 0), p_o = 0 = p_e, κ = 0: below 0.5.
    assert (criterion["kappa"], data["gate"]["passed"]) == (0.0, False)


def test_the_document_and_text_report_the_gate_with_undefined_criteria_apart() -> None:
    strong = _run("strong.jsonl", scenario("scenario-a", *_verdicts(True, True, False, False)))
    cheap = _run("cheap.jsonl", scenario("scenario-a", *_verdicts(True, False, False, False)))
    report = agreement_report(pair_runs(strong, cheap), [self_consistency(strong)])

    document = agreement_document(report, 0.6)
    text = agreement_text(report, 0.6)

    where_y = {"skill_dir": "skills/s", "scenario": "scenario-a", "criterion_index": 1}
    where_x = {**where_y, "criterion_index": 0}
    assert document["gate"] == {
        "min_kappa": 0.6,
        "passed": False,
        "below": [where_y],
        "undefined": [where_x],
    }
    x, y = document["criteria"]
    assert (x["kappa"], x["undefined"], x["ci95"]) == (None, "every verdict pass", None)
    assert (y["kappa"], y["n"], y["raw_agreement"]) == (pytest.approx(0.5), 4, 0.75)
    assert "FAILED: κ below 0.6 on 1 of 2 criteria:" in text
    assert "not gated: κ undefined on 1 criterion" in text
    assert (
        "skills/s::scenario-a [0] x  n=4  agreement 100%  κ undefined (every verdict pass)" in text
    )
    assert "skills/s::scenario-a [1] y  n=4  agreement 75%  κ 0.50 [" in text


# ---------------------------------------------------------------------------------------------
# The command's arguments, files and exit codes (the run logs written as a run writes them).


def _write_log(path: Path, *results: ScenarioResult, judge_model: str = "gpt-4o") -> Path:
    info = RunInfo("2026-12-01T10:00:00Z", settings={**SETTINGS, "judge_model": judge_model})
    path.write_text(log_lines(info, results, ROOT))
    return path


@pytest.fixture
def two_logs(tmp_path: Path) -> tuple[Path, Path]:
    strong = scenario("scenario-a", *_verdicts(True, True, False, False))
    cheap = scenario("scenario-a", *_verdicts(True, False, False, False))
    return (
        _write_log(tmp_path / "strong.jsonl", strong),
        _write_log(tmp_path / "cheap.jsonl", cheap, judge_model="small"),
    )


def test_the_command_writes_its_json_beside_an_earlier_one_never_over_it(
    two_logs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    earlier = tmp_path / "agreement.json"
    earlier.write_text("kept")

    status = agreement_main([*map(str, two_logs), "--json", str(earlier), "--min-kappa", "0.4"])

    out = capsys.readouterr().out
    assert status == 0  # κ 0.5 on y is not below 0.4; x is undefined
    assert earlier.read_text() == "kept"
    written = tmp_path / "agreement-2.json"
    assert f"agreement report: {written}" in out
    document = json.loads(written.read_text())
    assert document["gate"]["passed"] is True
    assert str(tmp_path) not in written.read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give a second run log or --labels FILE, not both nor neither"),
        (["--labels", "labels.jsonl", "other.jsonl"], "not both nor neither"),
        (["other.jsonl", "--min-kappa", "1.5"], "1.5 is out of range: kappa is between -1 and 1"),
        (["other.jsonl", "--min-kappa", "high"], "'high' is not a number"),
    ],
)
def test_bad_arguments_exit_2_saying_why(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _write_log(tmp_path / "run.jsonl", scenario("scenario-a", *_verdicts(True)))

    assert agreement_main([str(log), *args]) == 2
    assert message in capsys.readouterr().err


def test_inputs_that_cannot_be_read_exit_2_naming_the_file_and_line(
    two_logs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    strong, _cheap = two_logs
    broken = tmp_path / "broken.jsonl"
    broken.write_text(strong.read_text() + "{oops\n")
    labels = tmp_path / "labels.jsonl"
    labels.write_text(_label() + "\n" + _label(verdict="maybe") + "\n")

    assert agreement_main([str(strong), str(broken)]) == 2
    assert f"error: {broken}: line 6: not JSON" in capsys.readouterr().err
    assert agreement_main([str(strong), "--labels", str(labels)]) == 2
    assert f"error: {labels}: line 2: field verdict: 'maybe'" in capsys.readouterr().err


def test_a_run_log_is_told_from_a_labels_file(two_logs: tuple[Path, Path], tmp_path: Path) -> None:
    labels = tmp_path / "labels.jsonl"
    labels.write_text(_label() + "\n")

    assert is_run_log(two_logs[0]) is True
    assert is_run_log(labels) is False
    assert is_run_log(tmp_path / "missing.jsonl") is False


def test_the_markdown_report_shows_a_runs_agreement_escaped() -> None:
    hostile = "y | <script>alert(1)</script> *bold*"
    strong = [scenario("scenario-a", *[[judged(hostile, 1, p)] for p in (True, True, False)])]
    cheap = [scenario("scenario-a", *[[judged(hostile, 1, p)] for p in (True, False, False)])]
    report = agreement_report(pair_runs(_run("strong.jsonl", *strong), _run("b.jsonl", *cheap)))
    info = RunInfo("2026-12-01T10:00:00Z", settings=SETTINGS)
    extras = {AGREEMENT_EXTRA: [agreement_document(report, 0.9)]}

    page = render_markdown(parse_run_log(log_lines(info, cheap, ROOT, extras)))

    section = page[page.index("## Judge agreement") :]
    # Table (1, 1, 0, 1): p_o = 2/3; first pass 2/3, second 1/3; p_e = 2/9 + 2/9 = 4/9;
    # κ = (2/3 - 4/9) / (5/9) = .4.
    [row] = [line for line in section.splitlines() if line.startswith("| skills/s")]
    name = r"skills/s::scenario-a \[0\] y \| &lt;script&gt;alert(1)&lt;/script&gt; \*bold\*"
    assert row.startswith(f"| {name} |")
    assert "| 3 | 67% | 0.40 \\[" in row
    assert row.endswith("| 1 |")
    assert "<script>" not in section
    assert "Gate: κ at least 0.9 on every criterion: failed (1 below)" in section


def test_the_html_report_shows_a_runs_agreement_as_text() -> None:
    hostile = "y <script>alert(1)</script> & more"
    strong = [scenario("scenario-a", *[[judged(hostile, 1, p)] for p in (True, True, False)])]
    cheap = [scenario("scenario-a", *[[judged(hostile, 1, p)] for p in (True, False, False)])]
    report = agreement_report(pair_runs(_run("strong.jsonl", *strong), _run("b.jsonl", *cheap)))
    info = RunInfo("2026-12-01T10:00:00Z", settings=SETTINGS)
    extras = {AGREEMENT_EXTRA: [agreement_document(report, 0.9)]}

    page = render_html(parse_run_log(log_lines(info, cheap, ROOT, extras)))

    section = page[page.index('id="judge-agreement"') :]
    section = section[: section.index("</section>")]
    # The same table as the Markdown test's: κ = .4 on three paired verdicts.
    assert (
        "<li>skills/s::scenario-a [0] y &lt;script&gt;alert(1)&lt;/script&gt; &amp; more: "
        "n=3, agreement 67%, κ 0.40 [" in section
    )
    assert "<li>Gate: κ at least 0.9 on every criterion: failed (1 below)</li>" in section
    assert "<script>" not in section


def test_a_run_without_agreement_has_no_such_section() -> None:
    cheap = [scenario("scenario-a", [judged("y", 1, True)])]
    info = RunInfo("2026-12-01T10:00:00Z", settings=SETTINGS)

    page = render_html(parse_run_log(log_lines(info, cheap, ROOT, {})))

    assert 'id="judge-agreement"' not in page


def test_a_crafted_agreement_record_cannot_break_the_markdown_table() -> None:
    cheap = [scenario("scenario-a", [judged("y", 1, True)])]
    info = RunInfo("2026-12-01T10:00:00Z", settings=SETTINGS)
    crafted = {
        "first": "a",
        "second": "b",
        "overall": {"n": "1 | <script>x</script>", "kappa": 0.0, "one_side_constant": True},
        "criteria": [{"skill_dir": "skills/s", "scenario": "scenario-a", "n": "2 | <b>"}],
    }

    page = render_markdown(
        parse_run_log(log_lines(info, cheap, ROOT, {AGREEMENT_EXTRA: [crafted]}))
    )

    section = page[page.index("## Judge agreement") :]
    assert "<script>" not in section
    assert "<b>" not in section
    assert "κ 0.00 (one side gave one verdict throughout)" in section
    [row] = [line for line in section.splitlines() if line.startswith("| skills/s")]
    assert row.count(" | ") == 4  # five cells: the crafted n split none
