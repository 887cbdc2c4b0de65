"""One retry policy for agent calls, judge calls and sandbox runs.

An error is retried only when its *type and status* say so, never its message text: HTTP 429,
529 (overloaded) and 503 always, 500/502/504 when ``retry_server_errors``, a
:class:`TransportError` only when ``retry_transport``, and any :class:`RetryableError`. A call
that went past its deadline or sent an answer larger than the bound
(:class:`~.LimitExceededError`) is never retried: each attempt would take the whole deadline,
or read as much, again.
The wait after failed attempt ``n`` (0-based) is the server's Retry-After taken exactly, or
``min(base_delay * 2**n, max_delay)`` shrunk by up to ``jitter`` of itself; both are capped at
``max_delay``. There is no wait after the last attempt, and the call gives up early when the
next wait would push the total past ``budget``. Giving up raises :class:`RetriesExhaustedError`.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from pytest_openkata.contracts.errors import (
    BackendError,
    EndpointStatusError,
    LimitExceededError,
    RetryableError,
    TransportError,
)
from pytest_openkata.infra.text import visible

T = TypeVar("T")

logger = logging.getLogger(__name__)

THROTTLE_STATUSES = frozenset({429, 529})
"""Statuses meaning "slow down": 429 Too Many Requests, 529 Anthropic overloaded."""
ALWAYS_RETRIED_STATUSES = THROTTLE_STATUSES | {503}
"""Statuses retried under every policy (503 Service Unavailable is a temporary refusal)."""
SERVER_ERROR_STATUSES = frozenset({500, 502, 504})
"""Statuses retried only when :attr:`RetryPolicy.retry_server_errors` is set."""


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry one call.

    ``budget`` is the total number of seconds of *waiting* allowed for one call; the time the
    attempts themselves take is not counted (each attempt has its own timeout).
    """

    attempts: int = 3
    base_delay: float = 1.0
    max_delay: float = 30.0
    budget: float = 120.0
    jitter: float = 0.5
    retry_server_errors: bool = True
    retry_transport: bool = False

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"attempts must be at least 1, got {self.attempts}")
        if self.base_delay < 0 or self.max_delay < 0 or self.budget < 0:
            raise ValueError("base_delay, max_delay and budget must not be negative")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError(f"jitter must be between 0 and 1, got {self.jitter}")


NO_RETRY = RetryPolicy(attempts=1)
"""A policy that makes exactly one attempt."""


class RetriesExhaustedError(BackendError):
    """Retryable errors went on until the attempts or the waiting budget ran out.

    Raised ``from`` the last error, which is also kept as :attr:`last_error`.
    """

    def __init__(
        self,
        message: str,
        *,
        attempts: int,
        last_error: BaseException,
        waited: float,
        budget_exceeded: bool = False,
    ) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.last_error = last_error
        self.waited = waited
        self.budget_exceeded = budget_exceeded

    @property
    def throttled(self) -> bool:
        """Whether the last error was a throttle (429/529 or a throttled RetryableError)."""
        return _is_throttle(self.last_error)


def _is_throttle(exc: BaseException) -> bool:
    if isinstance(exc, EndpointStatusError):
        return exc.status in THROTTLE_STATUSES
    return isinstance(exc, RetryableError) and exc.throttled


def is_retryable(exc: BaseException, policy: RetryPolicy) -> bool:
    """Whether ``exc`` is worth another attempt under ``policy``, judged by type and status."""
    if isinstance(exc, RetriesExhaustedError):
        return False  # an inner retry loop already gave up; do not multiply the attempts
    if isinstance(exc, LimitExceededError):
        return False  # another attempt would take the whole deadline, or as many bytes, again
    if isinstance(exc, RetryableError):
        return True
    if isinstance(exc, EndpointStatusError):
        if exc.status in ALWAYS_RETRIED_STATUSES:
            return True
        return policy.retry_server_errors and exc.status in SERVER_ERROR_STATUSES
    if isinstance(exc, TransportError):
        return policy.retry_transport
    return False  # MalformedResponseError, other backend errors, bugs


def _retry_after(exc: BaseException) -> float | None:
    if isinstance(exc, EndpointStatusError | RetryableError):
        return exc.retry_after
    return None


def delay_for(
    attempt: int, exc: BaseException, policy: RetryPolicy, rand: Callable[[], float]
) -> float:
    """Seconds to wait after failed attempt ``attempt`` (0-based) before the next one.

    A Retry-After from ``exc`` is used exactly (no jitter), capped at ``max_delay``. Otherwise
    ``d = min(base_delay * 2**attempt, max_delay)`` and the wait is
    ``d * (1 - jitter * r)`` with ``r = rand()`` clamped to ``[0, 1]``, so it lies in
    ``[d * (1 - jitter), d]``: jitter only shortens the wait and never exceeds the cap.
    """
    retry_after = _retry_after(exc)
    if retry_after is not None:
        return min(max(retry_after, 0.0), policy.max_delay)
    try:
        exponential = policy.base_delay * 2.0**attempt
    except OverflowError:
        exponential = policy.max_delay
    capped = min(exponential, policy.max_delay)
    r = min(max(rand(), 0.0), 1.0)
    return capped * (1.0 - policy.jitter * r)


def _attempts_text(n: int) -> str:
    return f"{n} attempt" if n == 1 else f"{n} attempts"


def call_with_retry(
    fn: Callable[[], T],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], None] = time.sleep,
    rand: Callable[[], float] = random.random,
    describe: str = "call",
) -> T:
    """Call ``fn`` until it succeeds, retrying retryable errors under ``policy``.

    Non-retryable errors propagate at once, unchanged, as does every error of a one-attempt
    policy. When retryable errors use up the
    attempts or the waiting budget, :class:`RetriesExhaustedError` is raised from the last
    error. ``describe`` names the call in log messages.
    """
    waited = 0.0
    for attempt in range(policy.attempts):
        try:
            return fn()
        except Exception as exc:
            if policy.attempts == 1 or not is_retryable(exc, policy):
                raise  # with a single attempt nothing was retried: the error stays as it is
            made = attempt + 1
            if made >= policy.attempts:
                verb = "throttled" if _is_throttle(exc) else "failed"
                raise RetriesExhaustedError(
                    f"{verb} after {_attempts_text(made)}: {exc}",
                    attempts=made,
                    last_error=exc,
                    waited=waited,
                ) from exc
            delay = delay_for(attempt, exc, policy, rand)
            if waited + delay > policy.budget:
                raise RetriesExhaustedError(
                    f"gave up after {_attempts_text(made)}: the retry budget of "
                    f"{policy.budget:g} s would be exceeded: {exc}",
                    attempts=made,
                    last_error=exc,
                    waited=waited,
                    budget_exceeded=True,
                ) from exc
            logger.info(
                "%s: attempt %d of %d failed (%s); retrying in %.1f s",
                describe,
                made,
                policy.attempts,
                visible(str(exc)),  # an endpoint's body: shown in live logs
                delay,
            )
            sleep(delay)
            waited += delay
    raise AssertionError("unreachable: RetryPolicy.attempts is at least 1")
