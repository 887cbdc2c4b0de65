"""Shards of a run for CI matrices: which scenarios a shard runs, what it leaves for the merge,
and the merge itself.

``--eval-shard I/N`` runs the I-th of N stable, balanced parts of the selected scenarios:
sorted by their node ids (so by skill, then scenario), the k-th goes to shard ``k mod N``, so
that the scenarios of a skill are spread over the shards and the parts differ by one at most.
Each shard leaves one file in the shard folder: its run log (:mod:`.runlog`), whose ``shard``
record says which shard it is, what was selected before sharding, the settings and skill
versions it ran with, the plugin's version and how many ordinary tests failed.

The merge reads every shard's file, checks that they are the N parts of one run (each index
once, the same N, selection, settings, skill versions and plugin version, every selected
scenario run exactly once) and that every trial record holds together, and gives the results,
settings and finishing time from which the reporters write what the unsharded run writes.

A shard's file crossed a CI job's artifacts and may have been edited or mangled on the way;
what it holds becomes published results and a gate, so a record that does not hold together
is refused with its file and line: a trial (skill, scenario, arm, number) given twice, in one
shard or in two; trials not numbered 1..n, or more or fewer than the run ran (the scenario's
own ``trials`` in its scenario.json in the checkout, else the ``trials`` setting; one errored
trial for an arm that could not be set up); figures that contradict each other
(:func:`~pytest_openkata.core.trials.trial_contradiction`); an arm the settings did not ask
for, or a baseline arm without its scenario's own; scenario fields (description, digests,
task...) that differ between the trials of one arm.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.contracts.errors import OpenkataError
from pytest_openkata.contracts.results import ScenarioResult
from pytest_openkata.core.manifest import (
    MERGE,
    Drift,
    DriftError,
    Manifest,
    check_drift,
    command_digest,
    compare_manifests,
    merged_manifest,
)
from pytest_openkata.core.runlog import LoggedRun, LoggedTrial, arm_name
from pytest_openkata.core.spending import BUDGET_EXTRA, merged_spending, spending_problem
from pytest_openkata.core.trials import trial_contradiction
from pytest_openkata.infra.text import visible

__all__ = [
    "SHARD_EXTRA",
    "MergedRun",
    "ShardError",
    "ShardRecord",
    "ShardSpec",
    "merge_shards",
    "recorded_settings",
    "shard_items",
]

T = TypeVar("T")

SHARD_EXTRA = "shard"  # the kind of a shard's record in its run log
SHARD_FILE = re.compile(r"shard-(?P<index>[0-9]+)-of-(?P<count>[0-9]+)(?:-[0-9]+)?\.jsonl")

# Settings that may differ between the jobs of one run without changing a result or a report:
# how fast and where the sandboxes ran, the cache, and the settings' sources.
_PER_JOB = frozenset({"sources", "concurrency", "max_in_flight", "log_keep", "live_log", "retry"})
# Kept for the merged run's log, but free to differ between jobs (a job with a warm cache).
_NOT_COMPARED = frozenset({"cache"})
_PER_JOB_SANDBOX = frozenset({"hosts", "per_host", "tls_cert_path", "mounts"})
_SECRETS = {"http": "api_key", "anthropic": "api_key"}


class ShardError(OpenkataError):
    """Shards that cannot be merged; the message says which and why."""


@dataclass(frozen=True)
class ShardSpec:
    """The ``index``-th (from 1) of ``count`` shards."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> ShardSpec:
        """``I/N`` with 1 <= I <= N; :class:`ValueError` otherwise."""
        index, sep, count = text.strip().partition("/")
        if not (sep and index.isdigit() and count.isdigit()):
            raise ValueError(f"{text!r} is not I/N (e.g. 2/4: the second of four shards)")
        spec = cls(int(index), int(count))
        if not 1 <= spec.index <= spec.count:
            raise ValueError(f"{text!r}: I must be from 1 to N")
        return spec

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @property
    def file_name(self) -> str:
        return f"shard-{self.index}-of-{self.count}.jsonl"


def shard_items(items: Sequence[T], key: Callable[[T], str], spec: ShardSpec) -> list[T]:
    """The items of shard ``spec``, in their given order: sorted by ``key`` (a node id), the
    k-th item goes to shard ``k mod count`` (+1)."""
    ordered = sorted(range(len(items)), key=lambda i: key(items[i]))
    mine = {index for k, index in enumerate(ordered) if k % spec.count == spec.index - 1}
    return [item for index, item in enumerate(items) if index in mine]


def recorded_settings(settings: EvalSettings) -> dict[str, Any]:
    """The settings a shard records for the merge: without secrets, and without what may
    differ between the jobs of one run (concurrency, the cache, where sandboxes ran). The
    agent command is its digest, as the manifest records it: a command line may hold a
    secret, and the merge only compares it."""
    data = settings.model_dump(mode="json")
    data["agent_command"] = command_digest(settings.agent_command)
    for section, key in _SECRETS.items():
        data[section].pop(key, None)
    for key in _PER_JOB:
        data.pop(key, None)
    for key in _PER_JOB_SANDBOX:
        data["sandbox"].pop(key, None)
    return data


Scenario = tuple[str, str]  # (skill folder relative to the rootdir, scenario name)


@dataclass(frozen=True)
class ShardRecord:
    """What a shard records for the merge besides its results."""

    spec: ShardSpec
    plugin_version: str
    settings: Mapping[str, Any]
    skill_versions: Mapping[str, str]  # relative skill folder -> version
    selected: tuple[Scenario, ...]  # every scenario selected, before sharding
    failed: int = 0  # ordinary tests (not scenarios) that failed
    partial: bool = False  # the run counted every skill as partial (--eval-partial, a category)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.spec.index,
            "count": self.spec.count,
            "plugin_version": self.plugin_version,
            "settings": dict(self.settings),
            "skill_versions": dict(self.skill_versions),
            "selected": [list(scenario) for scenario in self.selected],
            "failed": self.failed,
            "partial": self.partial,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ShardRecord:
        return cls(
            spec=ShardSpec(int(data["index"]), int(data["count"])),
            plugin_version=str(data["plugin_version"]),
            settings=dict(data["settings"]),
            skill_versions={str(k): str(v) for k, v in data["skill_versions"].items()},
            selected=tuple((str(skill), str(name)) for skill, name in data["selected"]),
            failed=int(data.get("failed", 0)),
            partial=bool(data.get("partial", False)),
        )


@dataclass(frozen=True)
class MergedRun:
    """The run the shards make together."""

    results: list[ScenarioResult]
    settings: EvalSettings
    finished_at: datetime  # the last shard's
    failed: int  # ordinary tests that failed, over every shard
    partial: bool
    count: int  # shards
    # The shards' budget record together (core.spending; None: they ran without a budget).
    spending: Mapping[str, Any] | None = None
    # What differed between the shards' manifests (empty: nothing), allowed by allow_drift.
    drifts: tuple[Drift, ...] = ()
    # The recorded run the shards re-judged (their run record's ``rejudged_from``), or None.
    rejudged_from: Mapping[str, Any] | None = None

    @property
    def budget_reached(self) -> bool:
        return self.spending is not None and bool(self.spending["reached"])


def _record(source: str, run: LoggedRun) -> ShardRecord:
    records = run.extras.get(SHARD_EXTRA, [])
    if len(records) != 1:
        raise ShardError(f"{source}: not a shard's run log (it has no shard record)")
    try:
        return ShardRecord.from_dict(records[0])
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ShardError(f"{source}: its shard record cannot be read: {exc!r}") from exc


def _finished(source: str, run: LoggedRun) -> datetime:
    try:
        moment = datetime.strptime(run.info.finished_at, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError as exc:
        raise ShardError(f"{source}: its finishing time cannot be read: {exc}") from exc
    return moment.replace(tzinfo=UTC)


def _one_each(shards: Sequence[tuple[str, ShardRecord]]) -> int:
    """The shard count, when every shard of it is there once."""
    counts = {record.spec.count for _source, record in shards}
    if len(counts) > 1:
        found = ", ".join(f"{source} ({record.spec})" for source, record in shards)
        raise ShardError(f"the shards are of different runs (different shard counts): {found}")
    (count,) = counts
    by_index: dict[int, list[str]] = {}
    for source, record in shards:
        by_index.setdefault(record.spec.index, []).append(source)
    twice = {index: sources for index, sources in by_index.items() if len(sources) > 1}
    if twice:
        index = min(twice)
        raise ShardError(
            f"shard {index}/{count} is there {len(twice[index])} times "
            f"({', '.join(twice[index])}): keep one"
        )
    missing = [index for index in range(1, count + 1) if index not in by_index]
    if missing:
        names = ", ".join(f"{index}/{count}" for index in missing)
        noun = "shard" if len(missing) == 1 else "shards"
        raise ShardError(
            f"{noun} {names} missing: found {len(by_index)} of {count} "
            f"({', '.join(f'{i}/{count}' for i in sorted(by_index))})"
        )
    return count


def _same(
    shards: Sequence[tuple[str, ShardRecord]], what: str, value: Callable[[ShardRecord], object]
) -> None:
    first_source, first = shards[0]
    for source, record in shards[1:]:
        if value(record) != value(first):
            raise ShardError(
                f"{source} and {first_source} are not shards of one run: their {what} differ"
                + _difference(value(first), value(record))
            )


def _difference(left: object, right: object) -> str:
    """The first keys whose values differ, for settings (flattened by section)."""
    if not (isinstance(left, Mapping) and isinstance(right, Mapping)):
        return f" ({left!r} and {right!r})"
    flat_left, flat_right = _flat(left), _flat(right)
    keys = sorted(
        k for k in flat_left.keys() | flat_right.keys() if flat_left.get(k) != flat_right.get(k)
    )
    shown = "; ".join(f"{k}: {flat_left.get(k)!r} and {flat_right.get(k)!r}" for k in keys[:3])
    return f" ({shown})"


def _flat(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, Mapping):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _versions(shards: Sequence[tuple[str, ShardRecord]]) -> dict[str, str]:
    """Every skill's version, the same in every shard that ran it."""
    versions: dict[str, tuple[str, str]] = {}
    for source, record in shards:
        for skill, version in record.skill_versions.items():
            seen = versions.setdefault(skill, (version, source))
            if seen[0] != version:
                raise ShardError(
                    f"{source} and {seen[1]} are not shards of one run: {skill} is version "
                    f"{version!r} in one and {seen[0]!r} in the other"
                )
    return {skill: version for skill, (version, _source) in versions.items()}


def _ran_once(
    runs: Sequence[tuple[str, LoggedRun]], selected: Iterable[Scenario], *, some_not_run: bool
) -> list[ScenarioResult]:
    """Every selected scenario's result, from the one shard that ran it (``some_not_run``:
    a shard stopped for its budget, and the scenarios it never started are missing)."""
    where: dict[Scenario, str] = {}
    results = []
    for source, run in runs:
        for result in run.results:
            key = (result.skill_dir, result.name)
            if key in where:
                raise ShardError(
                    f"{key[0]}::{key[1]} ran in two shards ({where[key]} and {source})"
                )
            where[key] = source
            results.append(result)
    wanted = Counter(selected)
    missing = sorted(key for key in wanted if key not in where)
    if missing and not some_not_run:
        shown = ", ".join(f"{skill}::{name}" for skill, name in missing[:5])
        raise ShardError(f"no shard ran {plural_scenarios(len(missing))}: {shown}")
    extra = sorted(key for key in where if key not in wanted)
    if extra:
        shown = ", ".join(f"{skill}::{name}" for skill, name in extra[:5])
        raise ShardError(f"the shards ran scenarios their selection does not hold: {shown}")
    return results


def _check_trials(
    runs: Sequence[tuple[str, LoggedRun]],
    settings: EvalSettings,
    trials_here: Callable[[str, str], int | None],
    cut: set[str],
) -> None:
    """Every shard's trial records hold together (see the module docstring); a shard of
    ``cut`` stopped for its budget, and its arms may have fewer trials."""
    seen: dict[tuple[str, str, str, int], tuple[str, int]] = {}
    for source, run in runs:
        arms: dict[tuple[str, str, str], list[LoggedTrial]] = {}
        for logged in run.trials:
            where = f"{source}: line {logged.line}: {_trial_name(logged)}"
            _check_record(where, logged, settings.baseline)
            arm = arms.setdefault(logged.arm_key, [])
            if arm:
                _check_same_scenario(where, logged, arm[0])
            key = (*logged.arm_key, logged.trial.index)
            if key in seen:
                other, line = seen[key]
                also = f"line {line}" if other == source else f"{other}, line {line}"
                raise ShardError(f"{where} is there twice (also {also})")
            seen[key] = (source, logged.line)
            arm.append(logged)
        for (skill_dir, name, baseline), arm in arms.items():
            if baseline and (skill_dir, name, "") not in arms:
                raise ShardError(
                    f"{source}: line {arm[0].line}: {_trial_name(arm[0])}: the shard holds "
                    "no trial of the scenario's own arm"
                )
            own = trials_here(skill_dir, name)
            auto = not own and settings.trials == "auto"
            said = (
                f"its scenario.json says trials: {own}"
                if own
                else f"the shards ran with trials: auto, at most {settings.trials_max}"
                if auto
                else f"the shards ran with trials: {settings.trials}"
            )
            wanted = own or (settings.trials_max if auto else int(settings.trials))
            _check_count(source, arm, wanted, said, at_most=auto, cut=source in cut)


def _trial_name(logged: LoggedTrial) -> str:
    return f"trial {logged.trial.index!r} of {_arm_name(logged)}"


def _arm_name(logged: LoggedTrial) -> str:
    return arm_name(*logged.arm_key)


def _check_record(where: str, logged: LoggedTrial, baseline: str) -> None:
    """One trial record: its number, its arm, its figures."""
    index, arm = logged.trial.index, logged.arm_key[2]
    if not (isinstance(index, int) and not isinstance(index, bool) and index >= 1):
        raise ShardError(f"{where}: trials are numbered 1, 2, 3...")
    if arm and arm != baseline:
        ran = f"the baseline arm {baseline}" if baseline else "no baseline arm"
        raise ShardError(f"{where}: the shards ran {ran} (baseline setting)")
    wrong = trial_contradiction(logged.trial)
    if wrong is not None:
        raise ShardError(f"{where}: {wrong}")


def _check_same_scenario(where: str, logged: LoggedTrial, first: LoggedTrial) -> None:
    """Every trial of an arm carries its scenario's fields alike: the merge takes the first's."""
    keys = sorted(logged.scenario.keys() | first.scenario.keys())
    differ = [key for key in keys if logged.scenario.get(key) != first.scenario.get(key)]
    if differ:
        raise ShardError(
            f"{where}: its {differ[0]} differs from that of trial {first.trial.index} "
            f"(line {first.line})"
        )


def _check_count(
    source: str,
    arm: Sequence[LoggedTrial],
    wanted: int,
    said: str,
    *,
    at_most: bool = False,
    cut: bool = False,
) -> None:
    """An arm's trials are numbered 1..``wanted`` (one errored trial when it could not be
    set up: no trial of it ran); with ``at_most`` (``trials = auto``) 1..n for an n up to
    ``wanted``; fewer when ``cut``: the budget stopped the rest."""
    ordered = sorted(arm, key=lambda logged: logged.trial.index)
    if len(ordered) == 1 and ordered[0].trial.index == 1 and _not_set_up(ordered[0]):
        return
    for number, logged in enumerate(ordered, start=1):
        where = f"{source}: line {logged.line}"
        if logged.trial.index != number:
            raise ShardError(
                f"{where}: {_arm_name(logged)} has trial {logged.trial.index} but no trial {number}"
            )
        if number > wanted:
            raise ShardError(f"{where}: {_trial_name(logged)}, but {said}")
    if len(ordered) < wanted and not (at_most or cut):
        last = ordered[-1]
        count = f"{len(ordered)} trial{'' if len(ordered) == 1 else 's'}"
        raise ShardError(f"{source}: line {last.line}: {_arm_name(last)} has {count}, but {said}")


def _not_set_up(logged: LoggedTrial) -> bool:
    """An errored trial made before any trial ran (its scenario did not load, its baseline arm
    could not be made): the run gives such an arm this one trial, without a trace."""
    return logged.trial.criteria is None and logged.trial.trace is None


def _same_manifests(runs: Sequence[tuple[str, LoggedRun]], allow: bool) -> tuple[Drift, ...]:
    """Every shard's manifest against what the shards before it said together
    (:func:`~.manifest.merged_manifest`: each field's first value, the union of the id
    lists), for :data:`~.manifest.MERGE`: the agent and judge, the models the endpoints
    reported, the CLI's versions, the image digests, the skills' content and the settings
    that change results must be the same. A shard whose answers all came from the cache
    reports no model: it hides no difference between two later shards. A refusing
    difference is a :class:`ShardError` naming the shards, the field and both values, unless
    ``allow`` (``allow_drift``). A shard without a manifest is not checked."""
    seen: Manifest | None = None
    sources: list[str] = []  # the shards ``seen`` holds
    drifts = []
    for source, run in runs:
        manifest = run.info.manifest
        if manifest is None:
            continue
        if seen is None:
            seen, sources = manifest, [source]
            continue
        against = ", ".join(sources)
        drift = compare_manifests(seen, manifest, comparison=MERGE, against=against)
        try:
            drift = check_drift(drift, allow=allow)
        except DriftError as exc:
            raise ShardError(f"{source} and {against} are not shards of one run: {exc}") from None
        if drift.items:
            drifts.append(drift)
        seen = merged_manifest(seen, manifest)
        sources.append(source)
    return tuple(drifts)


def plural_scenarios(count: int) -> str:
    return f"{count} selected scenario{'' if count == 1 else 's'}"


def merge_shards(
    runs: Sequence[tuple[str, LoggedRun]],
    plugin_version: str,
    version_here: Callable[[str], str],
    trials_here: Callable[[str, str], int | None],
    *,
    allow_drift: bool = False,
) -> MergedRun:
    """The run the shards' run logs (each named by its ``source``) make together, after the
    checks of the module docstring; ``version_here`` reads a skill's version in the checkout
    the merge writes into (relative skill folder), which must be the shards', and
    ``trials_here`` a scenario's own trial count there (skill folder, scenario; None when its
    scenario.json sets none). The shards' manifests must agree (:func:`_same_manifests`)
    unless ``allow_drift`` (the merge's flag, or the setting the shards ran with)."""
    if not runs:
        raise ShardError("no shard files found")
    shards = [(source, _record(source, run)) for source, run in runs]
    spending, cut = _spending(runs)
    incomplete = [source for source, run in runs if not run.info.complete and source not in cut]
    if incomplete:
        raise ShardError(f"{incomplete[0]}: that shard was stopped before it finished")
    count = _one_each(shards)
    _same(shards, "plugin versions", lambda record: record.plugin_version)
    if shards[0][1].plugin_version != plugin_version:
        raise ShardError(
            f"the shards ran pytest-openkata {shards[0][1].plugin_version}, this is "
            f"{plugin_version}: merge with the version that ran them"
        )
    _same(
        shards,
        "settings",
        lambda record: {k: v for k, v in record.settings.items() if k not in _NOT_COMPARED},
    )
    _same(shards, "selections (the scenarios selected before sharding)", lambda r: r.selected)
    _same(shards, "partial flags (--eval-partial)", lambda record: record.partial)
    for skill, version in _versions(shards).items():
        here = version_here(skill)
        if here != version:
            raise ShardError(
                f"{skill}: the shards ran version {version!r}, the checkout here has "
                f"{here!r}: merge in the checkout the shards ran"
            )
    first = shards[0][1]
    settings = EvalSettings.model_validate(first.settings)
    drifts = _same_manifests(runs, allow_drift or settings.allow_drift)
    _check_trials(runs, settings, trials_here, cut)
    results = _ran_once(runs, first.selected, some_not_run=bool(cut))
    return MergedRun(
        results=results,
        settings=settings,
        finished_at=max(_finished(source, run) for source, run in runs),
        failed=sum(record.failed for _source, record in shards),
        partial=first.partial,
        count=count,
        spending=spending,
        drifts=drifts,
        rejudged_from=_rejudged_from(runs),
    )


def _rejudged_from(runs: Sequence[tuple[str, LoggedRun]]) -> Mapping[str, Any] | None:
    """The recorded run the shards re-judged, the same for every shard (None: they ran their
    agent); a :class:`ShardError` naming two shards that differ: they are not one run."""
    first_source, first = runs[0][0], runs[0][1].info.rejudged_from
    for source, run in runs[1:]:
        if run.info.rejudged_from != first:
            raise ShardError(
                f"{source} and {first_source} are not shards of one run: they re-judged "
                f"{_rejudged_name(run.info.rejudged_from)} and {_rejudged_name(first)}"
            )
    return first


def _rejudged_name(rejudged_from: Mapping[str, Any] | None) -> str:
    if rejudged_from is None:
        return "nothing (the agent ran)"
    return visible(
        f"the run log {rejudged_from.get('log', '?')} (finished "
        f"{rejudged_from.get('finished_at', '?')}) with the judge "
        f"{rejudged_from.get('judge_model', '?')}"
    )


def _spending(
    runs: Sequence[tuple[str, LoggedRun]],
) -> tuple[dict[str, Any] | None, set[str]]:
    """The shards' budget records summed, and the shards that stopped for their budget (they
    may lack scenarios and trials: those never started)."""
    records: list[Mapping[str, Any]] = []
    cut: set[str] = set()
    for source, run in runs:
        found = run.extras.get(BUDGET_EXTRA, [])
        for record in found:
            problem = spending_problem(record)
            if problem is not None:
                raise ShardError(f"{source}: its budget record cannot be read: {problem}")
        records.extend(found)
        if any(record.get("reached") is True for record in found):
            cut.add(source)
    return merged_spending(records), cut


def shard_files(paths: Iterable[Path]) -> list[Path]:
    """The shard files named, or found under the folders named, in order, once each."""
    found: dict[Path, Path] = {}  # by the file it is, as first named
    for path in paths:
        if path.is_dir():
            for candidate in sorted(path.rglob("shard-*-of-*.jsonl")):
                if SHARD_FILE.fullmatch(candidate.name):
                    found.setdefault(candidate.resolve(), candidate)
        else:
            found.setdefault(path.resolve(), path)
    return list(found.values())
