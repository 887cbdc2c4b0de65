"""The simulated user: a model that plays the user after the agent's answers.

scenario.json's ``simulated_user`` gives its ``instructions`` (who the user is, what they
want) and ``max_turns`` (the most replies it gives). After each answer the model gets the
instructions and the conversation so far, and answers with a JSON object (bound to
:data:`REPLY_SCHEMA` where the backend can, as the judge's verdicts are):
``{"message": "...", "done": false}``. ``done`` ends the conversation; so does its
``max_turns``-th reply once the agent answered it. The model is the judge's backend and model.

A reply that cannot be read, an empty message that is not done, or a failing endpoint is an
error of the trial (:class:`~pytest_openkata.contracts.errors.MalformedResponseError`, a
backend error), never a failed criterion.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pytest_openkata.contracts.backends import Completer, ResponseSchema
from pytest_openkata.contracts.errors import MalformedResponseError
from pytest_openkata.contracts.results import Turn
from pytest_openkata.core.conversation import NextPrompt
from pytest_openkata.core.scenario import SimulatedUser
from pytest_openkata.infra.text import valid_unicode

__all__ = [
    "REPLY_SCHEMA",
    "SIMULATED_USER_SYSTEM",
    "read_reply",
    "simulated_user",
    "simulated_user_message",
]

SIMULATED_USER_SYSTEM = """\
You play the user of an AI coding agent in a test of that agent. Your instructions say who \
you are and what you want. Read the conversation so far and write the user's next message to \
the agent: stay in your role, never do the agent's work, and say only what the user would say.

Answer with one JSON object: {"message": "<your next message>", "done": <true or false>}. \
Set "done" to true when you have nothing more to say: what you wanted is done, or the agent \
cannot get there. The conversation then ends and your message is not sent."""

REPLY_SCHEMA = ResponseSchema(
    "simulated_user_reply",
    {
        "type": "object",
        "properties": {"message": {"type": "string"}, "done": {"type": "boolean"}},
        "required": ["message", "done"],
        "additionalProperties": False,
    },
)

_DECODER = json.JSONDecoder()


def simulated_user_message(instructions: str, turns: Sequence[Turn]) -> str:
    """What the simulated user's model is asked: its instructions and the conversation."""
    parts = ["## Your instructions\n\n", instructions, "\n\n## The conversation so far\n"]
    for number, turn in enumerate(turns, start=1):
        parts += [
            f"\n### You (turn {number})\n\n",
            turn.user,
            f"\n\n### The agent (turn {number})\n\n",
            turn.agent,
            "\n",
        ]
    parts.append("\nWrite your next message, or say that you are done.\n")
    return "".join(parts)


def read_reply(raw: str) -> tuple[str, bool]:
    """The message and the done flag of the model's answer: the first JSON object in it that
    holds them, the message valid Unicode. Raises :class:`MalformedResponseError` when there is
    none."""
    start = raw.find("{")
    while start != -1:
        try:
            value: Any = _DECODER.raw_decode(raw, start)[0]
        except json.JSONDecodeError:
            value = None
        if (
            isinstance(value, dict)
            and isinstance(value.get("done"), bool)
            and isinstance(value.get("message", ""), str)
        ):
            return valid_unicode(str(value.get("message", ""))), value["done"]
        start = raw.find("{", start + 1)
    raise MalformedResponseError(
        f"simulated user: no reply object with a boolean done in its answer: {raw[:200]!r}"
    )


def simulated_user(user: SimulatedUser, model: Completer, *, after: int = 0) -> NextPrompt:
    """The simulated user's next message after each answer, until it is done or has replied
    ``user.max_turns`` times; ``after`` is the number of scripted follow-ups sent before it
    takes over."""

    def next_prompt(turns: Sequence[Turn]) -> str | None:
        replied = len(turns) - 1 - after
        if replied >= user.max_turns:
            return None
        raw = model.complete(
            SIMULATED_USER_SYSTEM,
            simulated_user_message(user.instructions, turns),
            schema=REPLY_SCHEMA,
        )
        message, done = read_reply(raw)
        if done:
            return None
        if not message.strip():
            raise MalformedResponseError(
                "simulated user: its reply has an empty message and does not say it is done"
            )
        return message

    return next_prompt
