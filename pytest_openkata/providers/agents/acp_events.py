"""What the ACP client printed (:mod:`.acp_client`), read into a transcript.

The client prints the agent's session updates, one JSON object a line
(``{"type": "session_update", "update": {...}}``), and a last ``result`` line (the prompt's
``stopReason``, its ``usage`` where the agent reports it, and the seconds it took). The
updates read are ACP's own:

- ``agent_message_chunk``: the agent's text; chunks that follow each other make one message,
  and its last message is its answer;
- ``tool_call`` and ``tool_call_update`` (matched by ``toolCallId``): a tool call named by its
  ``title`` (else its ``kind``), its ``rawInput`` as arguments, the text of its ``content``
  (else its ``rawOutput``) as result, and its status (``completed``: ``ok``, ``failed``:
  ``error``); a call of kind ``read`` reads the files its ``locations`` (else its input's path)
  name, one of kind ``edit``, ``delete`` or ``move`` writes them, and a read of a ``SKILL.md``
  loads the skill of the folder holding it;
- ``usage_update``: the session's cost, when given in US dollars.

Lines that are not JSON objects (a warning) are passed over; output without a ``result`` line
gives no transcript.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
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

__all__ = ["SOURCE", "read_acp_events"]

SOURCE = "acp session/update"

_READ_KINDS = frozenset({"read"})
_WRITE_KINDS = frozenset({"edit", "delete", "move"})
_PATH_KEYS = ("path", "file_path", "filePath", "absolute_path", "absolutePath", "filename")
_SKILL_FILE = re.compile(r"(?:^|/)([^/]+)/SKILL\.md$")
_STATUSES = {"completed": "ok", "failed": "error"}


@dataclass
class _Call:
    """A tool call as its updates have told it so far."""

    title: str = ""
    kind: str = ""
    arguments: Any = None
    result: str = ""
    status: str = ""
    paths: list[str] = field(default_factory=list)

    def merge(self, update: Mapping[str, Any]) -> None:
        if isinstance(update.get("title"), str) and update["title"]:
            self.title = update["title"]
        if isinstance(update.get("kind"), str):
            self.kind = update["kind"]
        if "rawInput" in update:
            self.arguments = update["rawInput"]
        if isinstance(update.get("status"), str):
            self.status = _STATUSES.get(update["status"], "")
        result = _content_text(update.get("content"))
        if not result and "rawOutput" in update:
            result = _json_text(update["rawOutput"])
        if result:
            self.result = result
        locations = update.get("locations")
        if isinstance(locations, list):
            self.paths = [
                str(location["path"])
                for location in locations
                if isinstance(location, dict) and isinstance(location.get("path"), str)
            ]

    def files(self) -> list[str]:
        if self.paths:
            return self.paths
        arguments = mapping(self.arguments)
        return [str(arguments[key]) for key in _PATH_KEYS if isinstance(arguments.get(key), str)]

    def step(self) -> Step:
        return Step.tool_call(
            self.title or self.kind or "tool",
            _json_text(self.arguments),
            result=self.result,
            status=self.status,
        )


def _json_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _content_text(content: Any) -> str:
    """The text of a tool call's content: its text blocks, and the new text of its diffs."""
    if not isinstance(content, list):
        return ""
    texts: list[str] = []
    for item in content:
        if not isinstance(item, dict):
            continue
        block = mapping(item.get("content"))
        if item.get("type") == "content" and block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        elif item.get("type") == "diff" and isinstance(item.get("newText"), str):
            texts.append(item["newText"])
    return "\n".join(texts)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


class _Reading:
    """The transcript as the lines come in: steps in order, a call's step updated in place."""

    def __init__(self) -> None:
        self.entries: list[_Call | str] = []  # a message's text, or a tool call
        self.calls: dict[str, _Call] = {}
        self.cost: float | None = None
        self.result: Mapping[str, Any] = {}

    def update(self, update: Mapping[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            content = mapping(update.get("content"))
            text = content.get("text")
            if content.get("type") == "text" and isinstance(text, str):
                if self.entries and isinstance(self.entries[-1], str):
                    self.entries[-1] += text
                else:
                    self.entries.append(text)
        elif kind in ("tool_call", "tool_call_update"):
            call_id = str(update.get("toolCallId", ""))
            call = self.calls.get(call_id) if call_id else None
            if call is None:
                call = _Call()
                self.entries.append(call)
                if call_id:
                    self.calls[call_id] = call
            call.merge(update)
        elif kind == "usage_update":
            cost = mapping(update.get("cost"))
            if str(cost.get("currency", "")).upper() == "USD":
                self.cost = _number(cost.get("amount"))

    def transcript(self) -> Transcript:
        steps: list[Step] = []
        read: list[str] = []
        written: list[str] = []
        skills: list[SkillLoad] = []
        for entry in self.entries:
            if isinstance(entry, str):
                if entry.strip():
                    steps.append(Step.message("assistant", entry))
                continue
            steps.append(entry.step())
            files = entry.files()
            if entry.kind in _READ_KINDS:
                read += files
                skills += [
                    SkillLoad(match.group(1))
                    for path in files
                    if (match := _SKILL_FILE.search(path))
                ]
            elif entry.kind in _WRITE_KINDS:
                written += files
        kept, cut = kept_steps(steps)
        usage = mapping(self.result.get("usage"))
        stop = str(self.result.get("stopReason", ""))
        return Transcript(
            source=SOURCE,
            steps=kept,
            cut_steps=cut,
            tool_call_count=sum(1 for step in steps if step.kind == "tool_call"),
            skills_loaded=tuple(dict.fromkeys(skills)),
            files_read=unique(read),
            files_written=unique(written),
            input_tokens=_int(usage.get("inputTokens")),
            output_tokens=_int(usage.get("outputTokens")),
            cost_usd=self.cost,
            seconds=_number(self.result.get("seconds")),
            outcome="success" if stop == "end_turn" else f"error: {stop}" if stop else "",
            final_text=last_said(steps),
        )


def read_acp_events(output: str) -> Transcript | None:
    """The transcript of the ACP client's output; None when it holds no ``result`` line (the
    session did not end)."""
    reading = _Reading()
    for event in json_events(output):
        if event["type"] == "session_update":
            reading.update(mapping(event.get("update")))
        elif event["type"] == "result":
            reading.result = event
    return reading.transcript() if reading.result else None
