"""Trajectory checks: verdicts on how the agent worked, read from its transcript.

Each function takes the transcript and what its check asks, and gives ``(passed, reason)``;
:mod:`pytest_openkata.core.checks` turns that into the check's verdict, and raises when the
agent gave no events to read (a check of a trajectory is then an error, never a pass or a
fail). Tool names match as shell-style globs, without regard to case (``bash`` matches
Claude Code's ``Bash``, ``mcp.*`` every MCP tool); an argument pattern is searched in the
call's arguments as the agent gave them (JSON text, or a command line).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence

from pytest_openkata.contracts.transcripts import Step, Transcript

__all__ = [
    "ORDERS",
    "files_read",
    "tool_sequence",
    "tool_used",
    "within_limit",
]

ORDERS = ("exact", "in_order", "any_order")
_SHOWN_CALLS = 5


def _named(step: Step, tool: str) -> bool:
    return step.kind == "tool_call" and fnmatch.fnmatchcase(step.tool.lower(), tool.lower())


def _listed(calls: Sequence[Step]) -> str:
    names = [call.tool for call in calls[:_SHOWN_CALLS]]
    more = f" and {len(calls) - _SHOWN_CALLS} more" if len(calls) > _SHOWN_CALLS else ""
    return (", ".join(names) + more) if names else "none"


def tool_used(
    transcript: Transcript, tool: str, arguments_match: Callable[[str], bool] | None
) -> tuple[bool, str]:
    """Whether some call of a tool named ``tool`` (its arguments matching, when asked) was
    made."""
    named = [step for step in transcript.steps if _named(step, tool)]
    matching = [s for s in named if arguments_match is None or arguments_match(s.arguments)]
    if matching:
        return True, f"{len(matching)} call(s) of {tool}: first {matching[0].arguments[:80]!r}"
    if named:
        return False, f"{len(named)} call(s) of {tool}, none with matching arguments"
    return False, f"no call of {tool} among the tool calls ({_listed(transcript.tool_calls)})"


def tool_sequence(transcript: Transcript, tools: Sequence[str], order: str) -> tuple[bool, str]:
    """Whether the tool calls hold ``tools``: ``exact`` (those calls and no other, in that
    order), ``in_order`` (those, in that order, others between them allowed) or
    ``any_order`` (each of them, in any order)."""
    calls = transcript.tool_calls
    said = f"the tool calls were {_listed(calls)}"
    if order == "exact":
        passed = len(calls) == len(tools) and all(
            _named(call, tool) for call, tool in zip(calls, tools, strict=True)
        )
        return passed, said
    if order == "any_order":
        missing = [tool for tool in tools if not any(_named(call, tool) for call in calls)]
        return not missing, said if not missing else f"no call of {', '.join(missing)}; {said}"
    position = 0
    for call in calls:
        if position < len(tools) and _named(call, tools[position]):
            position += 1
    if position == len(tools):
        return True, said
    before = ", ".join(tools[:position]) or "the start"
    return False, f"{tools[position]} did not come after {before}; {said}"


def files_read(transcript: Transcript, glob: str) -> tuple[bool, str]:
    """Whether the agent read a file whose path matches ``glob``; a relative glob matches
    below any folder (``references/*.md`` matches ``/workspace/skill/references/api.md``, not
    ``/workspace/notreferences/a.md``)."""
    wanted = glob.removeprefix("./")
    read = [
        path
        for path in transcript.files_read
        if fnmatch.fnmatchcase(path, wanted)
        or (not wanted.startswith("/") and fnmatch.fnmatchcase(path, f"*/{wanted}"))
    ]
    if read:
        return True, f"read {read[0]}"
    shown = ", ".join(transcript.files_read[:_SHOWN_CALLS]) or "none"
    return False, f"no file matching {glob} was read (files read: {shown})"


def within_limit(figure: int, limit: int, what: str) -> tuple[bool, str]:
    """Whether ``figure`` of ``what`` (tool calls, turns, tokens) is at most ``limit``."""
    return figure <= limit, f"{figure} {what}, at most {limit} allowed"
