"""A writer killed between its temporary file and the rename leaves nothing for good: the next
run removes the temporary files of dead writers from the cache and the report folders it writes
to, and says so, while a live writer's temporary file is left alone and its write completes.

The writers are real processes writing with the plugin's own code (a cache entry, a results
JSON, a run log). Each stops itself with SIGSTOP right before its rename or link, its temporary
file written in full; the test then kills it with SIGKILL, or lets it live through the run and
continues it afterwards.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_openkata.infra.cache import ResultCache
from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_skill

# Writes with the plugin's code, stopping itself before the step that gives the file its name.
WRITER = """
import os, signal, sys
from pathlib import Path

what, target, size = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
step = "replace" if what == "cache" else "link"
real = getattr(os, step)

def stopped_first(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGSTOP)  # the test kills or continues the writer here
    return real(*args, **kwargs)

setattr(os, step, stopped_first)
if what == "cache":
    from pytest_openkata.infra.cache import ResultCache

    ResultCache(target).put("agent", sys.argv[4], {"answer": "x" * size})
else:
    from pytest_openkata.infra.atomic import write_new_report

    write_new_report(target, "x" * size)
"""

BIG = 52_000_000  # the size of the temporary file the issue found left behind
DEAD_KEY = "d" * 64
LIVE_KEY = "e" * 64


def _stopped_writer(what: str, target: Path, size: int, key: str = "") -> subprocess.Popen[bytes]:
    """A writer process, stopped before its rename or link with its temporary file written."""
    writer = subprocess.Popen([sys.executable, "-c", WRITER, what, str(target), str(size), key])
    _pid, status = os.waitpid(writer.pid, os.WUNTRACED)
    assert os.WIFSTOPPED(status), f"the {what} writer ended instead of stopping: {status}"
    return writer


def _kill(writer: subprocess.Popen[bytes]) -> None:
    writer.send_signal(signal.SIGKILL)
    writer.wait()  # reaped: no process of that pid remains


def _temporary_files(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob(".*.tmp") if path.is_file())


@pytest.fixture
def live_writers() -> Iterator[list[subprocess.Popen[bytes]]]:
    writers: list[subprocess.Popen[bytes]] = []
    yield writers
    for writer in writers:
        if writer.poll() is None:
            _kill(writer)


def test_a_run_removes_what_killed_writers_left_and_leaves_live_writers_alone(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    live_writers: list[subprocess.Popen[bytes]],
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"a": 10}})
    cache = pytester.path / ".pytest_cache" / "d" / "openkata"
    results = pytester.path / "skills" / "s" / "evals" / "results" / "claude-sonnet-4.6"
    runs = pytester.path / ".openkata" / "runs"
    for writer in (
        _stopped_writer("cache", cache, BIG, DEAD_KEY),
        _stopped_writer("report", results / "killed.json", 1000),
    ):
        _kill(writer)
    dead = _temporary_files(pytester.path)
    assert len(dead) == 2
    assert max(path.stat().st_size for path in dead) > BIG
    live_writers += [
        _stopped_writer("cache", cache, 1000, LIVE_KEY),
        _stopped_writer("report", runs / "live.jsonl", 1000),
    ]
    live = [path for path in _temporary_files(pytester.path) if path not in dead]
    assert len(live) == 2

    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url))

    assert result.ret == pytest.ExitCode.OK
    assert _temporary_files(pytester.path) == live
    said = [line for line in result.outlines if line.startswith("removed a temporary file")]
    assert sorted(said) == [
        f"removed a temporary file left by a killed run: {path.relative_to(pytester.path)}"
        for path in dead
    ]
    # The live writers go on as if nothing happened: their files get their names.
    for writer in live_writers:
        writer.send_signal(signal.SIGCONT)
        assert writer.wait() == 0
    assert _temporary_files(pytester.path) == []
    assert ResultCache(cache).get("agent", LIVE_KEY) == {"answer": "x" * 1000}
    assert (runs / "live.jsonl").read_text() == "x" * 1000
