"""How an agent worked: one transcript model for every agent that says what it did.

A :class:`Transcript` is the ordered :class:`Step` s of one agent run (its messages and its tool
calls, with the subagent that made each, if one did), the skills it loaded and by whom, the files
it read and wrote, its turns, tokens, cost and time where the agent reported them. Agents say
this in their own event streams (Claude Code's ``stream-json``, Codex's ``exec --json``, ...);
each agent's reader turns its stream into this one model, and every report reads only the model.

A reader keeps at most :data:`MAX_STEPS` steps, the first and the last ones, with the number
left out in ``cut_steps``, so that a run of thousands of tool calls cannot fill a report or
the cache. Before a transcript is kept, :meth:`Transcript.masked` masks the secrets in every
text it holds and then bounds the steps' texts: a message, an argument or a result longer than
its cap keeps its start and a mark of how much was cut (:func:`bounded`). Masking comes first,
so that a cut never leaves part of a secret behind.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

__all__ = [
    "ARGUMENT_CHARS",
    "DIRECT_SOURCE",
    "MAX_STEPS",
    "MESSAGE_CHARS",
    "RESULT_CHARS",
    "SkillLoad",
    "Step",
    "Transcript",
    "bounded",
    "final_answer",
    "joined_turns",
    "kept_steps",
    "last_said",
    "one_turn",
    "unique",
]

MESSAGE_CHARS = 4000  # of one message's text
ARGUMENT_CHARS = 1000  # of one tool call's arguments
RESULT_CHARS = 1000  # of one tool call's result
MAX_STEPS = 400  # steps kept of one transcript: the first half and the last half of them

_StepKind = Literal["message", "tool_call"]


def bounded(text: str, limit: int) -> str:
    """``text``, or its first ``limit`` characters and a mark saying how many were cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters cut]"


@dataclass(frozen=True)
class Step:
    """One thing the agent did: a message (``role`` ``assistant`` or ``user``, its ``text``) or
    a tool call (``tool``, its ``arguments`` as the agent gave them, an excerpt of its ``result``
    and its ``status``: ``ok``, ``error`` or ``""`` where the agent did not say). ``subagent``
    names the tool call that started the subagent which made this step (``""``: the agent
    itself)."""

    kind: _StepKind
    role: str = ""
    text: str = ""
    tool: str = ""
    arguments: str = ""
    result: str = ""
    status: str = ""
    subagent: str = ""

    @classmethod
    def message(cls, role: str, text: str, *, subagent: str = "") -> Step:
        return cls("message", role=role, text=text, subagent=subagent)

    @classmethod
    def tool_call(
        cls,
        tool: str,
        arguments: str,
        *,
        result: str = "",
        status: str = "",
        subagent: str = "",
    ) -> Step:
        return cls(
            "tool_call",
            tool=tool,
            arguments=arguments,
            result=result,
            status=status,
            subagent=subagent,
        )

    def masked(self, mask: Callable[[str], str]) -> Step:
        """This step with ``mask`` applied to every text, and its texts then bounded."""
        return Step(
            self.kind,
            role=mask(self.role),
            text=bounded(mask(self.text), MESSAGE_CHARS),
            tool=mask(self.tool),
            arguments=bounded(mask(self.arguments), ARGUMENT_CHARS),
            result=bounded(mask(self.result), RESULT_CHARS),
            status=mask(self.status),
            subagent=mask(self.subagent),
        )


@dataclass(frozen=True)
class SkillLoad:
    """A skill the agent loaded: its ``name`` and who loaded it (``subagent``: the tool call
    that started the subagent that loaded it, ``""`` for the agent itself)."""

    name: str
    subagent: str = ""


@dataclass(frozen=True)
class Transcript:
    """One agent run as its events told it; see the module docstring. ``source`` names the
    events it was read from (``claude stream-json``, ``codex exec --json``); ``None`` where
    the agent did not report a figure."""

    source: str
    steps: tuple[Step, ...] = ()
    cut_steps: int = 0
    tool_call_count: int | None = None  # every tool call, those left out included
    skills_loaded: tuple[SkillLoad, ...] = ()
    files_read: tuple[str, ...] = ()
    files_written: tuple[str, ...] = ()
    turns: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    seconds: float | None = None
    outcome: str = ""  # how the agent said it ended: "success", "error: …", "" unknown
    final_text: str = ""
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def tool_calls(self) -> tuple[Step, ...]:
        """The tool calls kept (see ``cut_steps``)."""
        return tuple(step for step in self.steps if step.kind == "tool_call")

    @property
    def all_tool_calls(self) -> int:
        """How many tool calls the agent made, those left out of ``steps`` included."""
        return len(self.tool_calls) if self.tool_call_count is None else self.tool_call_count

    def last_tool_calls(self, count: int) -> tuple[Step, ...]:
        """The last ``count`` tool calls, the most recent last."""
        return self.tool_calls[-count:] if count > 0 else ()

    def masked(self, mask: Callable[[str], str]) -> Transcript:
        """This transcript with ``mask`` applied to every text it holds (secrets masked), its
        steps' texts then bounded; the final answer is kept whole (the judge reads it)."""
        return replace(
            self,
            source=mask(self.source),
            steps=tuple(step.masked(mask) for step in self.steps),
            skills_loaded=tuple(
                SkillLoad(mask(load.name), mask(load.subagent)) for load in self.skills_loaded
            ),
            files_read=tuple(mask(path) for path in self.files_read),
            files_written=tuple(mask(path) for path in self.files_written),
            final_text=mask(self.final_text),
            outcome=mask(self.outcome),
            extras={
                key: mask(value) if isinstance(value, str) else value
                for key, value in self.extras.items()
            },
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Transcript:
        """A transcript from :meth:`to_dict`'s data; raises KeyError or TypeError for data of
        another shape."""
        return cls(
            **{
                **data,
                "steps": tuple(Step(**step) for step in data.get("steps", ())),
                "skills_loaded": tuple(SkillLoad(**load) for load in data.get("skills_loaded", ())),
                "files_read": tuple(data.get("files_read", ())),
                "files_written": tuple(data.get("files_written", ())),
            }
        )


DIRECT_SOURCE = "direct"


def one_turn(answer: str) -> Transcript:
    """The transcript of a model backend's answer: one turn, one message (the prompt, the same
    for every trial, is not repeated in it)."""
    return Transcript(
        DIRECT_SOURCE,
        steps=(Step.message("assistant", answer),),
        tool_call_count=0,
        turns=1,
        final_text=answer,
    )


def last_said(steps: Sequence[Step]) -> str:
    """What the agent itself (not a subagent) said last, whole: its answer where its events
    name none."""
    said = [
        step.text
        for step in steps
        if step.kind == "message" and step.role == "assistant" and not step.subagent
    ]
    return said[-1] if said else ""


def final_answer(transcript: Transcript) -> str:
    """The agent's final answer: the one its events name, else its last message."""
    return transcript.final_text or last_said(transcript.steps)


def kept_steps(steps: Sequence[Step], limit: int = MAX_STEPS) -> tuple[tuple[Step, ...], int]:
    """At most ``limit`` of ``steps``: the first and the last ones, and how many were left out
    between them."""
    if len(steps) <= limit:
        return tuple(steps), 0
    head = limit // 2
    tail = limit - head
    return (*steps[:head], *steps[-tail:]), len(steps) - limit


def unique(items: Iterable[str]) -> tuple[str, ...]:
    """``items`` once each, in the order first seen."""
    return tuple(dict.fromkeys(item for item in items if item))


def _total(values: Iterable[int | None]) -> int | None:
    known = [value for value in values if value is not None]
    return sum(known) if known else None


def joined_turns(transcripts: Sequence[Transcript], prompts: Sequence[str]) -> Transcript:
    """The transcripts of a conversation's turns as one: each turn's steps, the follow-up
    ``prompts`` (one fewer than the turns) as the user's messages between them, the figures
    summed and the final answer the last turn's."""
    if not transcripts or len(prompts) != len(transcripts) - 1:
        raise ValueError("a conversation has one transcript per turn and a prompt between two")
    steps: list[Step] = list(transcripts[0].steps)
    for prompt, transcript in zip(prompts, transcripts[1:], strict=True):
        steps.append(Step.message("user", prompt))
        steps.extend(transcript.steps)
    kept, cut = kept_steps(steps)
    last = transcripts[-1]
    seconds = [t.seconds for t in transcripts if t.seconds is not None]
    costs = [t.cost_usd for t in transcripts if t.cost_usd is not None]
    return Transcript(
        last.source,
        steps=kept,
        cut_steps=cut + sum(t.cut_steps for t in transcripts),
        tool_call_count=_total(t.all_tool_calls for t in transcripts),
        skills_loaded=tuple(dict.fromkeys(load for t in transcripts for load in t.skills_loaded)),
        files_read=unique(path for t in transcripts for path in t.files_read),
        files_written=unique(path for t in transcripts for path in t.files_written),
        turns=_total(t.turns for t in transcripts),
        input_tokens=_total(t.input_tokens for t in transcripts),
        output_tokens=_total(t.output_tokens for t in transcripts),
        cost_usd=sum(costs) if costs else None,
        seconds=sum(seconds) if seconds else None,
        outcome=last.outcome,
        final_text=final_answer(last),
        extras=dict(last.extras),
    )
