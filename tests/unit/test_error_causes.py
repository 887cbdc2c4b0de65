"""What kind of failure an error is, told by the class raised and the chain it was raised
from, never by its message."""

from __future__ import annotations

import json

import pytest

from pytest_openkata.contracts.errors import (
    AGENT_CRASH,
    ENGINE_LOST,
    ERROR_CAUSES,
    INVALID_INPUT,
    MODEL_ENDPOINT,
    OUT_OF_MEMORY,
    RETRIED_CAUSES,
    SANDBOX_SETUP,
    TIMEOUT,
    AgentConfigError,
    AgentFailedError,
    AgentNotFoundError,
    AgentTimeoutError,
    AnswerTooLargeError,
    CallTimeoutError,
    ConfigError,
    EndpointStatusError,
    MalformedResponseError,
    OutOfMemoryError,
    RetryableError,
    SandboxError,
    SandboxLost,
    TransportError,
    error_cause,
)
from pytest_openkata.contracts.results import Attempt, ScenarioResult, TrialEnvironment
from pytest_openkata.core.checks import CheckError
from pytest_openkata.core.errors import ScenarioFailure
from pytest_openkata.core.trials import combine_trials, errored_trial
from pytest_openkata.infra.retry import RetriesExhaustedError


@pytest.mark.parametrize(
    ("error", "cause"),
    [
        (EndpointStatusError(500, "down"), MODEL_ENDPOINT),
        (TransportError("connection refused"), MODEL_ENDPOINT),
        (MalformedResponseError("no choices"), MODEL_ENDPOINT),
        (AnswerTooLargeError("larger than 4 MiB"), MODEL_ENDPOINT),
        (CallTimeoutError("after 120 s"), TIMEOUT),
        (AgentTimeoutError("after 2m0s", timeout=120, partial_output=""), TIMEOUT),
        (AgentFailedError("exit status 2", exit_status=2), AGENT_CRASH),
        (AgentNotFoundError("claude not found in PATH"), AGENT_CRASH),
        (OutOfMemoryError("killed"), OUT_OF_MEMORY),
        (SandboxError("image not found"), SANDBOX_SETUP),
        (SandboxLost("stopped answering"), ENGINE_LOST),
        (CheckError("cannot start"), "check"),
        (ConfigError("bad value"), INVALID_INPUT),
        (AgentConfigError("empty command"), INVALID_INPUT),
    ],
)
def test_each_class_says_its_kind(error: Exception, cause: str) -> None:
    assert error_cause(error, "unknown") == cause


def test_an_error_that_says_nothing_takes_the_kind_of_what_it_was_raised_from() -> None:
    # The engine's 5xx, retried until the attempts ran out: RetryableError names no kind.
    try:
        try:
            try:
                raise SandboxLost("the Docker engine stopped answering")
            except SandboxLost as lost:
                raise RetryableError("docker create: engine error") from lost
        except RetryableError as retryable:
            raise RetriesExhaustedError(
                "failed after 3 attempts", attempts=3, last_error=retryable, waited=0.0
            ) from retryable
    except RetriesExhaustedError as exhausted:
        wrapped = exhausted
    assert error_cause(wrapped, SANDBOX_SETUP) == ENGINE_LOST
    assert error_cause(RetryableError("engine error"), SANDBOX_SETUP) == SANDBOX_SETUP


def test_the_raisers_word_wins_over_the_chain() -> None:
    failure = ScenarioFailure("sandbox: command: exit status 137", cause=OUT_OF_MEMORY)
    failure.__cause__ = SandboxError("a sandbox error under it")

    assert error_cause(failure, MODEL_ENDPOINT) == OUT_OF_MEMORY


def test_a_message_never_decides() -> None:
    # Words of another kind in the text change nothing: the class does.
    assert error_cause(SandboxError("HTTP 500 timed out, out of memory"), "") == SANDBOX_SETUP


def test_only_the_infrastructures_kinds_are_retried() -> None:
    assert set(RETRIED_CAUSES) == {MODEL_ENDPOINT, SANDBOX_SETUP, ENGINE_LOST}
    assert set(RETRIED_CAUSES) <= set(ERROR_CAUSES)
    assert len(set(ERROR_CAUSES)) == len(ERROR_CAUSES)


def test_attempts_and_environment_cross_between_processes_unchanged() -> None:
    # What an xdist worker sends the controller (JSON of ScenarioResult.to_dict), read back.
    trial = errored_trial(
        1,
        "sandbox: docker create: image not found",
        cause=SANDBOX_SETUP,
        attempts=(Attempt(1, "sandbox: docker create: refused", SANDBOX_SETUP, 0.5),),
        environment=TrialEnvironment(0.5, 64, "2.1.197 (Claude Code)", "sha256:ab"),
    )
    result = combine_trials([trial], skill="s", skill_dir="skills/s", name="a", description="")

    again = ScenarioResult.from_dict(json.loads(json.dumps(result.to_dict())))

    assert again == result
    assert again.trials[0].attempts[0].cause == SANDBOX_SETUP
    assert again.error_cause == SANDBOX_SETUP
