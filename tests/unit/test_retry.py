"""The shared retry policy: what is retried, how long it waits, and how it gives up."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pytest

from pytest_openkata.contracts.errors import (
    AgentTimeoutError,
    AnswerTooLargeError,
    BackendError,
    CallTimeoutError,
    EndpointStatusError,
    MalformedResponseError,
    RetryableError,
    TransportError,
)
from pytest_openkata.infra.retry import (
    NO_RETRY,
    RetriesExhaustedError,
    RetryPolicy,
    call_with_retry,
    delay_for,
    is_retryable,
)

DEFAULT = RetryPolicy()


class Script:
    """A callable that raises the scripted errors in turn, then returns ``"ok"``."""

    def __init__(self, outcomes: Iterable[BaseException | str]) -> None:
        self.outcomes = list(outcomes)
        self.calls = 0

    def __call__(self) -> str:
        outcome = self.outcomes[min(self.calls, len(self.outcomes) - 1)]
        self.calls += 1
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


class Sleeps(list[float]):
    """A recording ``sleep`` that never sleeps."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def fixed(value: float) -> Callable[[], float]:
    return lambda: value


def run(fn: Script, policy: RetryPolicy = DEFAULT, *, rand: float = 0.0) -> tuple[str, Sleeps]:
    sleeps = Sleeps()
    result = call_with_retry(fn, policy, sleep=sleeps, rand=fixed(rand))
    return result, sleeps


def exhaust(
    fn: Script, policy: RetryPolicy = DEFAULT, *, rand: float = 0.0
) -> tuple[RetriesExhaustedError, Sleeps]:
    sleeps = Sleeps()
    with pytest.raises(RetriesExhaustedError) as info:
        call_with_retry(fn, policy, sleep=sleeps, rand=fixed(rand))
    return info.value, sleeps


def throttle(retry_after: float | None = None) -> EndpointStatusError:
    return EndpointStatusError(429, "rate limit exceeded", retry_after)


# --- success and retry counts ------------------------------------------------------------


def test_success_first_time_makes_one_call_and_never_sleeps() -> None:
    fn = Script(["ok"])
    assert run(fn) == ("ok", [])
    assert fn.calls == 1


def test_429_twice_then_success_makes_three_calls_and_two_sleeps() -> None:
    fn = Script([throttle(), throttle(), "ok"])
    result, sleeps = run(fn)
    assert result == "ok"
    assert fn.calls == 3
    assert sleeps == [1.0, 2.0]


def test_no_sleep_after_the_last_attempt() -> None:
    fn = Script([throttle()])
    _, sleeps = exhaust(fn, RetryPolicy(attempts=4))
    assert fn.calls == 4
    assert len(sleeps) == 3


def test_a_single_attempt_policy_never_sleeps_and_passes_the_error_through() -> None:
    fn = Script([throttle()])
    sleeps: list[float] = []
    with pytest.raises(EndpointStatusError) as info:
        call_with_retry(fn, NO_RETRY, sleep=sleeps.append, rand=lambda: 0.0)
    assert fn.calls == 1
    assert sleeps == []
    assert str(info.value) == "HTTP 429: rate limit exceeded"


# --- delays ------------------------------------------------------------------------------


def test_retry_after_is_honoured_exactly_without_jitter() -> None:
    fn = Script([throttle(retry_after=7.5), throttle(retry_after=0.25), "ok"])
    _, sleeps = run(fn, rand=1.0)
    assert sleeps == [7.5, 0.25]


def test_retry_after_is_capped_at_max_delay() -> None:
    fn = Script([throttle(retry_after=3600.0), "ok"])
    _, sleeps = run(fn, RetryPolicy(max_delay=30.0, budget=1000.0))
    assert sleeps == [30.0]


def test_negative_retry_after_means_no_wait() -> None:
    assert delay_for(0, throttle(retry_after=-5.0), DEFAULT, fixed(0.0)) == 0.0


@pytest.mark.parametrize(
    ("attempt", "expected"), [(0, 1.0), (1, 2.0), (2, 4.0), (3, 8.0), (4, 10.0), (50, 10.0)]
)
def test_exponential_delay_without_jitter_is_capped(attempt: int, expected: float) -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=10.0, jitter=0.0)
    assert delay_for(attempt, throttle(), policy, fixed(0.7)) == expected


@pytest.mark.parametrize("attempt", [0, 1, 2, 3, 4, 10])
def test_jitter_keeps_the_delay_between_its_bounds(attempt: int) -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=10.0, jitter=0.5)
    capped = min(2.0**attempt, 10.0)
    longest = delay_for(attempt, throttle(), policy, fixed(0.0))
    shortest = delay_for(attempt, throttle(), policy, fixed(1.0))
    middle = delay_for(attempt, throttle(), policy, fixed(0.5))
    assert longest == capped
    assert shortest == capped * 0.5
    assert shortest < middle < longest


def test_out_of_range_random_values_are_clamped() -> None:
    policy = RetryPolicy(base_delay=2.0, jitter=0.5)
    assert delay_for(0, throttle(), policy, fixed(-3.0)) == 2.0
    assert delay_for(0, throttle(), policy, fixed(3.0)) == 1.0


def test_the_error_text_holds_no_jittered_figure() -> None:
    # Reports hold error texts: the same outcome must give the same text, whatever the
    # random part of each wait was (the wait itself stays on the error).
    errors = [
        exhaust(Script([EndpointStatusError(502, "bad gateway")] * 3), rand=rand)[0]
        for rand in (0.0, 0.7)
    ]

    assert str(errors[0]) == str(errors[1]) == "failed after 3 attempts: HTTP 502: bad gateway"
    assert errors[0].waited != errors[1].waited


def test_jitter_applies_through_call_with_retry() -> None:
    fn = Script([throttle(), throttle(), "ok"])
    _, sleeps = run(fn, RetryPolicy(base_delay=2.0, jitter=0.5), rand=1.0)
    assert sleeps == [1.0, 2.0]


# --- giving up ---------------------------------------------------------------------------


def test_exhausted_throttle_message_and_attributes() -> None:
    last = throttle()
    error, sleeps = exhaust(Script([throttle(), throttle(), last]))
    assert str(error) == ("throttled after 3 attempts: HTTP 429: rate limit exceeded")
    assert sleeps == [1.0, 2.0]
    assert error.attempts == 3
    assert error.last_error is last
    assert error.__cause__ is last
    assert error.waited == 3.0
    assert not error.budget_exceeded
    assert error.throttled
    assert isinstance(error, BackendError)


def test_exhausted_overloaded_529_also_says_throttled() -> None:
    error, _ = exhaust(Script([EndpointStatusError(529, "overloaded")]))
    assert str(error) == "throttled after 3 attempts: HTTP 529: overloaded"


def test_exhausted_server_error_says_failed() -> None:
    error, _ = exhaust(Script([EndpointStatusError(503, "unavailable")]))
    assert str(error) == "failed after 3 attempts: HTTP 503: unavailable"
    assert not error.throttled


def test_budget_stops_retrying_before_the_attempts_run_out() -> None:
    fn = Script([throttle(retry_after=4.0)])
    error, sleeps = exhaust(fn, RetryPolicy(attempts=5, budget=5.0))
    assert fn.calls == 2
    assert sleeps == [4.0]
    assert str(error) == (
        "gave up after 2 attempts: the retry budget of 5 s would be exceeded: "
        "HTTP 429: rate limit exceeded"
    )
    assert error.attempts == 2
    assert error.budget_exceeded
    assert error.waited == 4.0


def test_budget_allows_waiting_exactly_up_to_the_limit() -> None:
    fn = Script([throttle(), throttle(), "ok"])
    _, sleeps = run(fn, RetryPolicy(budget=3.0))
    assert sleeps == [1.0, 2.0]


def test_zero_budget_gives_up_after_the_first_attempt() -> None:
    fn = Script([throttle()])
    error, sleeps = exhaust(fn, RetryPolicy(budget=0.0))
    assert fn.calls == 1
    assert sleeps == []
    assert error.budget_exceeded


# --- what is retried ---------------------------------------------------------------------


@pytest.mark.parametrize("status", [429, 529, 503])
def test_throttle_and_unavailable_statuses_are_always_retried(status: int) -> None:
    policy = RetryPolicy(retry_server_errors=False)
    fn = Script([EndpointStatusError(status, "busy"), "ok"])
    assert run(fn, policy)[0] == "ok"
    assert fn.calls == 2


@pytest.mark.parametrize("status", [500, 502, 504])
def test_server_errors_are_retried_when_enabled(status: int) -> None:
    fn = Script([EndpointStatusError(status, "boom"), "ok"])
    assert run(fn, RetryPolicy(retry_server_errors=True))[0] == "ok"
    assert fn.calls == 2


@pytest.mark.parametrize("status", [500, 502, 504])
def test_server_errors_are_not_retried_when_disabled(status: int) -> None:
    error = EndpointStatusError(status, "boom")
    fn = Script([error, "ok"])
    sleeps = Sleeps()
    with pytest.raises(EndpointStatusError) as info:
        call_with_retry(fn, RetryPolicy(retry_server_errors=False), sleep=sleeps)
    assert info.value is error
    assert fn.calls == 1
    assert sleeps == []


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_client_errors_propagate_unchanged_at_once(status: int) -> None:
    error = EndpointStatusError(status, "nope")
    fn = Script([error, "ok"])
    sleeps = Sleeps()
    with pytest.raises(EndpointStatusError) as info:
        call_with_retry(fn, DEFAULT, sleep=sleeps)
    assert info.value is error
    assert fn.calls == 1
    assert sleeps == []


def test_429_in_the_text_of_another_error_is_not_a_throttle() -> None:
    error = EndpointStatusError(400, "port 4290 rate limit throttled 429")
    assert not is_retryable(error, DEFAULT)
    fn = Script([error, "ok"])
    with pytest.raises(EndpointStatusError) as info:
        call_with_retry(fn, DEFAULT, sleep=Sleeps())
    assert info.value is error
    assert fn.calls == 1


def test_plain_exception_with_throttle_words_is_not_retried() -> None:
    error = RuntimeError("HTTP 429: rate limit exceeded, throttled")
    assert not is_retryable(error, DEFAULT)
    fn = Script([error, "ok"])
    with pytest.raises(RuntimeError) as info:
        call_with_retry(fn, DEFAULT, sleep=Sleeps())
    assert info.value is error
    assert fn.calls == 1


def test_a_non_retryable_error_after_retries_propagates_unchanged() -> None:
    error = EndpointStatusError(401, "bad key")
    fn = Script([throttle(), error, "ok"])
    sleeps = Sleeps()
    with pytest.raises(EndpointStatusError) as info:
        call_with_retry(fn, DEFAULT, sleep=sleeps, rand=fixed(0.0))
    assert info.value is error
    assert fn.calls == 2
    assert sleeps == [1.0]


def test_transport_errors_are_not_retried_by_default() -> None:
    error = TransportError("connection refused")
    fn = Script([error, "ok"])
    with pytest.raises(TransportError) as info:
        call_with_retry(fn, DEFAULT, sleep=Sleeps())
    assert info.value is error
    assert fn.calls == 1


def test_transport_errors_are_retried_when_enabled() -> None:
    fn = Script([TransportError("connection reset"), "ok"])
    result, sleeps = run(fn, RetryPolicy(retry_transport=True))
    assert result == "ok"
    assert fn.calls == 2
    assert sleeps == [1.0]


def test_exhausted_transport_retries_say_failed() -> None:
    error, _ = exhaust(Script([TransportError("timed out")]), RetryPolicy(retry_transport=True))
    assert str(error) == "failed after 3 attempts: timed out"


@pytest.mark.parametrize(
    "policy",
    [DEFAULT, RetryPolicy(retry_transport=True, retry_server_errors=True)],
)
def test_malformed_responses_are_never_retried(policy: RetryPolicy) -> None:
    error = MalformedResponseError("no choices in the answer")
    assert not is_retryable(error, policy)
    fn = Script([error, "ok"])
    with pytest.raises(MalformedResponseError) as info:
        call_with_retry(fn, policy, sleep=Sleeps())
    assert info.value is error
    assert fn.calls == 1


@pytest.mark.parametrize(
    "error",
    [
        CallTimeoutError("POST http://h/v1/chat/completions: timed out after 30s"),
        AnswerTooLargeError("POST http://h/v1/chat/completions: the answer is larger than 4 MiB"),
        AgentTimeoutError("kiro-cli timed out after 30s", timeout=30, partial_output=""),
    ],
)
def test_a_call_past_its_deadline_or_bound_is_never_retried(error: BackendError) -> None:
    # Another attempt would take the whole deadline, or read as much, again.
    policy = RetryPolicy(retry_transport=True, retry_server_errors=True)
    assert not is_retryable(error, policy)
    fn = Script([error, "ok"])
    with pytest.raises(type(error)) as info:
        call_with_retry(fn, policy, sleep=Sleeps())
    assert info.value is error
    assert fn.calls == 1


def test_retryable_error_is_retried_and_its_retry_after_honoured() -> None:
    fn = Script([RetryableError("agent CLI exit status 75", retry_after=12.0), "ok"])
    result, sleeps = run(fn, rand=1.0)
    assert result == "ok"
    assert sleeps == [12.0]


def test_retryable_error_without_retry_after_backs_off() -> None:
    fn = Script([RetryableError("sandbox busy"), RetryableError("sandbox busy"), "ok"])
    _, sleeps = run(fn, rand=0.0)
    assert sleeps == [1.0, 2.0]


def test_throttled_retryable_error_says_throttled_when_exhausted() -> None:
    error, _ = exhaust(Script([RetryableError("kiro-cli: throttled", throttled=True)]))
    assert str(error) == "throttled after 3 attempts: kiro-cli: throttled"


def test_unthrottled_retryable_error_says_failed_when_exhausted() -> None:
    error, _ = exhaust(Script([RetryableError("sandbox busy")]))
    assert str(error) == "failed after 3 attempts: sandbox busy"


def test_nested_retry_exhaustion_is_not_retried_again() -> None:
    inner = RetriesExhaustedError("throttled", attempts=3, last_error=throttle(), waited=3.0)
    assert not is_retryable(inner, DEFAULT)


def test_keyboard_interrupt_is_never_caught() -> None:
    fn = Script([KeyboardInterrupt(), "ok"])
    with pytest.raises(KeyboardInterrupt):
        call_with_retry(fn, DEFAULT, sleep=Sleeps())
    assert fn.calls == 1


# --- the policy itself -------------------------------------------------------------------


def test_default_policy_values() -> None:
    policy = RetryPolicy()
    assert policy == RetryPolicy(
        attempts=3,
        base_delay=1.0,
        max_delay=30.0,
        budget=120.0,
        jitter=0.5,
        retry_server_errors=True,
        retry_transport=False,
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"attempts": 0},
        {"base_delay": -1.0},
        {"max_delay": -1.0},
        {"budget": -1.0},
        {"jitter": -0.1},
        {"jitter": 1.5},
    ],
)
def test_invalid_policies_are_rejected(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="must"):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


def test_policy_is_frozen() -> None:
    with pytest.raises(AttributeError):
        DEFAULT.attempts = 5  # type: ignore[misc]
