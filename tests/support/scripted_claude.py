"""A stand-in for Claude Code that prints Claude Code's ``stream-json`` events as a plan says.

:func:`install_scripted_claude` puts a ``claude`` executable first on ``PATH``. For each call
it reads the prompt from standard input, looks the prompt up in the plan (a JSON file mapping
a prompt to one behaviour per call, in order) and prints:

- ``load``: an assistant turn calling the Skill tool on the plan's skill, then a result;
- ``skip``: an assistant text turn and a result, no tool call;
- ``silent``: a plain line of text and no event at all (an agent whose activation is unknown).

Each call also appends one JSON line to ``calls.jsonl`` beside it: its arguments, its prompt
and the files under its working folder, so that tests see where the installed skills were.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["ScriptedClaude", "install_scripted_claude"]

_PROGRAM = r"""
import fcntl, json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
prompt = sys.stdin.read()
plan = json.load(open(os.path.join(here, "plan.json")))
query = prompt.strip()
with open(os.path.join(here, "calls.jsonl"), "a") as log:
    fcntl.flock(log, fcntl.LOCK_EX)
    earlier = [json.loads(line) for line in open(os.path.join(here, "calls.jsonl"))]
    count = sum(1 for call in earlier if call["prompt"].strip() == query)
    files = sorted(
        os.path.relpath(os.path.join(root, name), ".")
        for root, _dirs, names in os.walk(".") for name in names
    )
    log.write(json.dumps({"argv": sys.argv[1:], "prompt": prompt, "files": files}) + "\n")
steps = plan["queries"].get(query, ["skip"])
step = steps[count % len(steps)]
if step == "silent":
    print("I answered without saying how.")
    sys.exit(0)
events = [{"type": "system", "subtype": "init", "session_id": "s", "model": "m"}]
if step == "load":
    events.append({"type": "assistant", "parent_tool_use_id": None, "message": {"content": [
        {"type": "tool_use", "id": "t1", "name": "Skill", "input": {"skill": plan["skill"]}}]}})
    events.append({"type": "user", "parent_tool_use_id": None, "message": {"content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "loaded"}]}})
else:
    events.append({"type": "assistant", "parent_tool_use_id": None, "message": {"content": [
        {"type": "text", "text": "No skill needed."}]}})
answer = "The task is done as the rules of the skill say, step by step."
events.append({"type": "result", "subtype": "success", "is_error": False, "result": answer,
               "num_turns": 1, "usage": {"input_tokens": 10, "output_tokens": 2}})
for event in events:
    print(json.dumps(event))
"""


class ScriptedClaude:
    """The stand-in's folder: its plan and the calls it received."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def plan(self, skill: str, queries: Mapping[str, Sequence[str]]) -> None:
        data = {"skill": skill, "queries": {q: list(steps) for q, steps in queries.items()}}
        (self.folder / "plan.json").write_text(json.dumps(data))

    def calls(self) -> list[dict[str, object]]:
        log = self.folder / "calls.jsonl"
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text().splitlines()]


def install_scripted_claude(folder: Path) -> tuple[ScriptedClaude, str]:
    """The stand-in in ``folder`` and the ``PATH`` that finds it first."""
    folder.mkdir(parents=True, exist_ok=True)
    program = folder / "claude_standin.py"
    program.write_text(_PROGRAM)
    claude = folder / "claude"
    claude.write_text(f"#!/bin/sh\nexec '{sys.executable}' '{program}' \"$@\"\n")
    claude.chmod(claude.stat().st_mode | stat.S_IXUSR)
    standin = ScriptedClaude(folder)
    standin.plan("", {})
    return standin, f"{folder}{os.pathsep}{os.environ['PATH']}"
