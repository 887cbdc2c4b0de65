"""The model ids endpoints report answering with, recorded beside the
:class:`~.Completer` protocol rather than through it, as token usage is
(:mod:`pytest_openkata.infra.usage`).

The OpenAI-style and the Anthropic APIs both say in a response's ``model`` field which model
answered, which may differ from the model asked for (an alias resolved to a dated snapshot,
a deployment pinned to a version, a proxy serving another model). A backend hands every
successful response body to :func:`record_reported_model`; whoever wants the ids wraps the
calls in :func:`recording_models`::

    with recording_models() as models:
        answer = completer.complete(system, user)

As for token usage, the recorder lives in a :class:`contextvars.ContextVar`: a call is
recorded only by the block open in its own thread, and with none open nothing is recorded.
An id is the endpoint's text: it is made safe to show and bounded before it is kept.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from pytest_openkata.infra.text import visible

__all__ = [
    "REPORTED_MODEL_MAX_CHARS",
    "record_reported_model",
    "recording_models",
    "reported_model",
]

REPORTED_MODEL_MAX_CHARS = 200
"""The bound on a reported model id: a hostile endpoint's id stays short."""

_recorder: ContextVar[list[str] | None] = ContextVar("pytest_openkata_model_recorder", default=None)


@contextmanager
def recording_models() -> Iterator[list[str]]:
    """Collect the model id of every call made in this context, in order (an id once per
    call that reported one), until the block ends; blocks nest as :func:`~.usage.recording`'s."""
    entries: list[str] = []
    token = _recorder.set(entries)
    try:
        yield entries
    finally:
        _recorder.reset(token)


def reported_model(body: Mapping[str, Any]) -> str:
    """The model id a response body reports in its ``model`` field, safe to show
    (:func:`~pytest_openkata.infra.text.visible`, bounded); "" when it is missing, not a
    string or blank."""
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        return ""
    return visible(model.strip())[:REPORTED_MODEL_MAX_CHARS]


def record_reported_model(body: Mapping[str, Any]) -> None:
    """Append the id ``body`` reports (:func:`reported_model`) to the innermost open
    :func:`recording_models` of this context, if any and if it reports one."""
    entries = _recorder.get()
    model = reported_model(body)
    if entries is not None and model:
        entries.append(model)
