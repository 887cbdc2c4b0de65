"""What one model call costs the caller's process in CPU: the plugin's HTTP path against httpx and
against the standard library's ``http.client``.

The plugin talks to model endpoints with httpx; the plugin at ``876b11a`` used ``http.client``.
This script tells how much of a scenario's CPU is the client itself. A small HTTP/1.1 server in
a child process (so that its CPU is not counted) answers every POST at once with a fixed JSON
object on a kept connection. This process then makes N POSTs of a judge-sized JSON body along
each path, the paths alternating round by round, and prints the process's CPU time (every
thread's: the plugin makes its exchange on a kept thread of its own) per call, and each path
against ``http.client``:

- ``http.client``: one ``HTTPConnection`` kept open, ``request`` + ``getresponse().read()`` +
  ``json.loads``, as the reference did;
- ``httpx``: a plain ``httpx.Client().post`` + ``json.loads``;
- ``httpx, the plugin's client``: ``client.post`` on the client ``make_client`` builds (its
  headers, limits, ``trust_env``);
- ``the plugin's call``: ``ask_json`` on that client (the deadline thread, the trace hook, the
  bounded streaming read, the answer's texts checked), what a backend makes per model call.

    python benchmarks/http_client.py               # 2,000 calls per path, 5 rounds
    python benchmarks/http_client.py --calls 200   # quick look
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import http.client
import json
import subprocess
import time
from collections.abc import Callable
from typing import Any

import httpx

from benchmarks._common import machine_line, median
from pytest_openkata.providers.backends.client import ask_json, make_client

# The child: an HTTP/1.1 server that keeps connections and answers every POST with ANSWER.
SERVER = r"""
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ANSWER = sys.argv[1].encode()
REPLY = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    + b"Content-Length: %d\r\n\r\n" % len(ANSWER)
    + ANSWER
)

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.wfile.write(REPLY)  # one write: no wait for a delayed ACK between two

    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""

# A judge's request and answer of a usual size (two criteria).
PAYLOAD: dict[str, Any] = {
    "model": "bench",
    "messages": [
        {"role": "system", "content": "You grade an agent's work against criteria. " * 20},
        {"role": "user", "content": "The task, the agent's answer and the criteria. " * 40},
    ],
    "response_format": {"type": "json_object"},
}
ANSWER = {
    "choices": [
        {
            "message": {
                "role": "assistant",
                "content": json.dumps({"c1": {"pass": True, "reason": "met " * 20}}),
            }
        }
    ],
    "usage": {"prompt_tokens": 600, "completion_tokens": 80},
}
HEADERS = {"Content-Type": "application/json", "Authorization": "Bearer key"}

Call = Callable[[], Any]


def paths(port: int) -> dict[str, tuple[Call, Callable[[], None]]]:
    """Each path's one call, and how to close what it keeps."""
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    body = json.dumps(PAYLOAD, ensure_ascii=False, separators=(",", ":")).encode()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def stdlib() -> Any:
        connection.request("POST", "/v1/chat/completions", body, HEADERS)
        return json.loads(connection.getresponse().read())

    plain = httpx.Client(timeout=30)
    plugins = make_client(30)

    def httpx_plain() -> Any:
        return json.loads(plain.post(url, content=body, headers=HEADERS).content)

    def httpx_plugins_client() -> Any:
        return json.loads(plugins.post(url, content=body, headers=HEADERS).content)

    def plugins_call() -> Any:
        return ask_json(plugins, url, PAYLOAD, HEADERS, "key")

    return {
        "http.client": (stdlib, connection.close),
        "httpx": (httpx_plain, plain.close),
        "httpx, the plugin's client": (httpx_plugins_client, lambda: None),
        "the plugin's call": (plugins_call, plugins.close),
    }


def measure(call: Call, count: int) -> tuple[float, float]:
    """CPU seconds and wall seconds per call, over ``count`` calls."""
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(count):
        call()
    return (time.process_time() - cpu) / count, (time.perf_counter() - wall) / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per path and round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    answer = json.dumps(ANSWER)
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, answer], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        run(paths(port), args.calls, args.rounds)
    finally:
        server.kill()
        server.wait()


def run(chosen: dict[str, tuple[Call, Callable[[], None]]], calls: int, rounds: int) -> None:
    print(machine_line())
    cpu: dict[str, list[float]] = {name: [] for name in chosen}
    wall: dict[str, list[float]] = {name: [] for name in chosen}
    try:
        for call, _ in chosen.values():  # warm: connections open, code paths imported
            measure(call, 20)
        for round_ in range(rounds):
            order = list(chosen) if round_ % 2 == 0 else list(reversed(chosen))
            for name in order:
                spent, took = measure(chosen[name][0], calls)
                cpu[name].append(spent)
                wall[name].append(took)
    finally:
        for _, close in chosen.values():
            close()
    base = median(cpu["http.client"])
    print(f"{calls} calls per path and round, {rounds} rounds, medians; CPU of every thread")
    print(f"{'path':<30} {'CPU/call':>10} {'wall/call':>10} {'CPU ÷ http.client':>18}")
    for name in chosen:
        spent = median(cpu[name])
        took = median(wall[name])
        print(f"{name:<30} {spent * 1e3:>8.3f}ms {took * 1e3:>8.3f}ms {spent / base:>18.2f}")
    extra = median(cpu["the plugin's call"]) - base
    print(f"the plugin's call costs {extra * 1e3:.3f} ms of CPU more than http.client's")


if __name__ == "__main__":
    main()
