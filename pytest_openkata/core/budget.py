"""The run's hard budget (``budget.tokens``, ``budget.usd``): what a trial spent is added to
the run's ledger, and no trial starts once the ledger holds the budget.

Every process of the run (the xdist workers of one host, or the one process without xdist)
adds to one :class:`~pytest_openkata.infra.ledger.SpendLedger`, so the budget is the whole
run's. The check is made before each trial (for a baseline run, before each pair of the two
arms' trials, so that the arms stay paired): trials already running finish, and their spend
counts, so a run ends a little over its budget, never far under it. A scenario none of whose
trials started raises :class:`BudgetReached`: it was not run, which is neither a pass nor a
failure. A scenario cut after some trials keeps the trials it ran.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_openkata.contracts.config import BudgetSettings, EvalSettings
from pytest_openkata.contracts.errors import OpenkataError
from pytest_openkata.contracts.results import CallStats, Usage
from pytest_openkata.infra.ledger import SpendLedger, Spent

__all__ = [
    "BUDGET_REACHED",
    "BudgetGuard",
    "BudgetReached",
    "budget_text",
    "is_reached",
    "spent_of",
    "spent_text",
    "unpriced_budget",
]

BUDGET_REACHED = "budget reached"


class BudgetReached(OpenkataError):
    """The run's budget was reached before this scenario's first trial started."""


def is_reached(spent: Spent, limits: BudgetSettings) -> bool:
    """Whether ``spent`` holds a limit of ``limits`` (a limit of 0 is none)."""
    return (limits.tokens > 0 and spent.tokens >= limits.tokens) or (
        limits.usd > 0 and spent.usd >= limits.usd
    )


def _role_spent(stats: CallStats) -> Spent:
    if stats.calls == 0:
        return Spent()
    tokens = (stats.input_tokens or 0) + (stats.output_tokens or 0)
    unknown = stats.input_tokens is None or stats.output_tokens is None or stats.cost_usd is None
    return Spent(tokens=tokens, usd=stats.cost_usd or 0.0, unknown=unknown)


def spent_of(usage: Usage) -> Spent:
    """What one trial's live calls spent (cache hits spend nothing)."""
    return _role_spent(usage.agent).plus(_role_spent(usage.judge))


@dataclass(frozen=True)
class BudgetGuard:
    """The budget of a run and the ledger its processes share."""

    limits: BudgetSettings
    ledger: SpendLedger

    def check(self) -> bool:
        """Whether a new trial may start; once it may not, the ledger says the budget was
        reached."""
        spent = self.ledger.read()
        if spent.reached:
            return False
        if is_reached(spent, self.limits):
            self.ledger.mark_reached()
            return False
        return True

    def spend(self, usage: Usage) -> None:
        spent = spent_of(usage)
        if spent != Spent():
            self.ledger.add(spent)


def budget_text(limits: BudgetSettings) -> str:
    """The budget as reports say it: ``1,000 tokens``, ``$2.50``, or both."""
    parts = []
    if limits.tokens:
        parts.append(f"{limits.tokens:,} tokens")
    if limits.usd:
        parts.append(f"${limits.usd:,.2f}")
    return " or ".join(parts)


def spent_text(spent: Spent) -> str:
    """What a run spent as reports say it: ``1,234 tokens, $0.0123``, with ``at least`` where
    some call's tokens or cost were not known."""
    at_least = "at least " if spent.unknown else ""
    return f"{at_least}{spent.tokens:,} tokens, ${spent.usd:,.4f}"


def unpriced_budget(settings: EvalSettings) -> str | None:
    """Why a budget in US dollars cannot be held (a model of the run has no price: an
    unpriced call's cost is unknown); None when it can, or when there is none."""
    from pytest_openkata.core.pricing import run_prices

    if settings.budget.usd <= 0:
        return None
    missing = run_prices(settings).unpriced()
    if not missing:
        return None
    return (
        f"budget.usd needs a price for the model {missing[0]!r}: give it with --eval-price "
        f"{missing[0]}=IN,OUT (prices; or price.agent_* / price.judge_*), or limit the run "
        "with budget.tokens instead"
    )
