"""Killed runs and the next run, inside a pid namespace of their own (see test_killed_runs.py).

``python killed_run_driver.py ROOT BASE_URL CASE`` runs, in ROOT, runs of skill ``s`` whose
agent is the ``command`` agent ``touch started; sleep 600; echo done`` (a shell and its child)
and whose judge is the scripted endpoint at BASE_URL, then prints what it saw as one JSON
object. CASE is:

- ``killed``: a run is SIGKILLed while its agent runs, then another run starts;
- ``alive``: a run is left going while another run starts, then stopped with SIGTERM.

The runs' temporary folder is ``ROOT/tmp`` (``TMPDIR``), so that what they leave there is
theirs. As pid 1 of its namespace, the driver also reaps the processes a killed run leaves to it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from tests.support.marked import marked_by

GUARD_SECONDS = 120


def reap() -> None:
    """Reap every ended child, as a namespace's pid 1 must."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def wait_until(ready: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + GUARD_SECONDS
    while not ready():
        reap()
        if time.monotonic() > deadline:
            seen = [(p.pid, p.ppid(), p.name(), p.status()) for p in psutil.process_iter()]
            raise SystemExit(f"never: {what}; processes: {seen}")
        time.sleep(0.05)


def pytest_command(base_url: str) -> list[str]:
    return [
        sys.executable, "-m", "pytest", "skills/s",
        "--eval-backend", "command",
        "--eval-agent-command", "touch started; sleep 600; echo done",
        "--eval-judge-backend", "http", "--eval-base-url", base_url,
    ]  # fmt: skip


def start_hanging_run(root: Path, base_url: str) -> subprocess.Popen[bytes]:
    run = subprocess.Popen(
        pytest_command(base_url),
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    # Once the shell's child is sleep (right after its fork it is a second "sh").
    wait_until(
        lambda: sorted(names(marked_by(run.pid))) == ["sh", "sleep"], "the CLI and its child"
    )
    return run


def names(processes: list[psutil.Process]) -> list[str]:
    found = []
    for process in processes:
        try:
            found.append(process.name())
        except psutil.Error:
            continue
    return found


def next_run(root: Path, base_url: str) -> str:
    """Another run of the skill, whose agent answers at once."""
    command = pytest_command(base_url)
    agent = command.index("touch started; sleep 600; echo done")
    command[agent] = "echo an answer long enough to be judged"
    done = subprocess.run(
        command, cwd=root, capture_output=True, timeout=GUARD_SECONDS, check=False
    )
    return done.stdout.decode()


def folders_of(run: subprocess.Popen[bytes]) -> list[str]:
    """The folders of the temporary folder whose names carry the run's pid."""
    return sorted(path.name for path in Path(os.environ["TMPDIR"]).glob(f"openkata-*-{run.pid}-*"))


def killed(root: Path, base_url: str) -> dict[str, object]:
    run = start_hanging_run(root, base_url)
    cli = [p for p in marked_by(run.pid) if p.name() == "sh"]
    os.kill(run.pid, signal.SIGKILL)
    run.wait()
    wait_until(lambda: not any(p.is_running() and p.status() != "zombie" for p in cli), "CLI")
    left = marked_by(run.pid)
    seen = {"left": [[p.pid, p.name()] for p in left], "left_folders": folders_of(run)}
    out = next_run(root, base_url)
    reap()
    return {
        **seen,
        "output": out,
        "still_running": [p.pid for p in marked_by(run.pid)],
        "folders_after": folders_of(run),
    }


def alive(root: Path, base_url: str) -> dict[str, object]:
    run = start_hanging_run(root, base_url)
    agents = marked_by(run.pid)
    folders = folders_of(run)
    out = next_run(root, base_url)
    still = [p.pid for p in agents if p.is_running() and p.status() != "zombie"]
    kept = folders_of(run)
    os.killpg(run.pid, signal.SIGTERM)
    run.wait(timeout=GUARD_SECONDS)
    wait_until(lambda: not marked_by(run.pid), "the run's agents stopped with it")
    return {
        "agents": len(agents),
        "output": out,
        "still_running": still,
        "folders": folders,
        "folders_after": kept,
    }


if __name__ == "__main__":
    root, base_url, case = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    os.environ["TMPDIR"] = str(root / "tmp")
    (root / "tmp").mkdir()
    seen = {"killed": killed, "alive": alive}[case](root, base_url)
    print(json.dumps(seen))
