"""Which scenario items a process runs next, for the scheduler to start ahead.

Without xdist that is the items after this one in ``session.items``; in an xdist worker, the
items xdist has queued for this worker (:func:`~.compat.xdist_queued`). Only items that
resolve the run's fixtures to the same definitions as the current one are given: they can run
on a thread with its fixtures.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pytest_openkata.plugin import compat

# The fixtures a scenario run is built from.
RUN_FIXTURES = (
    "openkata_result",
    "openkata_backends",
    "openkata_run_options",
    "openkata_redactor",
    "openkata_settings",
    "openkata_sandbox",
)

_positions_key = pytest.StashKey[tuple[int, dict[str, int]]]()
_definitions_key = pytest.StashKey[tuple[object, ...] | None]()


def _position(session: pytest.Session, item: pytest.Item) -> int | None:
    """``item``'s index in ``session.items`` (the table is rebuilt if the list changes)."""
    cached = session.stash.get(_positions_key, None)
    if cached is None or cached[0] != id(session.items):
        cached = (id(session.items), {it.nodeid: i for i, it in enumerate(session.items)})
        session.stash[_positions_key] = cached
    return cached[1].get(item.nodeid)


def _next_items(session: pytest.Session, item: pytest.Item) -> Iterator[pytest.Item]:
    items = session.items
    queued = compat.xdist_queued(session.config)
    if queued is None:
        index = _position(session, item)
        if index is not None:  # by index: a slice would copy the rest of the list each time
            for following in range(index + 1, len(items)):
                yield items[following]
        return
    for index in queued:
        if 0 <= index < len(items) and items[index] is not item:
            yield items[index]


def _run_definitions(item: pytest.Item) -> tuple[object, ...] | None:
    """The definitions ``item`` resolves for the run fixtures, worked out once per item: the
    scheduler looks at the items ahead each time an item asks for its result."""
    try:
        return item.stash[_definitions_key]
    except KeyError:
        definitions = compat.fixture_definitions(item, RUN_FIXTURES)
        item.stash[_definitions_key] = definitions
        return definitions


def upcoming_items(session: pytest.Session, item: pytest.Item) -> Iterator[pytest.Item]:
    """The items this process will run after ``item`` with the same run fixtures, in order."""
    definitions = _run_definitions(item)
    if definitions is None:
        return
    for upcoming in _next_items(session, item):
        if _run_definitions(upcoming) == definitions:
            yield upcoming
