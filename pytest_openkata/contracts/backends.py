"""The model backend's contract: the protocol a backend implements, what its factory gets,
the structured-output request and the bound on an answer's size.

A backend turns ``(system, user)`` text into the model's answer. Every failure is raised as a
:class:`~pytest_openkata.contracts.errors.BackendError` subclass, so that callers can tell an
endpoint problem from a failed criterion and a throttle from any other error without reading
message text. The backends themselves live in :mod:`pytest_openkata.providers.backends`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pytest_openkata.contracts.transcripts import Transcript

__all__ = [
    "DEFAULT_ANSWER_MAX_BYTES",
    "SCHEMA_REFUSED_STATUSES",
    "BackendContext",
    "CapacityAware",
    "Completer",
    "Conversing",
    "HoldsSessions",
    "Message",
    "ResponseSchema",
    "SkillAware",
    "Transcribing",
    "answer_bound",
    "byte_size",
]

DEFAULT_ANSWER_MAX_BYTES = 4 * 1024 * 1024
"""The default of ``answer_max_bytes``: about a million tokens of text, more than any judge's
context takes in, so that a larger answer could not be judged whole anyway; a call holds at
most this much in memory and a trial records at most this much."""


def answer_bound(limit: int) -> str:
    """How error texts name the bound on an answer: ``4 MiB, the bound of answer_max_bytes``."""
    return f"{byte_size(limit)}, the bound of answer_max_bytes"


def byte_size(count: int) -> str:
    """``4 MiB``, ``512 KiB``, ``1000 bytes``: a size in the largest unit that states it
    exactly."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size and count % size == 0:
            return f"{count // size} {unit}"
    return f"{count} byte" if count == 1 else f"{count} bytes"


@dataclass(frozen=True)
class ResponseSchema:
    """A JSON schema the answer must follow, for backends that can constrain their output."""

    name: str
    schema: dict[str, Any]

    @classmethod
    def keyed(cls, name: str, keys: Sequence[str], member: Mapping[str, Any]) -> ResponseSchema:
        """An object with one required member per key (a criterion's name), each following
        ``member``, and nothing else: the shape of a judge's verdicts, in the subset strict
        structured-output APIs accept."""
        return cls(
            name=name,
            schema={
                "type": "object",
                "properties": {key: copy.deepcopy(dict(member)) for key in keys},
                "required": list(keys),
                "additionalProperties": False,
            },
        )


# Statuses with which endpoints refuse a structured-output request they do not support
# (llama-cpp-python's server answers a json_schema request with 500). A backend that gets one
# on its first structured request, and then an answer to the same request without the
# structure, answers in plain text for the rest of the session.
SCHEMA_REFUSED_STATUSES = frozenset({400, 404, 415, 422, 500, 501})


class Completer(Protocol):
    """What the runner and the judge need from a backend.

    ``schema`` asks for structured output; a backend that cannot honour it answers in free
    text, which callers must still accept.
    """

    model: str

    @property
    def endpoint(self) -> str:
        """Where the requests go (a base URL, or an agent CLI's name): part of cache keys and
        the name of the in-flight cap's slots."""
        ...

    def complete(self, system: str, user: str, *, schema: ResponseSchema | None = None) -> str: ...


@runtime_checkable
class SkillAware(Protocol):
    """A backend whose answer depends on the skill folder it runs for (an agent CLI working in
    a folder prepared from the skill, as kiro's agent mode does)."""

    def for_skill(self, skill_dir: Path, *, source: Path | bool = True) -> Completer:
        """The backend for the skill of ``skill_dir``; ``source`` is where the skill's files
        come from when the backend installs them (True: ``skill_dir``, a folder: another copy,
        False: none)."""
        ...


@runtime_checkable
class Transcribing(Protocol):
    """A backend that can say how its answer was made (an agent CLI that prints its events):
    :meth:`complete_transcribed` is :meth:`~Completer.complete` with the transcript beside the
    answer (None where the agent gave no events)."""

    def complete_transcribed(self, system: str, user: str) -> tuple[str, Transcript | None]: ...


Message = tuple[str, str]
"""One message of a conversation: its role (``user`` or ``assistant``) and its text."""


@runtime_checkable
class Conversing(Protocol):
    """A model backend that can answer a conversation: the messages so far, alternating
    ``user`` and ``assistant`` and ending with a ``user`` one, are sent as the API's own
    messages (a direct scenario's follow-up turns)."""

    def converse(self, system: str, messages: Sequence[Message]) -> str: ...


@runtime_checkable
class HoldsSessions(Protocol):
    """A backend that runs an agent able to continue its session (an agent CLI): inside
    :meth:`session`, the function it gives sends one prompt after another to the same
    session, each giving the answer and how it was made (None where the agent gave no
    events). A backend whose agent cannot continue raises
    :class:`~pytest_openkata.contracts.errors.AgentConfigError` on entering."""

    def session(
        self,
    ) -> AbstractContextManager[Callable[[str], tuple[str, Transcript | None]]]: ...


@runtime_checkable
class CapacityAware(Protocol):
    """A backend whose endpoint can say how many requests it serves at once (llama-server
    reports its slots): the in-flight cap ``max_in_flight = auto`` asks it on the first call."""

    def capacity(self) -> int | None:
        """The number of requests the endpoint serves at once, or None when it does not say
        (or cannot be asked); never raises."""
        ...


@dataclass(frozen=True)
class BackendContext:
    """What a backend factory of the ``pytest_openkata.backends`` entry-point group gets: the
    run's settings, the model to ask, the session's shared HTTP client (an ``httpx.Client``)
    and whether the backend serves the agent or the judge."""

    settings: Any
    model: str
    client: Any
    role: str
