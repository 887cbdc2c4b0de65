"""Shared plumbing of the benchmark scripts (not a benchmark itself).

Every benchmark writes its skill folders into a fresh temporary folder and runs pytest there in
a child process, so that the repository's own configuration (``addopts``, ``conftest.py``) never
applies and pytest's cache never short-circuits a model call. A small recording plugin
(:data:`RECORDER_CONFTEST`) is dropped into that folder as ``conftest.py``: it writes the
session's own duration and, for every item, its setup, call and teardown durations and its
whole run protocol (reports and hooks included) to a JSON file, and can measure endpoint round
trips from inside the child, between items.
"""

from __future__ import annotations

import argparse
import compileall
import hashlib
import importlib.util
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
VENV_CACHE = Path.home() / ".cache" / "pytest-openkata"
# The interpreter of the pytest children: this one, or a clean virtualenv's (--venv).
CHILD = argparse.Namespace(python=sys.executable)
# Not OPENKATA_EVAL_*: the plugin rejects unknown variables of its own prefix.
RECORD_ENV = "OPENKATA_BENCH_RECORD"  # where the recording conftest writes its JSON
PROBE_ENV = "OPENKATA_BENCH_PROBE"  # "EVERY KIND URL BODIES_FILE": see the probe below

# Written as conftest.py at the root of the temporary folder. It runs in the pytest child; with
# xdist only the controller writes (workers forward their reports to it).
#
# The probe (only when OPENKATA_BENCH_PROBE is set): after every EVERY-th item, once the item
# is over and outside its setup/call/teardown durations, the child POSTs each recorded body
# to URL and records the round trips, measured in the same process, at the same moments and
# under the same machine load as the items' own calls. KIND says which path the POSTs take:
# "plugin" is the plugin's own (an httpx.Client from make_client, each call through post_json,
# without the plugin's backends, scheduler or pytest items); "httpx" is a plain httpx.Client
# and client.post, as the baseline tests make their calls. Everything is imported lazily, in the
# session, so that the conftest takes no import off the plugin's own session time.
RECORDER_CONFTEST = """\
import json
import os
import time

import pytest

HEADERS = {"Content-Type": "application/json"}

_started = None
_started_at = None
_items = {}
_probe = {"seen": 0, "client": None, "seconds": [], "spent": 0.0}


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionstart(session):
    global _started, _started_at
    _started, _started_at = time.perf_counter(), time.time()
    return (yield)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    # The item's whole cost: its phases, their reports and every hook around them (outermost),
    # less the probe's own POSTs (made in pytest_runtest_logfinish, inside the protocol).
    began, probed = time.perf_counter(), _probe["spent"]
    try:
        return (yield)
    finally:
        entry = _items.setdefault(item.nodeid, {"setup": 0.0, "call": 0.0, "teardown": 0.0})
        entry["protocol"] = time.perf_counter() - began - (_probe["spent"] - probed)


def pytest_runtest_logreport(report):
    if type(report).__name__ == "SubtestReport":
        return  # a criterion's subtest: its time is already inside the item's call
    entry = _items.setdefault(report.nodeid, {"setup": 0.0, "call": 0.0, "teardown": 0.0})
    entry[report.when] += report.duration


@pytest.hookimpl(optionalhook=True)
def pytest_openkata_scenario_result(result, item):
    # The plugin's own timing of its live model calls (agent + judge), when it reports one.
    usage = getattr(result, "usage", None)
    seconds = getattr(getattr(usage, "agent", None), "seconds", 0.0)
    seconds += getattr(getattr(usage, "judge", None), "seconds", 0.0)
    entry = _items.setdefault(item.nodeid, {"setup": 0.0, "call": 0.0, "teardown": 0.0})
    entry["model_calls"] = seconds


def _plugin_poster(bodies):
    # The plugin's HTTP path: its session client and its one request, nothing else of it.
    from pytest_openkata.providers.backends.client import make_client, post_json

    client = make_client(30)
    payloads = [json.loads(body) for body in bodies]  # the backends build dicts, not bytes

    def post(index, url):
        return post_json(client, url, payloads[index], HEADERS, "")

    return client, post


def _httpx_poster(bodies):
    # A plain httpx.Client, as the baseline tests POST.
    import httpx

    client = httpx.Client(timeout=30)
    contents = [body.encode() for body in bodies]

    def post(index, url):
        response = client.post(url, content=contents[index], headers=HEADERS)
        if response.status_code != 200:
            raise RuntimeError(f"the probe's POST got HTTP {response.status_code}")
        return response.content

    return client, post


_POSTERS = {"plugin": _plugin_poster, "httpx": _httpx_poster}


def _post_all(post, url, count):
    times = []
    for index in range(count):
        started = time.perf_counter()
        json.loads(post(index, url))
        times.append(time.perf_counter() - started)
    return times


def pytest_runtest_logfinish(nodeid, location):
    setting = os.environ.get("OPENKATA_BENCH_PROBE")
    if not setting:
        return
    every, kind, url, bodies_file = setting.split(" ", 3)
    _probe["seen"] += 1
    if _probe["seen"] % int(every):
        return
    began = time.perf_counter()
    if _probe["client"] is None:
        with open(bodies_file, encoding="utf-8") as data:
            bodies = json.load(data)
        _probe["client"], _probe["post"] = _POSTERS[kind](bodies)
        _probe["count"] = len(bodies)
        _post_all(_probe["post"], url, _probe["count"])  # warm-up, not counted
    _probe["seconds"] += _post_all(_probe["post"], url, _probe["count"])
    _probe["spent"] += time.perf_counter() - began


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    finishing_at = time.time()  # before every other sessionfinish hook: reports, summary
    try:
        return (yield)
    finally:
        finished, finished_at = time.perf_counter(), time.time()
        path = os.environ.get("OPENKATA_BENCH_RECORD")
        if path and not hasattr(session.config, "workerinput"):
            record = {
                "session_seconds": finished - _started,
                "started_at": _started_at,
                "finishing_at": finishing_at,
                "finished_at": finished_at,
                "items": _items,
                "probe_seconds": _probe["seconds"],
                "probe_spent": _probe["spent"],
            }
            with open(path, "w", encoding="utf-8") as out:
                json.dump(record, out)
"""


def pytest_command(*args: str, plugins: Sequence[str] = ("openkata",)) -> list[str]:
    """``python -m pytest`` for a child, with the cache provider off and ``addopts`` emptied.

    ``plugins`` are loaded with ``-p`` (entry point names): they are the only third-party
    plugins of the run unless :func:`child_environment` is told to keep the autoloaded ones.
    """
    command = [CHILD.python, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts="]
    if importlib.util.find_spec("pytest_randomly") is not None:
        command += ["-p", "no:randomly"]
    for plugin in plugins:
        command += ["-p", plugin]
    return [*command, *args]


def eval_options(base_url: str, *extra: str) -> list[str]:
    """The plugin's options for a run against a scripted endpoint, result cache off."""
    return [
        "--eval-backend", "http", "--eval-base-url", base_url, "--eval-model", "bench-model",
        "--eval-threshold", "0", "--eval-cache", "off", *extra,
    ]  # fmt: skip


def child_environment(*, all_plugins: bool = False, **extra: str) -> dict[str, str]:
    """This process's environment without settings that would change the child's run.

    Unless ``all_plugins``, pytest's plugin autoloading is off in the child, so that other
    installed plugins (hypothesis, pytest-benchmark, anyio, ...) do not add their own costs;
    the plugins the run needs are then named with ``-p`` (:func:`pytest_command`).
    """
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("OPENKATA_EVAL_")
        and name
        not in {
            "PYTEST_ADDOPTS",
            "PYTEST_PLUGINS",
            "PYTEST_XDIST_AUTO_NUM_WORKERS",
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD",
        }
    }
    if not all_plugins:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env.update(extra)
    return env


def add_plugin_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--all-plugins",
        action="store_true",
        help="let pytest autoload every installed plugin in the child (default: only the "
        "plugins the run needs, so that unrelated plugins do not skew the figures)",
    )
    parser.add_argument(
        "--venv",
        action="store_true",
        help="run the pytest children in a virtualenv holding only the plugin and its declared "
        "dependencies, as `pip install pytest-openkata` gives (built once under "
        f"{VENV_CACHE}, the plugin reinstalled when its source changes)",
    )


def prepare_children(args: argparse.Namespace) -> str:
    """Make the children's interpreter ready and say which it is, for the figures' header.

    Without ``--venv`` it is this interpreter, with every package installed here, and the
    plugin is byte-compiled in place (:func:`byte_compile_plugin`). With ``--venv`` it is a
    virtualenv that ``pip install`` of this checkout filled: the plugin, its dependencies and
    nothing else.
    """
    if not args.venv:
        byte_compile_plugin()
        CHILD.python = sys.executable
        return f"this Python ({sys.executable}), every package installed here"
    CHILD.python = str(clean_virtualenv() / "bin" / "python")
    return f"a clean virtualenv ({CHILD.python}): the plugin and its dependencies only"


def clean_virtualenv() -> Path:
    """A virtualenv with this checkout installed (not editable), as a user's would be.

    One per version of ``pyproject.toml`` (the dependencies); the plugin alone is reinstalled
    when a file of it changed since the last install.
    """
    project = (REPO / "pyproject.toml").read_bytes()
    venv = VENV_CACHE / f"bench-venv-{hashlib.sha256(project).hexdigest()[:12]}"
    python = venv / "bin" / "python"
    stamp = venv / "openkata-source.sha256"
    source = hashlib.sha256(project)
    for path in sorted((REPO / "pytest_openkata").rglob("*.py")):
        source.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    if python.is_file() and stamp.is_file() and stamp.read_text() == source.hexdigest():
        return venv
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    if not python.is_file():
        print(f"building {venv} (once; about 30 s) ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run([*pip, str(REPO)], check=True)
    else:
        print(f"reinstalling the plugin into {venv} ...", flush=True)
        subprocess.run([*pip, "--no-deps", "--force-reinstall", str(REPO)], check=True)
    stamp.write_text(source.hexdigest())
    return venv


def byte_compile_plugin() -> None:
    """Write the plugin's bytecode, as ``pip install`` does for an installed package.

    pytest and every other dependency are installed byte-compiled; an editable checkout of the
    plugin is not, and with ``PYTHONDONTWRITEBYTECODE`` set every child would compile the
    plugin afresh, a cost an installed plugin never has.
    """
    compileall.compile_dir(REPO / "pytest_openkata", quiet=1)


def write_corpus(root: Path, scenarios: int, per_skill: int, criteria: Mapping[str, int]) -> None:
    """``scenarios`` direct scenarios, ``per_skill`` to a skill, each with ``criteria``."""
    from tests.support.evals import write_skill

    for first in range(0, scenarios, per_skill):
        names = [f"scenario-{n:05d}" for n in range(first, min(first + per_skill, scenarios))]
        write_skill(root, f"skill-{first // per_skill:03d}", dict.fromkeys(names, criteria))


@contextmanager
def scratch_folder(prefix: str, keep: bool = False) -> Iterator[Path]:
    """A fresh temporary folder with an empty ``pytest.ini`` (it anchors the rootdir)."""
    root = Path(tempfile.mkdtemp(prefix=f"openkata-bench-{prefix}-"))
    (root / "pytest.ini").write_text("[pytest]\n")
    try:
        yield root
    finally:
        if keep:
            print(f"(kept {root})")
        else:
            shutil.rmtree(root, ignore_errors=True)


@dataclass(frozen=True)
class ChildRun:
    returncode: int
    wall_seconds: float  # from spawning the interpreter to its exit
    stdout: str
    stderr: str
    record: dict | None  # what the recording conftest wrote, when it ran

    def tail(self, lines: int = 15) -> str:
        text = (self.stdout + self.stderr).strip().splitlines()
        return "\n".join(text[-lines:])


def run_child(
    command: Sequence[str],
    cwd: Path,
    *,
    all_plugins: bool = False,
    record: bool = True,
    probe: str | None = None,
    **environment: str,
) -> ChildRun:
    """Run ``command`` in ``cwd`` with ``environment`` added, timing it from spawn to exit
    (``probe``: see :data:`RECORDER_CONFTEST`)."""
    record_path = cwd / f"record-{time.monotonic_ns()}.json"
    extra = dict(environment)
    if record:
        extra[RECORD_ENV] = str(record_path)
    if probe:
        extra[PROBE_ENV] = probe
    env = child_environment(all_plugins=all_plugins, **extra)
    started = time.perf_counter()
    done = subprocess.run(
        list(command), check=False, cwd=cwd, env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - started
    data = None
    if record and record_path.is_file():
        data = json.loads(record_path.read_text())
        record_path.unlink()
    return ChildRun(done.returncode, wall, done.stdout, done.stderr, data)


class ArrivalLog:
    """Wraps an endpoint's responder to note when each request arrives (epoch seconds)."""

    def __init__(self, responder: Callable[[Any], Any]) -> None:
        self.responder = responder
        self.arrivals: list[float] = []
        self._lock = threading.Lock()

    def __call__(self, request: Any) -> Any:
        with self._lock:
            self.arrivals.append(time.time())
        return self.responder(request)

    def since(self, index: int) -> list[float]:
        with self._lock:
            return self.arrivals[index:]


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by linear interpolation between closest ranks."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan


def machine_line() -> str:
    """``nproc`` and the CPU model, for the figures table."""
    model = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    return (
        f"{os.cpu_count()} CPUs ({model}), Python {platform.python_version()}, load average {load}"
    )


def ratio_line(label: str, measured: float, target: float, unit: str) -> str:
    ratio = measured / target
    verdict = "meets target" if ratio <= 1 else "MISSES target"
    return (
        f"{label}: {measured:.{_digits(measured)}f} {unit} / target {target:g} {unit} "
        f"-> ratio = {ratio:.2f} ({verdict})"
    )


def _digits(value: float) -> int:
    return 3 if abs(value) < 10 else 1


def check_child(run: ChildRun, what: str, allowed: Sequence[int] = (0, 1)) -> None:
    """Stop with the child's output when pytest did not run as expected."""
    if run.returncode not in allowed:
        sys.exit(f"{what}: pytest exited {run.returncode}\n{run.tail(30)}")
