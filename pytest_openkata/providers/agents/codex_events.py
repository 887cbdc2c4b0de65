"""Codex's ``exec --json`` events, read into a transcript.

``codex exec --json`` prints one JSON object a line: ``thread.started``, then per turn
``turn.started``, ``item.started`` / ``item.updated`` / ``item.completed`` events whose
``item`` has a ``type`` (``agent_message``: ``text``; ``reasoning``; ``command_execution``:
``command``, ``aggregated_output``, ``exit_code``, ``status``; ``file_change``: ``changes``
of ``path`` and ``kind``, ``status``; ``mcp_tool_call``: ``server``, ``tool``, ``arguments``,
``result`` or ``error``; ``web_search``: ``query``; ``todo_list``; ``error``: ``message``), and
``turn.completed`` with the turn's ``usage`` or ``turn.failed`` with its ``error``. An item is
read once it completed (its last state); the final text is the last agent message.

Codex has no skill tool: a skill counts as loaded when a command it ran names the skill's
``SKILL.md`` (``cat skills/review/SKILL.md``). Lines that are not JSON objects are passed over;
a stream that holds no event at all gives no transcript.
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

__all__ = ["SOURCE", "read_codex_events"]

SOURCE = "codex exec --json"

_SKILL_FILE = re.compile(r"([^\s/'\"]+)/SKILL\.md\b")
_STATUS = {"completed": "ok", "failed": "error", "declined": "error"}


def _step(item: Mapping[str, Any]) -> Step | None:
    kind = item.get("type")
    status = _STATUS.get(str(item.get("status", "")), "")
    if kind == "agent_message":
        return Step.message("assistant", str(item.get("text", "")))
    if kind == "command_execution":
        exit_code = item.get("exit_code")
        if isinstance(exit_code, int) and not status:
            status = "ok" if exit_code == 0 else "error"
        return Step.tool_call(
            "shell",
            str(item.get("command", "")),
            result=str(item.get("aggregated_output", "")),
            status=status,
        )
    if kind == "file_change":
        changes = [c for c in item.get("changes") or () if isinstance(c, dict)]
        described = ", ".join(f"{c.get('kind', '')} {c.get('path', '')}" for c in changes)
        return Step.tool_call("apply_patch", described, status=status)
    if kind == "mcp_tool_call":
        error = item.get("error")
        result = item.get("result")
        shown = json.dumps(result, ensure_ascii=False) if result is not None else ""
        if isinstance(error, dict):
            shown = str(error.get("message", ""))
        return Step.tool_call(
            f"{item.get('server', '')}.{item.get('tool', '')}",
            json.dumps(item.get("arguments"), ensure_ascii=False, sort_keys=True),
            result=shown,
            status=status,
        )
    if kind == "web_search":
        return Step.tool_call("web_search", str(item.get("query", "")), status="ok")
    if kind == "error":
        return Step.message("error", str(item.get("message", "")))
    return None  # reasoning, plans and to-do lists are the agent's notes, not what it did


class _Reading:
    def __init__(self) -> None:
        self.items: dict[str, Mapping[str, Any]] = {}  # by id, in the order first seen
        self.turns = 0
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.failure = ""

    def event(self, event: Mapping[str, Any]) -> None:
        kind = event["type"]
        if kind in ("item.started", "item.updated", "item.completed"):
            item = event.get("item")
            if isinstance(item, dict):
                self.items[str(item.get("id", len(self.items)))] = item
        elif kind == "turn.started":
            self.turns += 1
        elif kind == "turn.completed":
            self.failure = ""  # an error it recovered from (a reconnect) did not end the turn
            usage = mapping(event.get("usage"))
            self.input_tokens = _add(self.input_tokens, usage.get("input_tokens"))
            self.output_tokens = _add(self.output_tokens, usage.get("output_tokens"))
        elif kind in ("turn.failed", "error"):
            error = event.get("error") if kind == "turn.failed" else event
            message = error.get("message", "") if isinstance(error, dict) else ""
            self.failure = f"error: {message}"

    def transcript(self) -> Transcript:
        steps: list[Step] = []
        skills: list[SkillLoad] = []
        written: list[str] = []
        for item in self.items.values():
            step = _step(item)
            if step is None:
                continue
            steps.append(step)
            if item.get("type") == "command_execution":
                skills += [SkillLoad(name) for name in _SKILL_FILE.findall(step.arguments)]
            elif item.get("type") == "file_change":
                written += [
                    str(change.get("path", ""))
                    for change in item.get("changes") or ()
                    if isinstance(change, dict) and change.get("kind") != "delete"
                ]
        kept, cut = kept_steps(steps)
        return Transcript(
            source=SOURCE,
            steps=kept,
            cut_steps=cut,
            tool_call_count=sum(1 for step in steps if step.kind == "tool_call"),
            skills_loaded=tuple(dict.fromkeys(skills)),
            files_written=unique(written),
            turns=self.turns or None,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            outcome=self.failure or ("success" if self.turns else ""),
            final_text=last_said(steps),
        )


def _add(total: int | None, value: Any) -> int | None:
    if not isinstance(value, int) or isinstance(value, bool):
        return total
    return value if total is None else total + value


def read_codex_events(output: str) -> Transcript | None:
    """The transcript of ``codex exec --json`` output; None when it holds no event."""
    reading = _Reading()
    seen = False
    for event in json_events(output):
        seen = True
        reading.event(event)
    return reading.transcript() if seen else None
