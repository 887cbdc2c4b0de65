"""The failure that ends a trial or a scenario, raised inside a run and returned as data."""

from __future__ import annotations

from pytest_openkata.contracts.errors import OpenkataError
from pytest_openkata.contracts.results import TrialEnvironment


class ScenarioFailure(OpenkataError):
    """Ends a trial (or, before the first trial, the scenario); its text is reported, with
    what a timed-out agent printed and changed when there is any. ``kind`` is the error kind
    of the trial it ends when it is not the run's dependency failing (``""``). ``cause`` is
    the kind of failure when the raiser knows it (a timeout, a crash); otherwise the error it
    was raised ``from`` tells (:func:`~pytest_openkata.contracts.errors.error_cause`).
    ``environment`` is what the agent's sandbox was given and ran, when the agent ran at
    all."""

    def __init__(
        self,
        message: str,
        agent_output: str | None = None,
        *,
        kind: str = "",
        cause: str | None = None,
        environment: TrialEnvironment | None = None,
    ) -> None:
        super().__init__(message)
        self.agent_output = agent_output
        self.kind = kind
        self.cause = cause
        self.environment = environment
