"""The ``command`` agent's events file, read into a transcript.

A command may say how it worked by writing JSON Lines to the file named by
``OPENKATA_AGENT_EVENTS`` (the host runner gives a fresh path per run and reads the file once
the command exited). Each line is one JSON object with a ``type``:

- ``{"type": "message", "text": "...", "role": "assistant"}``: something said (``role``:
  ``assistant``, the default, or ``user``);
- ``{"type": "tool_call", "name": "Bash", "arguments": {...}, "result": "...", "status":
  "ok"}``: a tool call; ``arguments`` is a JSON value or a string, ``result`` a string and
  ``status`` ``ok``, ``error`` or absent;
- ``{"type": "file_read", "path": "..."}`` and ``{"type": "file_written", "path": "..."}``;
- ``{"type": "skill_loaded", "name": "..."}``;
- ``{"type": "usage", "input_tokens": 900, "output_tokens": 30, "cost_usd": 0.01, "turns":
  2}``: every field optional; several usage lines add up.

Blank lines are passed over. A line that is not such an object (not JSON, an unknown type, a
field of the wrong kind) is an error naming the file's variable and the line's number, never
a line silently dropped. The command's answer stays what it printed on standard output.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from pytest_openkata.contracts.errors import MalformedResponseError
from pytest_openkata.contracts.transcripts import (
    SkillLoad,
    Step,
    Transcript,
    kept_steps,
    unique,
)
from pytest_openkata.infra.text import valid_decoded

__all__ = ["EVENTS_VARIABLE", "EVENT_TYPES", "SOURCE", "read_command_events"]

EVENTS_VARIABLE = "OPENKATA_AGENT_EVENTS"
SOURCE = "command events file"
EVENT_TYPES = ("message", "tool_call", "file_read", "file_written", "skill_loaded", "usage")
_ROLES = ("assistant", "user")
_STATUSES = ("ok", "error", "")
_SHOWN_CHARS = 80


class _BadLine(ValueError):
    """One line of the events file cannot be read; the message says why."""


def _text(event: Mapping[str, Any], key: str, *, required: bool = True, default: str = "") -> str:
    value = event.get(key, None if required else default)
    if not isinstance(value, str):
        wanted = "a string" if required or key in event else "absent or a string"
        raise _BadLine(f"{key!r} must be {wanted}")
    return value


def _count(event: Mapping[str, Any], key: str) -> int | None:
    value = event.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _BadLine(f"{key!r} must be a whole number from 0 on")
    return value


def _amount(event: Mapping[str, Any], key: str) -> float | None:
    value = event.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise _BadLine(f"{key!r} must be a number from 0 on")
    return float(value)


def _added(total: float | None, more: float | None) -> Any:
    return total if more is None else more if total is None else total + more


class _Reading:
    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.read: list[str] = []
        self.written: list[str] = []
        self.skills: list[SkillLoad] = []
        self.usage: dict[str, Any] = {}

    def message(self, event: Mapping[str, Any]) -> None:
        role = _text(event, "role", required=False, default="assistant")
        if role not in _ROLES:
            raise _BadLine(f"'role' must be one of {', '.join(_ROLES)}")
        self.steps.append(Step.message(role, _text(event, "text")))

    def tool_call(self, event: Mapping[str, Any]) -> None:
        arguments = event.get("arguments")
        status = _text(event, "status", required=False)
        if status not in _STATUSES:
            raise _BadLine("'status' must be ok, error or absent")
        self.steps.append(
            Step.tool_call(
                _text(event, "name"),
                arguments
                if isinstance(arguments, str)
                else ""
                if arguments is None
                else json.dumps(arguments, ensure_ascii=False, sort_keys=True),
                result=_text(event, "result", required=False),
                status=status,
            )
        )

    def file_read(self, event: Mapping[str, Any]) -> None:
        self.read.append(_text(event, "path"))

    def file_written(self, event: Mapping[str, Any]) -> None:
        self.written.append(_text(event, "path"))

    def skill_loaded(self, event: Mapping[str, Any]) -> None:
        self.skills.append(SkillLoad(_text(event, "name")))

    def usage_line(self, event: Mapping[str, Any]) -> None:
        for key in ("input_tokens", "output_tokens", "turns"):
            self.usage[key] = _added(self.usage.get(key), _count(event, key))
        self.usage["cost_usd"] = _added(self.usage.get("cost_usd"), _amount(event, "cost_usd"))

    def transcript(self, output: str) -> Transcript:
        steps, cut = kept_steps(self.steps)
        return Transcript(
            source=SOURCE,
            steps=steps,
            cut_steps=cut,
            tool_call_count=sum(1 for step in self.steps if step.kind == "tool_call"),
            skills_loaded=tuple(dict.fromkeys(self.skills)),
            files_read=unique(self.read),
            files_written=unique(self.written),
            turns=self.usage.get("turns"),
            input_tokens=self.usage.get("input_tokens"),
            output_tokens=self.usage.get("output_tokens"),
            cost_usd=self.usage.get("cost_usd"),
            final_text=output,
        )


def _shown(line: str) -> str:
    """The start of a bad line, as ASCII (its control characters escaped)."""
    text = line if len(line) <= _SHOWN_CHARS else line[:_SHOWN_CHARS] + "…"
    return ascii(text)


def read_command_events(events: str, output: str, *, agent: str = "command") -> Transcript:
    """The transcript of an events file's text; ``output`` (what the command printed) is its
    final answer. Raises :class:`MalformedResponseError` naming the first bad line."""
    reading = _Reading()
    readers: dict[str, Callable[[Mapping[str, Any]], None]] = {
        "message": reading.message,
        "tool_call": reading.tool_call,
        "file_read": reading.file_read,
        "file_written": reading.file_written,
        "skill_loaded": reading.skill_loaded,
        "usage": reading.usage_line,
    }
    # Lines end at "\n" only: a text's U+2028 or form feed stays inside its line.
    for number, line in enumerate(events.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            try:
                event = valid_decoded(line, json.loads(line))
            except json.JSONDecodeError as exc:
                raise _BadLine(f"not JSON ({exc.msg})") from None
            except RecursionError:
                raise _BadLine("nested too deeply") from None
            if not isinstance(event, dict):
                raise _BadLine("not a JSON object")
            kind = event.get("type")
            reader = readers.get(kind) if isinstance(kind, str) else None
            if reader is None:
                raise _BadLine(f"'type' must be one of {', '.join(EVENT_TYPES)}")
            reader(event)
        except _BadLine as exc:
            raise MalformedResponseError(
                f"{agent}: events file (${EVENTS_VARIABLE}) line {number}: {exc}: {_shown(line)}"
            ) from None
    return reading.transcript(output)
