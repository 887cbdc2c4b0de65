"""What the run viewer takes to open a large run log.

A run of 10,000 scenarios (one trial each, 4 criteria, a 10,000-character agent output a trial:
a log of about 110 MB) is built in memory and written as a run log into a fresh folder; the
viewer serves that folder on a loopback port in a thread, and a client asks it, one after the
other, for the runs list (the log read without its answers), the run's page, one trial's page,
the run's page again (the log unchanged) and the live-update state the run page polls. Printed:
the seconds of each request from the first byte asked to the last received, and the size of
each page, against the issue's target of a first page within 5 s.

    python benchmarks/viewer.py                   # 10,000 scenarios
    python benchmarks/viewer.py --scenarios 1000 --output 2000
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import uvicorn

from benchmarks._common import machine_line
from pytest_openkata.core.runlog import RunInfo, log_lines
from pytest_openkata.viewer.app import make_app
from pytest_openkata.viewer.command import allowed_hosts, listening_socket
from pytest_openkata.viewer.guard import Guard
from tests.support.results import ROOT, SETTINGS, judged, scenario

TARGET_SECONDS = 5.0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenarios", type=int, default=10_000)
    parser.add_argument("--skills", type=int, default=20)
    parser.add_argument("--output", type=int, default=10_000, help="characters of an answer")
    return parser.parse_args()


def write_log(folder: Path, args: argparse.Namespace) -> Path:
    line = "an agent's answer, line by line\n"
    output = line * max(1, args.output // len(line))
    results = [
        scenario(
            f"scenario-{number}",
            [judged(f"c{c}", 5, (number + c) % 5 != 0, "because " * 8) for c in range(4)],
            skill=f"skill-{number % args.skills}",
            output=output,
        )
        for number in range(args.scenarios)
    ]
    info = RunInfo("2026-12-01T10:00:00Z", threshold=80, settings=SETTINGS)
    log = folder / ".openkata" / "runs" / "20261201T100000Z.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text(log_lines(info, results, ROOT), encoding="utf-8")
    return log


def timed(client: httpx.Client, url: str) -> tuple[float, int]:
    started = time.perf_counter()
    answer = client.get(url)
    seconds = time.perf_counter() - started
    answer.raise_for_status()
    return seconds, len(answer.content)


@contextmanager
def serving(folder: Path) -> Iterator[str]:
    """The viewer of ``folder`` on a free loopback port, in a thread; its base URL."""
    sock = listening_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    guard = Guard(allowed_hosts("127.0.0.1", port), "", "bench")
    server = uvicorn.Server(
        uvicorn.Config(make_app(folder, guard), log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=60)
        sock.close()


def main() -> None:
    args = parse_args()
    print(machine_line())
    with tempfile.TemporaryDirectory(prefix="openkata-viewer-bench-") as scratch:
        folder = Path(scratch)
        log = write_log(folder, args)
        relative = log.relative_to(folder).as_posix()
        print(f"run log: {args.scenarios:,} scenarios, {log.stat().st_size / 1e6:.0f} MB")
        with serving(folder) as base:
            trial = "skill=skills/skill-7&scenario=scenario-7&arm=&trial=1"
            asks = [
                ("runs list", "/"),
                ("run page", f"/run/{relative}"),
                ("trial page", f"/trial/{relative}?{trial}"),
                ("run page again", f"/run/{relative}"),
                ("live state", f"/api/run/{relative}"),
            ]
            with httpx.Client(base_url=base, timeout=600) as client:
                for name, url in asks:
                    seconds, size = timed(client, url)
                    print(f"{name:<15} {seconds:7.2f} s  {size / 1e6:7.2f} MB")
    print(f"target: a first page within {TARGET_SECONDS:.0f} s")


if __name__ == "__main__":
    main()
