"""A scripted ACP agent, written with the ACP SDK: ``python acp_agent.py SCRIPT [SKILL_FILE]``.

It speaks the real protocol on its standard input and output, as ``opencode acp`` or
``qwen --acp`` do, and on ``session/prompt`` plays one script:

- ``work``: reads ``SKILL_FILE`` through the client (a ``read`` tool call whose location is
  that file), runs a failed ``Bash`` call, asks permission to edit ``notes.md`` and writes it
  through the client when allowed, then answers in two chunks and reports its usage and cost;
- ``hostile``: answers with control characters, terminal escapes and markup, and calls a tool
  whose title and output hold them too;
- ``crash``: says a word, then exits with status 3 mid-session;
- ``silent``: never answers the prompt;
- ``refuse``: answers the prompt with an error whose message and data hold terminal escapes;
- ``mute``: ends the turn without a word.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import acp
from acp import schema

WORK_ANSWER_PARTS = ("The final answer, long enough ", "to be judged on its own merits.")
HOSTILE = "\x1b[2J\x1b]0;pwned\x07<script>alert(1)</script>\r\x00\u202e|end"
USAGE = {"input": 900, "output": 30}
COST_USD = 0.0125


class ScriptedAgent(acp.Agent):  # type: ignore[misc]
    def __init__(self, script: str, skill_file: str) -> None:
        self.script = script
        self.skill_file = skill_file
        self.client: Any = None

    def on_connect(self, conn: Any) -> None:
        self.client = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> schema.InitializeResponse:
        return schema.InitializeResponse(protocol_version=protocol_version)

    async def new_session(self, cwd: str, **kwargs: Any) -> schema.NewSessionResponse:
        self.cwd = Path(cwd)
        return schema.NewSessionResponse(session_id="session-1")

    async def _update(self, session_id: str, update: Any) -> None:
        await self.client.session_update(session_id=session_id, update=update)

    async def _say(self, session_id: str, text: str) -> None:
        await self._update(session_id, acp.update_agent_message_text(text))

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> Any:
        play = getattr(self, f"_{self.script}")
        return await play(session_id)

    async def _work(self, session_id: str) -> schema.PromptResponse:
        skill = str((self.cwd / self.skill_file).resolve())
        await self._update(
            session_id,
            acp.start_read_tool_call("read-1", "Read", skill),
        )
        read = await self.client.read_text_file(session_id=session_id, path=skill)
        await self._update(
            session_id,
            acp.update_tool_call(
                "read-1",
                status="completed",
                content=[acp.tool_content(acp.text_block(read.content))],
            ),
        )
        await self._update(
            session_id,
            acp.start_tool_call(
                "bash-1", "Bash", kind="execute", status="in_progress", raw_input={"command": "ls"}
            ),
        )
        await self._update(
            session_id,
            acp.update_tool_call("bash-1", status="failed", raw_output={"error": "no terminal"}),
        )
        notes = str(self.cwd / "notes.md")
        edit = acp.start_edit_tool_call("edit-1", "Edit", notes, "# notes\n")
        await self._update(session_id, edit)
        options = [
            schema.PermissionOption(option_id="yes", name="Allow", kind="allow_once"),
            schema.PermissionOption(option_id="no", name="Reject", kind="reject_once"),
        ]
        decision = await self.client.request_permission(
            session_id=session_id,
            tool_call=schema.ToolCallUpdate(
                tool_call_id="edit-1",
                kind="edit",
                locations=[schema.ToolCallLocation(path=notes)],
            ),
            options=options,
        )
        allowed = getattr(decision.outcome, "option_id", "") == "yes"
        if allowed:
            await self.client.write_text_file(
                session_id=session_id, path=notes, content="# notes\n"
            )
        await self._update(
            session_id,
            acp.update_tool_call(
                "edit-1",
                status="completed" if allowed else "failed",
                content=[acp.tool_content(acp.text_block("written" if allowed else "refused"))],
            ),
        )
        for part in WORK_ANSWER_PARTS:
            await self._say(session_id, part)
        await self._update(
            session_id,
            schema.UsageUpdate(
                session_update="usage_update",
                used=930,
                size=16384,
                cost=schema.Cost(amount=COST_USD, currency="USD"),
            ),
        )
        return schema.PromptResponse(
            stop_reason="end_turn",
            usage=schema.Usage(
                input_tokens=USAGE["input"],
                output_tokens=USAGE["output"],
                total_tokens=USAGE["input"] + USAGE["output"],
            ),
        )

    async def _hostile(self, session_id: str) -> schema.PromptResponse:
        await self._update(
            session_id,
            acp.start_tool_call("t-1", f"Tool{HOSTILE}", kind="other", raw_input={"x": HOSTILE}),
        )
        await self._update(
            session_id,
            acp.update_tool_call(
                "t-1", status="completed", content=[acp.tool_content(acp.text_block(HOSTILE))]
            ),
        )
        await self._say(session_id, f"answer<{HOSTILE}> from the scripted ACP agent, long enough.")
        return schema.PromptResponse(stop_reason="end_turn")

    async def _crash(self, session_id: str) -> schema.PromptResponse:
        await self._say(session_id, "Starting")
        await asyncio.sleep(0.2)  # the word reaches the client before the agent dies
        os._exit(3)

    async def _silent(self, session_id: str) -> schema.PromptResponse:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def _refuse(self, session_id: str) -> schema.PromptResponse:
        raise acp.RequestError(-32603, f"refused{HOSTILE}", {"why": HOSTILE})

    async def _mute(self, session_id: str) -> schema.PromptResponse:
        return schema.PromptResponse(stop_reason="end_turn")


def main() -> None:
    script = sys.argv[1]
    skill_file = sys.argv[2] if len(sys.argv) > 2 else "SKILL.md"
    asyncio.run(acp.run_agent(ScriptedAgent(script, skill_file)))


if __name__ == "__main__":
    main()
