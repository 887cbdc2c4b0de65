"""Sandboxed throughput on one Docker engine and on a pool of two, as a ratio.

The same sandboxed scenarios run through the plugin (``python -m pytest`` in a generated
project, as the other benchmarks run it) on two configurations, alternated over several rounds:

- one engine: ``--eval-sandbox-hosts a=<engine a>``;
- two engines: ``--eval-sandbox-hosts a=<engine a>,b=<engine b>``;

with the same ``--eval-sandbox-per-host`` and an ``--eval-concurrency`` that is never the limit
(every scenario may run at once). Each scenario's stand-in agent (the test suite's kiro-cli,
``tests/support/standins/sandbox-kiro-cli``) sleeps a fixed time (``STANDIN: sleep S`` in its
task.md), then writes a file; its judge is a scripted loopback endpoint. The two engines are
private dockerds this script starts (``tests/support/docker_engine.py``), the stand-in image
built into each, and stops on every exit.

It prints each run (and how many scenarios each engine ran, from the results JSON), then per
configuration the wall time (spawn to exit, min and median), scenarios per minute, the
session's own time and the ideal, ``ceil(N / room) x S``: the agents' sleeps alone, in waves
as wide as the pool's room; the session's time beyond it, per wave, is what a scenario costs
besides its agent (containers, copies, the judge's call). The figure is the ratio of
throughputs, two engines over one (median wall times, one's over two's; the sessions' too),
beside the ideal ratio (2.00 when the room doubles and N fills the waves). A third
configuration, on by default, is a control: one engine with twice the room (``per-host 2P``),
the same room as the pool of two; two engines against it show what the pool itself costs.

What this machine can show: both engines run on this one host, and the stand-in agents sleep
rather than compute. The gain measured is capacity (twice the sandboxes at once), not hardware;
what each scenario costs beyond its sleep (containers created, workspaces copied in and out,
the judge's call) is CPU work that both engines share here, so the measured ratio is below
the ideal by that share. On engines of their own hosts, that work would spread too.

    python benchmarks/pool.py                                  # 12 scenarios of 3 s, 3 rounds
    python benchmarks/pool.py --scenarios 24 --sleep 5 --per-host 4 --rounds 5
    python benchmarks/pool.py --rounds 1 --no-control          # a quick look
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import contextlib
import json
import math
import shutil
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from benchmarks._common import (
    RECORDER_CONFTEST,
    add_plugin_option,
    check_child,
    eval_options,
    machine_line,
    median,
    prepare_children,
    pytest_command,
    run_child,
    scratch_folder,
)
from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, reports_under, write_scenario, write_skill

SKILL = "pool-bench"
WARM_UP = "warm-up"  # a folder of its own: a run on both engines before the measured ones
CRITERIA = {"wrote-the-file": 100}
ENGINE_LINE = "openkata: engine "


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenarios", type=int, default=12, help="sandboxed scenarios (12)")
    parser.add_argument(
        "--sleep", type=float, default=3.0, help="seconds each stand-in agent sleeps (3)"
    )
    parser.add_argument(
        "--per-host", type=int, default=2, help="--eval-sandbox-per-host: room per engine (2)"
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=0,
        help="--eval-concurrency (0: the number of scenarios, so that it is never the limit)",
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="runs of every configuration, alternated (3)"
    )
    parser.add_argument(
        "--no-control",
        dest="control",
        action="store_false",
        help="leave out the control: one engine with twice the room",
    )
    parser.add_argument(
        "--no-warm-up",
        dest="warm_up",
        action="store_false",
        help="leave out the uncounted first run on both engines",
    )
    add_plugin_option(parser)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    if args.scenarios < 1 or args.per_host < 1 or args.rounds < 1 or args.sleep <= 0:
        parser.error("need at least 1 scenario, room and round, and a sleep above 0 s")
    args.concurrency = args.concurrency or args.scenarios
    return args


@dataclass(frozen=True)
class Setup:
    """One configuration of the pool: its engines (names) and the room of each."""

    label: str
    engines: tuple[str, ...]
    per_host: int

    @property
    def room(self) -> int:
        return len(self.engines) * self.per_host

    def ideal(self, scenarios: int, sleep: float) -> float:
        """The agents' sleeps alone, in waves as wide as the room."""
        return math.ceil(scenarios / self.room) * sleep


@dataclass(frozen=True)
class Outcome:
    wall: float  # the child from spawn to exit
    session: float  # pytest_sessionstart to pytest_sessionfinish, recorded in the child
    engines: Mapping[str, int]  # scenarios run on each engine, as the reports name it


@contextlib.contextmanager
def two_engines() -> Iterator[dict[str, str]]:
    """Two private dockerds (``a`` and ``b``), each with its own socket and data folder, as
    the test suite starts one; both are stopped on every way out."""
    from tests.support.docker_engine import private_dockerd

    with contextlib.ExitStack() as stack:
        engines = {name: stack.enter_context(private_dockerd()).host for name in ("a", "b")}
        yield engines


def prepare_engines(engines: Mapping[str, str]) -> tuple[str, str]:
    """Build the stand-in image into every engine; the image's tag and the engines' Docker
    version."""
    import docker

    from tests.support.docker_engine import build_standin_image

    tags, versions = set(), set()
    for host in engines.values():
        with contextlib.closing(docker.DockerClient(base_url=host, timeout=120)) as client:
            tags.add(build_standin_image(client))
            versions.add(str(client.version().get("Version", "?")))
    if len(tags) != 1:
        sys.exit(f"the engines built different stand-in images: {sorted(tags)}")
    return tags.pop(), ", ".join(sorted(versions))


def write_scenarios(root: Path, skill: str, count: int, sleep: float) -> None:
    """``count`` sandboxed scenarios whose stand-in agent sleeps ``sleep`` s, then writes."""
    folder = write_skill(root, skill, {})
    for index in range(count):
        scenario = write_scenario(folder, f"scenario-{index:03d}", CRITERIA, sandbox=True)
        lines = [f"Do the task of scenario-{index:03d}."]
        if sleep:
            lines.append(f"STANDIN: sleep {sleep:g}")
        lines.append(f"STANDIN: write out-{index:03d}.txt done")
        (scenario / "task.md").write_text("\n".join(lines) + "\n")


def engines_used(root: Path) -> Counter[str]:
    """How many scenarios ran on each engine, from the results JSON of the run; the results
    are removed afterwards, so that the next run's are the only ones."""
    used: Counter[str] = Counter()
    for report in reports_under(root):
        for scenario in json.loads(report.read_text())["scenarios"]:
            used[scenario.get("engine") or "?"] += 1
    for results in root.glob("skills/*/evals/results"):
        shutil.rmtree(results)
    return used


@dataclass(frozen=True)
class Bench:
    """What every run shares: the project's folder, the judge's endpoint, the engines (by
    name), the image and the options."""

    root: Path
    endpoint: ScriptedEndpoint
    engines: Mapping[str, str]
    image: str
    args: argparse.Namespace

    def command(self, setup: Setup, concurrency: int, *paths: str) -> list[str]:
        hosts = ",".join(f"{name}={self.engines[name]}" for name in setup.engines)
        options = eval_options(
            self.endpoint.base_url,
            "--eval-sandbox-image", self.image,
            "--eval-sandbox-mounts", "none",
            "--eval-sandbox-hosts", hosts,
            "--eval-sandbox-per-host", str(setup.per_host),
            "--eval-concurrency", str(concurrency),
        )  # fmt: skip
        return pytest_command(*paths, *options)

    def warm_up(self, setup: Setup) -> list[str]:
        """An uncounted run on every engine of ``setup`` (first containers, caches); the
        engine lines its start printed."""
        write_scenarios(self.root / WARM_UP, SKILL, setup.room, 0)
        argv = self.command(setup, setup.room, f"{WARM_UP}/skills")
        run = run_child(argv, self.root, all_plugins=self.args.all_plugins, record=False)
        check_child(run, "warm-up", allowed=(0,))
        shutil.rmtree(self.root / WARM_UP)
        return [line for line in run.stdout.splitlines() if line.startswith(ENGINE_LINE)]

    def run(self, setup: Setup) -> Outcome:
        """One measured run of every scenario on ``setup``."""
        argv = self.command(setup, self.args.concurrency, "-q", "skills")
        run = run_child(argv, self.root, all_plugins=self.args.all_plugins)
        check_child(run, setup.label, allowed=(0,))
        if run.record is None:
            sys.exit(f"{setup.label}: the recording conftest wrote nothing\n{run.tail()}")
        used = engines_used(self.root)
        if sum(used.values()) != self.args.scenarios:
            sys.exit(
                f"{setup.label}: {sum(used.values())} scenarios reported, not {self.args.scenarios}"
            )
        return Outcome(run.wall_seconds, run.record["session_seconds"], dict(used))


def spread(engines: Mapping[str, int]) -> str:
    return " ".join(f"{name}:{count}" for name, count in sorted(engines.items()))


def measure(bench: Bench, setups: Sequence[Setup]) -> dict[Setup, list[Outcome]]:
    """Every configuration once a round, the order reversed every other round."""
    runs: dict[Setup, list[Outcome]] = {setup: [] for setup in setups}
    header = f"{'run':<36} {'wall s':>8} {'session s':>10} {'per engine':>12}"
    print(header)
    print("-" * len(header))
    for round_ in range(1, bench.args.rounds + 1):
        ordered = setups if round_ % 2 else list(reversed(setups))
        for setup in ordered:
            outcome = bench.run(setup)
            runs[setup].append(outcome)
            print(
                f"{setup.label + ' #' + str(round_):<36} {outcome.wall:>8.2f} "
                f"{outcome.session:>10.2f} {spread(outcome.engines):>12}",
                flush=True,
            )
    return runs


def report(runs: Mapping[Setup, list[Outcome]], args: argparse.Namespace) -> None:
    print()
    header = (
        f"{'configuration':<32} {'room':>5} {'wall min s':>11} {'wall median s':>14} "
        f"{'scen./min':>10} {'session med s':>14} {'ideal s':>8} {'/ ideal':>8} "
        f"{'more per wave s':>16}"
    )
    print(header)
    print("-" * len(header))
    walls, sessions = {}, {}
    for setup, outcomes in runs.items():
        wall = walls[setup] = median([o.wall for o in outcomes])
        session = sessions[setup] = median([o.session for o in outcomes])
        ideal = setup.ideal(args.scenarios, args.sleep)
        waves = math.ceil(args.scenarios / setup.room)
        print(
            f"{setup.label:<32} {setup.room:>5} {min(o.wall for o in outcomes):>11.2f} "
            f"{wall:>14.2f} {args.scenarios / wall * 60:>10.1f} {session:>14.2f} "
            f"{ideal:>8.2f} {session / ideal:>8.2f} {(session - ideal) / waves:>16.2f}"
        )
    print(
        "  ideal: ceil(N / room) waves of the agents' sleep; more per wave: the session's time "
        "beyond it, per wave (containers, copies, judge calls, pytest)"
    )
    print()
    one, two, *control = runs
    ideal_ratio = one.ideal(args.scenarios, args.sleep) / two.ideal(args.scenarios, args.sleep)
    print(
        f"throughput, two engines / one: {walls[one] / walls[two]:.2f} on median walls, "
        f"{sessions[one] / sessions[two]:.2f} on median sessions (ideal {ideal_ratio:.2f}: the "
        "room doubles)"
    )
    if control:
        same = control[0]
        print(
            f"throughput, two engines / one engine with the same room: "
            f"{walls[same] / walls[two]:.2f} on walls, {sessions[same] / sessions[two]:.2f} on "
            "sessions (1.00: the pool costs nothing over a larger per-host)"
        )
    print(
        "both engines run on this one host and the stand-in agents sleep: the gain is capacity "
        "(twice the sandboxes at once), not hardware; what a scenario costs beyond its sleep "
        "uses the same CPUs on both engines"
    )


def main() -> None:
    args = parse_args()
    print(f"pytest children run in {prepare_children(args)}", flush=True)
    setups = [
        Setup(f"one engine (a), per-host {args.per_host}", ("a",), args.per_host),
        Setup(f"two engines (a, b), per-host {args.per_host}", ("a", "b"), args.per_host),
    ]
    if args.control:
        control = 2 * args.per_host
        setups.append(Setup(f"one engine (a), per-host {control}", ("a",), control))
    with (
        scratch_folder("pool", keep=args.keep) as root,
        two_engines() as engines,
        ScriptedEndpoint() as endpoint,
    ):
        endpoint.respond_with(EvalScript())
        image, version = prepare_engines(engines)
        print(f"machine: {machine_line()}")
        print(f"engines: two private dockerds on this host, Docker {version}; image {image}")
        print(
            f"{args.scenarios} sandboxed scenarios, each agent sleeping {args.sleep:g} s; "
            f"--eval-concurrency {args.concurrency}; {args.rounds} rounds, alternated"
            + ("; after an uncounted run on both engines" if args.warm_up else "")
        )
        (root / "conftest.py").write_text(RECORDER_CONFTEST)
        bench = Bench(root, endpoint, engines, image, args)
        if args.warm_up:
            for line in bench.warm_up(setups[1]):
                print(f"  {line}")
        write_scenarios(root, SKILL, args.scenarios, args.sleep)
        runs = measure(bench, setups)
    report(runs, args)


if __name__ == "__main__":
    main()
