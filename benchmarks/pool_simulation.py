"""The engine pool's placement over 10,000 sandboxed scenarios, in simulated time.

How long would a large run take on 1, 4 or 16 engines, how evenly does the pool spread it,
and what does losing an engine cost? Real engines cannot answer that on one machine, so this
script drives the plugin's own pool (``build_pool``, ``EnginePool``, ``LocalSlots``: the
placement code a run uses, not a copy of it) with in-process providers whose environments do
nothing, under a simulated clock: nothing sleeps, whatever the agent times drawn.

Each scenario's agent time is drawn in advance from a log-normal distribution, seeded and in
scenario order, as ``benchmarks/lognormal.py`` draws latencies: median 90 s, p99 900 s
(mu = ln 90, sigma = ln(900 / 90) / 2.3263). ``c`` scenario threads (the plugin's
``concurrency``; by default the pool's whole room) each pick up the next scenario in order,
call ``pool.create``, hold the environment for the scenario's time and ``remove()`` it, then
pick up the next. A thread calls ``create`` only when some engine has room, since the pool
would otherwise wait in real time; threads waiting for room get it first come, first served.

For each pool it prints the makespan (the end of the last run) against two references:

- the ideal: max(total agent time / the slots in use, min(c, room); the longest scenario), a
  bound no order of the scenarios can beat;
- the floor of the scenarios' order: the same threads on as many interchangeable slots as the
  pool has room, each slot taken as soon as it is free (a heap of free times, no pool). Engines
  here differ only in room, never in speed, so a pool that never leaves room idle while a
  scenario waits ends exactly there; makespan / floor above 1 would be placement's cost.

and the balance: each engine's busy time divided by its room (busy hours per slot), the
largest over the whole pool's (1.00: no engine fuller for its room than the pool). Two
variants follow: engines of unequal room (1, 2, 4, 8), at ``c`` the whole room and at half of
it, where least-loaded placement (the fraction of an engine's room in use) decides where each
sandbox goes; and a pool of 4 engines of which one is taken out (``pool.take_out``) halfway
through: the runs then on it are made again elsewhere from the start, as the core does with a
lost engine (``again_elsewhere``), and the script prints the extra makespan against a fluid
estimate (the work left at the loss, the lost runs' included, over the room left).

The simulated figures depend only on the arguments and the seed; the last lines, the real
time the pool's ``create`` and ``remove`` took per scenario, on the machine.

    python benchmarks/pool_simulation.py                    # 10,000 scenarios, seed 0
    python benchmarks/pool_simulation.py --seed 7 --per-host 8 --engines 2,8,32
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import heapq
import math
import random
import statistics
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from benchmarks._common import machine_line, percentile
from benchmarks.lognormal import Z_99
from pytest_openkata.contracts.sandboxes import (
    ExecResult,
    SandboxEnvironment,
    SandboxProvider,
    SandboxSpec,
)
from pytest_openkata.core.engine_pool import EnginePool, LocalSlots, Slots, build_pool
from pytest_openkata.infra.config import resolve_settings
from pytest_openkata.infra.inflight import SharedSlots

HOUR = 3600.0
SPEC = SandboxSpec(name="simulated-scenario", network="none", env={})


def positive_ints(text: str) -> list[int]:
    values = [int(part) for part in text.replace(",", " ").split()]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError("give whole numbers of at least 1, e.g. 1,4,16")
    return values


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenarios", type=int, default=10_000, help="scenarios (10,000)")
    parser.add_argument(
        "--engines", type=positive_ints, default=[1, 4, 16], metavar="LIST", help="(1,4,16)"
    )
    parser.add_argument("--per-host", type=int, default=4, help="room of each engine (4)")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=0,
        help="scenario threads, the plugin's concurrency (0: the pool's whole room)",
    )
    parser.add_argument(
        "--unequal",
        type=positive_ints,
        default=[1, 2, 4, 8],
        metavar="LIST",
        help="rooms of the unequal pool (1,2,4,8)",
    )
    parser.add_argument(
        "--lose-of", type=int, default=4, help="engines of the pool that loses one (4)"
    )
    parser.add_argument(
        "--lose-at",
        type=float,
        default=0.5,
        help="when it is lost, as a fraction of that pool's makespan without loss (0.5)",
    )
    parser.add_argument("--median", type=float, default=90.0, help="median agent time, s (90)")
    parser.add_argument("--p99", type=float, default=900.0, help="99th percentile, s (900)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the draws (0)")
    args = parser.parse_args()
    if not 0 < args.median < args.p99:
        parser.error("need 0 < --median < --p99")
    if args.scenarios < 1 or args.per_host < 1 or args.concurrency < 0:
        parser.error("need at least 1 scenario, --per-host >= 1 and --concurrency >= 0")
    if args.lose_of < 2 or not 0 < args.lose_at < 1:
        parser.error("need --lose-of >= 2 (one engine must be left) and 0 < --lose-at < 1")
    return args


def draw_agent_times(seed: int, scenarios: int, mu: float, sigma: float) -> list[float]:
    """One agent time per scenario, drawn in scenario order from one seeded generator."""
    rng = random.Random(seed)
    return [rng.lognormvariate(mu, sigma) for _ in range(scenarios)]


class IdleEnvironment:
    """An environment that does nothing: the simulation only holds it and removes it."""

    def exec(
        self, argv: Sequence[str], *, env: Mapping[str, str], workdir: str, timeout: float
    ) -> ExecResult:
        return ExecResult("", 0, False)

    def put_archive(self, path: str, data: bytes) -> None:
        pass

    def get_archive(self, path: str) -> Iterable[bytes]:
        return ()

    def remove(self) -> None:
        pass


class IdleProvider:
    """A provider of :class:`IdleEnvironment`: one per simulated engine."""

    def create(self, spec: SandboxSpec) -> SandboxEnvironment:
        return IdleEnvironment()

    def close(self) -> None:
        pass


def engine_names(count: int) -> list[str]:
    return [f"e{index:02d}" for index in range(count)]


def make_pool(rooms: Sequence[int], lock_folder: Path | None = None) -> EnginePool:
    """The plugin's pool of ``len(rooms)`` idle engines, built as a run builds its pool from
    ``sandbox.hosts``. Each engine's room is counted in this process (``LocalSlots``) or, with
    ``lock_folder``, with lock files there, as the plugin counts it (``SharedSlots``)."""
    names = engine_names(len(rooms))
    hosts = ",".join(f"{name}=unix:///simulated/{name}.sock" for name in names)
    settings = resolve_settings(
        ini={}, yaml_path=None, environ={}, cli={}, arguments={"sandbox": {"hosts": hosts}}
    )
    room = dict(zip(names, rooms, strict=True))

    def provider(_single: object) -> SandboxProvider:
        return IdleProvider()

    def slots(name: str, _capacity: int) -> Slots:
        if lock_folder is None:
            return LocalSlots(room[name])
        return SharedSlots(lock_folder, name, room[name])

    return build_pool(settings, provider, slots)


@dataclass(frozen=True)
class Loss:
    """Take engine ``engine`` (an index) out of the pool at simulated second ``at``."""

    engine: int
    at: float


@dataclass
class Run:
    """One agent run holding an environment of the pool."""

    scenario: int
    engine: int
    started: float
    environment: SandboxEnvironment
    live: bool = True


@dataclass
class Outcome:
    """What one simulated run of every scenario gave."""

    rooms: list[int]
    threads: int
    makespan: float = 0.0
    busy: list[float] = field(default_factory=list)  # seconds of finished runs, per engine
    runs: list[int] = field(default_factory=list)  # runs finished, per engine
    lost_seconds: float = 0.0  # seconds of runs cut short by the loss
    made_again: int = 0  # runs made again elsewhere after the loss
    left_at_loss: float = 0.0  # agent seconds not done yet when the engine was lost
    placement_seconds: float = 0.0  # real seconds spent in pool.create and remove()

    @property
    def room(self) -> int:
        return sum(self.rooms)

    def balance(self) -> float:
        """The busiest engine's busy time per slot over the whole pool's (1.00: no engine
        fuller for its room than the pool)."""
        per_slot = [busy / room for busy, room in zip(self.busy, self.rooms, strict=True)]
        return max(per_slot) / (sum(self.busy) / self.room)


class Simulation:
    """The scenario threads and the pool, in simulated time (see the module's docstring)."""

    def __init__(
        self, pool: EnginePool, times: Sequence[float], threads: int, loss: Loss | None
    ) -> None:
        self.pool = pool
        self.times = times
        self.loss = loss
        self.index = {engine.name: i for i, engine in enumerate(pool.engines)}
        rooms = [engine.slots.capacity for engine in pool.engines]
        engines = len(rooms)
        self.outcome = Outcome(rooms, threads, busy=[0.0] * engines, runs=[0] * engines)
        self.pending = deque(range(len(times)))  # not picked up by a thread yet
        self.waiting: deque[int] = deque()  # picked up, its thread waiting for room
        self.events: list[tuple[float, int, Run | None]] = []  # (when, order, run; None: loss)
        self.order = 0
        self.live: list[Run] = []

    def run(self) -> Outcome:
        for _ in range(min(self.outcome.threads, len(self.times))):
            self.waiting.append(self.pending.popleft())
        if self.loss is not None:
            self._at(self.loss.at, None)
        self._start_waiting(0.0)
        while self.events:
            now, _order, run = heapq.heappop(self.events)
            if run is None:
                self._lose(now)
            elif run.live:
                self._finish(now, run)
            self._start_waiting(now)
        return self.outcome

    def _at(self, when: float, run: Run | None) -> None:
        self.order += 1
        heapq.heappush(self.events, (when, self.order, run))

    def _has_room(self) -> bool:
        return any(
            engine.lost is None and engine.slots.in_use() < engine.slots.capacity
            for engine in self.pool.engines
        )

    def _start_waiting(self, now: float) -> None:
        """Waiting threads take room while there is some; the pool says where."""
        while self.waiting and self._has_room():
            scenario = self.waiting.popleft()
            began = time.perf_counter()
            environment = self.pool.create(SPEC)
            self.outcome.placement_seconds += time.perf_counter() - began
            engine = self.index[str(getattr(environment, "engine", ""))]
            run = Run(scenario, engine, now, environment)
            self.live.append(run)
            self._at(now + self.times[scenario], run)

    def _remove(self, run: Run) -> None:
        run.live = False
        self.live.remove(run)
        began = time.perf_counter()
        run.environment.remove()
        self.outcome.placement_seconds += time.perf_counter() - began

    def _finish(self, now: float, run: Run) -> None:
        self._remove(run)
        self.outcome.busy[run.engine] += now - run.started
        self.outcome.runs[run.engine] += 1
        self.outcome.makespan = now
        if self.pending:  # the thread picks up the next scenario
            self.waiting.append(self.pending.popleft())

    def _lose(self, now: float) -> None:
        """The engine is taken out; each run on it fails and its thread runs it again."""
        assert self.loss is not None
        self.pool.take_out(self.pool.engines[self.loss.engine], "lost (simulated)")
        done = sum(self.outcome.busy) + sum(
            now - run.started for run in self.live if run.engine != self.loss.engine
        )
        self.outcome.left_at_loss = sum(self.times) - done
        cut = [run for run in self.live if run.engine == self.loss.engine]
        for run in cut:
            self._remove(run)
            self.outcome.lost_seconds += now - run.started
        if not self.pool.has_live():
            raise RuntimeError("the simulated loss left no engine")
        self.outcome.made_again = len(cut)
        self.waiting.extendleft(run.scenario for run in reversed(cut))


def simulate(
    rooms: Sequence[int],
    times: Sequence[float],
    threads: int,
    loss: Loss | None = None,
    lock_folder: Path | None = None,
) -> Outcome:
    pool = make_pool(rooms, lock_folder)
    try:
        return Simulation(pool, times, threads, loss).run()
    finally:
        pool.close()


def order_floor(times: Sequence[float], slots: int) -> float:
    """The makespan of the scenarios in order on ``slots`` interchangeable slots, each
    scenario starting as soon as a slot is free (no pool: the reference for placement)."""
    free = [0.0] * slots
    end = 0.0
    for seconds in times:
        start = heapq.heappop(free)
        end = max(end, start + seconds)
        heapq.heappush(free, start + seconds)
    return end


def ideal(times: Sequence[float], slots: int) -> tuple[float, float]:
    """(total agent time / the slots in use, the longest scenario)."""
    return sum(times) / slots, max(times)


def hours(seconds: float) -> str:
    return f"{seconds / HOUR:.2f}"


def pool_label(rooms: Sequence[int]) -> str:
    if len(set(rooms)) > 1:
        return "+".join(str(room) for room in rooms)
    return f"{len(rooms)} x {rooms[0]}"


def print_pools(outcomes: Sequence[Outcome], times: Sequence[float]) -> None:
    header = (
        f"{'pool':<12} {'room':>5} {'c':>5} {'makespan h':>11} {'work/slots h':>13} "
        f"{'longest h':>10} {'/ ideal':>8} {'order floor h':>14} {'/ floor':>8} {'balance':>8}"
    )
    print(header)
    print("-" * len(header))
    for outcome in outcomes:
        slots = min(outcome.threads, outcome.room)
        by_work, longest = ideal(times, slots)
        floor = order_floor(times, slots)
        print(
            f"{pool_label(outcome.rooms):<12} {outcome.room:>5} {outcome.threads:>5} "
            f"{hours(outcome.makespan):>11} {hours(by_work):>13} {hours(longest):>10} "
            f"{outcome.makespan / max(by_work, longest):>8.3f} {hours(floor):>14} "
            f"{outcome.makespan / floor:>8.3f} {outcome.balance():>8.3f}"
        )


def print_engines(outcome: Outcome) -> None:
    """Each engine's share of the room against its share of the work, and how full it was."""
    total_busy = sum(outcome.busy)
    print(
        f"  {'engine':<7} {'room':>5} {'share of room':>14} {'runs':>6} {'share of work':>14} "
        f"{'busy h':>8} {'mean in flight':>15} {'/ room':>7}"
    )
    for name, room, busy, runs in zip(
        engine_names(len(outcome.rooms)), outcome.rooms, outcome.busy, outcome.runs, strict=True
    ):
        in_flight = busy / outcome.makespan
        print(
            f"  {name:<7} {room:>5} {room / outcome.room:>14.3f} {runs:>6} "
            f"{busy / total_busy:>14.3f} {hours(busy):>8} {in_flight:>15.2f} "
            f"{in_flight / room:>7.2f}"
        )
    pool = total_busy / outcome.makespan
    print(
        f"  {'pool':<7} {outcome.room:>5} {'':>14} {'':>6} {'':>14} {hours(total_busy):>8} "
        f"{pool:>15.2f} {pool / outcome.room:>7.2f}"
    )


def print_loss(kept: Outcome, lost: Outcome, loss: Loss) -> None:
    room_left = lost.room - lost.rooms[loss.engine]
    estimate = loss.at + lost.left_at_loss / room_left
    extra = lost.makespan - kept.makespan
    print(
        f"{len(lost.rooms)} engines of {lost.rooms[0]}, c = {lost.threads}; engine "
        f"e{loss.engine:02d} taken out at {hours(loss.at)} h, with {lost.made_again} runs on it "
        f"({hours(lost.lost_seconds)} h of agent time lost); they ran again elsewhere"
    )
    print(
        f"  makespan {hours(lost.makespan)} h against {hours(kept.makespan)} h without the loss: "
        f"+{hours(extra)} h (+{extra / kept.makespan:.1%}); fluid estimate "
        f"{hours(loss.at)} h + {hours(lost.left_at_loss)} h left / {room_left} slots = "
        f"{hours(estimate)} h -> makespan / estimate = {lost.makespan / estimate:.3f}"
    )


def main() -> None:
    args = parse_args()
    mu, sigma = math.log(args.median), math.log(args.p99 / args.median) / Z_99
    times = draw_agent_times(args.seed, args.scenarios, mu, sigma)

    def threads(room: int) -> int:
        return args.concurrency or room

    started = time.perf_counter()
    print(
        f"{args.scenarios:,} scenarios; agent times log-normal, mu = ln {args.median:g} = "
        f"{mu:.4f}, sigma = ln({args.p99:g} / {args.median:g}) / {Z_99} = {sigma:.4f}, seed "
        f"{args.seed}: median {statistics.median(times):.1f} s, p99 "
        f"{percentile(times, 99):.1f} s, max {max(times):.1f} s, mean "
        f"{statistics.fmean(times):.1f} s, sum {hours(sum(times))} h"
    )
    c_text = f"c = {args.concurrency}" if args.concurrency else "c = the pool's whole room"
    print(
        f"scenario threads: {c_text}; slots in use = min(c, room); ideal = max(work / slots, "
        "longest); order floor: the same order on as many interchangeable slots; balance: the "
        "busiest engine's hours per slot / the pool's"
    )
    print()
    equal = [
        simulate([args.per_host] * count, times, threads(count * args.per_host))
        for count in args.engines
    ]
    unequal_room = sum(args.unequal)
    half = max(1, unequal_room // 2)
    unequal = [
        simulate(args.unequal, times, threads(unequal_room)),
        simulate(args.unequal, times, args.concurrency or half),
    ]
    print_pools([*equal, *unequal], times)
    for outcome in unequal:
        print()
        print(f"unequal rooms {pool_label(outcome.rooms)}, c = {outcome.threads}:")
        print_engines(outcome)

    print()
    rooms = [args.per_host] * args.lose_of
    kept = next((o for o in equal if o.rooms == rooms), None)
    kept = kept or simulate(rooms, times, threads(sum(rooms)))
    loss = Loss(engine=0, at=args.lose_at * kept.makespan)
    lost = simulate(rooms, times, threads(sum(rooms)), loss)
    print_loss(kept, lost, loss)

    print()
    print(f"real time (this machine: {machine_line()}):")
    print_placement_cost(equal, times, threads)
    print(f"  the whole script: {time.perf_counter() - started:.1f} s")


def print_placement_cost(
    outcomes: Sequence[Outcome], times: Sequence[float], threads: Callable[[int], int]
) -> None:
    """The real time of the pool's create and remove() per run, with the room counted in this
    process and with lock files as the plugin counts it, for each pool of equal engines."""
    with tempfile.TemporaryDirectory(prefix="openkata-bench-pool-slots-") as folder:
        for outcome in outcomes:
            shared = simulate(outcome.rooms, times, threads(outcome.room), lock_folder=Path(folder))
            same = "same" if shared.runs == outcome.runs else "DIFFERENT"
            runs = sum(outcome.runs)
            print(
                f"  {pool_label(outcome.rooms):<8} pool.create + remove(): "
                f"{outcome.placement_seconds / runs * 1e6:7.1f} us a run (LocalSlots), "
                f"{shared.placement_seconds / runs * 1e6:7.1f} us (SharedSlots, lock files; "
                f"{same} placement)"
            )


if __name__ == "__main__":
    main()
