"""One live model call: held in a call slot, timed, its tokens and cost recorded."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import TypeVar

from pytest_openkata.contracts.results import CallStats
from pytest_openkata.core.activity import ACTIVITY
from pytest_openkata.core.slots import CallSlot
from pytest_openkata.infra.reported_models import recording_models
from pytest_openkata.infra.usage import Prices, TokenUsage, add_usage, cost_usd, recording

T = TypeVar("T")

NO_SLOTS: CallSlot = nullcontext()
"""A slot that never waits, for runs without a concurrency bound."""


def live_call(
    call: Callable[[], T], prices: Prices, slot: CallSlot, role: str
) -> tuple[T, CallStats]:
    """Run ``call`` in a call slot, timing it (not the wait for the slot) and collecting the
    tokens and the model ids the backend reported; ``role`` (``agent`` or ``judge``) counts
    it as in flight for the progress line."""
    with slot, recording() as entries, recording_models() as models, ACTIVITY.counting(role):
        started = time.perf_counter()
        value = call()
        seconds = time.perf_counter() - started
    tokens = add_usage(entries) if entries else TokenUsage()
    stats = CallStats(
        calls=1,
        input_tokens=tokens.input_tokens,
        output_tokens=tokens.output_tokens,
        seconds=seconds,
        cost_usd=cost_usd(tokens, prices),
        models=tuple(dict.fromkeys(models)),
    )
    return value, stats
