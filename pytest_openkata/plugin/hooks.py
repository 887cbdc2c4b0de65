"""pytest hooks of pytest-openkata: options, settings, collection, aggregation, reports."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Generator
from pathlib import Path

import pytest

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.contracts.errors import ConfigError
from pytest_openkata.infra.config import (
    find_yaml_file,
    provider_problems,
    resolve_settings,
    setting_help,
    settings_table,
)
from pytest_openkata.infra.redact import Redactor, secrets_from_environment
from pytest_openkata.infra.text import visible
from pytest_openkata.plugin import (
    budget,
    distribution,
    engines,
    fixtures,
    heartbeat,
    hookspecs,
    lint,
    orphans,
    progress,
    shard,
    termination,
    triggers,
    xdist_transport,
)
from pytest_openkata.plugin.aggregate import BODY_RAISED_ATTR, EvalAggregator
from pytest_openkata.plugin.file_warnings import FileWarnings
from pytest_openkata.plugin.format_files import marker_files
from pytest_openkata.plugin.heap import HeapFreezer
from pytest_openkata.plugin.items import (
    EvalsDir,
    ScenarioItem,
    ValidationItem,
    evals_candidates,
    is_evals_dir,
    note_skill_scenarios,
    result_key,
    tell_skills_apart,
    unite_skill_scenarios,
)
from pytest_openkata.plugin.scenario_folder import KIND_MARKERS
from pytest_openkata.plugin.session import (
    ESTIMATE,
    LINT,
    VALIDATE,
    mode_key,
    mode_of,
    redactor_key,
    settings_key,
    variants_key,
)
from pytest_openkata.plugin.xdist_transport import RESULT_ATTR

AGGREGATOR_NAME = "openkata-aggregator"


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("openkata", "skill evals (pytest-openkata)")
    # The built-in settings, then those that installed providers declare.
    for field in settings_table():
        if field.option and field.flag:
            group.addoption(
                field.option,
                dest=field.dest,
                action="store_const",
                const="true",
                default=None,
                help=setting_help(field),
            )
        elif field.option:
            group.addoption(
                field.option,
                dest=field.dest,
                action="append" if field.keyed else "store",
                default=None,
                metavar=field.shown_metavar,
                help=setting_help(field),
            )
        parser.addini(field.ini, setting_help(field), type="string", default=None)
    heartbeat.add_ini(parser)
    group.addoption(
        "--eval-partial",
        action="store_true",
        dest="eval_partial",
        help="count every skill as partly run, whatever ran: no threshold gate and no "
        "automatic report (the reference's scenario mode; --eval-output still writes one)",
    )
    group.addoption(
        "--eval-lint",
        action="store_true",
        dest="eval_lint",
        help="check skills and scenarios instead of evaluating them: no model, no sandbox",
    )
    group.addoption(
        "--eval-lint-strict",
        action="store_true",
        dest="eval_lint_strict",
        help="with --eval-lint: fail on warnings too",
    )
    group.addoption(
        "--eval-validate",
        action="store_true",
        dest="eval_validate",
        help="grade each scenario's solution/ (must score 100%%) and an empty agent (must "
        "score below 50%%) instead of running the agent; writes no report",
    )
    group.addoption(
        "--eval-estimate",
        action="store_true",
        dest="eval_estimate",
        help="show the estimated tokens and cost of the run per skill and in total instead of "
        "running it: every prompt is built, no model is called, no report is written",
    )
    shard.add_options(group)
    group.addoption(
        "--eval-config",
        dest="eval_config",
        default=None,
        metavar="PATH",
        help="settings file (default: .openkata-eval.yaml in the current folder or rootdir)",
    )


def _resolve(config: pytest.Config) -> EvalSettings:
    search = [config.invocation_params.dir, config.rootpath]
    table = settings_table()
    for problem in provider_problems():
        config.issue_config_time_warning(
            pytest.PytestConfigWarning(f"pytest-openkata: {problem}"), stacklevel=2
        )
    try:
        yaml_path = find_yaml_file(config.getoption("eval_config"), search)
        return resolve_settings(
            ini={f.dest: config.getini(f.ini) for f in table},
            yaml_path=yaml_path,
            environ=os.environ,
            cli={f.dest: config.getoption(f.dest) for f in table if f.option},
        )
    except ConfigError as exc:
        raise pytest.UsageError(f"pytest-openkata: {exc}") from None


def _check_agreement(config: pytest.Config, settings: EvalSettings, mode: str) -> None:
    """The judge agreement a run is asked to measure must be measurable when it ends: the other
    side's file there, a whole run (a shard holds part of the answers), and a gate only with
    something to gate."""
    if settings.min_kappa is not None and not settings.agreement_with:
        raise pytest.UsageError(
            "pytest-openkata: --eval-min-kappa gates the agreement of --eval-agreement-with, "
            "which is not given"
        )
    if not settings.agreement_with or mode:
        return
    if shard.shard_of(config) is not None:
        raise pytest.UsageError(
            "pytest-openkata: --eval-agreement-with measures a whole run, and a shard holds "
            "part of it: merge the shards, then run python -m pytest_openkata agreement on "
            "the merged run's log"
        )
    if not Path(settings.agreement_with).expanduser().is_file():
        raise pytest.UsageError(
            f"pytest-openkata: --eval-agreement-with: {settings.agreement_with} is not a file "
            "(a run log or a labels file)"
        )


def _check_compare(settings: EvalSettings) -> None:
    """An earlier run named by a path must be there before any token is spent on this one."""
    spec = settings.compare
    if spec and spec != "auto" and not Path(spec).expanduser().is_file():
        raise pytest.UsageError(
            f"pytest-openkata: --eval-compare: {spec}: no such file (give a results JSON, "
            "a run log or auto)"
        )


def _check_rejudge(config: pytest.Config, settings: EvalSettings) -> None:
    """The run log to re-judge must be readable, and this run's settings must not drift from
    the recorded run where that refuses a re-judge (the agent the reports would name for its
    answers), before any judge call: a refused re-judge costs nothing. What only the trials
    know (the models they reported) is checked again when the run is reported. An agent
    model other than the one that gave the answers is said when the log holds no manifest,
    or the drift is allowed."""
    from pytest_openkata import __version__
    from pytest_openkata.core.manifest import REJUDGE, compare_manifests
    from pytest_openkata.core.recorded import recorded_run
    from pytest_openkata.core.run_manifest import build_manifest

    try:
        recorded = recorded_run(settings, config.rootpath)
    except ConfigError as exc:
        raise pytest.UsageError(f"pytest-openkata: --eval-rejudge: {exc}") from None
    if recorded is None:
        return
    if recorded.info.manifest is not None and not settings.allow_drift:
        drift = compare_manifests(
            recorded.info.manifest,
            build_manifest(settings, (), config.rootpath, __version__),
            comparison=REJUDGE,
            against=f"the recorded run {recorded.log_name}",
        )
        refusal = drift.refusal()
        if refusal is not None:
            raise pytest.UsageError(f"pytest-openkata: --eval-rejudge: {refusal}")
    answered_by = recorded.info.settings.get("model")
    if answered_by and answered_by != settings.model:
        config.issue_config_time_warning(
            pytest.PytestConfigWarning(
                f"pytest-openkata: --eval-rejudge: the answers of {settings.rejudge} are the "
                f"agent model {answered_by}'s, and this run's reports name {settings.model} "
                f"(give --eval-model {answered_by})"
            ),
            stacklevel=2,
        )


def _mode(config: pytest.Config) -> str:
    lint, validate = config.getoption("eval_lint"), config.getoption("eval_validate")
    if lint and validate:
        raise pytest.UsageError("pytest-openkata: give --eval-lint or --eval-validate, not both")
    if config.getoption("eval_lint_strict") and not lint:
        raise pytest.UsageError("pytest-openkata: --eval-lint-strict needs --eval-lint")
    if config.getoption("eval_estimate"):
        if lint or validate:
            raise pytest.UsageError(
                "pytest-openkata: give --eval-estimate without --eval-lint or --eval-validate"
            )
        return ESTIMATE
    return LINT if lint else VALIDATE if validate else ""


def _variants(
    config: pytest.Config, settings: EvalSettings, mode: str, controller: bool
) -> EvalSettings:
    """A run's settings with the baseline its variants file gives, the file's arms kept for
    the scenarios (only a run that evaluates has arms, and an estimate counts them); what the
    file holds that this plugin does not know, and a file that cannot be run, are said once,
    by the controller."""
    if mode not in ("", ESTIMATE) or not settings.variants:
        config.stash[variants_key] = None
        return settings
    from pytest_openkata.core.variants import VariantPlan, VariantsError, run_variants

    try:
        settings, plan = run_variants(settings, config.rootpath)
    except ConfigError as exc:  # settings the file contradicts: no scenario runs
        raise pytest.UsageError(f"pytest-openkata: {visible(str(exc))}") from None
    config.stash[variants_key] = plan
    if controller:
        said = [str(plan)] if isinstance(plan, VariantsError) else []
        if isinstance(plan, VariantPlan):
            said = list(plan.file.warnings)
        for text in said:
            config.issue_config_time_warning(
                pytest.PytestConfigWarning(f"pytest-openkata: {visible(text)}"), stacklevel=2
            )
    return settings


def pytest_configure(config: pytest.Config) -> None:
    for name, meaning in KIND_MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {meaning}")
    mode = config.stash[mode_key] = _mode(config)
    heartbeat.configure(config)
    shard.configure(config)
    settings = distribution.worker_settings(config, lambda: _resolve(config))
    controller = not hasattr(config, "workerinput")
    settings = _variants(config, settings, mode, controller)
    if controller:  # only the controller compares, and a remote worker has other paths
        _check_compare(settings)
        _check_agreement(config, settings, mode)
        if settings.rejudge and mode in ("", ESTIMATE):
            _check_rejudge(config, settings)
    config.stash[settings_key] = settings
    config.stash[redactor_key] = Redactor({*settings.secrets, *secrets_from_environment()})
    config.pluginmanager.register(fixtures, "openkata-fixtures")
    config.pluginmanager.register(xdist_transport, "openkata-xdist-transport")
    config.pluginmanager.register(HeapFreezer(), "openkata-heap")
    if controller and mode != LINT and settings.sandbox.hosts:
        config.pluginmanager.register(engines, "openkata-engines")
    if controller and config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(distribution, "openkata-distribution")
    if shard.shard_of(config) is not None and config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(shard.FromWorkers(config), "openkata-shard-selection")
    if mode == ESTIMATE:
        from pytest_openkata.plugin.estimate import Estimate, run_in_this_process

        run_in_this_process(config)
        config.pluginmanager.register(Estimate(settings), "openkata-estimate")
    if mode == VALIDATE:
        # Imported when wanted: it runs scenarios (core.run), which collecting does not need.
        # By its full name, so that a test runner that unloads modules between sessions gets
        # it afresh, never the copy its package still names.
        validation = importlib.import_module("pytest_openkata.plugin.validation")
        config.pluginmanager.register(validation, "openkata-validation")
        if controller:
            config.pluginmanager.register(validation.ValidationSummary(), AGGREGATOR_NAME)
    if controller and mode != LINT:
        config.pluginmanager.register(FileWarnings(), "openkata-file-warnings")
    if mode == "":
        config.pluginmanager.register(termination, "openkata-termination")
        budget.configure(config, settings, lambda name: fixtures.shared_folder(config, name))
    if controller and mode == "":
        summary = triggers.TriggerSummary()
        config.pluginmanager.register(summary, "openkata-trigger-summary")
        # The orphans' stop at the session's end comes after the reports: of two trylast
        # wrappers, the one registered later ends first.
        config.pluginmanager.register(orphans, "openkata-orphans")
        config.pluginmanager.register(
            EvalAggregator(config, settings, triggers=summary), AGGREGATOR_NAME
        )


def pytest_sessionstart(session: pytest.Session) -> None:
    # Here, not at configure time: pytest's terminal reporter is registered by then.
    config = session.config
    if progress.wanted(config, os.environ):
        config.pluginmanager.register(progress.ProgressLine(config), "openkata-progress")
    elif heartbeat.wanted(config, os.environ):
        config.pluginmanager.register(heartbeat.Heartbeat(config), "openkata-heartbeat")


def pytest_report_header(config: pytest.Config) -> str:
    mode = mode_of(config)
    if mode == LINT:
        strict = ", warnings are errors" if config.getoption("eval_lint_strict") else ""
        return f"openkata: lint (no model, no sandbox{strict})"
    if mode == ESTIMATE:
        return "openkata: estimate (no model, no sandbox, no report)"
    s = config.stash[settings_key]
    defaults = EvalSettings()
    extras = [
        f"{name}={getattr(s, name)}"
        for name in ("trials", "judge_votes", "cache", "concurrency", "max_in_flight")
        if getattr(s, name) != getattr(defaults, name)
    ]
    if s.cache != "off" and getattr(config, "cache", None) is None:
        extras.append("cache=off (no cacheprovider)")
    if s.variant and mode == "":  # the own arm's variant; the baseline's is the baseline
        extras.append(f"variant={s.variant}")
    if s.baseline and mode != VALIDATE:  # a validation runs no baseline arm
        extras.append(f"baseline={s.baseline}")
    if s.rejudge and mode == "":
        extras.append(f"rejudge={s.rejudge} (recorded answers graded again; no agent runs)")
    if s.category:
        extras.append(
            f"category={s.category} (only these criteria run and score; no checks.json; "
            "partial: no gate, no automatic report)"
        )
    return (
        f"openkata: backend={s.backend} model={s.model} judge={s.judge_model} "
        f"threshold={s.threshold}"
        + (f" judge_backend={s.judge_backend}" if s.judge_backend != s.backend else "")
        + "".join(f" {extra}" for extra in extras)
        + (" mode=validate (solutions and an empty agent; no report)" if mode == VALIDATE else "")
    )


_HARBOR_OWN_FOLDERS = frozenset({"tests", "solution", "environment"})


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """A Harbor task's ``tests/``, ``solution/`` and ``environment/`` are what its verifier,
    reference solution and image build run inside the task's container: pytest does not
    collect them on the host (their ``test_outputs.py`` files, one a task, read ``/app`` and
    clash by module name). Other folders are left to pytest and the other plugins."""
    if collection_path.name not in _HARBOR_OWN_FOLDERS or "task.toml" not in marker_files(config):
        return None
    from pytest_openkata.core.formats.harbor import is_task  # only where a name matches

    return True if is_task(collection_path.parent) else None


@pytest.hookimpl(tryfirst=True)
def pytest_collect_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if mode_of(parent.config) == LINT:
        if lint.is_skill_dir(path):
            return lint.SkillLintDir.from_parent(parent, path=path)
        if is_evals_dir(path):
            return lint.EvalsLintDir.from_parent(parent, path=path)
        return None
    candidates = evals_candidates(path)
    if candidates is not None:
        return EvalsDir.from_parent(parent, path=path, candidates=candidates)
    return None


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """A published format's file (``evals.json``, ``eval.yaml``, ``task.toml``) in a run, in
    a cost estimate, in validate mode (its scenarios' validation items) and in lint mode (its
    scenarios' lint items)."""
    mode = mode_of(parent.config)
    if file_path.name not in marker_files(parent.config):
        return None
    if mode == LINT:
        return lint.format_lint_collector(file_path, parent)
    from pytest_openkata.plugin.format_items import format_collector  # only where one is

    return format_collector(file_path, parent)


def pytest_itemcollected(item: pytest.Item) -> None:
    note_skill_scenarios(item)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In lint and validate mode only the mode's own items run: the rest are deselected.
    With ``--eval-category``, so are the scenarios without a criterion of those categories;
    with ``--eval-shard``, all but the shard's part of what is left."""
    tell_skills_apart(items, config.rootpath)
    unite_skill_scenarios(config, items)
    mode = mode_of(config)
    _select_for_mode(config, items, mode)
    _count_variant_skills(config, items)  # the whole run's, before a shard takes its part
    shard.select(config, items)  # a part of what the mode, -k and -m selected


def _count_variant_skills(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tell the variants file's arms how many skills the run evaluates: only a run of one
    skill takes a variant's only fixture as its copy whatever the fixture's name."""
    plan = config.stash.get(variants_key, None)
    if plan is None:  # no variants file: nothing to tell
        return
    from dataclasses import replace

    from pytest_openkata.core.variants import VariantPlan

    if isinstance(plan, VariantPlan):
        skills = {item.skill_dir for item in items if isinstance(item, ScenarioItem)}
        config.stash[variants_key] = replace(plan, skill_count=len(skills))


def _select_for_mode(config: pytest.Config, items: list[pytest.Item], mode: str) -> None:
    if mode in (LINT, VALIDATE):
        from pytest_openkata.plugin.format_items import FormatValidationItem, NothingToValidate

        wanted = (
            (lint.SkillLintItem, lint.ScenarioLintItem, lint.FormatLintItem)
            if mode == LINT
            else (ValidationItem, FormatValidationItem, NothingToValidate)
        )
        _deselect(config, items, lambda item: isinstance(item, wanted))
    if mode != LINT:
        categories = config.stash[settings_key].categories
        if categories:
            _deselect(
                config,
                items,
                lambda item: not isinstance(item, ScenarioItem) or item.has_categories(categories),
            )


def _deselect(
    config: pytest.Config, items: list[pytest.Item], keep: Callable[[pytest.Item], bool]
) -> None:
    others = [item for item in items if not keep(item)]
    if others:
        items[:] = [item for item in items if keep(item)]
        config.hook.pytest_deselected(items=others)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """A shard of a lint or validation run whose part is empty (more shards than items)
    passes, when the run selected items for the other parts (a run's shards: the aggregator)."""
    config = session.config
    if (
        mode_of(config)
        and shard.shard_of(config) is not None
        and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED
        and shard.selected_items(config)
    ):
        session.exitstatus = pytest.ExitCode.OK


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if isinstance(item, ScenarioItem):
        result = item.stash.get(result_key, None)
        if result is not None and call.when == "setup":
            setattr(report, RESULT_ATTR, result)
        if call.when == "call":
            # Subtest failures do not raise out of the body; anything else that did is a
            # hard failure. The flag survives xdist's report serialisation.
            setattr(report, BODY_RAISED_ATTR, call.excinfo is not None)
    return report
