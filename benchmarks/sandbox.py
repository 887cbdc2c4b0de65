"""Sandbox cost per scenario against a bare docker-SDK round trip.

(a) the plugin's sandboxed run (``run_in_sandbox``, the core's flow on the ``DockerProvider``)
    with a trivial agent command (``sh -c 'cat > /dev/null; echo done > out.txt'``) on a small
    skill workspace;
(b) the floor the docker SDK allows for the same work: ``containers.create`` (same image,
    ``sleep``), ``start``, ``put_archive`` of the same workspace tar, ``exec_run`` of the same
    command, ``get_archive`` of the workspace (read to the end), ``remove(force=True)``.

N runs of each, interleaved (a, b, a, b, ...) after a short warm-up; it prints the medians,
the ratio a / b (target <= 1.3) and, per Docker API call, the median time each path spends
in it, so that a miss shows where the extra time goes.

It needs a Docker engine: ``DOCKER_HOST`` or the default socket, or ``--private-engine`` to
start a private dockerd the way the test suite does (tests/support/docker_engine.py). The
image needs ``sh``; by default the test suite's stand-in image is built locally.

    python benchmarks/sandbox.py --private-engine
    DOCKER_HOST=unix:///run/docker.sock python benchmarks/sandbox.py --image busybox:latest
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import contextlib
import functools
import os
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

from benchmarks._common import machine_line, median

TARGET = 1.3
COMMAND = ["sh", "-c", "cat > /dev/null; echo done > out.txt"]
WORKSPACE = "/workspace"
NETWORK = "none"
# The API client methods both paths go through (containers.create inspects the new one).
API_CALLS = (
    "create_container",
    "inspect_container",
    "start",
    "put_archive",
    "get_archive",
    "exec_create",
    "exec_start",
    "exec_inspect",
    "remove_container",
)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", "--runs", type=int, default=20, help="runs of each path (20)")
    parser.add_argument("--warm-up", type=int, default=2, help="uncounted runs of each (2)")
    parser.add_argument("--image", help="image with sh (default: build the stand-in image)")
    parser.add_argument(
        "--private-engine",
        action="store_true",
        help="start a private dockerd for the run (as the test suite does) when DOCKER_HOST "
        "is not set",
    )
    parser.add_argument(
        "--bare-limits",
        action="store_true",
        help="give the bare containers the plugin's limits too (CPUs, memory, processes, "
        "no-new-privileges), to tell their cost from the plugin's code",
    )
    return parser.parse_args()


@contextlib.contextmanager
def docker_host(private: bool) -> Iterator[str | None]:
    """The DOCKER_HOST to use (None: the SDK's default socket)."""
    configured = os.environ.get("DOCKER_HOST")
    if configured or not private:
        yield configured
        return
    from tests.support.docker_engine import private_dockerd

    with private_dockerd() as engine:
        yield engine.host


def connect(host: str | None) -> Any:
    import docker
    import docker.errors
    import requests.exceptions

    where = host or "the default socket"
    try:
        client = docker.DockerClient(base_url=host, timeout=120) if host else docker.from_env()
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        sys.exit(
            f"no Docker engine answers at {where} ({exc.__class__.__name__}).\n"
            "Start one (dockerd), set DOCKER_HOST, or pass --private-engine to start a "
            "private dockerd for this run (needs dockerd installed and root)."
        )
    return client


class ApiTimer:
    """Wraps the client's API methods to add up the seconds spent in each, per run (and, under
    ``#<name>``, how many calls)."""

    def __init__(self, api: Any) -> None:
        self.current: dict[str, float] = defaultdict(float)
        for name in API_CALLS:
            setattr(api, name, self._timed(name, getattr(api, name)))

    def _timed(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.current[name] += time.perf_counter() - started
                self.current[f"#{name}"] += 1

        return timed

    def take(self) -> dict[str, float]:
        taken, self.current = dict(self.current), defaultdict(float)
        return taken


def make_workspace(root: Path) -> tuple[Path, Path]:
    """A small skill (SKILL.md, a reference, a script) and one sandboxed scenario with inputs."""
    from tests.support.evals import write_scenario, write_skill

    skill = write_skill(root, "bench-skill", {})
    (skill / "references").mkdir()
    (skill / "references" / "guide.md").write_text("# Guide\n\n" + "A rule to follow.\n" * 40)
    (skill / "scripts").mkdir()
    (skill / "scripts" / "check.sh").write_text("#!/bin/sh\necho checked\n")
    scenario = write_scenario(
        skill,
        "scenario-bench",
        {"writes-out": 50, "says-done": 50},
        sandbox=True,
        inputs={"src/app.py": "print('hello')\n" * 20, "README.md": "# App\n"},
    )
    return skill, scenario


class Paths:
    """The two ways to run the same agent command on the same workspace."""

    def __init__(self, client: Any, image: str, root: Path, bare_limits: bool) -> None:
        from pytest_openkata.contracts.sandboxes import AgentCommand
        from pytest_openkata.core.sandboxed import SandboxSetup
        from pytest_openkata.core.scenario import load_scenario
        from pytest_openkata.core.workspace import workspace_archive
        from pytest_openkata.providers.sandboxes.docker import DockerLimits, DockerProvider

        self.client = client
        self.image = image
        limits = DockerLimits(image=image, cpus=1, memory="512m", pids=256)
        agent = AgentCommand(name="sh", argv=list(COMMAND))
        self.setup = SandboxSetup(DockerProvider(client, limits), agent, NETWORK, timeout=60)
        self.skill, scenario_dir = make_workspace(root)
        self.scenario = load_scenario(scenario_dir)
        self.prompt = (scenario_dir / "task.md").read_text()
        self.archive = workspace_archive(self.skill, scenario_dir)
        self.bare_limits: dict[str, Any] = {}
        if bare_limits:
            self.bare_limits = {
                "nano_cpus": int(limits.cpus * 1e9),
                "mem_limit": limits.memory,
                "pids_limit": limits.pids,
                "security_opt": ["no-new-privileges"],
            }

    def plugin(self) -> None:
        """(a) the plugin's flow on its Docker provider, as a sandboxed scenario runs it."""
        from pytest_openkata.core.errors import ScenarioFailure
        from pytest_openkata.core.sandboxed import run_in_sandbox
        from pytest_openkata.infra.retry import NO_RETRY

        try:
            result = run_in_sandbox(self.scenario, self.prompt, self.setup, NO_RETRY)
        except ScenarioFailure as exc:
            sys.exit(f"the plugin's run failed: {exc}")
        if "out.txt" not in result.text:
            sys.exit(f"the plugin's run made no out.txt:\n{result.text}")

    def bare(self) -> None:
        """(b) the same work with the fewest docker SDK calls."""
        container = self.client.containers.create(
            self.image,
            ["sleep", "2147483647"],
            network_mode=NETWORK,
            working_dir=WORKSPACE,
            detach=True,
            **self.bare_limits,
        )
        try:
            container.start()
            if not container.put_archive(WORKSPACE, self.archive):
                sys.exit("the engine refused the workspace archive")
            result = container.exec_run(COMMAND, workdir=WORKSPACE)
            if result.exit_code != 0:
                sys.exit(f"the bare exec failed: {result.output!r}")
            stream, _stat = container.get_archive(WORKSPACE)
            if sum(len(chunk) for chunk in stream) == 0:
                sys.exit("empty workspace archive")
        finally:
            container.remove(force=True)


def measure(
    paths: dict[str, Callable[[], None]], timer: ApiTimer, runs: int, warm_up: int
) -> tuple[dict[str, list[float]], dict[str, list[dict[str, float]]]]:
    """Seconds of each run of each path, and the seconds of each API call in it."""
    seconds: dict[str, list[float]] = {name: [] for name in paths}
    calls: dict[str, list[dict[str, float]]] = {name: [] for name in paths}
    for index in range(-warm_up, runs):
        for name, path in paths.items():  # interleaved: a, b, a, b, ...
            timer.take()
            started = time.perf_counter()
            path()
            elapsed = time.perf_counter() - started
            spent = timer.take()
            if index >= 0:
                seconds[name].append(elapsed)
                calls[name].append(spent)
    return seconds, calls


def report(seconds: dict[str, list[float]], calls: dict[str, list[dict[str, float]]]) -> None:
    plugin, bare = median(seconds["plugin"]), median(seconds["bare"])
    print(f"(a) run_in_sandbox        median {plugin * 1e3:8.1f} ms")
    print(f"(b) bare docker SDK trip  median {bare * 1e3:8.1f} ms")
    print(f"{'median ms per run (calls) in':<28} {'(a) plugin':>14} {'(b) bare':>13}")
    for call in API_CALLS:
        a = median([run.get(call, 0.0) for run in calls["plugin"]])
        b = median([run.get(call, 0.0) for run in calls["bare"]])
        count_a = median([run.get(f"#{call}", 0) for run in calls["plugin"]])
        count_b = median([run.get(f"#{call}", 0) for run in calls["bare"]])
        print(f"  api.{call:<22} {a * 1e3:>9.1f} ({count_a:g}) {b * 1e3:>9.1f} ({count_b:g})")
    outside = {
        name: median(
            [
                total - sum(v for k, v in spent.items() if not k.startswith("#"))
                for total, spent in zip(seconds[name], calls[name], strict=True)
            ]
        )
        for name in seconds
    }
    label = "rest: streams, Python"
    print(f"  {label:<26} {outside['plugin'] * 1e3:>9.1f}     {outside['bare'] * 1e3:>9.1f}")
    ratio = plugin / bare
    verdict = "meets target" if ratio <= TARGET else "MISSES target"
    print(
        f"a / b = {ratio:.3f} (target <= {TARGET}) -> ratio to target = "
        f"{ratio / TARGET:.2f} ({verdict})"
    )


def main() -> None:
    args = parse_args()
    root = Path(tempfile.mkdtemp(prefix="openkata-bench-sandbox-"))
    try:
        with docker_host(args.private_engine) as host:
            client = connect(host)
            try:
                if args.image:
                    image = args.image
                else:
                    from tests.support.docker_engine import build_standin_image

                    image = build_standin_image(client)
                paths = Paths(client, image, root, args.bare_limits)
                timer = ApiTimer(client.api)
                seconds, calls = measure(
                    {"plugin": paths.plugin, "bare": paths.bare}, timer, args.runs, args.warm_up
                )
                version = client.version().get("Version", "?")
            finally:
                client.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)

    print(f"machine: {machine_line()}")
    print(f"engine: Docker {version} at {host or 'the default socket'}; image {image}")
    print(
        f"{args.runs} runs of each, interleaved, after {args.warm_up} uncounted; network "
        f"{NETWORK}; bare containers {'with' if args.bare_limits else 'without'} the "
        "plugin's limits"
    )
    report(seconds, calls)


if __name__ == "__main__":
    main()
