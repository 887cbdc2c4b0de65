"""One exception tree, rooted at :class:`OpenkataError`.

Every error the package raises on purpose descends from :class:`OpenkataError`, so a caller
of :func:`pytest_openkata.evaluate` or of a provider can catch them all at once, and tell
them from a bug (any other exception). The classes defined here need nothing but the
standard library; the rest of the tree lives beside the code whose data it carries and
subclasses these::

    OpenkataError
    ├── ConfigError             a setting has a bad value
    ├── UnknownProviderError    no provider of that kind and name (registry; a LookupError)
    ├── ScenarioLoadError       a scenario's files are missing or invalid (core.jsonfiles)
    │   └── FormatError         a published eval format's file cannot be run as it is
    │                           (core.formats)
    ├── SkillFileError          the skill's SKILL.md cannot be read (core.prompt; a
    │                           FileNotFoundError)
    ├── ScenarioFailure         ends a trial or a scenario with the error its report shows
    │                           (core.errors)
    ├── CheckError              a deterministic check cannot give a verdict (core.checks)
    ├── GradeError              a grader could not grade a trial (providers.graders)
    ├── JudgeError              the judge step failed (providers.graders.judge)
    ├── JudgeParseError         the judge's answer holds no verdicts (the same module)
    ├── ArmError                a baseline arm cannot be made (core.arms)
    │   └── VariantsError       a variants (arms) file that cannot be run as it is
    │                           (core.variants)
    ├── PairwiseJudgeError      the pairwise judge broke its answer contract
    ├── ShardError              shards that cannot be merged (core.shards)
    ├── BudgetReached           the run's budget was reached before a scenario's first
    │                           trial (core.budget)
    ├── RunLogError             a run log that cannot be read (core.runlog)
    ├── LabelsError             a labels file of human verdicts that cannot be read
    │                           (core.verdict_labels)
    ├── AgreementError          two sets of verdicts with nothing to compare
    │                           (core.agreement)
    ├── ReportDecodeError       a report file the catalogue cannot read (core.catalogue)
    ├── VersionsFileError       a versions file of the wrong shape (core.catalogue)
    ├── EarlierRunError         the earlier run to compare with is unusable
    │                           (core.earlier)
    ├── ManifestError           a run's manifest cannot be read (core.manifest)
    ├── DriftError              a comparison refused: the runs drifted (core.manifest)
    ├── WriteError              the scaffold could not create a file (commands.scaffold)
    ├── ConvertError            a conversion cannot be written (core.formats.writers)
    ├── StagingError            a format's scenario cannot be written out to run
    │                           (core.formats.staging)
    ├── FlagError               the drop-in command's flags are refused
    │                           (commands.openkata_eval)
    ├── LocalModelError         the local model could not be set up (local.steps)
    │   └── LockWaitExpired     another run held a lock past the wait's limit
    └── BackendError            the model could not be asked or did not answer usably
        ├── TransportError      the request did not complete
        │   └── CallTimeoutError        … within its deadline (also a LimitExceededError)
        ├── EndpointStatusError         an HTTP status other than 200
        ├── MalformedResponseError      a 200 whose body is no usable completion
        │   └── AnswerTooLargeError     … larger than answer_max_bytes (also a
        │                               LimitExceededError)
        ├── LimitExceededError  a call went past its deadline or its answer's size bound
        │   └── AgentTimeoutError       an agent CLI did not finish in time
        ├── RetryableError      an error another layer wants retried
        ├── RetriesExhaustedError       retries ran out (infra.retry)
        ├── AgentConfigError    an agent cannot be built from the settings
        ├── AgentFailedError    an agent CLI could not start or failed
        │   ├── AgentNotFoundError      its executable does not exist
        │   └── OutOfMemoryError        it was killed for want of memory
        └── SandboxError        the sandbox itself failed
            └── SandboxLost     its engine stopped answering

Every class also says what kind of failure it is (its ``cause``, one of
:data:`ERROR_CAUSES`), so that a trial that errors is classified by what was raised, never
by its message (:func:`error_cause`).

Not in the tree, on purpose: the signals a command uses to stop (``BaseException``
subclasses that must pass through ``except Exception``), and markers of control flow that
never reach a caller (``HelpRequested``, ``SlotsClosed`` and the private ones).
"""

from __future__ import annotations

__all__ = [
    "AGENT_CRASH",
    "CHECK_FAILED",
    "ENGINE_LOST",
    "ERROR_CAUSES",
    "INVALID_INPUT",
    "MODEL_ENDPOINT",
    "OUT_OF_MEMORY",
    "RETRIED_CAUSES",
    "SANDBOX_SETUP",
    "SUSPICIOUS_RESULT",
    "TIMEOUT",
    "AgentConfigError",
    "AgentFailedError",
    "AgentNotFoundError",
    "AgentTimeoutError",
    "AnswerTooLargeError",
    "BackendError",
    "CallTimeoutError",
    "ConfigError",
    "EndpointStatusError",
    "LimitExceededError",
    "MalformedResponseError",
    "OpenkataError",
    "OutOfMemoryError",
    "RetryableError",
    "SandboxError",
    "SandboxLost",
    "TransportError",
    "error_cause",
]


SUSPICIOUS_RESULT = "suspicious result: trivial agent response"
"""How the judge's error begins when it passed every criterion on a trivial answer (the
reference's words): a run rejects that verdict, and validation recognises by it the empty
agent's run that every criterion passes."""


# What kind of failure ended a trial (``TrialResult.error_cause``), as stable snake_case
# names in every report: the model endpoint failed (an HTTP error status, a connection that
# failed, an unusable answer); the agent CLI exited non-zero or died; the agent or a call went
# past its deadline; the sandbox's container was killed for want of memory; the sandbox could
# not be made or used (a missing image, a refused copy, an engine's error); the engine behind
# it stopped answering; a deterministic check could not give a verdict; the scenario's or the
# skill's own files, or the run's configuration, are broken.
MODEL_ENDPOINT = "model_endpoint"
AGENT_CRASH = "agent_crash"
TIMEOUT = "timeout"
OUT_OF_MEMORY = "out_of_memory"
SANDBOX_SETUP = "sandbox_setup"
ENGINE_LOST = "engine_lost"
CHECK_FAILED = "check"
INVALID_INPUT = "invalid_input"
ERROR_CAUSES = (
    MODEL_ENDPOINT,
    AGENT_CRASH,
    TIMEOUT,
    OUT_OF_MEMORY,
    SANDBOX_SETUP,
    ENGINE_LOST,
    CHECK_FAILED,
    INVALID_INPUT,
)
RETRIED_CAUSES = (MODEL_ENDPOINT, SANDBOX_SETUP, ENGINE_LOST)
"""The infrastructure's failures, which ``retry_infrastructure`` runs a trial again for: they
say nothing of the agent or the skill. A crash, a timeout or an out-of-memory kill is the
agent's own run going wrong under the scenario's limits, and is never retried (another
attempt would hide it); nor is broken input, which fails the same way every time."""


class OpenkataError(Exception):
    """The root of every error pytest-openkata raises on purpose; the message says what went
    wrong and, where it can, what to do."""

    # The kind of failure (one of ERROR_CAUSES); None: the error that caused it says, else
    # whoever catches it decides (see error_cause).
    cause: str | None = None


def error_cause(exc: BaseException, default: str) -> str:
    """The kind of failure ``exc`` is: the ``cause`` of the first error of its chain (itself,
    then what it was raised ``from``) that has one, else ``default``."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        cause = getattr(current, "cause", None)
        if isinstance(cause, str) and cause in ERROR_CAUSES:
            return cause
        current = current.__cause__
    return default


class ConfigError(OpenkataError):
    """A setting has a bad value; the message names where it came from."""

    cause = INVALID_INPUT


class BackendError(OpenkataError):
    """The model could not be asked or did not answer usably. Raised by model backends,
    agents and sandboxes, so that callers can tell an endpoint problem from a failed
    criterion, and a throttle from any other error, without reading message text."""


class EndpointStatusError(BackendError):
    """The endpoint answered with an HTTP status other than 200."""

    cause = MODEL_ENDPOINT

    def __init__(self, status: int, body: str, retry_after: float | None = None) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.body = body
        self.retry_after = retry_after

    @property
    def throttled(self) -> bool:
        return self.status == 429


class TransportError(BackendError):
    """The request did not complete: connection refused, timeout, broken connection."""

    cause = MODEL_ENDPOINT


class MalformedResponseError(BackendError):
    """The endpoint answered 200 with a body that is not a usable completion."""

    cause = MODEL_ENDPOINT


class LimitExceededError(BackendError):
    """A call went past one of the run's limits on it: its deadline (``direct_timeout``) or
    the size of its answer (``answer_max_bytes``). Such a call is not made again, neither by
    the retry policy nor by the judge's second ask: it would take the whole deadline, or send
    as much, again."""

    cause = TIMEOUT


class CallTimeoutError(LimitExceededError, TransportError):
    """The call did not complete within its deadline, whichever phase it was in (connecting,
    sending, waiting, reading the answer)."""


class AnswerTooLargeError(LimitExceededError, MalformedResponseError):
    """The answer was larger than ``answer_max_bytes``: reading it stopped there."""

    cause = MODEL_ENDPOINT


class RetryableError(BackendError):
    """An error another layer wants retried, e.g. an agent CLI that reported throttling.

    ``retry_after`` (seconds) is honoured like an HTTP Retry-After header; ``throttled`` makes
    the final message say "throttled" rather than "failed".
    """

    def __init__(
        self, message: str, *, retry_after: float | None = None, throttled: bool = False
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.throttled = throttled


class AgentConfigError(BackendError):
    """An agent cannot be built from the settings: an unknown name, an empty command."""

    cause = INVALID_INPUT


class AgentFailedError(BackendError):
    """An agent CLI could not be started or exited unsuccessfully; ``output`` is what it
    printed on standard output (an agent that prints its events tells there how it failed)."""

    cause = AGENT_CRASH

    def __init__(
        self, message: str, *, exit_status: int | None = None, stderr: str = "", output: str = ""
    ) -> None:
        super().__init__(message)
        self.exit_status = exit_status
        self.stderr = stderr
        self.output = output


class AgentNotFoundError(AgentFailedError):
    """The agent CLI's executable does not exist."""


class OutOfMemoryError(AgentFailedError):
    """The agent's sandbox ran out of the memory it was given, and the kernel killed the agent
    (Docker's ``State.OOMKilled``, or the container's cgroup counting an OOM kill)."""

    cause = OUT_OF_MEMORY


class AgentTimeoutError(LimitExceededError):
    """An agent CLI did not finish in time and was killed; ``partial_output`` is what it
    printed."""

    def __init__(
        self, message: str, *, timeout: float, partial_output: str, partial_stderr: str = ""
    ) -> None:
        super().__init__(message)
        self.timeout = timeout
        self.partial_output = partial_output
        self.partial_stderr = partial_stderr


class SandboxError(BackendError):
    """The sandbox itself failed (no engine, a missing image, a copy that failed); the message
    says which and what to do."""

    cause = SANDBOX_SETUP


class SandboxLost(SandboxError):
    """The engine behind an environment stopped answering (its host died, its daemon was
    killed): the environment and what ran in it are gone.

    ``elsewhere`` says whether the provider has other engines to run on: then the core runs
    the whole sandboxed run again on a new environment (an engine pool takes the lost engine
    out first); otherwise the scenario errors with this message."""

    cause = ENGINE_LOST

    def __init__(self, message: str, *, elsewhere: bool = False) -> None:
        super().__init__(message)
        self.elsewhere = elsewhere
