"""The failure that ends a trial or a scenario, raised inside a run and returned as data."""

from __future__ import annotations

from pytest_openkata.contracts.errors import OpenkataError


class ScenarioFailure(OpenkataError):
    """Ends a trial (or, before the first trial, the scenario); its text is reported, with
    what a timed-out agent printed and changed when there is any. ``kind`` is the error kind
    of the trial it ends when it is not the run's dependency failing (``""``)."""

    def __init__(self, message: str, agent_output: str | None = None, *, kind: str = "") -> None:
        super().__init__(message)
        self.agent_output = agent_output
        self.kind = kind
