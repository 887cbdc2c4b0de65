"""Agent event streams as JSON Lines: what the agents' readers share."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from pytest_openkata.infra.text import valid_decoded

__all__ = ["json_events", "mapping", "session_in"]


def json_events(output: str) -> Iterator[Mapping[str, Any]]:
    """Each line of ``output`` that is a JSON object with a string ``type``, in order, its
    texts valid Unicode (a ``\\ud800`` escape reads as U+FFFD). Other lines (a warning the CLI
    printed among its events, a line cut by a crash, one nested too deeply to read) are
    passed over."""
    for line in output.splitlines():
        text = line.strip()
        if not text.startswith("{"):
            continue
        try:
            event = valid_decoded(text, json.loads(text))
        except (json.JSONDecodeError, RecursionError):  # nested past what can be walked
            continue
        if isinstance(event, dict) and isinstance(event.get("type"), str):
            yield event


def mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a JSON object, else an empty one: an event's field of the wrong
    shape reads as absent."""
    return value if isinstance(value, dict) else {}


def session_in(output: str, key: str, event_type: str = "") -> str | None:
    """The first non-empty string ``key`` of the events in ``output`` (of type
    ``event_type`` only, when one is given): the session an agent's turn ran in."""
    for event in json_events(output):
        if event_type and event["type"] != event_type:
            continue
        value = event.get(key)
        if isinstance(value, str) and value:
            return value
    return None
