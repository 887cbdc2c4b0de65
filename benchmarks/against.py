"""This checkout's plugin against the plugin at another git ref, side by side in one run.

The reference (``--ref``, by default ``876b11a``) is exported with ``git archive`` into a
temporary folder, byte-compiled as an installed package would be, and removed at the end. Every
measured pytest is a child process run from the same temporary skills tree; the reference's
children get the exported tree first on ``PYTHONPATH``, this checkout's children this checkout,
and each loads its plugin by the module its own ``pyproject.toml`` names as the ``pytest11``
entry point (``-p MODULE``, autoloading off). Both get the same options, ones both versions
accept. The two sides alternate run by run, and the order is reversed every other round, so
that a change in the machine's load hits both alike.

What is measured, each figure as a median over the rounds, both sides and current / reference:

(a) ``--scenarios`` direct scenarios x (agent + judge) against the scripted loopback endpoint
    at ``--latency`` and ``--eval-concurrency`` ``--concurrency``: the child's wall time, its
    CPU time (user + system) and its peak RSS. Each child runs as the only child of a small
    intermediate process, which reads ``resource.getrusage(RUSAGE_CHILDREN)`` once the child
    has exited.
(b) CPU per scenario at zero latency: the same scenarios against an endpoint that answers at
    once, the child's CPU time less that of ``--collect-only`` of the same tree (start-up and
    collection), divided by the scenarios; the whole child's CPU per scenario beside it.
(c) ``pytest --collect-only -q`` of ``--collect-scenarios`` scenarios (100 to a skill): wall
    time and peak RSS.
(d) From the child's spawn to the endpoint receiving its first request, against the wall time
    of ``pytest --collect-only -q`` of the same tree (target: ratio <= 1.3).
(e) From the last answer (its arrival plus the latency) to the child's exit, and the part of
    it spent in ``pytest_sessionfinish`` (the reports, the terminal summary), recorded by the
    benchmarks' recording conftest (target: the rest <= 0.2 s).

    python benchmarks/against.py                                    # the defaults, 5 rounds
    python benchmarks/against.py --rounds 1 --scenarios 40 --collect-scenarios 1000
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import compileall
import json
import re
import resource
import shutil
import subprocess
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from benchmarks._common import (
    RECORD_ENV,
    RECORDER_CONFTEST,
    REPO,
    ArrivalLog,
    child_environment,
    eval_options,
    machine_line,
    median,
    prepare_children,
    pytest_command,
    scratch_folder,
    write_corpus,
)
from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript

FIRST_CALL_TARGET = 1.3  # spawn -> first model call / collect-only of the same tree
AFTER_TARGET = 0.2  # seconds from the last answer to exit, beyond pytest_sessionfinish
CRITERIA = {"names-the-change": 50, "keeps-it-short": 50}
COLLECTED = re.compile(r"(\d+) tests? collected")
SIDES = ("current", "reference")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ref", default="876b11a", help="the reference's git ref (876b11a)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds, each side once (5)")
    parser.add_argument("--scenarios", type=int, default=200, help="scenarios of (a) (200)")
    parser.add_argument("--latency", type=float, default=0.2, help="endpoint latency s (0.2)")
    parser.add_argument("--concurrency", type=int, default=32, help="--eval-concurrency (32)")
    parser.add_argument(
        "--collect-scenarios", type=int, default=10_000, help="scenarios of (c) (10000; 0 skips)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary folders")
    parser.add_argument("--measure", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser.parse_args()


@dataclass(frozen=True)
class Side:
    """One plugin under test: where its package is and which module pytest loads."""

    name: str
    source: Path  # the folder holding its pytest_openkata package
    module: str  # its pytest11 entry point's module

    def command(self, *args: str) -> list[str]:
        return pytest_command(*args, plugins=(self.module,))

    def environment(self, **extra: str) -> dict[str, str]:
        return child_environment(PYTHONPATH=str(self.source), **extra)


@dataclass(frozen=True)
class Measurement:
    """One child: wall and CPU seconds, peak RSS, spawn and exit times (epoch seconds)."""

    wall: float
    cpu: float
    max_rss_kib: int
    spawned_at: float
    exited_at: float
    returncode: int
    collected: int | None
    tail: str

    @property
    def megabytes(self) -> float:
        return self.max_rss_kib * 1024 / 1e6


def measure_here(command: Sequence[str]) -> dict[str, object]:
    """Run ``command`` as this process's only child; its times and peak RSS."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    spawned_at, started = time.time(), time.perf_counter()
    done = subprocess.run(list(command), check=False, capture_output=True, text=True)
    wall, exited_at = time.perf_counter() - started, time.time()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime - before.ru_utime - before.ru_stime
    found = COLLECTED.findall(done.stdout)
    return {
        "wall": wall,
        "cpu": cpu,
        "max_rss_kib": usage.ru_maxrss,
        "spawned_at": spawned_at,
        "exited_at": exited_at,
        "returncode": done.returncode,
        "collected": int(found[-1]) if found else None,
        "tail": "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:]),
    }


def measure(side: Side, cwd: Path, *args: str, **environment: str) -> Measurement:
    """:func:`measure_here` of ``side``'s pytest in a fresh intermediate process, with
    ``environment`` added to the child's."""
    wrapper = [sys.executable, __file__, "--measure", *side.command(*args)]
    env = side.environment(**environment)
    done = subprocess.run(wrapper, check=True, cwd=cwd, env=env, capture_output=True, text=True)
    outcome = Measurement(**json.loads(done.stdout))
    if outcome.returncode != 0:
        sys.exit(
            f"{side.name}: pytest {' '.join(args)} exited {outcome.returncode}\n{outcome.tail}"
        )
    return outcome


def plugin_module(pyproject: str) -> str:
    """The module a ``pyproject.toml`` names as its ``pytest11`` entry point."""
    entry_points = tomllib.loads(pyproject)["project"]["entry-points"]["pytest11"]
    (module,) = entry_points.values()
    return str(module).split(":")[0]


@contextmanager
def reference_side(ref: str) -> Iterator[Side]:
    """The plugin at ``ref``, exported into a temporary folder removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="openkata-bench-ref-"))
    try:
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", ref, "pytest_openkata"],
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
        compileall.compile_dir(folder / "pytest_openkata", quiet=1)
        pyproject = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{ref}:pyproject.toml"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        yield Side("reference", folder, plugin_module(pyproject))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def current_side() -> Side:
    return Side("current", REPO, plugin_module((REPO / "pyproject.toml").read_text()))


@dataclass(frozen=True)
class Round:
    """One side's figures of one round."""

    run_wall: float
    run_cpu: float
    run_megabytes: float
    zero_cpu: float
    collect_wall: float  # collect-only of the run's tree
    collect_cpu: float
    first_call: float  # spawn -> first request
    after_answer: float  # last answer -> exit
    session_finish: float  # the part of it in pytest_sessionfinish
    big_wall: float  # collect-only of --collect-scenarios
    big_megabytes: float


class Bench:
    """The trees, the endpoints and the runs of one side in one round."""

    def __init__(self, root: Path, big: Path, args: argparse.Namespace) -> None:
        self.root, self.big, self.args = root, big, args
        self.slow_log = ArrivalLog(EvalScript())
        self.zero_log = ArrivalLog(EvalScript())

    def round(self, side: Side, slow: ScriptedEndpoint, zero: ScriptedEndpoint) -> Round:
        args = self.args
        record = self.root / "record.json"
        arrivals = len(self.slow_log.since(0))
        options = eval_options(slow.base_url, "--eval-concurrency", str(args.concurrency))
        run = measure(side, self.root, "-q", "skills", *options, **{RECORD_ENV: str(record)})
        recorded = json.loads(record.read_text())
        record.unlink()
        calls = self.slow_log.since(arrivals)
        if len(calls) != 2 * args.scenarios:
            sys.exit(f"{side.name}: {len(calls)} model calls, {2 * args.scenarios} expected")
        last_answer = max(calls) + args.latency
        options = eval_options(zero.base_url, "--eval-concurrency", str(args.concurrency))
        zero_run = measure(side, self.root, "-q", "skills", *options)
        collect = measure(side, self.root, "--collect-only", "-q", "skills")
        big_wall = big_megabytes = float("nan")
        if args.collect_scenarios:
            big = measure(side, self.big, "--collect-only", "-q", "skills")
            if big.collected != args.collect_scenarios:
                sys.exit(f"{side.name}: collected {big.collected}\n{big.tail}")
            big_wall, big_megabytes = big.wall, big.megabytes
        return Round(
            run_wall=run.wall,
            run_cpu=run.cpu,
            run_megabytes=run.megabytes,
            zero_cpu=zero_run.cpu,
            collect_wall=collect.wall,
            collect_cpu=collect.cpu,
            first_call=min(calls) - run.spawned_at,
            after_answer=run.exited_at - last_answer,
            session_finish=recorded["finished_at"] - recorded["finishing_at"],
            big_wall=big_wall,
            big_megabytes=big_megabytes,
        )


@dataclass(frozen=True)
class Figure:
    label: str
    unit: str
    scale: float
    value: Callable[[Round], float]

    def of(self, rounds: list[Round]) -> float:
        return median([self.value(r) for r in rounds]) * self.scale


def figures(args: argparse.Namespace) -> list[Figure]:
    n = args.scenarios
    found = [
        Figure("(a) wall time", "s", 1, lambda r: r.run_wall),
        Figure("(a) CPU time (user + sys)", "s", 1, lambda r: r.run_cpu),
        Figure("(a) peak RSS", "MB", 1, lambda r: r.run_megabytes),
        Figure(
            "(b) CPU per scenario, 0 ms, less collection", "ms", 1e3,
            lambda r: (r.zero_cpu - r.collect_cpu) / n,
        ),
        Figure("(b) CPU per scenario, 0 ms, whole child", "ms", 1e3, lambda r: r.zero_cpu / n),
    ]  # fmt: skip
    if args.collect_scenarios:
        found += [
            Figure("(c) collect-only, wall", "s", 1, lambda r: r.big_wall),
            Figure("(c) collect-only, peak RSS", "MB", 1, lambda r: r.big_megabytes),
        ]
    found += [
        Figure("(d) spawn -> first model call", "s", 1, lambda r: r.first_call),
        Figure("(d) collect-only of the same tree", "s", 1, lambda r: r.collect_wall),
        Figure("(d) first call / collect-only", "x", 1, lambda r: r.first_call / r.collect_wall),
        Figure("(e) last answer -> exit", "s", 1, lambda r: r.after_answer),
        Figure("(e) of which pytest_sessionfinish", "s", 1, lambda r: r.session_finish),
        Figure("(e) the rest", "s", 1, lambda r: r.after_answer - r.session_finish),
    ]
    return found


def verdict(ok: bool) -> str:
    return "meets target" if ok else "MISSES target"


def main() -> None:
    args = parse_args()
    if args.measure is not None:  # the intermediate process
        print(json.dumps(measure_here(args.measure)))
        return
    print(f"pytest children run in {prepare_children(args=argparse.Namespace(venv=False))}")
    current = current_side()
    head = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    results: dict[str, list[Round]] = {name: [] for name in SIDES}
    with (
        reference_side(args.ref) as reference,
        scratch_folder("against", keep=args.keep) as root,
        scratch_folder("against-collect", keep=args.keep) as big,
    ):
        print(f"current: {head} (+ working tree) -p {current.module}")
        print(f"reference: {args.ref} -p {reference.module}")
        started = time.perf_counter()
        write_corpus(root, args.scenarios, 100, CRITERIA)
        (root / "conftest.py").write_text(RECORDER_CONFTEST)
        if args.collect_scenarios:
            write_corpus(big, args.collect_scenarios, 100, CRITERIA)
        print(f"wrote the trees in {time.perf_counter() - started:.1f} s", flush=True)
        bench = Bench(root, big, args)
        with (
            ScriptedEndpoint(latency=args.latency, keep_alive=True) as slow,
            ScriptedEndpoint(latency=0, keep_alive=True) as zero,
        ):
            slow.respond_with(bench.slow_log)
            zero.respond_with(bench.zero_log)
            for number in range(args.rounds):
                sides = (current, reference) if number % 2 == 0 else (reference, current)
                for side in sides:
                    outcome = bench.round(side, slow, zero)
                    results[side.name].append(outcome)
                    print(
                        f"round {number + 1} {side.name:<9} run {outcome.run_wall:.2f} s "
                        f"wall, {outcome.run_cpu:.2f} s CPU; first call "
                        f"{outcome.first_call:.2f} s; collect {outcome.collect_wall:.2f} s; "
                        f"{args.collect_scenarios} collected {outcome.big_wall:.2f} s",
                        flush=True,
                    )

    print()
    print(f"machine: {machine_line()}")
    print(
        f"(a) {args.scenarios} direct scenarios x (agent + judge), {args.latency * 1e3:g} ms, "
        f"--eval-concurrency {args.concurrency}; (b) the same at 0 ms; (c) collect-only of "
        f"{args.collect_scenarios} scenarios; medians of {args.rounds} alternating round(s)"
    )
    print(f"{'measure':<46} {'current':>10} {'reference':>10} {'cur/ref':>8}")
    for figure in figures(args):
        mine, theirs = figure.of(results["current"]), figure.of(results["reference"])
        print(
            f"{figure.label:<46} {mine:>8.3f} {figure.unit:<2}{theirs:>8.3f} {figure.unit:<2}"
            f"{mine / theirs:>7.2f}"
        )
    print()
    for name in SIDES:
        rounds = results[name]
        ratio = median([r.first_call / r.collect_wall for r in rounds])
        rest = median([r.after_answer - r.session_finish for r in rounds])
        print(
            f"{name}: (d) first call / collect-only = {ratio:.2f} (target <= "
            f"{FIRST_CALL_TARGET}, {verdict(ratio <= FIRST_CALL_TARGET)}); (e) last answer -> "
            f"exit beyond sessionfinish = {rest:.3f} s (target <= {AFTER_TARGET} s, "
            f"{verdict(rest <= AFTER_TARGET)})"
        )


if __name__ == "__main__":
    main()
