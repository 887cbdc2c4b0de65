"""The viewer served for real on a free loopback port, in a thread, for the tests that speak
HTTP to it (from httpx or a headless browser)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import uvicorn

from pytest_openkata.viewer.app import make_app
from pytest_openkata.viewer.command import allowed_hosts, listening_socket
from pytest_openkata.viewer.guard import Guard, GuardedApp

FORM_KEY = "form-key-of-the-test"


@contextmanager
def serving_app(make: Callable[[int], GuardedApp]) -> Iterator[str]:
    """The app ``make`` builds for the port it is given, served on that loopback port until
    the block ends; its base URL."""
    sock = listening_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(make(port), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


@contextmanager
def serving(folder: Path, token: str = "", made: list[GuardedApp] | None = None) -> Iterator[str]:
    """The viewer of ``folder`` as the view command guards it (loopback host names, the
    ``token`` when given); its base URL. The app is added to ``made``, when given."""

    def make(port: int) -> GuardedApp:
        app = make_app(folder, Guard(allowed_hosts("127.0.0.1", port), token, FORM_KEY, port))
        if made is not None:
            made.append(app)
        return app

    with serving_app(make) as base:
        yield base
