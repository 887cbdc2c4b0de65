"""What a run with a budget spent, as its run log records it and its reports say it.

The record is an extra record of kind ``budget`` in the run log (and in a shard's file): the
limits, what the run spent (live tokens, US dollars at its prices, and whether some call's
tokens or cost were not known, so that the figures are a lower bound), whether the budget was
reached, and the scenarios it left unrun (node ids, relative to the rootdir). The merge of
shards sums the shards' records into one (:func:`merged_spending`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_openkata.contracts.config import BudgetSettings
from pytest_openkata.core.budget import BUDGET_REACHED, budget_text, spent_text
from pytest_openkata.infra.ledger import Spent
from pytest_openkata.infra.text import visible

__all__ = [
    "BUDGET_EXTRA",
    "budget_line",
    "budget_note",
    "budget_summary",
    "merged_spending",
    "spending_problem",
    "spending_record",
]

BUDGET_EXTRA = "budget"


def spending_record(limits: BudgetSettings, spent: Spent, not_run: Sequence[str]) -> dict[str, Any]:
    """The run log's budget record."""
    return {
        "tokens": limits.tokens,
        "usd": limits.usd,
        "spent_tokens": spent.tokens,
        "spent_usd": round(spent.usd, 6),
        "spent_unknown": spent.unknown,
        "reached": spent.reached,
        "not_run": sorted(not_run),
    }


_NUMBERS = {"tokens": int, "usd": float, "spent_tokens": int, "spent_usd": float}
_FLAGS = {"reached": True, "spent_unknown": False}  # a flag, and whether it must be there


def spending_problem(record: object) -> str | None:
    """What makes a budget record (read from a shard's file) unreadable, naming the field and
    its value; None when it can be read."""
    if not isinstance(record, Mapping):
        return f"must be an object, not {type(record).__name__}"
    for name, kind in _NUMBERS.items():
        if name not in record:
            return f"{name}: missing"
        value = record[name]
        wanted = (int,) if kind is int else (int, float)
        if isinstance(value, bool) or not isinstance(value, wanted) or value < 0:
            what = "a whole number" if kind is int else "a number"
            return visible(f"{name}: must be {what} of 0 or more, not {value!r:.80}")
    for name, required in _FLAGS.items():
        if name not in record:
            if required:
                return f"{name}: missing"
            continue
        if not isinstance(record[name], bool):
            return visible(f"{name}: must be true or false, not {record[name]!r:.80}")
    not_run = record.get("not_run", [])
    if not isinstance(not_run, list) or not all(isinstance(n, str) for n in not_run):
        return "not_run: must be a list of node ids"
    return None


def _limits(record: Mapping[str, Any]) -> BudgetSettings:
    return BudgetSettings(tokens=int(record["tokens"]), usd=float(record["usd"]))


def _spent(record: Mapping[str, Any]) -> Spent:
    return Spent(
        tokens=int(record["spent_tokens"]),
        usd=float(record["spent_usd"]),
        unknown=bool(record.get("spent_unknown", False)),
        reached=bool(record["reached"]),
    )


def merged_spending(records: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The budget record of the shards together: their spends summed, their scenarios not run
    joined; reached when a shard stopped for its budget (each shard holds its own spend to
    the budget: it cannot see the others'). None when no shard had a budget; the shards'
    limits are the same (their settings are). Each record must be readable
    (:func:`spending_problem` says why one is not)."""
    if not records:
        return None
    total = Spent()
    not_run: list[str] = []
    for record in records:
        total = total.plus(_spent(record))
        not_run.extend(str(nodeid) for nodeid in record.get("not_run", ()))
    return spending_record(_limits(records[0]), total, not_run)


def budget_line(record: Mapping[str, Any]) -> str:
    """What ended the run, for the gate's line: ``budget reached (spent ... of ...)``."""
    return (
        f"{BUDGET_REACHED} (spent {spent_text(_spent(record))} of {budget_text(_limits(record))})"
    )


def budget_summary(record: Mapping[str, Any]) -> str:
    """The terminal's line on the budget: what was spent, and what was not run."""
    spent = f"spent {spent_text(_spent(record))} of a budget of {budget_text(_limits(record))}"
    if not record["reached"]:
        return f"Budget: {spent}"
    not_run = list(record.get("not_run", ()))
    left = f"; {len(not_run)} scenario{'' if len(not_run) == 1 else 's'} not run" if not_run else ""
    return f"Budget reached: {spent}{left} (no trial started after it was reached)"


def budget_note(extras: Mapping[str, Sequence[Mapping[str, Any]]]) -> tuple[str, bool] | None:
    """What a logged run's reports say of its budget, and whether it was reached; None for a
    run without a budget, or whose budget record cannot be read (a log is outside data)."""
    records = extras.get(BUDGET_EXTRA) or ()
    if len(records) != 1:
        return None
    try:
        return budget_summary(records[0]), records[0]["reached"] is True
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
