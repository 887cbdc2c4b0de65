"""The only place where pytest-openkata reads private pytest and xdist names, and why.

Each name below has no public equivalent; each use degrades to "no scenario started ahead"
(never to a wrong result) when the name is missing in another version, and tox runs the suite
on every pytest version the package declares.

- ``item._fixtureinfo.name2fixturedefs`` (pytest): the fixture definitions an item resolved.
  A scenario is run ahead on another thread with the fixtures of the item that starts it, so
  it is started ahead only when it resolves the same definitions (a skill whose
  ``conftest.py`` overrides a plugin fixture runs its own scenarios in their turn). pytest
  offers the fixture *names* publicly (``item.fixturenames``), not what they resolve to.
- xdist's worker loop (``WorkerInteractor``): ``torun`` (the queue of item indices xdist
  sent this worker, read under its lock, never changed) and ``nextitem_index``. Running ahead
  in an xdist worker needs to know which items it will run next; xdist exposes no hook or
  API for that.
"""

from __future__ import annotations

from collections.abc import Sequence

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
