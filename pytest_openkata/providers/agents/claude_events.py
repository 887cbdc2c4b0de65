"""Claude Code's ``--output-format stream-json`` events, read into a transcript.

With ``-p --output-format stream-json --verbose`` Claude Code prints one JSON object a line: a
``system`` event (``init``: the session, the model, the tools, the skills it found; the
transcript keeps the model and those skills' names as ``extras``), ``assistant`` messages whose
``content`` holds ``text`` and ``tool_use`` blocks (``id``, ``name``, ``input``), ``user``
messages holding the ``tool_result`` blocks of those calls (``tool_use_id``, ``content``,
``is_error``), and a last ``result`` event (``result``: the final text; ``num_turns``,
``duration_ms``, ``total_cost_usd``, ``usage``). A subagent's events carry the id of the
``Task`` call that started it in ``parent_tool_use_id``.

A skill counts as loaded when the ``Skill`` tool was called for it, or when its ``SKILL.md`` was
read. Lines that are not JSON objects (a warning the CLI printed) are passed over; a stream that
holds no event at all gives no transcript.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from pytest_openkata.contracts.transcripts import (
    SkillLoad,
    Step,
    Transcript,
    kept_steps,
    last_said,
    unique,
)
from pytest_openkata.providers.agents.events import json_events, mapping

__all__ = ["SOURCE", "read_claude_events"]

SOURCE = "claude stream-json"

_READ_TOOLS = frozenset({"Read", "NotebookRead"})
_WRITE_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
_SKILL_TOOL = "Skill"
_SKILL_FILE = re.compile(r"(?:^|/)([^/]+)/SKILL\.md$")


def _text_of(content: Any) -> str:
    """A tool result's content: a string, or a list of blocks of which the text ones count."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(block.get("text", ""))
            for block in content
            if isinstance(block, dict) and block.get("type") == "text"
        )
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def _arguments(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True) if value is not None else ""


def _skill_name(tool: str, arguments: Mapping[str, Any]) -> str:
    if tool == _SKILL_TOOL:
        for key in ("skill", "command", "name"):
            if isinstance(arguments.get(key), str):
                return str(arguments[key]).lstrip("/")
    if tool in _READ_TOOLS:
        match = _SKILL_FILE.search(str(arguments.get("file_path", "")))
        if match:
            return match.group(1)
    return ""


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _tokens(*values: Any) -> int | None:
    """The sum of the token counts given (Claude Code reports the cached input apart)."""
    counts = [count for count in map(_int, values) if count is not None]
    return sum(counts) if counts else None


class _Reading:
    """The transcript as the events come in."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.calls: dict[str, int] = {}  # tool_use id -> index of its step
        self.skills: list[SkillLoad] = []
        self.read: list[str] = []
        self.written: list[str] = []
        self.result: Mapping[str, Any] = {}
        self.model = ""
        self.offered = ""  # the skills it found, as its init event lists them

    def assistant(self, event: Mapping[str, Any], by: str) -> None:
        for block in _content(event):
            kind = block.get("type")
            if kind == "text" and str(block.get("text", "")).strip():
                self.steps.append(Step.message("assistant", str(block["text"]), subagent=by))
            elif kind == "tool_use":
                self._tool_use(block, by)

    def _tool_use(self, block: Mapping[str, Any], by: str) -> None:
        tool = str(block.get("name", ""))
        arguments = mapping(block.get("input"))
        call_id = block.get("id")
        if isinstance(call_id, str) and call_id:  # a call without one has no result to match
            self.calls[call_id] = len(self.steps)
        self.steps.append(Step.tool_call(tool, _arguments(arguments), subagent=by))
        skill = _skill_name(tool, arguments)
        if skill:
            self.skills.append(SkillLoad(skill, by))
        path = str(arguments.get("file_path") or arguments.get("notebook_path") or "")
        if path and tool in _READ_TOOLS:
            self.read.append(path)
        elif path and tool in _WRITE_TOOLS:
            self.written.append(path)

    def user(self, event: Mapping[str, Any]) -> None:
        for block in _content(event):
            if block.get("type") != "tool_result":
                continue
            index = self.calls.get(str(block.get("tool_use_id", "")))
            if index is None:
                continue
            call = self.steps[index]
            status = "error" if block.get("is_error") else "ok"
            self.steps[index] = Step.tool_call(
                call.tool,
                call.arguments,
                result=_text_of(block.get("content")),
                status=status,
                subagent=call.subagent,
            )

    def transcript(self) -> Transcript:
        result = self.result
        usage = mapping(result.get("usage"))
        duration = _number(result.get("duration_ms"))
        steps, cut = kept_steps(self.steps)
        outcome = ""
        if result:
            failed = result.get("is_error") or result.get("subtype") != "success"
            outcome = f"error: {result.get('subtype', '')}" if failed else "success"
        answer = result.get("result")
        return Transcript(
            source=SOURCE,
            steps=steps,
            cut_steps=cut,
            tool_call_count=sum(1 for step in self.steps if step.kind == "tool_call"),
            skills_loaded=tuple(dict.fromkeys(self.skills)),
            files_read=unique(self.read),
            files_written=unique(self.written),
            turns=_int(result.get("num_turns")),
            input_tokens=_tokens(
                usage.get("input_tokens"),
                usage.get("cache_read_input_tokens"),
                usage.get("cache_creation_input_tokens"),
            ),
            output_tokens=_int(usage.get("output_tokens")),
            cost_usd=_number(result.get("total_cost_usd")),
            seconds=None if duration is None else duration / 1000,
            outcome=outcome,
            final_text=answer if isinstance(answer, str) else last_said(self.steps),
            extras={
                key: value
                for key, value in (("model", self.model), ("skills_offered", self.offered))
                if value
            },
        )


# At most this many of the skills an init event lists are kept: the CLI's own come first.
_MAX_OFFERED = 200


def _names(value: Any) -> str:
    """The skill names of an init event's ``skills`` list, comma-separated (text, so that
    masking and every report treat it as the rest of the transcript's text)."""
    if not isinstance(value, list):
        return ""
    return ", ".join(str(name) for name in value[:_MAX_OFFERED] if isinstance(name, str))


def _content(event: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    message = event.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, dict)]


def read_claude_events(output: str) -> Transcript | None:
    """The transcript of Claude Code's ``stream-json`` output; None when it holds no event."""
    reading = _Reading()
    seen = False
    for event in json_events(output):
        seen = True
        kind = event["type"]
        by = str(event.get("parent_tool_use_id") or "")
        if kind == "system" and event.get("subtype") == "init":
            reading.model = str(event.get("model", ""))
            reading.offered = _names(event.get("skills"))
        elif kind == "assistant":
            reading.assistant(event, by)
        elif kind == "user":
            reading.user(event)
        elif kind == "result":
            reading.result = event
    return reading.transcript() if seen else None
