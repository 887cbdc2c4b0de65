"""Model backends: one module per backend (``http``, ``anthropic``, ``cli``), over the
contract of :mod:`pytest_openkata.contracts.backends`, whose names are given here too, with the
errors a backend raises, for backends written against this package."""

from __future__ import annotations

from pytest_openkata.contracts.backends import (
    DEFAULT_ANSWER_MAX_BYTES,
    SCHEMA_REFUSED_STATUSES,
    BackendContext,
    CapacityAware,
    Completer,
    ResponseSchema,
    SkillAware,
    answer_bound,
    byte_size,
)
from pytest_openkata.contracts.errors import (
    AnswerTooLargeError,
    BackendError,
    CallTimeoutError,
    EndpointStatusError,
    LimitExceededError,
    MalformedResponseError,
    TransportError,
)

__all__ = [
    "DEFAULT_ANSWER_MAX_BYTES",
    "SCHEMA_REFUSED_STATUSES",
    "AnswerTooLargeError",
    "BackendContext",
    "BackendError",
    "CallTimeoutError",
    "CapacityAware",
    "Completer",
    "EndpointStatusError",
    "LimitExceededError",
    "MalformedResponseError",
    "ResponseSchema",
    "SkillAware",
    "TransportError",
    "answer_bound",
    "byte_size",
]
