"""How often the attempts of a run errored, by kind of failure, for the reports.

Every attempt counts: a trial run again under ``retry.infrastructure`` counts each of its
attempts, so that a flaky endpoint shows even when its retries hid it from the score. The
kinds are :data:`~pytest_openkata.contracts.errors.ERROR_CAUSES`, in their order; a kind no
attempt had is left out. Baseline arms count with their scenarios: they ran on the same
infrastructure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from pytest_openkata.contracts.errors import ERROR_CAUSES, RETRIED_CAUSES
from pytest_openkata.contracts.results import ScenarioResult, TrialResult

__all__ = ["ErrorRate", "error_rates", "error_rates_text"]


@dataclass(frozen=True)
class ErrorRate:
    """Attempts that errored with one kind of failure (``errored``) of all the attempts
    counted (``attempts``), and how many of those were run again (``retried``)."""

    cause: str
    errored: int
    attempts: int
    retried: int = 0

    @property
    def percentage(self) -> float:
        return 100.0 * self.errored / self.attempts if self.attempts else 0.0

    @property
    def infrastructure(self) -> bool:
        """Whether it is a kind ``retry.infrastructure`` runs a trial again for."""
        return self.cause in RETRIED_CAUSES

    @property
    def text(self) -> str:
        """``model_endpoint 2 of 5 attempts (40%, 1 retried)``."""
        noun = "attempt" if self.attempts == 1 else "attempts"
        retried = f", {self.retried} retried" if self.retried else ""
        return (
            f"{self.cause} {self.errored} of {self.attempts} {noun} "
            f"({self.percentage:.0f}%{retried})"
        )


def _arms(results: Iterable[ScenarioResult]) -> Iterator[ScenarioResult]:
    for result in results:
        yield result
        if result.baseline is not None:
            yield result.baseline


def _trials(results: Iterable[ScenarioResult]) -> Iterator[TrialResult]:
    for arm in _arms(results):
        yield from arm.trials


def error_rates(results: Iterable[ScenarioResult]) -> list[ErrorRate]:
    """The kinds of failure the attempts of ``results`` had, each with its rate; [] when no
    attempt errored."""
    errored: Counter[str] = Counter()
    retried: Counter[str] = Counter()
    attempts = 0
    for trial in _trials(results):
        attempts += 1 + len(trial.attempts)
        for earlier in trial.attempts:
            errored[earlier.cause] += 1
            retried[earlier.cause] += 1
        if trial.error is not None and trial.error_cause:
            errored[trial.error_cause] += 1
    known = [cause for cause in ERROR_CAUSES if errored[cause]]
    others = sorted(cause for cause in errored if cause not in ERROR_CAUSES)  # an edited log
    return [
        ErrorRate(cause, errored[cause], attempts, retried[cause]) for cause in (*known, *others)
    ]


def error_rates_text(rates: Iterable[ErrorRate]) -> str:
    """The rates on one line, ``; `` between them ("" when there are none)."""
    return "; ".join(rate.text for rate in rates)
