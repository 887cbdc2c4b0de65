"""Token usage: the per-context recorder, sums and prices."""

from __future__ import annotations

import math
import threading

import pytest

from pytest_openkata.infra.usage import (
    Prices,
    TokenUsage,
    add_usage,
    cost_usd,
    record_tokens,
    recording,
    token_count,
)

# -- recording --------------------------------------------------------------------------------


def test_recording_collects_in_order() -> None:
    with recording() as usage:
        record_tokens(TokenUsage(10, 2))
        record_tokens(TokenUsage(None, None))
        record_tokens(TokenUsage(7, 3))
    assert usage == [TokenUsage(10, 2), TokenUsage(None, None), TokenUsage(7, 3)]


def test_without_recording_record_tokens_does_nothing() -> None:
    record_tokens(TokenUsage(1, 1))  # no recorder: no error, nowhere to go
    with recording() as usage:
        pass
    assert usage == []


def test_entries_after_the_block_are_not_collected() -> None:
    with recording() as usage:
        record_tokens(TokenUsage(1, 2))
    record_tokens(TokenUsage(100, 200))
    assert usage == [TokenUsage(1, 2)]


def test_inner_recording_collects_alone_and_outer_resumes() -> None:
    with recording() as outer:
        record_tokens(TokenUsage(1, 1))
        with recording() as inner:
            record_tokens(TokenUsage(2, 2))
        record_tokens(TokenUsage(3, 3))
    assert inner == [TokenUsage(2, 2)]
    assert outer == [TokenUsage(1, 1), TokenUsage(3, 3)]


def test_recording_ends_when_the_block_raises() -> None:
    seen: list[list[TokenUsage]] = []

    def record_then_fail() -> None:
        with recording() as usage:
            seen.append(usage)
            record_tokens(TokenUsage(4, 5))
            raise RuntimeError("boom")

    with recording() as outer:
        with pytest.raises(RuntimeError, match="boom"):
            record_then_fail()
        record_tokens(TokenUsage(6, 7))
    assert seen == [[TokenUsage(4, 5)]]
    assert outer == [TokenUsage(6, 7)]  # the outer recording collects again after the failure


def test_each_thread_records_into_its_own_list() -> None:
    rounds = 50
    barrier = threading.Barrier(2)
    results: dict[str, list[TokenUsage]] = {}
    errors: list[BaseException] = []

    def work(name: str, tokens: int) -> None:
        try:
            with recording() as usage:
                barrier.wait()  # both threads are recording before either records
                for _ in range(rounds):
                    record_tokens(TokenUsage(tokens, tokens))
                barrier.wait()  # neither leaves its block before the other has finished
            results[name] = usage
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    threads = [
        threading.Thread(target=work, args=("a", 1)),
        threading.Thread(target=work, args=("b", 2)),
    ]
    with recording() as main:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    assert errors == []
    assert results["a"] == [TokenUsage(1, 1)] * rounds
    assert results["b"] == [TokenUsage(2, 2)] * rounds
    assert main == []  # a thread does not record into the recording of the thread that started it


def test_a_thread_without_its_own_recording_records_nothing() -> None:
    with recording() as main:
        thread = threading.Thread(target=record_tokens, args=(TokenUsage(9, 9),))
        thread.start()
        thread.join()
    assert main == []


# -- token_count ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, 0),
        (1234, 1234),
        (None, None),
        (True, None),
        (False, None),
        (12.0, None),
        ("12", None),
        (-1, None),
        ([3], None),
    ],
)
def test_token_count(value: object, expected: int | None) -> None:
    assert token_count(value) == expected


# -- add_usage --------------------------------------------------------------------------------


def test_add_usage_of_nothing_is_unknown() -> None:
    assert add_usage([]) == TokenUsage(None, None)


def test_add_usage_sums_fields() -> None:
    assert add_usage([TokenUsage(10, 1), TokenUsage(20, 2), TokenUsage(30, 3)]) == TokenUsage(60, 6)


def test_add_usage_none_plus_none_stays_none() -> None:
    assert add_usage([TokenUsage(None, None), TokenUsage(None, None)]) == TokenUsage(None, None)


def test_add_usage_none_plus_a_count_is_the_count() -> None:
    total = add_usage([TokenUsage(None, 5), TokenUsage(7, None), TokenUsage(None, None)])
    assert total == TokenUsage(7, 5)


def test_add_usage_takes_any_iterable() -> None:
    assert add_usage(TokenUsage(n, 2 * n) for n in range(4)) == TokenUsage(6, 12)


# -- cost_usd ---------------------------------------------------------------------------------


def test_cost_without_prices_is_unknown() -> None:
    assert cost_usd(TokenUsage(1_000_000, 1_000_000), Prices()) is None


def test_cost_sums_both_directions() -> None:
    prices = Prices(input_per_million=3.0, output_per_million=15.0)
    cost = cost_usd(TokenUsage(2_000_000, 500_000), prices)
    assert cost is not None
    assert math.isclose(cost, 2 * 3.0 + 0.5 * 15.0)


def test_cost_of_small_counts() -> None:
    cost = cost_usd(TokenUsage(1234, 56), Prices(input_per_million=2.5, output_per_million=10.0))
    assert cost is not None
    assert math.isclose(cost, 1234 * 2.5e-6 + 56 * 10.0e-6)


def test_cost_of_zero_tokens_is_zero() -> None:
    assert cost_usd(TokenUsage(0, 0), Prices(1.0, 1.0)) == 0.0


@pytest.mark.parametrize("usage", [TokenUsage(None, 10), TokenUsage(10, None), TokenUsage()])
def test_cost_with_a_needed_count_unknown_is_unknown(usage: TokenUsage) -> None:
    assert cost_usd(usage, Prices(input_per_million=1.0, output_per_million=2.0)) is None


def test_a_count_priced_at_zero_is_not_needed() -> None:
    only_output = Prices(input_per_million=0.0, output_per_million=4.0)
    assert cost_usd(TokenUsage(None, 250_000), only_output) == 1.0
    only_input = Prices(input_per_million=4.0, output_per_million=0.0)
    assert cost_usd(TokenUsage(500_000, None), only_input) == 2.0


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
def test_prices_must_be_finite_and_not_negative(bad: float) -> None:
    with pytest.raises(ValueError, match="input_per_million"):
        Prices(input_per_million=bad)
    with pytest.raises(ValueError, match="output_per_million"):
        Prices(output_per_million=bad)
