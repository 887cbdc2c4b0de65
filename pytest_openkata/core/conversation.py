"""Conversations of more than one turn: the follow-up prompts of a scenario, sent after the
agent's first answer in the same session, and the turns they make.

Where the next prompt comes from is a :data:`NextPrompt`: it gets the turns so far and gives
the next prompt, or None when the conversation is over. scenario.json's ``follow_ups`` are
sent first, in order; its ``simulated_user`` (:mod:`pytest_openkata.core.simulated_user`)
replies after them. :func:`converse` drives any agent session through them: a function that
sends one prompt and gives the answer and, where the agent says, how it worked.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pytest_openkata.contracts.results import Turn
from pytest_openkata.contracts.transcripts import Transcript, joined_turns

__all__ = [
    "Conversation",
    "NextPrompt",
    "SendPrompt",
    "conversation_text",
    "converse",
    "scripted",
    "then",
]

NextPrompt = Callable[[Sequence[Turn]], str | None]
"""The next prompt of a conversation given its turns so far; None when it is over."""

SendPrompt = Callable[[str], tuple[str, Transcript | None]]
"""Sends one prompt to the agent's session: its answer, and how it worked where it says."""


@dataclass(frozen=True)
class Conversation:
    """Every turn of a conversation, and the agent's transcripts of them joined into one
    (None when a turn gave none)."""

    turns: tuple[Turn, ...]
    transcript: Transcript | None

    @property
    def answer(self) -> str:
        """The final answer: the last turn's."""
        return self.turns[-1].agent


def scripted(prompts: Sequence[str]) -> NextPrompt:
    """The ``prompts``, one after each answer, then the end."""
    fixed = tuple(prompts)

    def next_prompt(turns: Sequence[Turn]) -> str | None:
        sent = len(turns) - 1  # the first turn is the task
        return fixed[sent] if sent < len(fixed) else None

    return next_prompt


def then(first: NextPrompt, second: NextPrompt) -> NextPrompt:
    """``first``'s prompts, then ``second``'s once ``first`` has none left (``first`` gives
    none for every later turn, as :func:`scripted` does)."""

    def next_prompt(turns: Sequence[Turn]) -> str | None:
        prompt = first(turns)
        return prompt if prompt is not None else second(turns)

    return next_prompt


def converse(send: SendPrompt, task: str, prompt: str, follow: NextPrompt) -> Conversation:
    """Send ``prompt`` (the task, with the skill as the prompt holds it), then each prompt
    ``follow`` gives, in the same session. ``task`` is the first turn's text as the
    conversation shows it (task.md, without the skill)."""
    answer, transcript = send(prompt)
    turns = [Turn(task, answer)]
    transcripts = [transcript]
    while (following := follow(turns)) is not None:
        answer, transcript = send(following)
        turns.append(Turn(following, answer))
        transcripts.append(transcript)
    told = [t for t in transcripts if t is not None]
    joined = None
    if len(told) == len(transcripts):
        joined = joined_turns(told, [turn.user for turn in turns[1:]])
    return Conversation(tuple(turns), joined)


def conversation_text(turns: Sequence[Turn], final: str) -> str:
    """A conversation as the judge reads it: each turn's user message and the agent's answer,
    numbered; the last answer is ``final`` (for a sandboxed agent, its answer and the
    workspace changes)."""
    parts = []
    for number, turn in enumerate(turns, start=1):
        answer = final if number == len(turns) else turn.agent
        parts.append(f"### User (turn {number})\n\n{turn.user}\n\n### Agent (turn {number})\n\n")
        parts.append(answer)
        if number < len(turns):
            parts.append("\n\n")
    return "".join(parts)
