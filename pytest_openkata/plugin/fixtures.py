"""Fixtures: settings, backends, run options, the scheduler and the scenario result. Any of them
can be overridden in a ``conftest.py`` (for example a per-skill judge)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.contracts.errors import (
    AgentConfigError,
    BackendError,
    ConfigError,
    OpenkataError,
)
from pytest_openkata.contracts.results import ScenarioResult
from pytest_openkata.core.activity import ACTIVITY
from pytest_openkata.core.schedule import ScenarioScheduler
from pytest_openkata.core.slots import CallSlot
from pytest_openkata.core.triggers import PassRule, QueryOutcome
from pytest_openkata.infra.cache import ResultCache
from pytest_openkata.infra.once import Once
from pytest_openkata.infra.private_folder import private_folder
from pytest_openkata.infra.redact import Redactor
from pytest_openkata.infra.text import visible
from pytest_openkata.plugin.distribution import share_of
from pytest_openkata.plugin.items import ScenarioItem
from pytest_openkata.plugin.scheduling import upcoming_items
from pytest_openkata.plugin.session import mode_of, redactor_of, settings_of, variants_key
from pytest_openkata.plugin.triggers import OUTCOME_PROPERTY, TriggerQueryItem

if TYPE_CHECKING:
    from pytest_openkata.core.engine_pool import SlotsFor
    from pytest_openkata.core.run import Backends, RunOptions
    from pytest_openkata.core.sandboxed import SandboxSetup

CACHE_FOLDER = "openkata"
IN_FLIGHT_FOLDER = "openkata-in-flight"
REFS_FOLDER = "openkata-refs"  # the skills' files at the git ref of --eval-baseline


def shared_folder(config: pytest.Config, name: str) -> Path:
    """A folder shared by the controller and every xdist worker of a run: in pytest's cache
    folder, or with the cache provider disabled, in the temporary folder under a name derived
    from the rootdir."""
    cache = getattr(config, "cache", None)
    if cache is not None:
        return Path(cache.mkdir(name))
    digest = hashlib.sha256(str(config.rootpath).encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"{name}-{digest}-{os.getuid()}"
    # A predictable name in a folder everyone may write to: someone else could have made it.
    # Closed to others entirely: it holds the skills' files at a git ref too.
    try:
        return private_folder(folder, closed=0o077)
    except OSError as exc:
        raise pytest.UsageError(
            f"pytest-openkata: {exc}: remove it, or run with pytest's cache provider"
        ) from None


def result_cache(config: pytest.Config, settings: EvalSettings) -> ResultCache | None:
    """The run's content cache in pytest's cache folder (``.pytest_cache/d/openkata``, so
    that ``--cache-clear`` empties it); None with the cache off or the cache provider
    disabled."""
    cache = getattr(config, "cache", None)
    if settings.cache == "off" or cache is None:
        return None
    return ResultCache(cache.mkdir(CACHE_FOLDER), settings.cache)


def in_flight_folder(config: pytest.Config) -> Path:
    """The lock folder of the in-flight cap and of the engines' room (:func:`shared_folder`;
    a folder of its own per group of xdist workers when several hosts take part)."""
    folder = shared_folder(config, IN_FLIGHT_FOLDER)
    group = share_of(config).folder
    if group:
        folder = folder / group
        folder.mkdir(exist_ok=True)
    return folder


def engine_slots(config: pytest.Config, settings: EvalSettings) -> SlotsFor:
    """Each pool engine's room, counted by every process of this host's workers through lock
    files, at their share of the engine's capacity."""
    from pytest_openkata.infra.inflight import SharedSlots

    order = {name: index for index, (name, _url) in enumerate(settings.sandbox.hosts)}

    def slots(name: str, capacity: int) -> SharedSlots:
        # The folder is made here, by a pool: a run without one makes none.
        share = share_of(config)
        part = share.of(capacity, first=order.get(name, 0))
        return SharedSlots(in_flight_folder(config), name, part)

    return slots


@pytest.fixture(scope="session")
def openkata_settings(pytestconfig: pytest.Config) -> EvalSettings:
    """The resolved settings of this run."""
    return settings_of(pytestconfig)


@pytest.fixture(scope="session")
def openkata_redactor(pytestconfig: pytest.Config) -> Redactor:
    """Masks API keys and tokens in everything the plugin reports."""
    return redactor_of(pytestconfig)


@pytest.fixture(scope="session")
def openkata_sandbox(
    pytestconfig: pytest.Config, openkata_settings: EvalSettings
) -> Iterator[Callable[[], SandboxSetup]]:
    """A factory of the Docker sandbox, connected on first use: a run without sandboxed
    scenarios never needs an engine, and a missing one errors only those scenarios."""
    # Imported here, as in openkata_backends: the plugin loads in every pytest run of the
    # environment, and the backends (the HTTP client, the agent CLIs) serve only runs with
    # scenarios.
    from pytest_openkata.core.sandboxed import SandboxSetup, build_sandbox

    slots = engine_slots(pytestconfig, openkata_settings)
    factory = Once(
        lambda: build_sandbox(openkata_settings, slots), SandboxSetup.close, "the sandbox"
    )
    yield factory  # SIGTERM ends the run as Ctrl-C does: see plugin/termination.py
    factory.close()


@pytest.fixture(scope="session")
def openkata_backends(
    pytestconfig: pytest.Config,
    openkata_settings: EvalSettings,
    openkata_sandbox: Callable[[], SandboxSetup],
) -> Iterator[Callable[[], Backends]]:
    """A factory for the agent and judge backends, shared by the session (one HTTP client).

    A factory rather than the backends themselves, so that a backend that cannot be built
    errors each scenario with a clear message instead of breaking fixture setup.
    """
    from pytest_openkata.core.build import build_backends, close_backends
    from pytest_openkata.infra.http import make_client

    settings = openkata_settings
    lock_folder = in_flight_folder(pytestconfig) if settings.max_in_flight else None
    with make_client(float(settings.direct_timeout), settings.concurrency) as client:
        share = share_of(pytestconfig)
        factory = Once(
            lambda: build_backends(settings, client, openkata_sandbox, lock_folder, share),
            close_backends,
            "the backends",
        )
        # Built here, in pytest's thread, before scenario threads compete for the interpreter
        # (the first build imports the agent modules); if it fails, each scenario asks again
        # and errors with the reason.
        with contextlib.suppress(BackendError):
            factory()
        yield factory
        factory.close()


@pytest.fixture(scope="session")
def openkata_run_options(
    pytestconfig: pytest.Config, openkata_settings: EvalSettings
) -> RunOptions:
    """Trials, judge votes, fencing, the content cache, prices and the skills' texts of this
    run.

    The cache lives under pytest's cache folder (``.pytest_cache/d/openkata``), so
    ``--cache-clear`` empties it; with the cache provider disabled there is no cache.
    """
    from pytest_openkata.core.evaluate import run_options
    from pytest_openkata.core.recorded import recorded_run
    from pytest_openkata.plugin.budget import guard_of

    settings = openkata_settings
    cache = result_cache(pytestconfig, settings)
    try:  # a validation grades its solutions, never a recorded run's answers
        recorded = (
            recorded_run(settings, pytestconfig.rootpath) if not mode_of(pytestconfig) else None
        )
    except ConfigError as exc:  # read at configure time too: only a log changed since then
        raise pytest.UsageError(f"pytest-openkata: --eval-rejudge: {exc}") from None
    options = run_options(settings, cache, shared_folder(pytestconfig, REFS_FOLDER), recorded)
    variants = pytestconfig.stash.get(variants_key, None)
    return replace(options, budget=guard_of(pytestconfig), variants=variants)


@pytest.fixture(scope="session")
def openkata_scheduler(
    pytestconfig: pytest.Config, openkata_settings: EvalSettings
) -> Iterator[ScenarioScheduler]:
    """Runs scenarios ahead on threads, up to ``concurrency`` agent runs and judge calls at
    once in this process (see :mod:`pytest_openkata.core.schedule`)."""
    # No `request` argument: for every item, pytest makes a new definition of `request` (an
    # inspect.signature() each) for each fixture of the item that takes it, cached or not.
    scheduler = ScenarioScheduler(
        openkata_settings.concurrency,
        lambda item: upcoming_items(item.session, item),
        # An xdist worker may be sent more items at any time.
        upcoming_is_final=not hasattr(pytestconfig, "workerinput"),
    )
    yield scheduler
    scheduler.close()


@pytest.fixture
def openkata_result(
    request: pytest.FixtureRequest,
    openkata_backends: Callable[[], Backends],
    openkata_redactor: Redactor,
    openkata_run_options: RunOptions,
    openkata_scheduler: ScenarioScheduler,
) -> ScenarioResult:
    """Runs the scenario (prompt, agent, judge, score; maybe started ahead by the scheduler)
    and records its result.

    A scenario that cannot be evaluated errors here, in setup, with the reason on one line.
    """
    from pytest_openkata.core.budget import BUDGET_REACHED, BudgetReached
    from pytest_openkata.core.run import run_scenario

    item = request.node
    if not isinstance(item, ScenarioItem):
        raise pytest.UsageError("openkata_result is only available to scenario items")

    def run(scenario: ScenarioItem, slot: CallSlot) -> ScenarioResult:
        # Named as pytest's reports head it (``skill::scenario``), for the progress lines.
        with ACTIVITY.scenario(scenario.location[2]):
            return _run(scenario, slot)

    def _run(scenario: ScenarioItem, slot: CallSlot) -> ScenarioResult:
        try:
            # A format's scenario is written out as an openkata folder here, on first use.
            scenario_dir, shown = scenario.runnable()
        except OpenkataError as exc:
            result = scenario.unrunnable(exc, openkata_redactor)
        else:
            result = run_scenario(
                scenario_dir,
                openkata_backends,
                skill_dir=scenario.skill_dir,
                redact=lambda text: shown(openkata_redactor(text)),
                options=openkata_run_options,
                slot=slot,
                skill_scenarios=scenario.skill_scenarios,
            )
        # Recorded here, on the scenario's thread, before pytest reports the item.
        scenario.record_result(result)
        return result

    # Typo'd keys, placeholders, a file beside task.md that never reaches the agent: said
    # before it runs, here in pytest's thread so that they are the item's warnings.
    item.warn_before_run()
    try:
        result = openkata_scheduler.result(item, run)
    except BudgetReached:
        # Neither passed nor failed: its report is made a skip (plugin/budget.py), and the
        # controller lists it among the scenarios not run.
        from pytest_openkata.plugin.budget import NOT_RUN_PROPERTY

        item.user_properties.append((NOT_RUN_PROPERTY, BUDGET_REACHED))
        raise
    item.ihook.pytest_openkata_scenario_result(result=result, item=item)
    if result.error is not None:
        pytest.fail(visible(f"scenario error: {result.error}"), pytrace=False)
    baseline = result.baseline
    if baseline is not None and baseline.error is not None:
        # The comparison the run was asked for cannot be made: an error, not a criterion.
        pytest.fail(visible(f"baseline {baseline.arm}: {baseline.error}"), pytrace=False)
    pairwise_errors = [t.pairwise.error for t in result.trials if t.pairwise and t.pairwise.error]
    if pairwise_errors:  # the comparison asked for could not be made: an error, not a verdict
        pytest.fail(visible(pairwise_errors[0]), pytrace=False)
    return result


# --- trigger evals (:mod:`pytest_openkata.plugin.triggers`) ------------------------------


@pytest.fixture(scope="session")
def openkata_trigger_backends(
    pytestconfig: pytest.Config, openkata_settings: EvalSettings
) -> Iterator[Callable[[], Backends]]:
    """The backends of trigger queries: the run's, with the agent built for installed skill
    delivery whatever ``skill_delivery`` says (a query's skill is never in its prompt), under
    the same in-flight cap as the scenarios' agent."""
    from pytest_openkata.core.build import build_backends, close_backends
    from pytest_openkata.infra.http import make_client

    settings = openkata_settings.model_copy(update={"skill_delivery": "installed"})
    lock_folder = in_flight_folder(pytestconfig) if settings.max_in_flight else None
    share = share_of(pytestconfig)
    with make_client(float(settings.direct_timeout), settings.concurrency) as client:
        factory = Once(
            lambda: build_backends(settings, client, None, lock_folder, share),
            close_backends,
            "the backends",
        )
        with contextlib.suppress(BackendError):
            factory()
        yield factory
        factory.close()


@pytest.fixture
def openkata_trigger_outcome(
    request: pytest.FixtureRequest,
    openkata_settings: EvalSettings,
    openkata_trigger_backends: Callable[[], Backends],
    openkata_redactor: Redactor,
) -> QueryOutcome:
    """Runs the trigger query (``trigger_runs`` times) and records its outcome; a query that
    cannot be evaluated errors here, in setup, with the reason on one line."""
    from pytest_openkata.core.errors import ScenarioFailure
    from pytest_openkata.core.runlog import relative_skill_dir
    from pytest_openkata.core.trigger_run import TriggerRun, run_trigger_query

    item = request.node
    if not isinstance(item, TriggerQueryItem):
        raise pytest.UsageError("openkata_trigger_outcome is only available to trigger items")
    if item.query is None:
        pytest.fail(visible(f"trigger queries: {item.load_error}"), pytrace=False)
    settings = openkata_settings
    rootdir = item.config.rootpath
    try:
        rule = PassRule(
            settings.trigger_runs, settings.trigger_loads_needed, settings.trigger_loads_allowed
        )
        try:
            backends = openkata_trigger_backends()
        except AgentConfigError as exc:  # an agent (or a model backend) without a skills folder
            raise AgentConfigError(f"trigger queries install the skill: {exc}") from exc
        run = TriggerRun(
            backends,
            tuple(rootdir / folder for folder in settings.trigger_skills),
            rule,
            cache=result_cache(item.config, settings),
            redact=openkata_redactor,
        )
        skill = relative_skill_dir(item.skill_dir, rootdir)
        outcome = run_trigger_query(item.query, item.skill_dir, skill, run)
    except (BackendError, ConfigError, ScenarioFailure) as exc:
        pytest.fail(visible(f"trigger query error: {openkata_redactor(str(exc))}"), pytrace=False)
    item.user_properties.append((OUTCOME_PROPERTY, json.dumps(outcome.to_dict())))
    return outcome
