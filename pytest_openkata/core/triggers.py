"""Trigger evals: does the agent load the skill when it should, and leave it when it should not?

A skill's trigger queries are user requests, each marked should-trigger or should-not-trigger.
They are read from the skill's ``evals/`` folder in either of two formats:

- ``evals/trigger_queries.json``, a JSON list of ``{"query": TEXT, "should_trigger": BOOL}``
  objects (the format of skill-creator's description evals), taken as it is: other keys of an
  entry are ignored;
- ``evals/trigger_tests.yaml``, waza's format: ``skill`` (the skill's name),
  ``should_trigger_prompts`` and ``should_not_trigger_prompts``, lists of ``{prompt, reason,
  confidence}`` (``confidence``: ``high`` or ``medium``, optional). As waza does, an unknown
  key is an error.

Each query runs ``trigger_runs`` times with the skill installed where the agent discovers
skills, and each run's transcript says whether the skill loaded
(:mod:`pytest_openkata.core.activation`). A query passes by :class:`PassRule`; over a skill's
runs, :func:`trigger_metrics` gives precision, recall and F1 with 95 % intervals.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_openkata.contracts.errors import ConfigError
from pytest_openkata.core.activation import LOADED, UNKNOWN, Activation
from pytest_openkata.core.jsonfiles import ScenarioLoadError
from pytest_openkata.core.stats import wilson_interval_95
from pytest_openkata.infra.text import valid_unicode

__all__ = [
    "QUERIES_FILE",
    "TRIGGER_FILES",
    "WAZA_FILE",
    "Interval",
    "PassRule",
    "QueryOutcome",
    "TriggerMetrics",
    "TriggerQuery",
    "has_trigger_queries",
    "load_trigger_queries",
    "metrics_by_skill",
    "metrics_line",
    "recorded_outcomes",
    "trigger_metrics",
]

QUERIES_FILE = "trigger_queries.json"
WAZA_FILE = "trigger_tests.yaml"
TRIGGER_FILES = (QUERIES_FILE, WAZA_FILE)
_WAZA_KEYS = frozenset({"skill", "should_trigger_prompts", "should_not_trigger_prompts"})
_WAZA_PROMPT_KEYS = frozenset({"prompt", "reason", "confidence"})
_CONFIDENCES = frozenset({"", "high", "medium"})

Interval = tuple[float, float]


@dataclass(frozen=True)
class TriggerQuery:
    """One query of a skill's trigger evals. ``name`` is its pytest item's name
    (``trigger-03``: its place in the file, from 1, so that ``-k`` selects it)."""

    name: str
    query: str
    should_trigger: bool
    source: str  # the file it comes from, relative to the skill folder


def has_trigger_queries(evals_dir: Path) -> bool:
    """Whether an ``evals/`` folder holds a trigger query file."""
    return any((evals_dir / name).is_file() for name in TRIGGER_FILES)


def load_trigger_queries(skill_dir: Path) -> list[TriggerQuery]:
    """The trigger queries of the skill of ``skill_dir``, from both files when both exist
    (the JSON file's first), each valid Unicode (a ``\\ud800`` escape reads as U+FFFD).
    Raises :class:`ScenarioLoadError` naming the file and the entry for a file that cannot be
    read as its format says."""
    read: list[tuple[str, bool, str]] = []
    evals = skill_dir / "evals"
    if (evals / QUERIES_FILE).is_file():
        read += _read_queries_json(evals / QUERIES_FILE)
    if (evals / WAZA_FILE).is_file():
        read += _read_waza(evals / WAZA_FILE)
    width = max(2, len(str(len(read))))
    return [
        TriggerQuery(f"trigger-{index:0{width}d}", valid_unicode(query), should, source)
        for index, (query, should, source) in enumerate(read, 1)
    ]


def _error(path: Path, message: str, field: str | None = None) -> ScenarioLoadError:
    """An error naming the query file relative to the skill folder (no machine path)."""
    return ScenarioLoadError(path, message, field, shown=f"evals/{path.name}")


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _error(path, f"cannot be read: {exc}") from None


def _read_queries_json(path: Path) -> list[tuple[str, bool, str]]:
    source = f"evals/{QUERIES_FILE}"
    try:
        data = json.loads(_read_text(path))
    except json.JSONDecodeError as exc:
        raise _error(path, f"not valid JSON: {exc}") from None
    if not isinstance(data, list):
        raise _error(path, 'expected a JSON list of {"query", "should_trigger"}')
    found = []
    for index, entry in enumerate(data):
        where = f"entry {index}"
        if not isinstance(entry, dict):
            raise _error(path, "expected an object", where)
        query, should = entry.get("query"), entry.get("should_trigger")
        if not isinstance(query, str) or not query.strip():
            raise _error(path, "expected a non-empty string", f"{where}: query")
        if not isinstance(should, bool):
            raise _error(path, "expected true or false", f"{where}: should_trigger")
        found.append((query, should, source))
    if not found:
        raise _error(path, "holds no query")
    return found


def _read_waza(path: Path) -> list[tuple[str, bool, str]]:
    import yaml

    source = f"evals/{WAZA_FILE}"
    try:
        data = yaml.safe_load(_read_text(path))
    except yaml.YAMLError as exc:
        raise _error(path, f"not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise _error(path, "expected a mapping with skill and the prompt lists")
    unknown = sorted(str(key) for key in data if key not in _WAZA_KEYS)
    if unknown:
        known = ", ".join(sorted(_WAZA_KEYS))
        raise _error(path, f"unknown key; known keys: {known}", unknown[0])
    if not isinstance(data.get("skill"), str) or not data["skill"].strip():
        raise _error(path, "required: the skill's name", "skill")
    found = []
    for key, should in (("should_trigger_prompts", True), ("should_not_trigger_prompts", False)):
        entries = data.get(key) or []
        if not isinstance(entries, list):
            raise _error(path, "expected a list of {prompt, reason, confidence}", key)
        for index, entry in enumerate(entries):
            found.append((_waza_prompt(path, entry, f"{key}[{index}]"), should, source))
    if not found:
        raise _error(path, "holds no prompt")
    return found


def _waza_prompt(path: Path, entry: Any, where: str) -> str:
    if not isinstance(entry, dict):
        raise _error(path, "expected a mapping with prompt", where)
    unknown = sorted(str(key) for key in entry if key not in _WAZA_PROMPT_KEYS)
    if unknown:
        raise _error(path, "unknown key; known: prompt, reason, confidence", where)
    prompt = entry.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise _error(path, "required: a non-empty string", f"{where}.prompt")
    confidence = entry.get("confidence") or ""
    if confidence not in _CONFIDENCES:
        raise _error(path, "expected high or medium", f"{where}.confidence")
    return prompt


@dataclass(frozen=True)
class PassRule:
    """When a query passes: a should-trigger query loads the skill in at least ``needed``
    of its ``runs``, a should-not-trigger one in at most ``allowed``."""

    runs: int = 3
    needed: int = 2
    allowed: int = 1

    def __post_init__(self) -> None:
        if self.runs < 1:
            raise ConfigError(f"trigger_runs must be at least 1, got {self.runs}")
        if not 0 <= self.needed <= self.runs:
            raise ConfigError(
                f"trigger_loads_needed {self.needed} is more than the trigger_runs "
                f"{self.runs}: no query could pass"
            )
        if not 0 <= self.allowed <= self.runs:
            raise ConfigError(
                f"trigger_loads_allowed {self.allowed} is more than the trigger_runs {self.runs}"
            )

    def passes(self, should_trigger: bool, loads: int) -> bool:
        return loads >= self.needed if should_trigger else loads <= self.allowed

    def text(self, should_trigger: bool) -> str:
        """What the rule asks of such a query: ``loads in at least 2 of 3 runs``."""
        if should_trigger:
            return f"loads in at least {self.needed} of {self.runs} runs"
        return f"loads in at most {self.allowed} of {self.runs} runs"


@dataclass(frozen=True)
class QueryOutcome:
    """How a query's runs went: each run's activation, in order, and the rule's verdict."""

    skill: str  # the skill folder relative to the rootdir
    name: str
    query: str
    should_trigger: bool
    activations: tuple[Activation, ...]
    passed: bool

    @property
    def loads(self) -> int:
        return sum(1 for state in self.activations if state == LOADED)

    def to_dict(self) -> dict[str, Any]:
        return {
            "skill": self.skill,
            "name": self.name,
            "query": self.query,
            "should_trigger": self.should_trigger,
            "activations": list(self.activations),
            "loads": self.loads,
            "runs": len(self.activations),
            "passed": self.passed,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QueryOutcome:
        states = tuple(data["activations"])
        if any(state == UNKNOWN for state in states):
            raise ValueError("a recorded trigger outcome holds an unknown activation")
        return cls(
            str(data["skill"]),
            str(data["name"]),
            str(data["query"]),
            bool(data["should_trigger"]),
            states,
            bool(data["passed"]),
        )


@dataclass(frozen=True)
class TriggerMetrics:
    """A skill's trigger evals over all their runs: each run of a should-trigger query that
    loaded the skill is a true positive, one that did not a false negative; each run of a
    should-not-trigger query that loaded it a false positive, one that did not a true
    negative. A metric with nothing to count (no run loaded the skill: no precision) is None.

    The precision and recall intervals are Wilson's at 95 %. F1 grows with both, so its
    interval is F1 of the two lower bounds to F1 of the two upper bounds: it holds at least
    when both others do (90 % or more)."""

    skill: str
    queries: int
    passed: int
    true_positives: int
    false_positives: int
    false_negatives: int
    true_negatives: int
    precision: float | None
    recall: float | None
    f1: float | None
    precision_ci95: Interval | None
    recall_ci95: Interval | None
    f1_ci: Interval | None

    def to_dict(self) -> dict[str, Any]:
        def pair(interval: Interval | None) -> list[float] | None:
            return None if interval is None else [interval[0], interval[1]]

        return {
            "skill": self.skill,
            "queries": self.queries,
            "passed": self.passed,
            "true_positives": self.true_positives,
            "false_positives": self.false_positives,
            "false_negatives": self.false_negatives,
            "true_negatives": self.true_negatives,
            "precision": self.precision,
            "recall": self.recall,
            "f1": self.f1,
            "precision_ci95": pair(self.precision_ci95),
            "recall_ci95": pair(self.recall_ci95),
            "f1_ci": pair(self.f1_ci),
        }


def _f1(precision: float | None, recall: float | None) -> float | None:
    if precision is None or recall is None:
        return None
    if precision + recall == 0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def trigger_metrics(skill: str, outcomes: Sequence[QueryOutcome]) -> TriggerMetrics:
    """Precision, recall and F1 of a skill's query outcomes, counted over their runs."""
    tp = sum(o.loads for o in outcomes if o.should_trigger)
    fn = sum(len(o.activations) - o.loads for o in outcomes if o.should_trigger)
    fp = sum(o.loads for o in outcomes if not o.should_trigger)
    tn = sum(len(o.activations) - o.loads for o in outcomes if not o.should_trigger)
    precision, recall = _ratio(tp, tp + fp), _ratio(tp, tp + fn)
    precision_ci, recall_ci = wilson_interval_95(tp, tp + fp), wilson_interval_95(tp, tp + fn)
    f1_ci = None
    if precision_ci is not None and recall_ci is not None:
        low, high = _f1(precision_ci[0], recall_ci[0]), _f1(precision_ci[1], recall_ci[1])
        f1_ci = (low or 0.0, high or 0.0)
    return TriggerMetrics(
        skill=skill,
        queries=len(outcomes),
        passed=sum(1 for o in outcomes if o.passed),
        true_positives=tp,
        false_positives=fp,
        false_negatives=fn,
        true_negatives=tn,
        precision=precision,
        recall=recall,
        f1=_f1(precision, recall),
        precision_ci95=precision_ci,
        recall_ci95=recall_ci,
        f1_ci=f1_ci,
    )


def recorded_outcomes(records: Iterable[Mapping[str, Any]]) -> list[QueryOutcome]:
    """The query outcomes a run log holds (its ``trigger_query`` records), those that can be
    read: a report made from a log shows what the log holds and never fails on a record."""
    outcomes = []
    for record in records:
        try:
            outcomes.append(QueryOutcome.from_dict(record))
        except (KeyError, TypeError, ValueError):
            continue
    return outcomes


def metrics_by_skill(outcomes: Iterable[QueryOutcome]) -> list[TriggerMetrics]:
    """:func:`trigger_metrics` of each skill of ``outcomes``, by skill folder."""
    by_skill: dict[str, list[QueryOutcome]] = {}
    for outcome in outcomes:
        by_skill.setdefault(outcome.skill, []).append(outcome)
    return [trigger_metrics(skill, found) for skill, found in sorted(by_skill.items())]


def _shown(value: float | None) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.2f}"


def metrics_line(metrics: TriggerMetrics) -> str:
    """One line of the terminal summary: ``skills/x: 5 of 6 queries passed; precision 0.83
    [0.44, 0.97], recall ...``."""

    def with_interval(value: float | None, interval: Interval | None) -> str:
        if interval is None:
            return _shown(value)
        return f"{_shown(value)} [{_shown(interval[0])}, {_shown(interval[1])}]"

    return (
        f"{metrics.skill}: {metrics.passed} of {metrics.queries} trigger queries passed; "
        f"precision {with_interval(metrics.precision, metrics.precision_ci95)}, "
        f"recall {with_interval(metrics.recall, metrics.recall_ci95)}, "
        f"F1 {with_interval(metrics.f1, metrics.f1_ci)}"
    )
