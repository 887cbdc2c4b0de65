"""The one representation of a result, from a scenario run to scoring, summaries and every
reporter: plain frozen dataclasses that every layer shares.

A :class:`ScenarioResult` converts to and from JSON-able dicts (:meth:`~ScenarioResult.to_dict`,
:meth:`~ScenarioResult.from_dict`) for the pytest adapter's xdist transport. The workspace's
files as a sandboxed trial left them (:class:`FileContent`, :class:`WorkspaceDiff`,
:class:`FileChange`) and a scenario's trial statistics (:class:`TrialStats`) are part of it;
the code that makes them lives in ``core`` (``core.workspace``, ``core.stats``).
"""

from __future__ import annotations

import codecs
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any, TypeVar

from pytest_openkata.contracts.text import GO_REPLACE
from pytest_openkata.contracts.transcripts import Transcript

__all__ = [
    "BINARY_SNIFF_BYTES",
    "ERROR_KINDS",
    "INFRASTRUCTURE_ERROR",
    "PAIRWISE_BASELINE",
    "PAIRWISE_SKILL",
    "PAIRWISE_TIE",
    "SCENARIO_ERROR",
    "SETTLED_ABOVE",
    "SETTLED_BELOW",
    "SKILL_ERROR",
    "UNSETTLED",
    "AgentResult",
    "Attempt",
    "AutoTrials",
    "CallStats",
    "CriterionResult",
    "FileChange",
    "FileContent",
    "PairwiseTrial",
    "PairwiseVerdict",
    "ScenarioResult",
    "Snapshot",
    "TrialEnvironment",
    "TrialResult",
    "TrialStats",
    "TrialTrace",
    "Turn",
    "Usage",
    "Verdict",
    "WorkspaceDiff",
    "engines_of",
]

BINARY_SNIFF_BYTES = 8192


@dataclass(frozen=True)
class FileContent:
    """A file's bytes as snapshotted: all of them, or the first ones when ``truncated``.

    ``full_size`` is the file's real size (it defaults to ``len(data)``); ``sha256`` is the hex
    digest of the full content, set for truncated files only. Equality compares all fields.
    """

    data: bytes
    truncated: bool = False
    full_size: int = -1
    sha256: str | None = None

    def __post_init__(self) -> None:
        if self.full_size < 0:
            object.__setattr__(self, "full_size", len(self.data))
        if self.full_size < len(self.data):
            raise ValueError(f"full_size {self.full_size} < {len(self.data)} bytes held")

    @property
    def size(self) -> int:
        """The number of bytes held (``full_size`` is the file's real size)."""
        return len(self.data)

    @cached_property
    def is_binary(self) -> bool:
        """A NUL byte in the first 8 KiB, or bytes that are not UTF-8. A multi-byte character
        cut by the truncation at the very end does not count as invalid."""
        if b"\0" in self.data[:BINARY_SNIFF_BYTES]:
            return True
        try:
            _utf8_decoder("strict").decode(self.data, final=not self.truncated)
        except UnicodeDecodeError:
            return True
        return False

    @cached_property
    def text(self) -> str:
        """The content decoded as UTF-8, each invalid byte one U+FFFD as in the reference's
        judge text; a character cut by the truncation at the very end is dropped."""
        return _utf8_decoder(GO_REPLACE).decode(self.data, final=not self.truncated)


Snapshot = dict[str, FileContent]


def _utf8_decoder(errors: str) -> codecs.IncrementalDecoder:
    return codecs.getincrementaldecoder("utf-8")(errors)


@dataclass(frozen=True)
class WorkspaceDiff:
    """Files added, modified (with their new content), deleted and unchanged, each by path."""

    added: list[tuple[str, FileContent]] = field(default_factory=list)
    modified: list[tuple[str, FileContent]] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    @property
    def has_changes(self) -> bool:
        return bool(self.added or self.modified or self.deleted)


@dataclass(frozen=True)
class FileChange:
    """One workspace file the agent added, modified or deleted: a unified diff of its text,
    or a note where there is no text to show (a binary file, one cut at the snapshot's cap)."""

    path: str
    status: str  # "added", "modified" or "deleted"
    diff: str


@dataclass(frozen=True)
class TrialStats:
    """Summary of the repeated trials of one scenario (see :func:`trial_stats`)."""

    trials: int
    mean: float
    stdev: float
    ci95: tuple[float, float] | None
    passes: int
    pass_at_k: dict[int, float]
    pass_hat_k: dict[int, float]


# How ``trials = auto`` ended for a scenario: its mean's interval lay wholly at or above the
# threshold, wholly below it, or neither (the maximum was reached, or a trial errored).
SETTLED_ABOVE = "above"
SETTLED_BELOW = "below"
UNSETTLED = ""


@dataclass(frozen=True)
class AutoTrials:
    """How ``trials = auto`` ran a scenario: at most ``maximum`` trials, stopped once the
    ``confidence`` interval of the mean percentage lay wholly on one side of ``threshold``;
    ``settled`` says which side (:data:`SETTLED_ABOVE`, :data:`SETTLED_BELOW`) or that it did
    not settle (:data:`UNSETTLED`). Kept so that the reports can state the trials saved."""

    maximum: int
    confidence: float
    threshold: float
    settled: str = UNSETTLED

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AutoTrials:
        """Read back from a run log; ``TypeError``/``ValueError`` for a malformed record."""
        maximum, confidence, threshold = data["maximum"], data["confidence"], data["threshold"]
        settled = data.get("settled", UNSETTLED)
        if not (isinstance(maximum, int) and not isinstance(maximum, bool) and maximum >= 1):
            raise ValueError(f"auto_trials maximum must be a whole number >= 1, not {maximum!r}")
        for name, value in (("confidence", confidence), ("threshold", threshold)):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"auto_trials {name} must be a number, not {value!r}")
        if settled not in (SETTLED_ABOVE, SETTLED_BELOW, UNSETTLED):
            raise ValueError(f"auto_trials settled must be above, below or empty, not {settled!r}")
        return cls(maximum, float(confidence), float(threshold), settled)


_N = TypeVar("_N", int, float)

# Why a trial errored (``TrialResult.error_kind``): its scenario's files or the run's own
# configuration are broken; the skill itself is (its SKILL.md, or a tile's tile.json, is
# missing or cannot be read); or something the run depends on failed (an endpoint, the judge,
# an agent CLI, the sandbox engine, a check that could not run). A run whose scenarios errored
# for the last reason holds back its report, and one whose skill is broken writes none (see
# the results JSON reporter).
SCENARIO_ERROR = "scenario"
SKILL_ERROR = "skill"
INFRASTRUCTURE_ERROR = "infrastructure"
ERROR_KINDS = (SCENARIO_ERROR, SKILL_ERROR, INFRASTRUCTURE_ERROR)


@dataclass(frozen=True)
class Verdict:
    """One judge verdict as parsed from the judge's answer."""

    name: str
    passed: bool
    reason: str = ""


@dataclass(frozen=True)
class CriterionResult:
    name: str
    passed: bool
    score: int
    max_score: int
    reason: str
    # With several judge votes or trials: how many passed, of how many.
    votes: tuple[int, int] | None = None
    # Who gave the verdict: the judge (criteria.json) or a deterministic check (checks.json).
    kind: str = "judge"
    # The criterion's ``category`` in criteria.json (Tessl's ``INTENT``, ``QUALITY``...), or "".
    category: str = ""

    @classmethod
    def judged(
        cls,
        name: str,
        max_score: int,
        passed: bool,
        reason: str,
        votes: tuple[int, int] | None = None,
        *,
        category: str = "",
    ) -> CriterionResult:
        """A judged criterion: all of its points when it passed, none otherwise."""
        score = max_score if passed else 0
        return cls(name, passed, score, max_score, reason, votes, category=category)


@dataclass(frozen=True)
class CallStats:
    """The model calls of one role (agent or judge): live calls and calls answered from the
    cache, tokens, seconds and cost of the live ones (None: not reported or not priced), and
    the model ids the endpoint reported answering the live ones with, each once."""

    calls: int = 0
    cached: int = 0
    input_tokens: int | None = None
    output_tokens: int | None = None
    seconds: float = 0.0
    cost_usd: float | None = None
    models: tuple[str, ...] = ()

    def __add__(self, other: CallStats) -> CallStats:
        return CallStats(
            calls=self.calls + other.calls,
            cached=self.cached + other.cached,
            input_tokens=_add(self.input_tokens, other.input_tokens),
            output_tokens=_add(self.output_tokens, other.output_tokens),
            seconds=self.seconds + other.seconds,
            cost_usd=_add(self.cost_usd, other.cost_usd),
            models=tuple(dict.fromkeys((*self.models, *other.models))),
        )

    @property
    def empty(self) -> bool:
        return self.calls == 0 and self.cached == 0


def _add(left: _N | None, right: _N | None) -> _N | None:
    if left is None:
        return right
    if right is None:
        return left
    return left + right


@dataclass(frozen=True)
class Usage:
    agent: CallStats = CallStats()
    judge: CallStats = CallStats()

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.agent + other.agent, self.judge + other.judge)


@dataclass(frozen=True)
class Turn:
    """One exchange of a conversation with the agent: what the user said (the task for the
    first turn, then each follow-up) and what the agent answered to it."""

    user: str
    agent: str


@dataclass(frozen=True)
class AgentResult:
    """What the agent of one trial produced, as graders see it.

    ``text`` is what the judge reads: a direct agent's answer, or for a sandboxed agent the
    reference's judge text (its output, then the workspace changes). ``output`` is what the
    agent printed; ``changes`` is the workspace diff of a sandboxed run (None for a direct
    one); ``cached`` says the result came from the cache.
    """

    text: str
    output: str
    changes: WorkspaceDiff | None = None
    cached: bool = False
    # The sandbox engine the agent ran on (named in a pool; "" otherwise), and the engines
    # lost under this run before it, each "engine <name>: why".
    engine: str = ""
    lost_engines: tuple[str, ...] = ()
    # How the agent worked, where it said so (its events), else None.
    transcript: Transcript | None = None
    # What a sandboxed agent's environment was given and ran (None for a direct agent and
    # from the cache).
    environment: TrialEnvironment | None = None
    # Every turn of a conversation with follow-ups (the last one's answer is the final
    # answer); empty for a one-turn trial.
    turns: tuple[Turn, ...] = ()


@dataclass(frozen=True)
class TrialTrace:
    """What one trial saw and did besides its verdicts, kept so that an author can see why a
    criterion failed: the run log and the HTML, Markdown and pytest reports show it.

    ``output`` is the agent's final output; ``judged`` is what the judge read where it is not
    ``output`` (a sandboxed run adds the workspace changes); ``changes`` the workspace diff;
    ``answers`` each grader's raw answers by grader name (the judge's verdicts per vote, the
    command checks' outcomes); ``seconds`` the trial's wall time. ``engine`` is the engine of
    an engine pool the sandboxed agent ran on ("" without a pool or from the cache), and
    ``lost_engines`` the engines that failed under the trial before it ("engine <name>: why").
    ``transcript`` is how the agent worked, where its events said so (None otherwise).
    ``skill_delivery`` is how the skill reached the agent.
    ``turns`` is the conversation of a trial with follow-ups (empty for one turn).
    """

    output: str = ""
    judged: str | None = None
    changes: tuple[FileChange, ...] = ()
    answers: dict[str, list[Any]] = field(default_factory=dict)
    seconds: float = 0.0
    engine: str = ""
    lost_engines: tuple[str, ...] = ()
    transcript: Transcript | None = None
    # How the skill reached the agent: "prompt" (pasted into it) or "installed" (where the
    # agent discovers skills; :mod:`pytest_openkata.core.skill_delivery`).
    skill_delivery: str = "prompt"
    turns: tuple[Turn, ...] = ()


@dataclass(frozen=True)
class TrialEnvironment:
    """What a sandboxed trial ran with: the CPUs and memory (MiB) its sandbox was given (None:
    the provider's defaults, which ``cpus_default``/``memory_default`` tell), the agent CLI's
    version as the CLI itself reports it ("" when it could not tell), the sandbox image's
    id (its content digest, ``sha256:...``; "" when unknown), and the working folder the
    agent ran in, which held the workspace (``/workspace``, or the WORKDIR a scenario's own
    image sets; "" in records made before it was kept)."""

    cpus: float | None = None
    memory_mb: int | None = None
    agent_version: str = ""
    image_id: str = ""
    workdir: str = ""


@dataclass(frozen=True)
class Attempt:
    """An earlier attempt of a trial that errored for the infrastructure
    (``retry_infrastructure``) and was run again: its 1-based number, why it errored and
    what kind of failure that was (``contracts.errors.ERROR_CAUSES``), and its wall time."""

    number: int
    error: str
    cause: str
    seconds: float = 0.0


# Which arm's answer met a criterion better in a pairwise comparison (after unblinding).
PAIRWISE_SKILL = "skill"
PAIRWISE_BASELINE = "baseline"
PAIRWISE_TIE = "tie"


@dataclass(frozen=True)
class PairwiseVerdict:
    """One criterion of a trial compared side by side by the judge, in both orders: which
    arm's answer met it better (:data:`PAIRWISE_SKILL`, :data:`PAIRWISE_BASELINE` or
    :data:`PAIRWISE_TIE`, unblinded) when the skill's answer was shown first, and when the
    baseline's was, each with the judge's reason."""

    name: str
    skill_first: str
    baseline_first: str
    skill_first_reason: str = ""
    baseline_first_reason: str = ""

    @property
    def agrees(self) -> bool:
        """Whether the judge said the same in both orders (else the order swayed it)."""
        return self.skill_first == self.baseline_first

    @property
    def outcome(self) -> str:
        """What the comparison counts: the judge's word when both orders agree, else a tie
        (an answer that wins only where it is shown in one place has not won)."""
        return self.skill_first if self.agrees else PAIRWISE_TIE


@dataclass(frozen=True)
class PairwiseTrial:
    """The pairwise comparison of one trial's two arms (``--eval-judge-pairwise``): every
    criterion's verdicts in both orders, or the error that left it without them, and the
    usage of its judge calls (kept apart from the per-arm grading's)."""

    verdicts: tuple[PairwiseVerdict, ...] = ()
    error: str | None = None
    usage: CallStats = CallStats()


@dataclass(frozen=True)
class TrialResult:
    """One run of a scenario: agent, judge votes, score."""

    index: int  # 1-based
    criteria: list[CriterionResult] | None
    score: int
    max_score: int
    percentage: float
    passed: bool
    error: str | None = None
    agent_output: str | None = None
    agent_cached: bool = False
    judge_cached: int = 0  # judge votes answered from the cache
    judge_errors: int = 0
    usage: Usage = Usage()
    trace: TrialTrace | None = None
    # One of ERROR_KINDS for an errored trial, else "".
    error_kind: str = ""
    # What kind of failure it was (one of contracts.errors.ERROR_CAUSES), else "".
    error_cause: str = ""
    # The attempts before this one, which errored for the infrastructure and were run again.
    attempts: tuple[Attempt, ...] = ()
    # What a sandboxed trial ran with (None for a direct one).
    environment: TrialEnvironment | None = None
    # The own arm's trial compared side by side with its baseline arm's trial of the same
    # index (``--eval-judge-pairwise``); None when no pairwise comparison was asked for.
    pairwise: PairwiseTrial | None = None
    # A re-judged trial's agent calls as the recorded run made them (its answer came from
    # that run's log): where the answer came from, not what this run spent (``usage`` holds
    # only this run's calls). None for a trial whose agent ran in this run or the cache.
    recorded_agent: CallStats | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialResult:
        """A trial from the dict :func:`dataclasses.asdict` made of one."""
        return _trial(data)

    @property
    def engine(self) -> str:
        return "" if self.trace is None else self.trace.engine

    @property
    def lost_engines(self) -> tuple[str, ...]:
        return () if self.trace is None else self.trace.lost_engines


def engines_of(trials: Sequence[TrialResult]) -> str:
    """The engines ``trials`` ran on, in order, once each, joined by ", "."""
    return ", ".join(dict.fromkeys(t.engine for t in trials if t.engine))


@dataclass(frozen=True)
class ScenarioResult:
    """The outcome of one scenario, in the shape of the reference's results JSON entry.

    ``criteria`` is ``None`` for an errored scenario (``null`` in the report), and ``error``
    carries the error text on its own so that an error can be told apart from a real 0 %.
    With several trials, ``percentage`` is their mean and ``trials``/``stats`` hold the rest.
    """

    skill: str
    skill_dir: str
    name: str
    description: str
    criteria: list[CriterionResult] | None
    score: int
    max_score: int
    percentage: float
    passed: bool
    error: str | None = None
    # What a timed-out sandboxed agent printed and changed, kept for the report.
    agent_output: str | None = None
    skill_scenarios: list[str] = field(default_factory=list)
    trials: list[TrialResult] = field(default_factory=list)
    stats: TrialStats | None = None
    usage: Usage = Usage()
    # The arm this result is of: "" for the run's own, else a baseline arm's name
    # (:mod:`pytest_openkata.core.arms`); a result of the own arm carries its baseline's.
    arm: str = ""
    baseline: ScenarioResult | None = None
    # The scenario's task.md as the agent got it (secrets masked), for the reports that show it.
    task: str = ""
    # sha256 of what the arm ran: its prompt, task, criteria, checks and inputs
    # (:func:`pytest_openkata.core.scenario.scenario_digests`); empty when it could not load.
    digests: dict[str, str] = field(default_factory=dict)
    # How ``trials = auto`` ran it; None when its number of trials was fixed.
    auto_trials: AutoTrials | None = None

    @property
    def trials_saved(self) -> int:
        """Trials that ``trials = auto`` did not need to run, against its maximum (0 with a
        fixed number of trials, and for a scenario the run's budget stopped before it settled:
        those trials were not saved, only not paid for)."""
        if self.auto_trials is None:
            return 0
        if self.budget_cut:
            return 0
        return max(self.auto_trials.maximum - len(self.trials), 0)

    @property
    def budget_cut(self) -> bool:
        """Whether ``trials = auto`` stopped before it settled, reached its maximum or met an
        error: only the run's budget stops trials so."""
        auto = self.auto_trials
        return (
            auto is not None
            and auto.settled == UNSETTLED
            and len(self.trials) < auto.maximum
            and not any(trial.error is not None for trial in self.trials)
        )

    @property
    def judge_errors(self) -> int:
        return sum(trial.judge_errors for trial in self.trials)

    @property
    def engine(self) -> str:
        """The engines of a pool its trials ran on, in order, once each ("" without a pool)."""
        return engines_of(self.trials)

    @property
    def lost_engines(self) -> tuple[str, ...]:
        """The engines that failed under its trials, which then ran again elsewhere."""
        return tuple(lost for trial in self.trials for lost in trial.lost_engines)

    @property
    def error_kind(self) -> str:
        """Why the first errored trial errored (``""`` when none did)."""
        return next((t.error_kind for t in self.trials if t.error is not None), "")

    @property
    def error_cause(self) -> str:
        """What kind of failure the first errored trial had (``""`` when none errored)."""
        return next((t.error_cause for t in self.trials if t.error is not None), "")

    @property
    def skill_errors(self) -> int:
        """Trials that errored because the skill itself is broken (:data:`SKILL_ERROR`)."""
        return sum(1 for trial in self.trials if trial.error_kind == SKILL_ERROR)

    @property
    def retried_attempts(self) -> int:
        """Attempts of its trials that errored for the infrastructure and were run again."""
        return sum(len(trial.attempts) for trial in self.trials)

    @property
    def infrastructure_errors(self) -> int:
        """Trials that errored because something the run depends on failed, not the scenario."""
        return sum(1 for trial in self.trials if trial.error_kind == INFRASTRUCTURE_ERROR)

    @property
    def plain_description(self) -> str:
        """The description without the ``(error: ...)`` the reference appends to an errored
        scenario's: the views that show the error on its own show this."""
        if self.criteria is None and self.error is not None:
            return self.description.removesuffix(f" (error: {self.error})")
        return self.description

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScenarioResult:
        stats = data.get("stats")
        baseline = data.get("baseline")
        auto = data.get("auto_trials")
        return cls(
            **{
                **data,
                "auto_trials": None if auto is None else AutoTrials.from_dict(auto),
                "criteria": _criteria(data.get("criteria")),
                "trials": [_trial(t) for t in data.get("trials", ())],
                "stats": None if stats is None else _stats(stats),
                "usage": _usage(data.get("usage")),
                "baseline": None if baseline is None else cls.from_dict(baseline),
            }
        )


def _criteria(data: list[dict[str, Any]] | None) -> list[CriterionResult] | None:
    if data is None:
        return None
    return [
        CriterionResult(**{**c, "votes": None if c.get("votes") is None else tuple(c["votes"])})
        for c in data
    ]


def _usage(data: dict[str, Any] | None) -> Usage:
    if data is None:
        return Usage()
    return Usage(_call_stats(data["agent"]), _call_stats(data["judge"]))


def _call_stats(data: dict[str, Any]) -> CallStats:
    return CallStats(**{**data, "models": tuple(data.get("models", ()))})


def _trace(data: dict[str, Any] | None) -> TrialTrace | None:
    if data is None:
        return None
    changes = tuple(FileChange(**change) for change in data.get("changes", ()))
    lost = tuple(data.get("lost_engines", ()))
    told = data.get("transcript")
    transcript = None if told is None else Transcript.from_dict(told)
    turns = tuple(Turn(**turn) for turn in data.get("turns", ()))
    answers = data.get("answers", {})
    if not isinstance(answers, dict) or not all(
        isinstance(a, list | tuple) for a in answers.values()
    ):
        raise TypeError("a trace's answers must be an object of lists by grader")
    return TrialTrace(
        **{
            **data,
            "answers": answers,
            "changes": changes,
            "lost_engines": lost,
            "transcript": transcript,
            "turns": turns,
        }
    )


def _pairwise(data: dict[str, Any] | None) -> PairwiseTrial | None:
    if data is None:
        return None
    return PairwiseTrial(
        verdicts=tuple(PairwiseVerdict(**verdict) for verdict in data.get("verdicts", ())),
        error=data.get("error"),
        usage=CallStats(**data.get("usage", {})),
    )


def _trial(data: dict[str, Any]) -> TrialResult:
    environment = data.get("environment")
    return TrialResult(
        **{
            **data,
            "criteria": _criteria(data.get("criteria")),
            "usage": _usage(data["usage"]),
            "trace": _trace(data.get("trace")),
            "attempts": tuple(Attempt(**attempt) for attempt in data.get("attempts", ())),
            "environment": None if environment is None else TrialEnvironment(**environment),
            "pairwise": _pairwise(data.get("pairwise")),
            "recorded_agent": (
                None if data.get("recorded_agent") is None else _call_stats(data["recorded_agent"])
            ),
        }
    )


def _stats(data: dict[str, Any]) -> TrialStats:
    ci95 = data.get("ci95")
    return TrialStats(
        **{
            **data,
            "ci95": None if ci95 is None else (ci95[0], ci95[1]),
            # JSON object keys are strings; k is an int in memory.
            "pass_at_k": {int(k): v for k, v in data["pass_at_k"].items()},
            "pass_hat_k": {int(k): v for k, v in data["pass_hat_k"].items()},
        }
    )
