"""Evaluating skills without pytest: ``evaluate(paths, **settings)``.

The same core as the pytest plugin, in the same order: discover the scenarios under the paths,
run them (``concurrency`` agent runs and judge calls at once, started ahead on threads),
summarise each skill, and hand the summaries to every registered reporter, so that the results
JSON files are the ones a complete ``pytest`` run writes. Settings resolve as for pytest, less
pytest's own layers: defaults, then ``.openkata-eval.yaml`` in the current folder, then the
``OPENKATA_EVAL_*`` environment variables, then the keyword arguments, named as the YAML keys
(sections as dicts: ``http={"base_url": ...}``). As a pytest run does, it stops what runs that
are over left on this host before its scenarios run, and what its own agents left running once
they are done, each said in a warning of Python's logging.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.contracts.errors import BackendError, ConfigError
from pytest_openkata.contracts.results import ScenarioResult
from pytest_openkata.core.auto_trials import AutoTrialRule
from pytest_openkata.core.budget import BudgetGuard, BudgetReached, unpriced_budget
from pytest_openkata.core.build import build_backends, close_backends
from pytest_openkata.core.pricing import run_prices
from pytest_openkata.core.prompt import SkillTexts
from pytest_openkata.core.recorded import RecordedRun, recorded_run
from pytest_openkata.core.reporting import make_run, report_run
from pytest_openkata.core.run import RunOptions, run_scenario
from pytest_openkata.core.sandboxed import SandboxSetup, build_sandbox
from pytest_openkata.core.scenario import (
    SCENARIO_NAMES,
    discover_scenarios,
    has_categories,
    holds_scenario_files,
    is_scenario_dir,
    scenario_candidates,
    skill_of,
)
from pytest_openkata.core.schedule import ScenarioScheduler
from pytest_openkata.core.slots import CallSlot
from pytest_openkata.core.spending import BUDGET_EXTRA, spending_record
from pytest_openkata.core.summary import SkillSummary, summarise
from pytest_openkata.core.variants import VariantPlan, VariantsError, run_variants
from pytest_openkata.infra.cache import ResultCache
from pytest_openkata.infra.config import find_yaml_file, provider_problems, resolve_settings
from pytest_openkata.infra.inflight import SharedSlots
from pytest_openkata.infra.ledger import SpendLedger
from pytest_openkata.infra.once import Once
from pytest_openkata.infra.processes import stop_strays, stopped_line, sweep_orphans
from pytest_openkata.infra.redact import Redactor, secrets_from_environment
from pytest_openkata.infra.signals import stop_signals_as_interrupt
from pytest_openkata.infra.tempfiles import (
    REMOVED,
    remove_stale,
    remove_stale_run_folders,
    run_folder,
    stale_folders_line,
)
from pytest_openkata.infra.text import one_line

__all__ = ["cache_folder", "evaluate", "find_scenarios", "run_options"]

PathLike = str | os.PathLike[str]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Job:
    """One scenario to run, with the names of every scenario of its skill (for the gate)."""

    scenario_dir: Path
    skill_scenarios: tuple[str, ...]


def _evals_folders(root: Path, names: str) -> Iterator[Path]:
    """Every ``evals`` folder under ``root`` holding scenarios, never looking into one."""
    for folder, subfolders, _files in os.walk(root):
        here = Path(folder)
        if here.name == "evals" and discover_scenarios(here, names):
            subfolders.clear()
            yield here
            continue
        subfolders[:] = sorted(
            name for name in subfolders if not name.startswith(".") and name != "node_modules"
        )


def find_scenarios(paths: Iterable[PathLike], names: str = SCENARIO_NAMES) -> list[Path]:
    """The scenario folders ``paths`` name, in order and once each: a scenario folder
    (whatever its name), an ``evals`` folder, a skill or tile folder, or any folder above
    them; ``names`` is the ``scenario_names`` setting."""
    found: dict[Path, None] = {}
    for given in paths:
        path = Path(given).absolute()
        if not path.exists():
            raise ConfigError(f"{given}: no such file or folder")
        if path.parent.name == "evals" and (is_scenario_dir(path) or holds_scenario_files(path)):
            found.setdefault(path)
            continue
        for evals in _evals_folders(path, names):
            for scenario in discover_scenarios(evals, names):
                found.setdefault(scenario)
    return list(found)


def _skill_scenarios(scenario: Path, names: str) -> tuple[str, ...]:
    """The names of the scenarios of ``scenario``'s skill, for the gate's completeness: those
    ``names`` takes, or, for a folder given by path that it does not take, every folder that
    looks like a scenario (so that the run is partial), as a pytest run counts them."""
    taken = discover_scenarios(scenario.parent, names)
    if scenario not in taken:
        taken = scenario_candidates(scenario.parent)
    return tuple(entry.name for entry in taken)


def refs_folder(root: Path) -> Path:
    """Where runs in ``root`` extract skills at a git ref: the folder pytest runs there use."""
    return cache_folder(root).parent / "openkata-refs"


def cache_folder(root: Path) -> Path:
    """The result cache of runs in ``root``: the one pytest runs there use
    (``.pytest_cache/d/openkata``), so that either answers the other's repeats."""
    pytest_cache = root / ".pytest_cache"
    if not pytest_cache.exists():
        pytest_cache.mkdir()
        # As pytest marks its own cache folder: never committed.
        (pytest_cache / ".gitignore").write_text("# Created by pytest-openkata.\n*\n")
    folder = pytest_cache / "d" / "openkata"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def run_options(
    settings: EvalSettings,
    cache: ResultCache | None,
    refs_folder: Path | None = None,
    recorded: RecordedRun | None = None,
) -> RunOptions:
    """Trials, votes, fencing, the cache, prices, the skills' texts and the baseline arm of a
    run (``refs_folder``: where the skills' files at a git ref are extracted; ``recorded``:
    the recorded run it re-judges, if any)."""
    prices = run_prices(settings)
    auto = settings.trials == "auto"
    return RunOptions(
        trials=settings.trials_max if auto else int(settings.trials),
        auto_trials=AutoTrialRule(
            settings.trials_max, settings.trials_confidence, settings.threshold
        )
        if auto
        else None,
        judge_votes=settings.judge_votes,
        fence=settings.judge_fence,
        cache=cache,
        agent_prices=prices.agent,
        judge_prices=prices.judge,
        skill_texts=SkillTexts(),
        baseline=settings.baseline,
        refs_folder=refs_folder,
        judge_pairwise=settings.judge_pairwise,
        judge_reason_max_chars=settings.judge_reason_max_chars,
        categories=settings.categories,
        provider_settings=settings.provider_settings,
        retry_infrastructure=settings.retry.infrastructure,
        skill_delivery=settings.skill_delivery,
        recorded=recorded,
    )


def _settings(arguments: dict[str, object]) -> EvalSettings:
    here = Path.cwd()
    for problem in provider_problems():  # as pytest warns of them: the run goes on
        logger.warning("%s", problem)
    return resolve_settings(
        ini={},
        yaml_path=find_yaml_file(None, [here]),
        environ=os.environ,
        cli={},
        arguments=arguments,
    )


def evaluate(paths: PathLike | Iterable[PathLike], **settings: object) -> list[SkillSummary]:
    """Evaluate the scenarios under ``paths`` and return each skill's summary, writing the
    reports a complete ``pytest`` run writes (a skill of which only some scenarios ran is a
    partial run: no threshold, no report unless ``output`` is set).

    Raises :class:`~pytest_openkata.contracts.errors.ConfigError` for a bad setting or a path that
    does not exist; a scenario that cannot be evaluated is an errored result, as in pytest.
    """
    resolved, variants = run_variants(_settings(settings), Path.cwd())
    given = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    names = resolved.scenario_names
    jobs = [
        _Job(scenario, _skill_scenarios(scenario, names))
        for scenario in find_scenarios(given, names)
        # As pytest deselects them: with --eval-category, those without such criteria.
        if not resolved.categories or has_categories(scenario, resolved.categories)
    ]
    if isinstance(variants, VariantPlan):  # a variant's only fixture: a run of one skill's copy
        skills = {skill_of(job.scenario_dir) for job in jobs}
        variants = replace(variants, skill_count=len(skills))
    here = Path.cwd()
    recorded = recorded_run(resolved, here)
    problem = unpriced_budget(resolved)
    if problem is not None:
        raise ConfigError(problem)
    if jobs:  # what runs that are over left on this host, stopped as a pytest run does
        _log(stopped_line(sweep_orphans(), "left by a run that is over"))
        _log(stale_folders_line(remove_stale_run_folders()))
    with _budget(resolved) as guard:
        results, not_run = _run(jobs, resolved, here, recorded, guard, variants=variants)
        spending = (
            None
            if guard is None
            else spending_record(
                guard.limits,
                guard.ledger.read(),
                [Path(os.path.relpath(job.scenario_dir, here)).as_posix() for job in not_run],
            )
        )
    reached = spending is not None and spending["reached"]
    summaries = summarise(
        results, resolved.threshold, here, partial=bool(resolved.category) or reached
    )
    run = make_run(
        summaries,
        resolved,
        datetime.now(UTC),
        here,
        removed=tuple(_remove_stale(resolved, here)),
        rejudged=recorded,
        complete=not reached,  # a run the budget stopped is partial: no results JSON
        log_extras={} if spending is None else {BUDGET_EXTRA: [spending]},
    )
    done = report_run(run)
    for path in done.removed:  # no terminal here: a warning of Python's logging says it
        logger.warning("%s: %s", REMOVED, path)
    # A file of the whole run that could not be written fails every skill's gate here, where
    # the summaries are all the caller gets.
    return [
        replace(summary, report_error=summary.report_error or "; ".join(done.errors) or None)
        for summary in done.summaries
    ]


def _remove_stale(settings: EvalSettings, here: Path) -> list[Path]:
    """Remove the temporary files that killed runs left in the cache and among the skills
    extracted at git refs, as a pytest run does."""
    removed = [] if settings.cache == "off" else ResultCache(cache_folder(here)).remove_stale()
    return removed + remove_stale(refs_folder(here))


def _log(line: str | None) -> None:
    """What a sweep stopped or removed, in a warning of Python's logging (no terminal here)."""
    if line is not None:
        logger.warning("%s", one_line(line))


class _Runs:
    """How many :func:`evaluate` calls of this process are running: their agents all carry
    the process's mark, so what one left running is stopped only once none is running (a
    service or a notebook may run calls on several threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0

    def start(self) -> None:
        with self._lock:
            self._running += 1

    def end(self) -> bool:
        """Notes a call's end; whether it was the last running."""
        with self._lock:
            self._running -= 1
            return self._running == 0


_RUNS = _Runs()


def _engine_slots(folder: Path, engine: str, capacity: int) -> SharedSlots:
    folder.mkdir(parents=True, exist_ok=True)
    return SharedSlots(folder, engine, capacity)


@contextlib.contextmanager
def _budget(settings: EvalSettings) -> Iterator[BudgetGuard | None]:
    """The run's budget and its ledger, a file of this process's own for the run's length
    (None: no budget)."""
    if not settings.budget.limited:
        yield None
        return
    with run_folder("budget") as folder:
        yield BudgetGuard(settings.budget, SpendLedger.create(Path(folder) / "ledger.json"))


def _run(
    jobs: list[_Job],
    settings: EvalSettings,
    here: Path,
    recorded: RecordedRun | None,
    budget: BudgetGuard | None = None,
    *,
    variants: VariantPlan | VariantsError | None = None,
) -> tuple[list[ScenarioResult], list[_Job]]:
    """Every job's result, and the jobs the budget left unrun (``variants``: the arms of a
    variants file, or why it gives none)."""
    from pytest_openkata.infra.http import make_client

    redact = Redactor({*settings.secrets, *secrets_from_environment()})
    cache = None if settings.cache == "off" else ResultCache(cache_folder(here), settings.cache)
    options = replace(
        run_options(settings, cache, refs_folder(here), recorded), budget=budget, variants=variants
    )
    # The in-flight cap's and the engines' lock files, shared with pytest runs in ``here``.
    locks = here / ".pytest_cache" / "d" / "openkata-in-flight"
    lock_folder = None
    if settings.max_in_flight:
        lock_folder = locks
        lock_folder.mkdir(parents=True, exist_ok=True)
    sandbox = Once(
        lambda: build_sandbox(settings, partial(_engine_slots, locks)),
        SandboxSetup.close,
        "the sandbox",
    )
    following = {job: jobs[index + 1 :] for index, job in enumerate(jobs)}
    scheduler: ScenarioScheduler[_Job] = ScenarioScheduler(
        settings.concurrency, lambda job: following[job]
    )
    with (
        stop_signals_as_interrupt(),
        make_client(float(settings.direct_timeout), settings.concurrency) as client,
    ):
        backends = Once(
            lambda: build_backends(settings, client, sandbox, lock_folder),
            close_backends,
            "the backends",
        )
        _RUNS.start()
        try:
            with contextlib.suppress(BackendError):  # else each scenario errors with it
                backends()  # built before scenario threads start

            def run(job: _Job, slot: CallSlot) -> ScenarioResult:
                return run_scenario(
                    job.scenario_dir,
                    backends,
                    skill_dir=skill_of(job.scenario_dir),
                    redact=redact,
                    options=options,
                    slot=slot,
                    skill_scenarios=job.skill_scenarios,
                )

            results, not_run = [], []
            for job in jobs:
                try:
                    results.append(scheduler.result(job, run))
                except BudgetReached:
                    not_run.append(job)
            return results, not_run
        finally:
            scheduler.close()
            backends.close()
            sandbox.close()
            if _RUNS.end():  # the process's mark is every call's: the last to end stops strays
                _log(stopped_line(stop_strays(), "this run's agents left running"))
