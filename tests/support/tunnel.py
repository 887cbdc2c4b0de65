"""A real forward proxy on loopback that serves ``CONNECT`` only, as clients reach https
endpoints through an http proxy: it opens the asked-for connection, answers ``200`` and then
relays bytes both ways, without seeing inside the TLS it carries.

    with TunnelProxy() as proxy:
        ...  # HTTPS_PROXY=proxy.url
        assert proxy.tunnels == [("127.0.0.1:8443", {...headers...})]

``TunnelProxy(require="Basic ...")`` answers ``407`` to a ``CONNECT`` whose
``Proxy-Authorization`` differs.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Self

_END_OF_HEADERS = b"\r\n\r\n"


class TunnelProxy:
    def __init__(self, *, require: str | None = None) -> None:
        self.require = require
        self.tunnels: list[tuple[str, dict[str, str]]] = []  # (host:port, lower-case headers)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def __enter__(self) -> Self:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            with self._lock:
                self._sockets.append(client)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        head = b""
        while _END_OF_HEADERS not in head:
            chunk = client.recv(4096)
            if not chunk:
                client.close()
                return
            head += chunk
        request, _, early = head.partition(_END_OF_HEADERS)
        first, *lines = request.decode("latin-1").split("\r\n")
        method, target, _version = first.split(" ", 2)
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        with self._lock:
            self.tunnels.append((target, headers))
        if method != "CONNECT":
            client.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            client.close()
            return
        if self.require is not None and headers.get("proxy-authorization") != self.require:
            client.sendall(
                b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n"
            )
            client.close()
            return
        host, _, port = target.rpartition(":")
        upstream = socket.create_connection((host, int(port)))
        with self._lock:
            self._sockets.append(upstream)
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        if early:
            upstream.sendall(early)
        threading.Thread(target=_relay, args=(upstream, client), daemon=True).start()
        _relay(client, upstream)


def _relay(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)
