"""The client side of the Agent Client Protocol, run as ``python -m`` by the ``acp`` agent.

``python -m pytest_openkata.providers.agents.acp_client --name NAME --approve MODE -- ARGV...``
reads the prompt on standard input, starts the ACP agent ``ARGV`` with its standard input and
output as the protocol's pipe (its standard error is this process's), and runs one session:
``initialize``, ``session/new`` in the current folder (the workspace) and one
``session/prompt``. With ``--resume ID`` it continues the session ``ID`` instead (a follow-up
turn): ``session/load``, whose replay of the conversation so far is not printed again, then
the prompt; an agent that does not offer ``session/load`` cannot be continued, which is its
error. It prints what the agent reported, one JSON object a line (read by
:mod:`.acp_events`):

- ``{"type": "session", "sessionId": ...}``: the session the prompt went to, first;

- ``{"type": "session_update", "update": {...}}``: a ``session/update`` notification's update
  as ACP spells it (``sessionUpdate``, ``toolCallId``, ``rawInput``, ...); consecutive chunks
  of one message are joined into one update, so that a streamed answer is not one line a
  token;
- ``{"type": "result", "stopReason": ..., "usage": {...} | null, "seconds": ...}``: the
  prompt's response, last.

The agent is served as a client must serve it: files are read and written for it inside the
workspace only, and its permission requests are answered by ``--approve``: ``all`` (a run in
a disposable sandbox: every tool), ``edits`` (a workspace agent on the host: edits of files in
the workspace, as Claude Code's ``acceptEdits``) or ``none`` (a plain answer: nothing). It
gets no terminal.

A failure (the agent cannot start, it exits or breaks the protocol mid-session, it ends the
prompt without a response) is one line on standard error naming the agent, and exit status
1. The agent is stopped on every way out: standard input closed, then terminated, then
killed; the runner kills this process's whole group after it anyway.

A sandboxed agent runs in the trial's container, whose image has no Python for this client:
:func:`drive_attached` runs the same session in the plugin's own process, over an agent
process the sandbox attached (its standard input and output held by the host), and writes
the same lines to the caller. There every permission is granted and the client offers no
file-system capability (the agent's own tools act on the container's files); a failure is
the same line, written last, and status 1.

The ACP SDK is imported here only, so that the plugin's start-up does not pay for it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import threading
import time
import unicodedata
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_openkata.contracts.sandboxes import AttachedProcess

__all__ = ["APPROVALS", "drive_attached", "main"]

APPROVALS = ("none", "edits", "all")
_EDIT_KINDS = frozenset({"edit", "delete", "move"})
_CHUNKS = frozenset({"agent_message_chunk"})
# The updates kept: what the agent said and did, and what it cost (not its command list,
# modes, plans or thoughts).
_KEPT = frozenset({"agent_message_chunk", "tool_call", "tool_call_update", "usage_update"})
_ESCAPED = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_SHUTDOWN_SECONDS = 2.0
_STREAM_LIMIT = 50 * 1024 * 1024  # one protocol message, as the SDK's own default


class AgentProtocolError(Exception):
    """The agent broke the session: it exited, answered out of protocol or gave no answer."""


Write = Callable[[str], None]


def _to_stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _emitter(write: Write) -> Callable[..., None]:
    """``emit(kind, **fields)``: one line of output through ``write``."""

    def emit(kind: str, **fields: Any) -> None:
        # ASCII only: a line separator of Unicode's (U+2028, U+0085) never splits a line.
        write(json.dumps({"type": kind, **fields}) + "\n")

    return emit


def _inside(path: str, root: Path) -> Path | None:
    """``path`` resolved, when it lies in ``root``; None otherwise."""
    try:
        resolved = (root / path).resolve()
    except (OSError, RuntimeError, ValueError):
        return None
    return resolved if resolved.is_relative_to(root) else None


class _Updates:
    """The session's updates as they come, consecutive chunks of one message joined; none
    while ``muted`` (an agent replaying a loaded session's earlier turns)."""

    def __init__(self, emit: Callable[..., None]) -> None:
        self._pending: dict[str, Any] | None = None
        # The pending message's text as its chunks came, joined once when it is emitted (a
        # text grown chunk by chunk would be copied whole at every chunk).
        self._pieces: list[str] = []
        self.muted = False
        self.emit = emit

    def add(self, update: dict[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        if kind not in _KEPT or self.muted:
            return
        pending = self._pending
        if (
            pending is not None
            and kind in _CHUNKS
            and kind == pending.get("sessionUpdate")
            and _text(update) is not None
            and _text(pending) is not None
        ):
            self._pieces.append(_text(update) or "")
            return
        self.flush()
        if kind in _CHUNKS and _text(update) is not None:
            self._pending = update
            self._pieces = [_text(update) or ""]
        else:
            self.emit("session_update", update=update)

    def flush(self) -> None:
        if self._pending is not None:
            self._pending["content"]["text"] = "".join(self._pieces)
            self.emit("session_update", update=self._pending)
            self._pending = None
            self._pieces = []


def _text(update: dict[str, Any]) -> str | None:
    content = update.get("content")
    if isinstance(content, dict) and content.get("type") == "text":
        text = content.get("text")
        return text if isinstance(text, str) else None
    return None


def _make_client(workspace: Path | None, approve: str, updates: _Updates) -> Any:
    import acp
    from acp import schema

    class WorkspaceClient:
        """Serves the agent: files inside the workspace, permissions by ``approve``; the
        methods it lacks (terminals, elicitations) the agent is told are not there."""

        async def request_permission(
            self,
            session_id: str,
            tool_call: schema.ToolCallUpdate,
            options: list[schema.PermissionOption],
            **kwargs: Any,
        ) -> schema.RequestPermissionResponse:
            allowed = approve == "all" or (
                approve == "edits" and workspace is not None and _an_edit_in(tool_call, workspace)
            )
            wanted = ("allow_once", "allow_always") if allowed else ("reject_once", "reject_always")
            for kind in wanted:
                for option in options:
                    if option.kind == kind:
                        return schema.RequestPermissionResponse(
                            outcome=schema.AllowedOutcome(
                                outcome="selected", option_id=option.option_id
                            )
                        )
            return schema.RequestPermissionResponse(
                outcome=schema.DeniedOutcome(outcome="cancelled")
            )

        async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
            updates.add(update.model_dump(mode="json", by_alias=True, exclude_none=True))

        async def read_text_file(
            self,
            session_id: str,
            path: str,
            line: int | None = None,
            limit: int | None = None,
            **kwargs: Any,
        ) -> schema.ReadTextFileResponse:
            target = None if workspace is None else _inside(path, workspace)
            if target is None:
                raise acp.RequestError.invalid_params({"path": "outside the workspace"})
            try:
                text = target.read_text(errors="replace")
            except OSError as exc:
                raise acp.RequestError.resource_not_found(path) from exc
            if line is not None or limit is not None:
                lines = text.splitlines(keepends=True)
                start = max((line or 1) - 1, 0)
                text = "".join(lines[start : None if limit is None else start + limit])
            return schema.ReadTextFileResponse(content=text)

        async def write_text_file(
            self, session_id: str, path: str, content: str, **kwargs: Any
        ) -> schema.WriteTextFileResponse | None:
            target = None if workspace is None else _inside(path, workspace)
            if target is None or approve == "none":
                raise acp.RequestError.invalid_params({"path": "not writable by the agent"})
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
            return schema.WriteTextFileResponse()

    return WorkspaceClient()


def _an_edit_in(tool_call: Any, workspace: Path) -> bool:
    """Whether ``tool_call`` edits files, all of them in the workspace: one that names no file
    cannot be told to stay there, and is not one."""
    if tool_call.kind not in _EDIT_KINDS:
        return False
    paths = [location.path for location in tool_call.locations or ()]
    return bool(paths) and all(_inside(path, workspace) is not None for path in paths)


# How the client reaches the agent: given the client, a context that yields the connection
# and a future of the agent's exit status (None: it closed its output, its status unknown).
AgentLink = Callable[[Any], AbstractAsyncContextManager[tuple[Any, "asyncio.Future[int | None]"]]]


def _spawned(argv: Sequence[str], workspace: Path) -> AgentLink:
    """The agent ``argv`` started here, in ``workspace``, its standard error this process's."""

    @asynccontextmanager
    async def link(client: Any) -> AsyncIterator[tuple[Any, asyncio.Future[int | None]]]:
        import acp

        spawned = acp.spawn_agent_process(
            client,
            argv[0],
            *argv[1:],
            env=dict(os.environ),
            cwd=workspace,
            transport_kwargs={"stderr": None, "limit": _STREAM_LIMIT},
        )
        async with spawned as (connection, process):
            ended: asyncio.Future[int | None] = asyncio.ensure_future(process.wait())
            try:
                yield connection, ended
            finally:
                ended.cancel()

    return link


class _AttachedTransport:
    """The protocol's messages over an attached process (the SDK's message-level transport):
    sent as JSON lines from a worker thread, so that a full pipe never blocks the loop, and
    received as the lines a thread of its own reads (:func:`_attached`) give them. A line
    that is no JSON (an agent's log line on its output) is skipped, as the SDK's own stdio
    transport skips it."""

    def __init__(self, process: AttachedProcess, lines: asyncio.Queue[bytes | None]) -> None:
        self._process = process
        self._lines = lines

    async def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        await asyncio.to_thread(self._process.send, data)

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await self._lines.get()
            if line is None:
                self._lines.put_nowait(None)  # the end stays the end
                return None
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict):
                return message

    async def close(self) -> None:
        self._process.close_input()


def _attached(process: AttachedProcess) -> AgentLink:
    """The agent ``process`` already started elsewhere (in a sandbox), its standard output
    read line by line by a thread of its own."""

    @asynccontextmanager
    async def link(client: Any) -> AsyncIterator[tuple[Any, asyncio.Future[int | None]]]:
        import acp

        loop = asyncio.get_running_loop()
        lines: asyncio.Queue[bytes | None] = asyncio.Queue()
        ended: asyncio.Future[int | None] = loop.create_future()

        def settle(status: int | None) -> None:
            if not ended.done():
                ended.set_result(status)

        def pump() -> None:
            # The unfinished line's pieces (only each new chunk is split), and their size: a
            # line longer than the host's stream limit ends the output, as it does there.
            pending: list[bytes] = []
            size = 0
            with contextlib.suppress(OSError, RuntimeError):  # a broken stream is its end
                while chunk := process.receive():
                    *ends, rest = chunk.split(b"\n")
                    for end in ends:
                        line = b"".join([*pending, end])
                        pending, size = [], 0
                        if line.strip():
                            loop.call_soon_threadsafe(lines.put_nowait, line)
                    pending.append(rest)
                    size += len(rest)
                    if size > _STREAM_LIMIT:
                        pending = []
                        break
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                last = b"".join(pending)
                if last.strip():
                    loop.call_soon_threadsafe(lines.put_nowait, last)
                loop.call_soon_threadsafe(lines.put_nowait, None)
                status = process.wait(_SHUTDOWN_SECONDS)
                loop.call_soon_threadsafe(settle, status)

        threading.Thread(target=pump, name="acp-agent-output", daemon=True).start()
        connection = acp.connect_to_agent(client, _AttachedTransport(process, lines))
        try:
            yield connection, ended
        finally:
            await connection.close()
            process.close_input()
            ended.cancel()

    return link


async def _session(
    name: str,
    link: AgentLink,
    prompt: str,
    approve: str,
    *,
    cwd: str,
    workspace: Path | None,
    emit: Callable[..., None],
    program: str = "",
    hint: str = "",
    resume: str | None = None,
) -> None:
    """One turn with the agent ``link`` reaches: a new session in ``cwd`` (as the agent sees
    it), or the session ``resume`` names. ``workspace`` is the host folder whose files the
    client reads and writes for the agent; None: it serves no files (the agent works on its
    own files, in a sandbox)."""
    import acp
    from acp import schema

    updates = _Updates(emit)
    client = _make_client(workspace, approve, updates)
    try:
        async with link(client) as (connection, ended):
            started = time.monotonic()
            try:
                turn = _Turn(cwd, workspace is not None, prompt, resume, updates)
                response = await _until_exit(
                    ended, turn.run(connection, schema, acp.PROTOCOL_VERSION)
                )
            except ConnectionError:
                # The pipe closed: most often because the agent exited, which says more.
                with contextlib.suppress(TimeoutError):
                    status = await asyncio.wait_for(asyncio.shield(ended), _SHUTDOWN_SECONDS)
                    raise AgentProtocolError(_exited(status)) from None
                raise
            finally:
                updates.flush()
    except FileNotFoundError as exc:
        message = f"{name}: cannot start {program}: {exc.strerror}"
        raise AgentProtocolError(f"{message}\n{hint}" if hint else message) from exc
    except acp.RequestError as exc:
        details = f" ({json.dumps(exc.data, ensure_ascii=False)})" if exc.data else ""
        raise AgentProtocolError(
            f"{name}: the agent answered with an error: {exc}{details}"
        ) from exc
    except (ConnectionError, EOFError) as exc:
        raise AgentProtocolError(f"{name}: the connection to the agent broke: {exc}") from exc
    usage = response.usage
    emit(
        "result",
        stopReason=response.stop_reason,
        usage=None
        if usage is None
        else usage.model_dump(mode="json", by_alias=True, exclude_none=True),
        seconds=round(time.monotonic() - started, 3),
    )


async def _until_exit(ended: asyncio.Future[int | None], work: Any) -> Any:
    """``work``'s result, or an error as soon as the agent exits before it is done."""
    task = asyncio.ensure_future(work)
    await asyncio.wait({task, ended}, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        return task.result()
    task.cancel()
    raise AgentProtocolError(_exited(ended.result()))


def _exited(status: int | None) -> str:
    if status is None:
        return "the agent closed its output mid-session"
    how = f"signal {-status}" if status < 0 else f"status {status}"
    return f"the agent exited mid-session ({how})"


class _Turn:
    """One prompt: to a new session in the workspace, or to the session ``resume`` names."""

    def __init__(
        self, cwd: str, files: bool, prompt: str, resume: str | None, updates: _Updates
    ) -> None:
        self.cwd = cwd
        self.files = files
        self.prompt = prompt
        self.resume = resume
        self.updates = updates

    async def run(self, connection: Any, schema: Any, version: int) -> Any:
        started = await connection.initialize(
            protocol_version=version,
            client_capabilities=schema.ClientCapabilities(
                fs=schema.FileSystemCapabilities(
                    read_text_file=self.files, write_text_file=self.files
                ),
                terminal=False,
            ),
            client_info=schema.Implementation(name="pytest-openkata", version="1"),
        )
        cwd = self.cwd
        if self.resume is None:
            session_id = (await connection.new_session(cwd=cwd, mcp_servers=[])).session_id
        else:
            capabilities = started.agent_capabilities
            if capabilities is None or not capabilities.load_session:
                raise AgentProtocolError(
                    "the agent cannot continue a session: it does not offer session/load"
                )
            self.updates.muted = True  # its replay of the turns already printed
            try:
                await connection.load_session(cwd=cwd, session_id=self.resume, mcp_servers=[])
            finally:
                self.updates.muted = False
            session_id = self.resume
        self.updates.emit("session", sessionId=session_id)
        return await connection.prompt(
            session_id=session_id,
            prompt=[schema.TextContentBlock(type="text", text=self.prompt)],
        )


def _shown(text: str) -> str:
    """``text`` with its control characters escaped (an agent's error message is its own
    text): only its line breaks stay."""
    return "".join(
        ascii(char)[1:-1] if char != "\n" and unicodedata.category(char) in _ESCAPED else char
        for char in text
    )


def main(args: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="acp_client", description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="acp", help="the agent's name in error texts")
    parser.add_argument("--approve", choices=APPROVALS, default="none")
    parser.add_argument("--hint", default="", help="how to install the agent, when missing")
    parser.add_argument("--resume", default=None, help="the session to continue (session/load)")
    parser.add_argument("argv", nargs="+", help="the ACP agent's command line")
    options = parser.parse_args(args)
    prompt = sys.stdin.read()
    try:
        workspace = Path.cwd().resolve()
        asyncio.run(
            _session(
                options.name,
                _spawned(options.argv, workspace),
                prompt,
                options.approve,
                cwd=str(workspace),
                workspace=workspace,
                emit=_emitter(_to_stdout),
                program=options.argv[0],
                hint=options.hint,
                resume=options.resume,
            )
        )
    except AgentProtocolError as exc:
        print(_failure(options.name, exc), file=sys.stderr)
        return 1
    return 0


def _failure(name: str, exc: AgentProtocolError) -> str:
    message = str(exc)
    if not message.startswith(f"{name}:"):
        message = f"{name}: {message}"
    return _shown(message)


def drive_attached(
    name: str,
    process: AttachedProcess,
    prompt: str,
    session: str | None,
    write: Write,
) -> int:
    """One turn with the ACP agent ``process``, which runs in a sandbox (a
    :data:`~pytest_openkata.contracts.sandboxes.Driver`, with ``name`` bound): every
    permission is granted (the sandbox is disposable) and no file of the host is served (the
    client advertises no file-system capability, so the agent's file tools act on the
    sandbox's files). What the agent reported is written as the host's client prints it; a
    failure is one line naming the agent after it, and status 1."""
    try:
        asyncio.run(
            _session(
                name,
                _attached(process),
                prompt,
                "all",
                cwd=process.workdir,
                workspace=None,
                emit=_emitter(write),
                resume=session,
            )
        )
    except AgentProtocolError as exc:
        write(_failure(name, exc) + "\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
