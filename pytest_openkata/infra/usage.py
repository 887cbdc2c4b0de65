"""Token usage of model calls, recorded beside the :class:`~.Completer`
protocol rather than through it.

A backend calls :func:`record_tokens` after every successful call; whoever wants the counts
wraps the calls in :func:`recording`::

    with recording() as usage:
        answer = completer.complete(system, user)
    total = add_usage(usage)

The recorder lives in a :class:`contextvars.ContextVar`, so it is thread-safe without a lock:
every thread has its own context, and a call made in one thread is recorded only by the
:func:`recording` block open in that same thread. A new thread (``threading.Thread``, a
``ThreadPoolExecutor`` worker) does not see the recorder of the thread that started it, so
callers open :func:`recording` inside the thread that makes the call. With no recording open,
:func:`record_tokens` does nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Prices",
    "TokenUsage",
    "add_usage",
    "cost_usd",
    "record_tokens",
    "recording",
    "token_count",
    "usage_in",
]


@dataclass(frozen=True)
class TokenUsage:
    """The tokens one call (or a sum of calls) consumed; None where the endpoint did not say."""

    input_tokens: int | None = None
    output_tokens: int | None = None


_recorder: ContextVar[list[TokenUsage] | None] = ContextVar(
    "pytest_openkata_token_recorder", default=None
)


@contextmanager
def recording() -> Iterator[list[TokenUsage]]:
    """Collect the usage of every call made in this context, in order, until the block ends.

    Blocks nest: while an inner block is open it alone collects, and the outer block never sees
    the inner one's entries (add them to the outer list yourself if you want them there). The
    list stays readable after the block ends.
    """
    entries: list[TokenUsage] = []
    token = _recorder.set(entries)
    try:
        yield entries
    finally:
        _recorder.reset(token)


def record_tokens(usage: TokenUsage) -> None:
    """Append ``usage`` to the innermost open :func:`recording` of this context, if any."""
    entries = _recorder.get()
    if entries is not None:
        entries.append(usage)


def token_count(value: object) -> int | None:
    """A token count read from a response body: a non-negative int, else None.

    ``True`` and ``False`` are not counts, although they are ints to Python.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def usage_in(body: Mapping[str, Any], input_key: str, output_key: str) -> TokenUsage:
    """The token counts under ``body["usage"]`` by the API's own key names; a count that is
    missing or unusable (or no ``usage`` object at all) is None."""
    usage = body.get("usage")
    if not isinstance(usage, dict):
        return TokenUsage()
    return TokenUsage(token_count(usage.get(input_key)), token_count(usage.get(output_key)))


def add_usage(entries: Iterable[TokenUsage]) -> TokenUsage:
    """The field-wise sum of ``entries``; a field stays None only if it is None in every entry."""
    input_tokens: int | None = None
    output_tokens: int | None = None
    for entry in entries:
        input_tokens = _plus(input_tokens, entry.input_tokens)
        output_tokens = _plus(output_tokens, entry.output_tokens)
    return TokenUsage(input_tokens, output_tokens)


def _plus(total: int | None, value: int | None) -> int | None:
    if value is None:
        return total
    return value if total is None else total + value


@dataclass(frozen=True)
class Prices:
    """US dollars per million input and output tokens; both 0 means no prices are configured,
    unless ``given`` says the prices were given as they are (a free model of a price table)."""

    input_per_million: float = 0.0
    output_per_million: float = 0.0
    given: bool = False

    def __post_init__(self) -> None:
        for name in ("input_per_million", "output_per_million"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite price >= 0, got {value!r}")

    @property
    def configured(self) -> bool:
        return self.given or self.input_per_million != 0 or self.output_per_million != 0


def cost_usd(usage: TokenUsage, prices: Prices) -> float | None:
    """What ``usage`` cost at ``prices``, in US dollars.

    None when no prices are configured, or when a count that has a non-zero price is unknown
    (a count priced at 0 is not needed).
    """
    if not prices.configured:
        return None
    total = 0.0
    for tokens, per_million in (
        (usage.input_tokens, prices.input_per_million),
        (usage.output_tokens, prices.output_per_million),
    ):
        if per_million == 0:
            continue
        if tokens is None:
            return None
        total += tokens / 1_000_000 * per_million
    return total
