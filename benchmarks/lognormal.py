"""Wall time against the ideal at concurrency 128 with log-normal model latencies.

N direct scenarios (256 by default) run with ``--eval-concurrency 128`` (one pytest process,
the plugin's own scheduler) against an endpoint whose every answer takes a latency drawn from a
log-normal distribution: median 2 s, p99 20 s (mu = ln 2, sigma = ln(20 / 2) / 2.3263), seeded.
The draws are made in advance, one agent and one judge latency per scenario in scenario order
(a longer run keeps the draws of a shorter one), and the endpoint gives each request its own:
it reads the scenario's name (``scenario-00042``) and the call's kind (a judge call has a
system message) from the request, never the order of arrival. So the ideal is known before
the run:

    ideal = max(sum of all 2N latencies / c, the longest scenario's agent + judge latency)

the first bound being c calls always in flight, the second a scenario's two calls, which
follow each other. Target: session time <= 1.10 x the ideal.

The ideal is a bound no scheduler that does not know the latencies in advance can promise.
Beside it the script prints the floor of the plugin's own rule for the same draws, simulated
with no cost at all: ``SCENARIOS_PER_SLOT`` x c threads each pick up the next scenario and
queue its agent call (in pick-up order), a scenario's judge call queues when its agent's answer
comes, behind whatever waits, and a released call slot passes to the longest waiter
(``pytest_openkata.core.slots``). The measured session over that floor is what the plugin's
code costs; the floor over the ideal is what its rule costs for these draws (the seed decides
whether the longest scenario's calls wait behind others).

It prints the session's own time (recorded in the child) and the child's wall time against
both, the endpoint's most requests in flight, where the session's time goes, how much later
than in the simulated schedule the calls arrived, and the scenario whose answer came last.

    python benchmarks/lognormal.py                     # 256 scenarios, c = 128, seed 0
    python benchmarks/lognormal.py --seed 7 --rounds 3
    python benchmarks/lognormal.py --scenarios 48 --concurrency 16 --median 0.05 --p99 0.5
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import dataclasses
import heapq
import math
import random
import re
import statistics
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks._common import (
    RECORDER_CONFTEST,
    add_plugin_option,
    check_child,
    eval_options,
    machine_line,
    median,
    percentile,
    prepare_children,
    pytest_command,
    run_child,
    scratch_folder,
    write_corpus,
)
from pytest_openkata.core.schedule import SCENARIOS_PER_SLOT
from tests.support.endpoint import RecordedRequest, Reply, ScriptedEndpoint
from tests.support.evals import EvalScript

TARGET = 1.10
Z_99 = 2.3263  # the standard normal's 99th percentile
AGENT, JUDGE = 0, 1
KINDS = ("agent", "judge")
CRITERIA = {"names-the-change": 50, "keeps-it-short": 50}
# write_corpus names scenarios scenario-00000, scenario-00001, ... across all skills; an agent
# prompt holds the scenario's task.md ("Do the task of scenario-00042."), a judge prompt its
# criteria's context ("ctx scenario-00042") and that task.
SCENARIO_NAME = re.compile(r"\bscenario-(\d{5})\b")

Latencies = Sequence[tuple[float, float]]  # (agent, judge) seconds, by scenario number


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenarios", type=int, default=256, help="direct scenarios (256)")
    parser.add_argument("--per-skill", type=int, default=64, help="scenarios per skill (64)")
    parser.add_argument("--concurrency", type=int, default=128, help="--eval-concurrency (128)")
    parser.add_argument("--median", type=float, default=2.0, help="median latency, s (2)")
    parser.add_argument("--p99", type=float, default=20.0, help="99th percentile, s (20)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the draws (0)")
    parser.add_argument(
        "--rounds", type=int, default=1, help="runs, reported as medians (1; same draws)"
    )
    add_plugin_option(parser)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    if not 0 < args.median < args.p99:
        parser.error("need 0 < --median < --p99")
    if not 0 < args.scenarios < 100_000 or args.concurrency < 2:
        parser.error("need 1 to 99,999 scenarios and a concurrency of at least 2")
    return args


def draw_latencies(seed: int, scenarios: int, mu: float, sigma: float) -> list[tuple[float, float]]:
    """An agent and a judge latency per scenario, drawn in scenario order from one seeded
    generator: the first n draws do not depend on how many scenarios there are."""
    rng = random.Random(seed)
    return [
        (rng.lognormvariate(mu, sigma), rng.lognormvariate(mu, sigma)) for _ in range(scenarios)
    ]


def ideal_seconds(latencies: Latencies, concurrency: int) -> tuple[float, float]:
    """(all latencies / concurrency, the longest scenario's two calls)."""
    total = sum(agent + judge for agent, judge in latencies)
    return total / concurrency, max(agent + judge for agent, judge in latencies)


def simulate_fcfs(latencies: Latencies, concurrency: int) -> tuple[float, list[list[float]]]:
    """The plugin's rule with no cost: the end of the last call, and each call's start
    (``starts[scenario][kind]``).

    ``SCENARIOS_PER_SLOT`` x ``concurrency`` threads; a thread picks up the next scenario when
    it has none and queues its agent call; when the agent's answer comes, the judge call
    queues at the back; when the judge's comes, the thread picks up the next scenario. A slot
    released while calls wait passes to the one that has waited longest.
    """
    starts = [[math.nan, math.nan] for _ in latencies]
    free = concurrency
    waiting: deque[tuple[int, int]] = deque()
    running: list[tuple[float, int, int, int]] = []  # (end, order, scenario, kind)
    order = 0
    picked = 0

    def start(now: float, scenario: int, kind: int) -> None:
        nonlocal order
        starts[scenario][kind] = now
        order += 1
        heapq.heappush(running, (now + latencies[scenario][kind], order, scenario, kind))

    def queue(now: float, scenario: int, kind: int) -> None:
        nonlocal free
        if free and not waiting:
            free -= 1
            start(now, scenario, kind)
        else:
            waiting.append((scenario, kind))

    def pick_up(now: float) -> None:
        nonlocal picked
        if picked < len(latencies):
            picked += 1
            queue(now, picked - 1, AGENT)

    for _ in range(SCENARIOS_PER_SLOT * concurrency):
        pick_up(0.0)
    end = 0.0
    while running:
        end, _order, scenario, kind = heapq.heappop(running)
        if waiting:
            start(end, *waiting.popleft())  # the slot passes on without becoming free
        else:
            free += 1
        if kind == AGENT:
            queue(end, scenario, JUDGE)
        else:
            pick_up(end)
    return end, starts


@dataclass(frozen=True)
class Call:
    scenario: int
    kind: int
    arrived: float  # epoch seconds, when the endpoint had the request
    latency: float


class DrawnLatencies:
    """The endpoint's responder: ``EvalScript``'s answer, delayed by the request's own draw."""

    def __init__(self, latencies: Latencies) -> None:
        self.latencies = latencies
        self.script = EvalScript()
        self.calls: list[Call] = []
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Reply:
        arrived = time.time()
        messages = request.json["messages"]
        kind = JUDGE if messages[0]["role"] == "system" else AGENT
        numbers = set(SCENARIO_NAME.findall(messages[-1]["content"]))
        if len(numbers) != 1:
            raise ValueError(f"no single scenario named in a {KINDS[kind]} call: {numbers}")
        scenario = int(numbers.pop())
        latency = self.latencies[scenario][kind]
        with self._lock:
            self.calls.append(Call(scenario, kind, arrived, latency))
        return dataclasses.replace(self.script(request), delay=latency)

    def since(self, index: int) -> list[Call]:
        with self._lock:
            return self.calls[index:]


@dataclass(frozen=True)
class Outcome:
    session: float
    wall: float
    max_in_flight: int
    calls: int
    before_calls: float  # session start -> first call arrives
    calls_window: float  # first call arrives -> last answer leaves
    after_calls: float  # last answer -> session end
    lateness: list[float]  # each call's arrival after the first call's - its simulated start
    last: str  # the scenario whose answer came last, told


def run_once(
    root: Path,
    endpoint: ScriptedEndpoint,
    responder: DrawnLatencies,
    starts: list[list[float]],
    args: argparse.Namespace,
) -> Outcome:
    longest = max(max(pair) for pair in responder.latencies)
    timeout = max(120, math.ceil(longest) + 60)  # a drawn latency never times a call out
    options = eval_options(
        endpoint.base_url,
        "--eval-concurrency", str(args.concurrency),
        "--eval-direct-timeout", str(timeout),
    )  # fmt: skip
    command = pytest_command("-q", "skills", *options)
    before = len(responder.since(0))
    endpoint.reset_peak()
    run = run_child(command, root, all_plugins=args.all_plugins)
    check_child(run, "lognormal run", allowed=(0,))
    if run.record is None:
        sys.exit(f"the recording conftest wrote nothing\n{run.tail()}")
    calls = responder.since(before)
    seen = {(call.scenario, call.kind) for call in calls}
    if len(calls) != 2 * args.scenarios or len(seen) != len(calls):
        sys.exit(
            f"expected one agent and one judge call per scenario ({2 * args.scenarios}), got "
            f"{len(calls)} calls for {len(seen)} (scenario, kind) pairs: retries?"
        )
    started, finished = run.record["started_at"], run.record["finished_at"]
    first = min(call.arrived for call in calls)
    last_call = max(calls, key=lambda call: call.arrived + call.latency)
    last_answer = last_call.arrived + last_call.latency
    by_key = {(call.scenario, call.kind): call for call in calls}
    agent, judge = by_key[(last_call.scenario, AGENT)], by_key[(last_call.scenario, JUDGE)]
    waited = judge.arrived - (agent.arrived + agent.latency)
    simulated = starts[last_call.scenario]
    simulated_wait = simulated[JUDGE] - (simulated[AGENT] + agent.latency)
    last = (
        f"scenario-{last_call.scenario:05d}: agent call at +{agent.arrived - first:.2f} s "
        f"({agent.latency:.2f} s), judge call {waited:.2f} s after the agent's answer "
        f"({judge.latency:.2f} s); simulated: agent at +{simulated[AGENT]:.2f} s, judge "
        f"{simulated_wait:.2f} s after"
    )
    return Outcome(
        session=run.record["session_seconds"],
        wall=run.wall_seconds,
        max_in_flight=endpoint.max_in_flight,
        calls=len(calls),
        before_calls=first - started,
        calls_window=last_answer - first,
        after_calls=finished - last_answer,
        lateness=[(call.arrived - first) - starts[call.scenario][call.kind] for call in calls],
        last=last,
    )


def verdict(ratio: float) -> str:
    return "meets target" if ratio <= TARGET else "MISSES target"


def main() -> None:
    args = parse_args()
    mu, sigma = math.log(args.median), math.log(args.p99 / args.median) / Z_99
    latencies = draw_latencies(args.seed, args.scenarios, mu, sigma)
    by_throughput, by_chain = ideal_seconds(latencies, args.concurrency)
    ideal = max(by_throughput, by_chain)
    floor, starts = simulate_fcfs(latencies, args.concurrency)
    every = [latency for pair in latencies for latency in pair]

    print(f"pytest children run in {prepare_children(args)}", flush=True)
    print(f"machine: {machine_line()}")
    plugins = "every installed plugin" if args.all_plugins else "openkata only (no autoload)"
    print(f"third-party pytest plugins: {plugins}")
    print(
        f"{args.scenarios} direct scenarios x 2 calls, --eval-concurrency {args.concurrency}; "
        f"latencies log-normal, mu = ln {args.median:g} = {mu:.4f}, sigma = "
        f"ln({args.p99:g} / {args.median:g}) / {Z_99} = {sigma:.4f}, seed {args.seed}"
    )
    print(
        f"the {len(every)} draws: median {statistics.median(every):.2f} s, p99 "
        f"{percentile(every, 99):.2f} s, max {max(every):.2f} s, mean "
        f"{statistics.fmean(every):.2f} s, sum {sum(every):.1f} s"
    )
    print(
        f"ideal = max(sum / {args.concurrency} = {by_throughput:.2f} s, longest scenario's "
        f"agent + judge = {by_chain:.2f} s) = {ideal:.2f} s; target session <= {TARGET} x ideal "
        f"= {TARGET * ideal:.2f} s"
    )
    print(
        f"floor of the plugin's rule ({SCENARIOS_PER_SLOT} x {args.concurrency} threads, calls "
        f"first come, first served), simulated at no cost: {floor:.2f} s = "
        f"{floor / ideal:.3f} x the ideal",
        flush=True,
    )
    header = (
        f"{'run':<10} {'session s':>10} {'/ ideal':>8} {'/ floor':>8} {'wall s':>8} "
        f"{'/ ideal':>8} {'max in flight':>14} {'calls':>6}"
    )
    print(header)
    print("-" * len(header))
    outcomes = []
    with scratch_folder("lognormal", keep=args.keep) as root:
        write_corpus(root, args.scenarios, args.per_skill, CRITERIA)
        (root / "conftest.py").write_text(RECORDER_CONFTEST)
        with ScriptedEndpoint(keep_alive=True) as endpoint:
            responder = DrawnLatencies(latencies)
            endpoint.respond_with(responder)
            for round_ in range(1, args.rounds + 1):
                outcome = run_once(root, endpoint, responder, starts, args)
                outcomes.append(outcome)
                print(
                    f"{'#' + str(round_):<10} {outcome.session:>10.2f} "
                    f"{outcome.session / ideal:>8.3f} {outcome.session / floor:>8.3f} "
                    f"{outcome.wall:>8.2f} {outcome.wall / ideal:>8.3f} "
                    f"{outcome.max_in_flight:>14d} {outcome.calls:>6d}",
                    flush=True,
                )
    session = median([o.session for o in outcomes])
    wall = median([o.wall for o in outcomes])
    print()
    print(
        "where the session's time goes (medians): start -> first call "
        f"{median([o.before_calls for o in outcomes]):.2f} s | first call -> last answer "
        f"{median([o.calls_window for o in outcomes]):.2f} s | last answer -> session end "
        f"{median([o.after_calls for o in outcomes]):.2f} s"
    )
    lateness = [late for o in outcomes for late in o.lateness]
    print(
        "calls' arrival after the first call's - their start in the simulated schedule: "
        f"median {median(lateness):.3f} s, p90 {percentile(lateness, 90):.3f} s, "
        f"max {max(lateness):.3f} s"
    )
    for round_, outcome in enumerate(outcomes, 1):
        print(f"answered last (#{round_}; times after the first call): {outcome.last}")
    print()
    ratio = session / ideal
    rounds = f", median of {args.rounds} rounds" if args.rounds > 1 else ""
    print(
        f"session {session:.2f} s / ideal {ideal:.2f} s = {ratio:.3f} (target <= {TARGET}, "
        f"{verdict(ratio)}){rounds}; / the rule's floor {floor:.2f} s = {session / floor:.3f}; "
        f"wall {wall:.2f} s / ideal = {wall / ideal:.3f}; max_in_flight = "
        f"{max(o.max_in_flight for o in outcomes)} (at most {args.concurrency} expected)"
    )


if __name__ == "__main__":
    main()
