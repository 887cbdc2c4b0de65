"""Wall time against the ideal for direct scenarios on a slow endpoint.

Every scenario makes two model calls (agent, judge) and the endpoint delays each answer by
``--latency`` seconds, so N scenarios run c at a time need at least N x 2 x latency / c
seconds. The same corpus is run with ``--eval-concurrency`` 1, 8 and 32 (one pytest process,
the plugin's own scheduler) and with ``-n 4`` (pytest-xdist, concurrency 1 per worker, ideal
with c = 4). For each run it prints the pytest session's own time (``pytest_sessionstart`` to
``pytest_sessionfinish``, recorded in the child) and the child's whole wall time (interpreter
start and collection included), each divided by the ideal, and the most requests the endpoint
had in flight at once. Target, at c = 32 and 200 ms: session ratio <= 1.15.

Two baselines without the plugin's scenario machinery, side by side, both making their calls
through an ``httpx.Client`` configured as the plugin's ``make_client`` configures its own
(timeout, no cap on connections, as many kept as calls at once): beside each
``--eval-concurrency`` c > 1, one plain test making the same calls from c threads (each thread
takes a scenario and makes its two calls in turn: what httpx, pytest and the endpoint cost at c
in flight on this machine); beside ``-n``, as many plain test functions, each making the two
calls, run with the same ``-n`` (what pytest-xdist costs).

    python benchmarks/concurrency.py                      # 200 scenarios, 200 ms, 1 8 32 -n 4
    python benchmarks/concurrency.py --scenarios 40 --concurrency 8 --xdist 0   # quick look
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import math
from dataclasses import dataclass

from benchmarks._common import (
    RECORDER_CONFTEST,
    ArrivalLog,
    add_plugin_option,
    check_child,
    eval_options,
    machine_line,
    median,
    prepare_children,
    pytest_command,
    run_child,
    scratch_folder,
    write_corpus,
)
from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript

TARGET = 1.15
CALLS_PER_SCENARIO = 2
CRITERIA = {"names-the-change": 50, "keeps-it-short": 50}
PLAIN_TESTS = """\
import json
import os

import httpx
import pytest

URL = os.environ["OPENKATA_BENCH_URL"] + "/chat/completions"
BODY = {"model": "bench-model", "messages": [{"role": "user", "content": "hello"}]}
HEADERS = {"Content-Type": "application/json"}


@pytest.fixture(scope="session")
def client():
    # As make_client builds the plugin's: no cap on connections, kept ones for every caller.
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=20)
    with httpx.Client(timeout=60, limits=limits) as client:
        yield client


@pytest.mark.parametrize("number", range(int(os.environ["OPENKATA_BENCH_TESTS"])))
def test_two_calls(client, number):
    for _ in range(2):
        response = client.post(URL, content=json.dumps(BODY).encode(), headers=HEADERS)
        assert response.status_code == 200
"""
# The same calls from one test on c threads: what httpx and the endpoint cost at c in flight.
PLAIN_THREADS = """\
import json
import os
import threading

import httpx

URL = os.environ["OPENKATA_BENCH_URL"] + "/chat/completions"
BODY = {"model": "bench-model", "messages": [{"role": "user", "content": "hello"}]}
HEADERS = {"Content-Type": "application/json"}


def test_the_same_calls_on_threads():
    scenarios = iter(range(int(os.environ["OPENKATA_BENCH_TESTS"])))
    lock = threading.Lock()
    failures = []

    def work(client):
        while True:
            with lock:
                if next(scenarios, None) is None:
                    return
            try:
                for _ in range(2):
                    body = json.dumps(BODY).encode()
                    response = client.post(URL, content=body, headers=HEADERS)
                    if response.status_code != 200:
                        failures.append(response.status_code)
            except httpx.HTTPError as exc:
                failures.append(exc)

    count = int(os.environ["OPENKATA_BENCH_THREADS"])
    # As make_client builds the plugin's: no cap on connections, kept ones for every thread.
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=max(count, 20))
    with httpx.Client(timeout=60, limits=limits) as client:
        threads = [threading.Thread(target=work, args=(client,)) for _ in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert not failures
"""


def positive_ints(text: str) -> list[int]:
    values = [int(part) for part in text.replace(",", " ").split()]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError("give whole numbers of at least 1, e.g. 1,8,32")
    return values


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenarios", type=int, default=200, help="direct scenarios (200)")
    parser.add_argument("--per-skill", type=int, default=50, help="scenarios per skill (50)")
    parser.add_argument(
        "--latency", type=float, default=0.2, help="seconds the endpoint waits per call (0.2)"
    )
    parser.add_argument(
        "--concurrency",
        type=positive_ints,
        default=[1, 8, 32],
        metavar="LIST",
        help="--eval-concurrency values to run without xdist (1,8,32)",
    )
    parser.add_argument(
        "--xdist",
        type=int,
        default=4,
        metavar="N",
        help="also run with -n N and --eval-concurrency 1 (4; 0 skips it)",
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="runs of every setup, reported as medians (1)"
    )
    add_plugin_option(parser)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    return parser.parse_args()


@dataclass(frozen=True)
class Setup:
    label: str
    concurrency: int  # --eval-concurrency
    workers: int  # -n, 0 without xdist
    plain: bool = False  # the baseline: plain tests making the same calls, no openkata

    @property
    def parallel(self) -> int:
        """Scenarios in flight at once in the ideal schedule."""
        return self.workers or self.concurrency


@dataclass(frozen=True)
class Outcome:
    setup: Setup
    ideal: float
    session: float
    wall: float
    max_in_flight: int
    calls: int
    before_calls: float  # session start -> first model call arrives
    calls_window: float  # first call arrives -> last answer leaves
    after_calls: float  # last answer -> session end
    scenario_calls: float  # median seconds of a scenario's two calls, as the plugin timed them


def run_setup(
    root: Path, endpoint: ScriptedEndpoint, log: ArrivalLog, setup: Setup, args: argparse.Namespace
) -> Outcome:
    xdist = ["-n", str(setup.workers)] if setup.workers else []
    environment: dict[str, str] = {}
    if setup.plain:
        folder, plugins = ("plain", ("xdist",)) if setup.workers else ("plain_threads", ())
        command = pytest_command("-q", *xdist, folder, plugins=plugins)
        environment = {
            "OPENKATA_BENCH_URL": endpoint.base_url,
            "OPENKATA_BENCH_TESTS": str(args.scenarios),
            "OPENKATA_BENCH_THREADS": str(setup.concurrency),
        }
    else:
        options = eval_options(endpoint.base_url, "--eval-concurrency", str(setup.concurrency))
        plugins = ("openkata", "xdist") if setup.workers else ("openkata",)
        command = pytest_command("-q", *xdist, "skills", *options, plugins=plugins)
    requests_before = len(endpoint.requests)
    arrivals_before = len(log.since(0))
    endpoint.reset_peak()
    run = run_child(command, root, all_plugins=args.all_plugins, **environment)
    check_child(run, setup.label, allowed=(0,))
    if run.record is None:
        sys.exit(f"{setup.label}: the recording conftest wrote nothing\n{run.tail()}")
    ideal = args.scenarios * CALLS_PER_SCENARIO * args.latency / setup.parallel
    arrivals = log.since(arrivals_before)
    started, finished = run.record["started_at"], run.record["finished_at"]
    last_answer = max(arrivals) + args.latency
    return Outcome(
        setup=setup,
        ideal=ideal,
        session=run.record["session_seconds"],
        wall=run.wall_seconds,
        max_in_flight=endpoint.max_in_flight,
        calls=len(endpoint.requests) - requests_before,
        before_calls=min(arrivals) - started,
        calls_window=last_answer - min(arrivals),
        after_calls=finished - last_answer,
        scenario_calls=median(
            [
                entry["model_calls"]
                for entry in run.record["items"].values()
                if "model_calls" in entry
            ]
        ),
    )


def fewest_turns(setup: Setup, scenarios: int) -> int:
    """Rounds of calls the setup needs at the least: c call slots share all 2N calls; a
    worker of -n runs its scenarios one at a time."""
    if setup.workers:
        return math.ceil(scenarios / setup.workers) * CALLS_PER_SCENARIO
    return math.ceil(scenarios * CALLS_PER_SCENARIO / setup.parallel)


def verdict(ratio: float) -> str:
    return "meets target" if ratio <= TARGET else "MISSES target"


def print_row(label: str, outcome: Outcome) -> None:
    print(
        f"{label:<34} {outcome.ideal:>8.2f} {outcome.session:>10.2f} "
        f"{outcome.session / outcome.ideal:>6.2f} {outcome.wall:>8.2f} "
        f"{outcome.wall / outcome.ideal:>6.2f} {outcome.max_in_flight:>14d} "
        f"{outcome.calls:>6d}",
        flush=True,
    )


def summarise(setup: Setup, outcomes: list[Outcome]) -> Outcome:
    """The median of each figure over the rounds of one setup."""
    return Outcome(
        setup=setup,
        ideal=outcomes[0].ideal,
        session=median([o.session for o in outcomes]),
        wall=median([o.wall for o in outcomes]),
        max_in_flight=max(o.max_in_flight for o in outcomes),
        calls=outcomes[0].calls,
        before_calls=median([o.before_calls for o in outcomes]),
        calls_window=median([o.calls_window for o in outcomes]),
        after_calls=median([o.after_calls for o in outcomes]),
        scenario_calls=median([o.scenario_calls for o in outcomes]),
    )


def main() -> None:
    args = parse_args()
    print(f"pytest children run in {prepare_children(args)}", flush=True)
    setups = []
    for c in args.concurrency:
        setups.append(Setup(f"--eval-concurrency {c}", c, 0))
        if c > 1:
            setups.append(Setup(f"{c} threads, same calls, no plugin", c, 0, True))
    if args.xdist:
        setups.append(Setup(f"-n {args.xdist} (--eval-concurrency 1)", 1, args.xdist))
        setups.append(Setup(f"-n {args.xdist} plain tests, no plugin", 1, args.xdist, True))

    print(f"machine: {machine_line()}")
    plugins = "every installed plugin" if args.all_plugins else "openkata (+ xdist for -n)"
    print(f"third-party pytest plugins: {plugins}")
    print(
        f"{args.scenarios} direct scenarios x {CALLS_PER_SCENARIO} calls, endpoint latency "
        f"{args.latency * 1e3:g} ms; ideal = {args.scenarios} x {CALLS_PER_SCENARIO} x "
        f"{args.latency:g} s / c; target ratio <= {TARGET}"
    )
    header = (
        f"{'run':<34} {'ideal s':>8} {'session s':>10} {'ratio':>6} {'wall s':>8} "
        f"{'ratio':>6} {'max in flight':>14} {'calls':>6}"
    )
    print(header)
    print("-" * len(header))
    runs: dict[Setup, list[Outcome]] = {setup: [] for setup in setups}
    with scratch_folder("concurrency", keep=args.keep) as root:
        write_corpus(root, args.scenarios, args.per_skill, CRITERIA)
        (root / "conftest.py").write_text(RECORDER_CONFTEST)
        (root / "plain").mkdir()
        (root / "plain" / "test_plain.py").write_text(PLAIN_TESTS)
        (root / "plain_threads").mkdir()
        (root / "plain_threads" / "test_plain_threads.py").write_text(PLAIN_THREADS)
        with ScriptedEndpoint(latency=args.latency, keep_alive=True) as endpoint:
            log = ArrivalLog(EvalScript())
            endpoint.respond_with(log)
            for round_ in range(1, args.rounds + 1):  # rounds interleave the setups
                for setup in setups:
                    outcome = run_setup(root, endpoint, log, setup, args)
                    runs[setup].append(outcome)
                    label = setup.label + (f" #{round_}" if args.rounds > 1 else "")
                    print_row(label, outcome)
    outcomes = [summarise(setup, found) for setup, found in runs.items()]
    if args.rounds > 1:
        print(f"median of {args.rounds} rounds:")
        for outcome in outcomes:
            print_row(outcome.setup.label, outcome)
    print()
    print(
        "where the session's time goes: start -> first model call | first call -> last "
        "answer (the window; ratio to the ideal) | last answer -> session end"
    )
    print(
        "  turns: the fewest rounds of calls: c call slots need ceil(2N / c) turns of "
        f"{args.latency:g} s; a worker of -n runs its scenarios one at a time, 2 turns each"
    )
    print("  calls: a scenario's 2 calls as the plugin timed them (median)")
    for outcome in outcomes:
        turns = fewest_turns(outcome.setup, args.scenarios)
        calls = outcome.scenario_calls
        timed = "n/a" if math.isnan(calls) else f"{calls:.3f} s"
        floor = turns * args.latency
        print(
            f"  {outcome.setup.label:<34} {outcome.before_calls:5.2f} s | "
            f"{outcome.calls_window:6.2f} s ({outcome.calls_window / outcome.ideal:.2f}) | "
            f"{outcome.after_calls:5.2f} s | turns {turns} = {floor:.2f} s "
            f"({floor / outcome.ideal:.2f}) | calls {timed}"
        )
    print()
    for outcome in outcomes:
        session_ratio = outcome.session / outcome.ideal
        wall_ratio = outcome.wall / outcome.ideal
        print(
            f"{outcome.setup.label}: session ratio = {session_ratio:.2f} "
            f"({verdict(session_ratio)}), wall ratio = {wall_ratio:.2f} "
            f"({verdict(wall_ratio)}), target {TARGET}; "
            f"max_in_flight = {outcome.max_in_flight} (at most {outcome.setup.parallel} expected)"
        )


if __name__ == "__main__":
    main()
