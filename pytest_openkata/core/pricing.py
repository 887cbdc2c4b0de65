"""What a run's models cost: the price table (``prices``) first, then the role prices.

A model named in the price table takes its prices from it; otherwise the agent model takes
``price.agent_*`` and the judge model ``price.judge_*``, the prices of whatever model the run
is configured with. No price is ever guessed: a model priced by neither is unpriced, and its
cost is unknown (None), never 0. A model priced at 0 in the table is free, which is known.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.infra.usage import Prices

__all__ = ["RunPrices", "run_prices"]


@dataclass(frozen=True)
class RunPrices:
    """The prices of a run's agent and judge models, and the models they are for."""

    agent_model: str
    agent: Prices
    judge_model: str
    judge: Prices

    def unpriced(self) -> tuple[str, ...]:
        """The models of the run that have no price, each once."""
        missing = [
            model
            for model, prices in ((self.agent_model, self.agent), (self.judge_model, self.judge))
            if not prices.configured
        ]
        return tuple(dict.fromkeys(missing))


def run_prices(settings: EvalSettings) -> RunPrices:
    """The agent's and the judge's prices of a run with ``settings`` (see the module
    docstring)."""
    table = {model: Prices(i, o, given=True) for model, i, o in settings.prices}
    price = settings.price
    judge_model = settings.judge_model or settings.model
    return RunPrices(
        agent_model=settings.model,
        agent=table.get(settings.model, Prices(price.agent_input, price.agent_output)),
        judge_model=judge_model,
        judge=table.get(judge_model, Prices(price.judge_input, price.judge_output)),
    )
