"""How far two sets of verdicts on the same answers agree: two judges (a run and its re-judge,
or two runs whose agents answered alike), or a judge and human labels.

Verdicts are paired criterion by criterion: the same skill folder, scenario, arm, trial and
criterion (its position among the trial's criteria and its text). A pair is only made where
both sides judged the same answer, so that the figures measure the judges, not the agent:
trials on one side only, trials that errored, trials whose answers differ and criteria
reworded between the runs are left out and counted. Only the judge's criteria are paired; a
deterministic check gives the same verdict on the same answer every time.

For each criterion, each scenario and overall: raw agreement and Cohen's κ with its standard
error and 95 % interval (statsmodels' ``cohens_kappa``: the large-sample variance of Fleiss,
Cohen and Everitt; the interval is κ ± 1.96 SE, clipped to [-1, 1]). κ is undefined when both
sides gave one and the same verdict to every pair (chance agreement is then 1): it is reported
as undefined, with the verdict, never as a failure of a gate. A judge's self-consistency is
read from the votes each trial recorded per criterion (``judge_votes`` above 1): the share of
its trials whose votes split, and the mean agreement of its votes two by two.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from pytest_openkata.contracts.errors import INVALID_INPUT, OpenkataError
from pytest_openkata.contracts.results import CriterionResult, TrialResult
from pytest_openkata.core.runlog import LoggedRun, LoggedTrial, arm_name
from pytest_openkata.core.verdict_labels import LabelsError, VerdictLabel

__all__ = [
    "AgreementError",
    "AgreementReport",
    "CriterionAgreement",
    "Kappa",
    "PairedVerdict",
    "Pairing",
    "RatedVerdict",
    "ScenarioAgreement",
    "SelfConsistency",
    "VoteConsistency",
    "agreement_report",
    "below_min_kappa",
    "cohens_kappa",
    "judge_name",
    "pair_labels",
    "pair_runs",
    "self_consistency",
]

_JUDGE_KIND = "judge"

_TrialKey = tuple[str, str, str, int]  # skill folder, scenario, arm, trial
_CriterionKey = tuple[str, str, int, str]  # skill folder, scenario, index, text


class AgreementError(OpenkataError):
    """Two sets of verdicts that share no judged answer: nothing to measure."""

    cause = INVALID_INPUT


@dataclass(frozen=True)
class RatedVerdict:
    """One side's verdict on a criterion of a trial: the judge's (its reason and votes) or a
    reviewer's (their note)."""

    passed: bool
    reason: str = ""
    votes: tuple[int, int] | None = None
    reviewer: str = ""


@dataclass(frozen=True)
class PairedVerdict:
    """Both sides' verdicts on one criterion of one trial, with the answer they judged."""

    skill_dir: str
    scenario: str
    arm: str
    trial: int
    criterion_index: int
    criterion: str
    first: RatedVerdict
    second: RatedVerdict
    answer: str

    @property
    def agreed(self) -> bool:
        return self.first.passed == self.second.passed

    @property
    def criterion_key(self) -> _CriterionKey:
        return (self.skill_dir, self.scenario, self.criterion_index, self.criterion)


@dataclass(frozen=True)
class Pairing:
    """The paired verdicts of two sides, named ``first`` and ``second`` as reports show them,
    and how many of each kind of item were left out, by why."""

    first: str
    second: str
    pairs: tuple[PairedVerdict, ...]
    left_out: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Kappa:
    """Agreement on ``n`` paired verdicts: the 2x2 table (both pass, first only passes, second
    only passes, both fail), Cohen's κ, its standard error and 95 % interval. κ and the rest
    are None when undefined (every verdict on both sides the same: see ``undefined``)."""

    table: tuple[int, int, int, int]
    kappa: float | None
    std_error: float | None
    low: float | None
    high: float | None

    @property
    def n(self) -> int:
        return sum(self.table)

    @property
    def agreed(self) -> int:
        return self.table[0] + self.table[3]

    @property
    def raw(self) -> float:
        """The share of pairs on which both sides gave the same verdict."""
        return self.agreed / self.n if self.n else 0.0

    @property
    def undefined(self) -> str:
        """Why κ is undefined ("" when it is not): which one verdict both sides always gave."""
        if self.kappa is not None:
            return ""
        both_pass, first_only, second_only, both_fail = self.table
        if first_only == second_only == 0 and (both_pass == 0 or both_fail == 0):
            return "every verdict pass" if both_pass else "every verdict fail"
        return "no finite figure for this table"

    @property
    def by_construction(self) -> bool:
        """Whether κ is 0 because one side gave one verdict throughout (and the other did
        not): no interval then, and κ says only that the side told nothing apart."""
        return self.kappa == 0.0 and self.low is None


@dataclass(frozen=True)
class CriterionAgreement:
    """Agreement on one criterion of a scenario, over its trials and arms, with the pairs on
    which the sides disagreed."""

    skill_dir: str
    scenario: str
    criterion_index: int
    criterion: str
    kappa: Kappa
    disagreements: tuple[PairedVerdict, ...]


@dataclass(frozen=True)
class ScenarioAgreement:
    """Agreement over every criterion of one scenario."""

    skill_dir: str
    scenario: str
    kappa: Kappa


@dataclass(frozen=True)
class VoteConsistency:
    """A judge's votes on one criterion: ``trials`` with two votes or more, ``split`` of them
    not unanimous, and ``agreement``, the mean share of its votes that agree two by two."""

    skill_dir: str
    scenario: str
    criterion_index: int
    criterion: str
    trials: int
    split: int
    agreement: float


@dataclass(frozen=True)
class SelfConsistency:
    """One judge's agreement with itself across its votes, per criterion; empty when it cast
    one vote per trial (nothing to measure)."""

    judge: str
    criteria: tuple[VoteConsistency, ...]

    @property
    def trials(self) -> int:
        return sum(c.trials for c in self.criteria)

    @property
    def split(self) -> int:
        return sum(c.split for c in self.criteria)

    @property
    def agreement(self) -> float | None:
        """The mean two-by-two vote agreement over every trial of every criterion."""
        if not self.trials:
            return None
        return sum(c.agreement * c.trials for c in self.criteria) / self.trials


@dataclass(frozen=True)
class AgreementReport:
    """Everything the agreement of two sides comes to: overall, per criterion and per scenario
    (in the order of their skill folders, scenarios and criteria), what was left out, and each
    judge's self-consistency."""

    first: str
    second: str
    overall: Kappa
    criteria: tuple[CriterionAgreement, ...]
    scenarios: tuple[ScenarioAgreement, ...]
    left_out: Mapping[str, int]
    consistency: tuple[SelfConsistency, ...] = ()

    def most_disagreed(self, count: int) -> list[CriterionAgreement]:
        """The ``count`` criteria with the most disagreements (then the lowest agreement),
        leaving out those without any."""
        found = [c for c in self.criteria if c.disagreements]
        found.sort(key=lambda c: (-len(c.disagreements), c.kappa.raw))
        return found[:count]


def cohens_kappa(table: tuple[int, int, int, int]) -> Kappa:
    """Cohen's κ of a 2x2 table (both pass, first only passes, second only passes, both fail),
    with statsmodels' standard error and a 95 % interval clipped to [-1, 1]; undefined (None)
    when both sides gave every pair one and the same verdict; 0 without an interval when one
    side gave one verdict throughout and the other did not (a judge that passes everything
    agrees with nothing beyond chance: the gate counts it)."""
    both_pass, first_only, second_only, both_fail = table
    if min(table) < 0 or not sum(table):
        raise ValueError(f"a table of paired verdicts needs counts, at least one: {table}")
    if first_only == second_only == 0 and (both_pass == 0 or both_fail == 0):
        return Kappa(table, None, None, None, None)
    first_constant = second_only + both_fail == 0 or both_pass + first_only == 0
    second_constant = first_only + both_fail == 0 or both_pass + second_only == 0
    if first_constant or second_constant:
        # p_e = p_o: κ is 0 by construction, whatever the table; an interval from the
        # asymptotic error would be either zero-width or not a number.
        return Kappa(table, 0.0, None, None, None)
    from statsmodels.stats.inter_rater import (  # type: ignore[import-untyped]
        cohens_kappa as statsmodels_kappa,
    )

    # Its results' interval is two-sided at 95 % (alpha 0.025 on each side).
    with warnings.catch_warnings():  # its test statistic divides by zero on some tables
        warnings.simplefilter("ignore", RuntimeWarning)
        found = statsmodels_kappa(
            [[both_pass, first_only], [second_only, both_fail]], return_results=True
        )
    figures = [float(found.kappa), float(found.std_kappa)]
    figures += [float(found.kappa_low), float(found.kappa_upp)]
    if not all(math.isfinite(figure) for figure in figures):
        return Kappa(table, None, None, None, None)
    kappa, error, low, high = figures
    return Kappa(table, kappa, error, max(-1.0, low), min(1.0, high))


def _kappa_of(pairs: Iterable[PairedVerdict]) -> Kappa:
    counts = [0, 0, 0, 0]
    for pair in pairs:
        counts[(0 if pair.first.passed else 2) + (0 if pair.second.passed else 1)] += 1
    # (pass, pass), (pass, fail), (fail, pass), (fail, fail)
    return cohens_kappa((counts[0], counts[1], counts[2], counts[3]))


def agreement_report(
    pairing: Pairing, consistency: Sequence[SelfConsistency] = ()
) -> AgreementReport:
    """The agreement of a pairing overall, per criterion and per scenario."""
    if not pairing.pairs:
        raise AgreementError("no paired verdicts: nothing to measure")
    by_criterion: dict[_CriterionKey, list[PairedVerdict]] = {}
    by_scenario: dict[tuple[str, str], list[PairedVerdict]] = {}
    for pair in pairing.pairs:
        by_criterion.setdefault(pair.criterion_key, []).append(pair)
        by_scenario.setdefault((pair.skill_dir, pair.scenario), []).append(pair)
    criteria = tuple(
        CriterionAgreement(
            skill_dir,
            scenario,
            index,
            text,
            _kappa_of(pairs),
            tuple(pair for pair in pairs if not pair.agreed),
        )
        for (skill_dir, scenario, index, text), pairs in sorted(by_criterion.items())
    )
    scenarios = tuple(
        ScenarioAgreement(skill_dir, scenario, _kappa_of(pairs))
        for (skill_dir, scenario), pairs in sorted(by_scenario.items())
    )
    return AgreementReport(
        first=pairing.first,
        second=pairing.second,
        overall=_kappa_of(pairing.pairs),
        criteria=criteria,
        scenarios=scenarios,
        left_out=dict(pairing.left_out),
        consistency=tuple(consistency),
    )


def below_min_kappa(report: AgreementReport, minimum: float) -> list[CriterionAgreement]:
    """The criteria whose κ is below ``minimum``; an undefined κ is never below it."""
    return [c for c in report.criteria if c.kappa.kappa is not None and c.kappa.kappa < minimum]


def judge_name(run: LoggedRun) -> str:
    """A run's judge as reports name it: its judge model and the log's file name (never the
    folder: a machine path)."""
    model = str(run.info.settings.get("judge_model") or "?")
    return f"judge {model} ({_file_name(run.source)})"


def _file_name(source: str) -> str:
    """A file's name without its folders (on any OS's spelling)."""
    return PurePosixPath(source.replace("\\", "/")).name


def _judged(trial: TrialResult) -> dict[int, CriterionResult]:
    """A graded trial's criteria the judge gave, by their position among its criteria."""
    return {
        index: criterion
        for index, criterion in enumerate(trial.criteria or ())
        if criterion.kind == _JUDGE_KIND
    }


def _answer(trial: TrialResult) -> str:
    """What the judge read of a trial: the judged text of a sandboxed one, else the output."""
    trace = trial.trace
    if trace is not None and trace.judged is not None:
        return trace.judged
    if trace is not None and trace.output:
        return trace.output
    return trial.agent_output or ""


def _by_trial(run: LoggedRun) -> dict[_TrialKey, LoggedTrial]:
    return {(*logged.arm_key, logged.trial.index): logged for logged in run.trials}


def _rated(criterion: CriterionResult) -> RatedVerdict:
    return RatedVerdict(criterion.passed, criterion.reason, criterion.votes)


def _count(left_out: dict[str, int], why: str, count: int = 1) -> None:
    left_out[why] = left_out.get(why, 0) + count


def pair_runs(first: LoggedRun, second: LoggedRun) -> Pairing:
    """The judged verdicts of two runs of the same answers, paired; what cannot be paired is
    counted by why. :class:`AgreementError` when nothing pairs."""
    ones, others = _by_trial(first), _by_trial(second)
    pairs: list[PairedVerdict] = []
    left_out: dict[str, int] = {}
    for key in sorted(ones.keys() | others.keys()):
        one, other = ones.get(key), others.get(key)
        if one is None or other is None:
            _count(left_out, f"trials in the {'second' if one is None else 'first'} run only")
            continue
        if one.trial.criteria is None or other.trial.criteria is None:
            _count(left_out, "trials that errored in either run")
            continue
        answer = _answer(one.trial)
        if answer != _answer(other.trial):
            _count(left_out, "trials whose answers differ between the runs")
            continue
        theirs = _judged(other.trial)
        for index, criterion in _judged(one.trial).items():
            match = theirs.get(index)
            if match is None or match.name != criterion.name:
                _count(left_out, "criteria reworded or missing in the second run")
                continue
            skill_dir, scenario, arm, trial = key
            pairs.append(
                PairedVerdict(
                    skill_dir=skill_dir,
                    scenario=scenario,
                    arm=arm,
                    trial=trial,
                    criterion_index=index,
                    criterion=criterion.name,
                    first=_rated(criterion),
                    second=_rated(match),
                    answer=answer,
                )
            )
    if not pairs:
        raise AgreementError(
            f"{first.source} and {second.source} share no judged answer: "
            + _reasons(left_out, "they hold no graded trial")
        )
    return Pairing(judge_name(first), judge_name(second), tuple(pairs), left_out)


def _reasons(left_out: Mapping[str, int], otherwise: str) -> str:
    if not left_out:
        return otherwise
    return "; ".join(f"{count} {why}" for why, count in sorted(left_out.items()))


def pair_labels(run: LoggedRun, labels: Sequence[VerdictLabel], source: str) -> Pairing:
    """The run's judged verdicts paired with human ``labels`` (read from ``source``); a label
    on a trial or criterion the run does not have, or on a criterion worded otherwise, is a
    :class:`LabelsError` naming ``source`` and its line."""
    trials = _by_trial(run)
    pairs: list[PairedVerdict] = []
    left_out: dict[str, int] = {}
    for label in labels:
        where = f"{source}: line {label.line}"
        named = f"trial {label.trial} of {arm_name(label.skill_dir, label.scenario, label.arm)}"
        logged = trials.get((label.skill_dir, label.scenario, label.arm, label.trial))
        if logged is None:
            raise LabelsError(f"{where}: {run.source} holds no {named}")
        if logged.trial.criteria is None:
            _count(left_out, "labels on trials that errored")
            continue
        criteria = logged.trial.criteria
        if label.criterion_index >= len(criteria):
            raise LabelsError(
                f"{where}: {named} has {len(criteria)} criteria; criterion_index "
                f"{label.criterion_index} is past them (the first is 0)"
            )
        criterion = criteria[label.criterion_index]
        if criterion.name != label.criterion:
            raise LabelsError(
                f"{where}: criterion {label.criterion_index} of {named} is "
                f"{criterion.name!r} in {run.source}, not {label.criterion!r}"
            )
        if criterion.kind != _JUDGE_KIND:
            raise LabelsError(
                f"{where}: criterion {label.criterion_index} of {named} is a deterministic "
                "check, not a judged criterion"
            )
        human = RatedVerdict(label.passed, label.note, None, label.reviewer)
        pairs.append(
            PairedVerdict(
                skill_dir=label.skill_dir,
                scenario=label.scenario,
                arm=label.arm,
                trial=label.trial,
                criterion_index=label.criterion_index,
                criterion=label.criterion,
                first=_rated(criterion),
                second=human,
                answer=_answer(logged.trial),
            )
        )
    if not pairs:
        raise AgreementError(
            f"{source}: no label is on a graded trial of {run.source}: "
            + _reasons(left_out, "no labels")
        )
    return Pairing(judge_name(run), f"human labels ({_file_name(source)})", tuple(pairs), left_out)


def self_consistency(run: LoggedRun) -> SelfConsistency:
    """A run's judge against itself: per criterion, over the trials that recorded two votes
    or more on it."""
    tallies: dict[_CriterionKey, list[tuple[int, int]]] = {}
    for logged in run.trials:
        for index, criterion in _judged(logged.trial).items():
            if criterion.votes is None or criterion.votes[1] < 2:
                continue
            key = (logged.arm_key[0], logged.arm_key[1], index, criterion.name)
            tallies.setdefault(key, []).append(criterion.votes)
    criteria = []
    for (skill_dir, scenario, index, text), votes in sorted(tallies.items()):
        split = sum(1 for passes, total in votes if 0 < passes < total)
        agreement = sum(_vote_agreement(passes, total) for passes, total in votes) / len(votes)
        criteria.append(
            VoteConsistency(skill_dir, scenario, index, text, len(votes), split, agreement)
        )
    return SelfConsistency(judge_name(run), tuple(criteria))


def _vote_agreement(passes: int, total: int) -> float:
    """The share of a trial's pairs of votes that agree: (p(p-1) + f(f-1)) / (n(n-1))."""
    fails = total - passes
    return (passes * (passes - 1) + fails * (fails - 1)) / (total * (total - 1))
