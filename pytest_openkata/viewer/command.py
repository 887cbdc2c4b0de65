"""``python -m pytest_openkata view [FOLDER] [--host H] [--port P]``: serve the viewer.

It listens on loopback (127.0.0.1) unless ``--host`` names another address; then it makes a
random token, prints the address with it, and answers no request without it (see
:mod:`pytest_openkata.viewer.guard`). ``--port 0`` (the default) takes a free port. It prints
the address to open and serves until interrupted (Ctrl-C), then stops its server and returns 0.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import secrets
import socket
import sys
from pathlib import Path

__all__ = ["allowed_hosts", "is_loopback", "listening_socket", "main"]

LOOPBACK = "127.0.0.1"


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine only: ``localhost`` or a loopback address."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def allowed_hosts(host: str, port: int) -> frozenset[str]:
    """The ``Host`` headers a viewer on loopback answers to (empty beyond loopback: its
    token guards it there, and the names a network gives the machine are not known here)."""
    if not is_loopback(host):
        return frozenset()
    names = {f"[{host}]" if ":" in host else host, "localhost", LOOPBACK, "[::1]"}
    return frozenset(f"{name}:{port}" for name in names)


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host`` and ``port`` (0: a free one), so that the port is known
    before the server starts."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(64)
    except OSError:
        sock.close()
        raise
    return sock


def _port_number(text: str) -> int:
    """A ``--port`` value: a whole number from 0 to 65535 (argparse names a bad one)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port: it must be 0 to 65535")
    return port


def _url(host: str, port: int, token: str) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/" + (f"?token={token}" if token else "")


def main(argv: list[str]) -> int:
    """Serve the viewer (see the module docstring); 2 for bad arguments or a folder that is
    not one, 1 when the address cannot be listened on."""
    parser = argparse.ArgumentParser(
        prog="python -m pytest_openkata view",
        description="Browse the run logs under a folder in a local web viewer.",
    )
    parser.add_argument(
        "folder", nargs="?", default=".", type=Path, help="where to look for run logs (default: .)"
    )
    parser.add_argument(
        "--host",
        default=LOOPBACK,
        help="address to listen on (default 127.0.0.1; any other needs the printed token)",
    )
    parser.add_argument("--port", type=_port_number, default=0, help="port (default: a free one)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse has printed why
        return 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 2
    folder: Path = args.folder
    if not folder.is_dir():
        print(f"error: {folder} is not a folder", file=sys.stderr)
        return 2
    host: str = args.host
    try:
        sock = listening_socket(host, args.port)
    except OSError as exc:
        print(f"error: cannot listen on {host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    try:
        return _serve(sock, folder.resolve(), host)
    finally:
        sock.close()


def _serve(sock: socket.socket, folder: Path, host: str) -> int:
    import uvicorn

    from pytest_openkata.viewer.app import make_app
    from pytest_openkata.viewer.guard import Guard

    port = sock.getsockname()[1]
    token = "" if is_loopback(host) else secrets.token_urlsafe(24)
    guard = Guard(allowed_hosts(host, port), token, secrets.token_urlsafe(24), port)
    config = uvicorn.Config(
        make_app(folder, guard), log_level="warning", access_log=False, lifespan="off"
    )
    server = uvicorn.Server(config)
    print(f"Viewer of the run logs under {folder.name or folder}: {_url(host, port, token)}")
    if token:
        print("It listens beyond this machine: every request needs the token above.")
    print("Ctrl-C stops it.", flush=True)
    # On Ctrl-C the server stops, then raises the signal again for its caller: here, the end.
    with contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=[sock])
    return 0
