"""The price table's spellings, how it combines with the role prices, the spend ledger and the
shards' budget records summed."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_openkata.contracts.config import BudgetSettings, EvalSettings
from pytest_openkata.contracts.errors import ConfigError
from pytest_openkata.contracts.results import CallStats, Usage
from pytest_openkata.core.budget import BudgetGuard, spent_of, unpriced_budget
from pytest_openkata.core.pricing import run_prices
from pytest_openkata.core.spending import merged_spending, spending_problem, spending_record
from pytest_openkata.infra.config import resolve_settings
from pytest_openkata.infra.ledger import SpendLedger, Spent
from pytest_openkata.infra.usage import Prices


def _settings(
    *, cli: dict[str, object] | None = None, yaml: str | None = None, tmp: Path | None = None
) -> EvalSettings:
    path = None
    if yaml is not None:
        assert tmp is not None
        path = tmp / ".openkata-eval.yaml"
        path.write_text(yaml)
    return resolve_settings(ini={}, yaml_path=path, environ={}, cli=cli or {})  # type: ignore[arg-type]


def test_the_price_option_given_again_adds_a_model_each_time() -> None:
    settings = _settings(cli={"eval_prices": ["a/b:c=3,15", "free=0,0"]})

    assert settings.prices == (("a/b:c", 3.0, 15.0), ("free", 0.0, 0.0))


def test_a_yaml_mapping_of_models_takes_each_spelling_of_two_prices(tmp_path: Path) -> None:
    yaml = 'prices:\n  m1: "1,2"\n  m2: [3, 4.5]\n  m3: {input: 5, output: 6}\n'

    assert _settings(yaml=yaml, tmp=tmp_path).prices == (
        ("m1", 1.0, 2.0),
        ("m2", 3.0, 4.5),
        ("m3", 5.0, 6.0),
    )


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("m=1", "'m=1' is not MODEL=INPUT,OUTPUT"),
        ("m=1,x", "'m=1,x': 'x' is not a number"),
        ("m=1,-2", "'m=1,-2': -2 is out of range"),
        ("m=1,2;m=3,4", "the model 'm' is priced twice"),
    ],
)
def test_a_bad_price_is_an_error_naming_where_it_was_given(text: str, said: str) -> None:
    with pytest.raises(ConfigError) as raised:
        resolve_settings(ini={}, yaml_path=None, environ={"OPENKATA_EVAL_PRICES": text}, cli={})

    assert str(raised.value).startswith(f"environment OPENKATA_EVAL_PRICES: {said}")


def test_the_table_prices_a_model_before_the_role_prices() -> None:
    settings = EvalSettings(
        model="agent-m",
        judge_model="judge-m",
        prices=(("agent-m", 0.0, 0.0),),
        price={"agent_input": 9, "judge_input": 2, "judge_output": 4},  # type: ignore[arg-type]
    )

    prices = run_prices(settings)

    assert prices.agent == Prices(0.0, 0.0, given=True)  # free, and known to be
    assert prices.agent.configured
    assert prices.judge == Prices(2.0, 4.0)
    assert prices.unpriced() == ()


def test_a_model_priced_nowhere_is_unpriced_and_a_dollar_budget_says_so() -> None:
    settings = EvalSettings(model="m", judge_model="j", budget=BudgetSettings(usd=1.0))

    assert run_prices(settings).unpriced() == ("m", "j")
    assert unpriced_budget(settings) == (
        "budget.usd needs a price for the model 'm': give it with --eval-price m=IN,OUT "
        "(prices; or price.agent_* / price.judge_*), or limit the run with budget.tokens instead"
    )
    assert unpriced_budget(settings.model_copy(update={"budget": BudgetSettings(tokens=5)})) is None


def test_a_trial_spends_its_live_calls_and_an_unpriced_one_makes_the_cost_unknown() -> None:
    priced = CallStats(calls=1, input_tokens=100, output_tokens=50, cost_usd=0.25)
    unpriced = CallStats(calls=2, input_tokens=10, output_tokens=5)

    assert spent_of(Usage(priced, CallStats(cached=1))) == Spent(150, 0.25)
    assert spent_of(Usage(priced, unpriced)) == Spent(165, 0.25, unknown=True)


def test_processes_add_to_one_ledger_and_a_guard_stops_at_the_budget(tmp_path: Path) -> None:
    path = tmp_path / "ledger.json"
    SpendLedger.create(path)
    one, other = SpendLedger(path), SpendLedger(path)  # as two workers open it
    guard = BudgetGuard(BudgetSettings(tokens=300), one)

    one.add(Spent(200, 0.5))
    assert guard.check()
    other.add(Spent(100, 0.25, unknown=True))

    assert not guard.check()
    assert other.read() == Spent(300, 0.75, unknown=True, reached=True)
    assert SpendLedger.create(path).read() == Spent()  # a new run starts from nothing


def test_the_shards_records_sum_and_a_shard_stopped_by_its_budget_stops_the_run() -> None:
    limits = BudgetSettings(tokens=1000)
    first = spending_record(limits, Spent(600, 0.5, reached=True), ["s/evals::b"])
    second = spending_record(limits, Spent(700, 0.25, unknown=True), [])

    assert merged_spending([first, second]) == {
        "tokens": 1000,
        "usd": 0.0,
        "spent_tokens": 1300,
        "spent_usd": 0.75,
        "spent_unknown": True,
        "reached": True,
        "not_run": ["s/evals::b"],
    }
    assert merged_spending([second])["reached"] is False  # type: ignore[index]
    assert merged_spending([]) is None
    with pytest.raises(KeyError):
        merged_spending([{"tokens": 1}])


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"spent_tokens": None}, "spent_tokens: must be a whole number of 0 or more, not None"),
        ({"spent_usd": "lots"}, "spent_usd: must be a number of 0 or more, not 'lots'"),
        ({"reached": "yes"}, "reached: must be true or false, not 'yes'"),
        ({"not_run": "all"}, "not_run: must be a list of node ids"),
    ],
)
def test_a_budget_record_that_cannot_be_read_is_named_by_its_field(
    change: dict[str, object], problem: str
) -> None:
    good = spending_record(BudgetSettings(tokens=1000), Spent(tokens=300), [])
    assert spending_problem(good) is None

    assert spending_problem({**good, **change}) == problem
    assert spending_problem([good]) == "must be an object, not list"
