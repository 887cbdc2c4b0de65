"""The only place where pytest-openkata reads private pytest and xdist names, and why.

Each name below has no public equivalent; each use falls back to the public way (slower, or
no scenario started ahead; never a different result) when the name is missing in another
version, and tox runs the suite on every pytest version the package declares.

- ``item._fixtureinfo.name2fixturedefs`` (pytest): the fixture definitions an item resolved.
  A scenario is run ahead on another thread with the fixtures of the item that starts it, so
  it is started ahead only when it resolves the same definitions (a skill whose
  ``conftest.py`` overrides a plugin fixture runs its own scenarios in their turn). pytest
  offers the fixture *names* publicly (``item.fixturenames``), not what they resolve to.
- ``config._getconftest_pathlist`` (pytest): a conftest's ``collect_ignore`` and
  ``collect_ignore_glob``. Every scenario folder is a directory that pytest's own
  ``pytest_ignore_collect`` checks against every ``norecursedirs`` pattern, building paths for
  each: most of the collection of a large suite. :func:`ignore_check` applies pytest's rules
  with what they read taken once per ``evals`` folder and the patterns compiled once, and
  calls every other plugin's implementation of the hook as pluggy would. It reads the
  implementations from the plugin manager's own hook caller (pytest 9.0's path-aware proxy of
  ``config.hook`` does not expose them); where a ``conftest.py`` implements the hook (which
  applies to some folders only), or for hook wrappers or arguments it cannot give, it calls
  the folder's hook itself.
- ``session._fixturemanager.getfixtureinfo`` and copying its ``FuncFixtureInfo`` (pytest):
  every scenario of an ``evals`` folder resolves the same fixtures; they are worked out once
  per folder (:func:`shared_fixture_info`) instead of once per item.
- xdist's worker loop (``WorkerInteractor``): ``torun`` (the queue of item indices xdist
  sent this worker, read under its lock, never changed) and ``nextitem_index``. Running ahead
  in an xdist worker needs to know which items it will run next; xdist exposes no hook or
  API for that.
- ``_pytest``'s folder (pytest's private package): xdist copies it, with pytest's own, into
  the ``chdir`` of every worker on another host and hands such a worker only the path
  arguments under those folders or an ``--rsyncdir`` (its ``make_reltoroot``); to say before
  any worker starts that a path argument cannot reach it, :func:`xdist_rsync_roots` finds the
  same folders xdist does. No public API names them.
- ``TerminalWriter._current_line`` (pytest): the text of the line pytest's terminal writer
  is on, from which it pads the progress percentage to the right edge. A status line written
  past the writer (to the output's descriptor, while the writer's own file is captured) ends
  pytest's open line; :func:`line_written_past` tells the writer its line is new, so that the
  percentage lines up. Without the name, the percentage stands where it would have on the
  open line; nothing else changes.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest


def fixture_definitions(item: pytest.Item, names: Sequence[str]) -> tuple[object, ...] | None:
    """The definitions ``item`` resolves for each of ``names`` (None: unknown)."""
    info = getattr(item, "_fixtureinfo", None)
    definitions = getattr(info, "name2fixturedefs", None)
    if not isinstance(definitions, dict):
        return None
    return tuple(definitions[name][-1] if definitions.get(name) else None for name in names)


def xdist_queued(config: pytest.Config) -> list[int] | None:
    """In an xdist worker, the indices (into ``session.items``) of the items it will run
    next, in order; None when this is no worker or xdist does not say."""
    if not hasattr(config, "workerinput"):
        return None
    for plugin in config.pluginmanager.get_plugins():
        if hasattr(plugin, "torun") and hasattr(plugin, "nextitem_index"):
            try:
                with plugin.torun.lock() as queue:
                    queued = list(queue)
                indices = [plugin.nextitem_index, *queued]
            except (AttributeError, TypeError):  # another xdist version: look no further
                return []
            return [index for index in indices if isinstance(index, int)]
    return []


def ignore_check(collector: pytest.Collector) -> Callable[[Path], bool]:
    """Whether a scenario folder of ``collector`` (its ``evals`` folder) is ignored, as
    ``pytest_ignore_collect`` says (see the module docstring)."""
    config = collector.config
    hook = collector.ihook.pytest_ignore_collect
    implementations = config.pluginmanager.hook.pytest_ignore_collect.get_hookimpls()
    rules = _pytest_ignore_rules(collector)
    if (
        rules is None
        or [i.plugin_name for i in implementations].count("main") != 1
        or any(
            i.hookwrapper
            or i.wrapper
            or not set(i.argnames) <= {"collection_path", "config"}
            or Path(getattr(i.plugin, "__file__", "") or "").name == "conftest.py"
            for i in implementations
        )
    ):
        return lambda path: bool(hook(collection_path=path, config=config))
    in_call_order = implementations[::-1]  # pluggy calls the last registered first

    def ignored(path: Path) -> bool:
        arguments = {"collection_path": path, "config": config}
        for implementation in in_call_order:
            if implementation.plugin_name == "main":
                answer: object = rules(path) or None
            else:
                answer = implementation.function(
                    *(arguments[name] for name in implementation.argnames)
                )
            if answer is not None:
                return bool(answer)
        return False

    return ignored


def _pytest_ignore_rules(collector: pytest.Collector) -> Callable[[Path], bool] | None:
    """pytest's own ``pytest_ignore_collect`` for the folders in ``collector``'s folder."""
    config = collector.config
    pathlist = getattr(config, "_getconftest_pathlist", None)
    if pathlist is None:
        return None
    folder = collector.path
    ignore_paths = set(pathlist("collect_ignore", path=folder) or ())
    ignore_paths.update(Path(os.path.abspath(p)) for p in config.getoption("ignore") or ())
    ignore_globs = _any_of(
        str(glob)
        for glob in [
            *(pathlist("collect_ignore_glob", path=folder) or ()),
            *(os.path.abspath(g) for g in config.getoption("ignore_glob") or ()),
        ]
    )
    in_virtualenv_too = bool(config.getoption("collect_in_virtualenv"))
    norecurse = config.getini("norecursedirs")
    by_name = _any_of(p for p in norecurse if os.sep not in p and "/" not in p)
    by_path = _any_of(p for p in norecurse if os.sep in p or "/" in p)

    def ignored(path: Path) -> bool:
        return (
            path in ignore_paths
            or bool(ignore_globs and ignore_globs(str(path)))
            # pytest's virtualenv rule, with one stat and no path object per folder
            or (not in_virtualenv_too and os.path.isfile(os.path.join(path, "pyvenv.cfg")))
            or bool(by_name and by_name(path.name))
            or bool(by_path and by_path(str(path)))
        )

    return ignored


def _any_of(patterns: Iterable[str]) -> Callable[[str], object] | None:
    """One compiled test for ``fnmatch.fnmatch`` against any of ``patterns`` (None if none)."""
    translated = [fnmatch.translate(os.path.normcase(pattern)) for pattern in patterns]
    if not translated:
        return None
    match = re.compile("|".join(translated)).match
    return lambda text: match(os.path.normcase(text))


def shared_fixture_info(collector: pytest.Collector, function: Callable[..., Any]) -> Any:
    """A factory of fixture information for items of ``function`` under ``collector``: worked
    out once, copied per item (None: let pytest work it out per item)."""
    manager = getattr(collector.session, "_fixturemanager", None)
    if manager is None or not hasattr(manager, "getfixtureinfo"):
        return None
    shared: Any = manager.getfixtureinfo(collector, function, None)
    if not dataclasses.is_dataclass(shared) or isinstance(shared, type):
        return None

    info: Any = shared

    def copy() -> Any:
        return dataclasses.replace(
            info,
            names_closure=list(info.names_closure),
            name2fixturedefs=dict(info.name2fixturedefs),
        )

    return copy


def xdist_rsync_roots(config: Any) -> list[Path]:
    """The folders xdist copies into the ``chdir`` of a worker on another host, as it finds
    them: pytest's own packages, then ``--rsyncdir`` and the ``rsyncdirs`` ini option."""
    import _pytest
    import pytest

    given = [*(getattr(config.option, "rsyncdir", None) or ()), *config.getini("rsyncdirs")]
    own = [Path(pytest.__file__).parent, Path(_pytest.__file__).parent]
    return [*own, *(Path(root).resolve() for root in given)]


def line_written_past(writer: Any) -> None:
    """Tell pytest's terminal writer that the line it was on has ended (see the module
    docstring)."""
    if isinstance(getattr(writer, "_current_line", None), str):
        writer._current_line = ""
