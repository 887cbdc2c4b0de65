"""A process in a Docker container with its standard input and output held by the host: the
engine's exec with stdin attached, over the SDK's hijacked socket (no ``docker`` command line,
so every engine the SDK reaches works: a unix socket, TCP with TLS, ssh).

The socket carries the process's standard output and error multiplexed in frames (no
terminal, so they stay apart): the output is what :meth:`DockerAttachedProcess.receive`
gives, the error is kept, bounded, for the message of a failure. Stopping the process stops
the container side too: killing the host's end of an exec leaves its process running in the
container, so :meth:`DockerAttachedProcess.stop` kills every process of the container but its
own first one (``kill -KILL -1`` run in the container: the environment is the trial's alone,
and only one attached process runs in it at a time), then closes the socket.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["STOP_ALL", "DockerAttachedProcess"]

# Every process of the container but its first (``sleep``) and the killer itself.
STOP_ALL = ("sh", "-c", "kill -KILL -1 2>/dev/null; exit 0")
_ERRORS_KEPT = 16 * 1024
_HEADER = struct.Struct(">BxxxL")
_STDOUT, _STDERR = 1, 2
_POLL_SECONDS = 0.1


def _raw(sock: Any) -> Any:
    """The object to send on and shut down: the socket inside a unix socket's file wrapper,
    else the socket (TLS) or ssh channel itself."""
    return getattr(sock, "_sock", sock)


class DockerAttachedProcess:
    """One exec of a container with stdin attached (see the module docstring); made by
    :meth:`~pytest_openkata.providers.sandboxes.docker.DockerEnvironment.attach`."""

    def __init__(
        self,
        api: Any,
        container_id: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        workdir: str,
    ) -> None:
        self._api = api
        self._container_id = container_id
        self._workdir = workdir
        self._exec_id = api.exec_create(
            container_id,
            list(argv),
            stdin=True,
            stdout=True,
            stderr=True,
            workdir=workdir,
            environment=dict(env),
        )["Id"]
        self._sock = api.exec_start(self._exec_id, socket=True)
        self._raw = _raw(self._sock)
        # The client's request timeout is on the socket: an agent may think for longer than
        # that without a word. Its time limit is the caller's (it stops the process).
        settimeout = getattr(self._raw, "settimeout", None)
        if settimeout is not None:
            settimeout(None)
        self._errors = bytearray()
        self._lock = threading.Lock()
        self._input_closed = False
        self._stopped = False
        self._pending = b""  # bytes read past a frame's header, not yet split

    @property
    def workdir(self) -> str:
        return self._workdir

    def send(self, data: bytes) -> None:
        self._raw.sendall(data)

    def close_input(self) -> None:
        with self._lock:
            if self._input_closed:
                return
            self._input_closed = True
        # A half-close: the engine closes the process's standard input, its output goes on.
        with contextlib.suppress(OSError, AttributeError, ValueError):
            shutdown_write = getattr(self._raw, "shutdown_write", None)  # an ssh channel
            if shutdown_write is not None:
                shutdown_write()
            else:
                self._raw.shutdown(socket.SHUT_WR)

    def _read(self, size: int) -> bytes:
        """Exactly ``size`` bytes of the socket, or fewer at its end."""
        data = bytearray()
        while len(data) < size:
            chunk = self._raw.recv(size - len(data))
            if not chunk:
                break
            data += chunk
        return bytes(data)

    def receive(self) -> bytes:
        while True:
            header = self._read(_HEADER.size)
            if len(header) < _HEADER.size:
                return b""
            stream, size = _HEADER.unpack(header)
            data = self._read(size)
            if len(data) < size:
                return data
            if stream == _STDERR:
                self._errors += data
                del self._errors[: max(0, len(self._errors) - _ERRORS_KEPT)]
                continue
            if stream == _STDOUT and data:
                return data

    def errors(self) -> str:
        return bytes(self._errors).decode("utf-8", "replace")

    def wait(self, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                state = self._api.exec_inspect(self._exec_id)
            except Exception:  # an engine failure: the status is unknown
                return None
            if not state.get("Running"):
                code = state.get("ExitCode")
                return code if isinstance(code, int) else None
            if time.monotonic() >= deadline:
                return None
            time.sleep(_POLL_SECONDS)

    def stop(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        with contextlib.suppress(Exception):  # an engine gone: the container goes with it
            killer = self._api.exec_create(self._container_id, list(STOP_ALL))["Id"]
            self._api.exec_start(killer)
        with contextlib.suppress(OSError):
            self._raw.close()
        with contextlib.suppress(OSError):
            self._sock.close()
