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
        if index is not None:
            yield from items[index + 1 :]
        return
    for index in queued:
        if 0 <= index < len(items) and items[index] is not item:
            yield items[index]


def upcoming_items(session: pytest.Session, item: pytest.Item) -> Iterator[pytest.Item]:
    """The items this process will run after ``item`` with the same run fixtures, in order."""
    definitions = compat.fixture_definitions(item, RUN_FIXTURES)
    if definitions is None:
        return
    for upcoming in _next_items(session, item):
        if compat.fixture_definitions(upcoming, RUN_FIXTURES) == definitions:
            yield upcoming
