"""``--eval-shard I/N``: this run is one shard of a CI matrix (:mod:`pytest_openkata.core.shards`).

Collection keeps the shard's part of the selected scenarios (and of any other selected test)
and deselects the rest; what was selected before is kept for the shard's record. The run is
partial (no gate, no results JSON anywhere: the merge writes it) and leaves its run log, with
the shard's record, in ``--eval-shard-dir``. Under xdist every worker collects and deselects
alike, and sends the selection to the controller through xdist's ``workeroutput``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.contracts.results import ScenarioResult
from pytest_openkata.core.runlog import RunInfo, log_lines, relative_skill_dir
from pytest_openkata.core.shards import (
    SHARD_EXTRA,
    Scenario,
    ShardRecord,
    ShardSpec,
    recorded_settings,
    shard_items,
)
from pytest_openkata.core.versions import read_skill_version
from pytest_openkata.infra.atomic import write_new_report
from pytest_openkata.infra.redact import Redactor
from pytest_openkata.plugin.items import ScenarioItem
from pytest_openkata.plugin.session import redactor_of

DEFAULT_FOLDER = ".openkata/shards"
_SELECTION_OUTPUT = "openkata_selection"

_spec_key = pytest.StashKey[ShardSpec | None]()
_selection_key = pytest.StashKey[list[Scenario]]()
_selected_key = pytest.StashKey[int]()


def add_options(group: Any) -> None:
    group.addoption(
        "--eval-shard",
        dest="eval_shard",
        default=None,
        metavar="I/N",
        help="run the I-th of N balanced parts of the selected scenarios (a CI matrix job): "
        "no gate and no results JSON; the shard's run log goes to --eval-shard-dir for "
        "python -m pytest_openkata merge",
    )
    group.addoption(
        "--eval-shard-dir",
        dest="eval_shard_dir",
        default=None,
        metavar="DIR",
        help=f"with --eval-shard: the folder of the shard's file (default {DEFAULT_FOLDER}, "
        "relative to the rootdir)",
    )


def configure(config: pytest.Config) -> None:
    """Read ``--eval-shard``; a bad value is a usage error."""
    text = config.getoption("eval_shard")
    spec = None
    if text:
        try:
            spec = ShardSpec.parse(text)
        except ValueError as exc:
            raise pytest.UsageError(f"pytest-openkata: --eval-shard: {exc}") from None
    elif config.getoption("eval_shard_dir"):
        raise pytest.UsageError("pytest-openkata: --eval-shard-dir needs --eval-shard")
    config.stash[_spec_key] = spec


def shard_of(config: pytest.Config) -> ShardSpec | None:
    return config.stash.get(_spec_key, None)


def shard_folder(config: pytest.Config) -> Path:
    given = config.getoption("eval_shard_dir") or DEFAULT_FOLDER
    return config.rootpath / Path(given).expanduser()


def scenario_of(item: pytest.Item) -> Scenario | None:
    """A scenario item's skill folder (relative to the rootdir) and name."""
    if not isinstance(item, ScenarioItem):
        return None
    return relative_skill_dir(item.skill_dir, item.config.rootpath), item.name


def select(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep this shard's part of ``items``, deselect the rest, and remember the scenarios
    selected before. Scenarios and other tests are split apart, so that the scenarios' parts
    are balanced whatever tests lie between them."""
    spec = shard_of(config)
    if spec is None:
        return
    config.stash[_selection_key] = sorted(
        scenario for scenario in map(scenario_of, items) if scenario is not None
    )
    config.stash[_selected_key] = len(items)
    scenarios = [item for item in items if isinstance(item, ScenarioItem)]
    others = [item for item in items if not isinstance(item, ScenarioItem)]
    kept = {id(item) for part in (scenarios, others) for item in shard_items(part, _node_id, spec)}
    dropped = [item for item in items if id(item) not in kept]
    if dropped:
        items[:] = [item for item in items if id(item) in kept]
        config.hook.pytest_deselected(items=dropped)


def selected_items(config: pytest.Config) -> int:
    """How many items (of any kind) this process selected before splitting them."""
    return config.stash.get(_selected_key, 0)


def _node_id(item: pytest.Item) -> str:
    return item.nodeid


def selection(config: pytest.Config) -> list[Scenario]:
    """The scenarios selected before sharding (None known: the collection did not run here)."""
    return config.stash.get(_selection_key, [])


class FromWorkers:
    """Under xdist: the selection, which only the workers know, comes back with each."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is not None:
            workeroutput[_SELECTION_OUTPUT] = [list(s) for s in selection(session.config)]

    @pytest.hookimpl
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        given: Sequence[Sequence[str]] | None = getattr(node, "workeroutput", {}).get(
            _SELECTION_OUTPUT
        )
        if given is not None and _selection_key not in self.config.stash:
            self.config.stash[_selection_key] = [(skill, name) for skill, name in given]


def write_shard_file(
    config: pytest.Config,
    results: Sequence[ScenarioResult],
    settings: EvalSettings,
    finished_at: datetime,
    *,
    failed: int,
    partial: bool,
    complete: bool = True,
    removed: list[Path] | None = None,
    extras: Mapping[str, list[dict[str, Any]]] | None = None,
) -> Path:
    """The shard's run log, with its record, in the shard folder (never over another file);
    ``complete`` is False for a shard that was stopped (the merge then refuses it). The
    temporary files of killed runs removed from the folder are added to ``removed``."""
    from pytest_openkata import __version__
    from pytest_openkata.core.recorded import recorded_run
    from pytest_openkata.core.run_manifest import build_manifest
    from pytest_openkata.core.runlog import run_settings

    spec = shard_of(config)
    assert spec is not None
    rootdir = config.rootpath
    recorded = recorded_run(settings, rootdir)
    versions = {
        relative_skill_dir(result.skill_dir, rootdir): read_skill_version(Path(result.skill_dir))
        for result in results
    }
    record = ShardRecord(
        spec=spec,
        plugin_version=__version__,
        settings=_masked(recorded_settings(settings), redactor_of(config)),
        skill_versions=dict(sorted(versions.items())),
        selected=tuple(selection(config)),
        failed=failed,
        partial=partial,
    )
    info = RunInfo(
        finished_at=finished_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        complete=complete,
        threshold=settings.threshold,
        settings=run_settings(settings),
        manifest=build_manifest(settings, results, rootdir, __version__),
        # A shard of a re-judge says what it re-judged, as the merged run will.
        rejudged_from=None if recorded is None else recorded.rejudged_from(),
    )
    text = log_lines(info, results, rootdir, {**(extras or {}), SHARD_EXTRA: [record.to_dict()]})
    return write_new_report(shard_folder(config) / spec.file_name, text, removed=removed)


def _masked(data: dict[str, Any], redact: Redactor) -> dict[str, Any]:
    """The settings with every secret masked, as every report masks them."""
    return {
        key: _masked(value, redact)
        if isinstance(value, dict)
        else redact(value)
        if isinstance(value, str)
        else value
        for key, value in data.items()
    }
