"""The in-flight cap per endpoint, over real HTTP to a loopback server, across threads and
spawned processes; and the loopback server's own concurrency counters and latency."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import multiprocessing
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from pytest_openkata.contracts.backends import ResponseSchema
from pytest_openkata.infra.inflight import InFlightLimit, LimitedCompleter
from pytest_openkata.providers.backends.http import OpenAIChatBackend, make_client
from tests.support.endpoint import RecordedRequest, Reply, ScriptedEndpoint

SPAWN = multiprocessing.get_context("spawn")
WAIT = 60.0  # generous bound on any wait for a thread or process, never reached when it works


def echo(delay: float = 0.0) -> Callable[[RecordedRequest], Reply]:
    """A responder answering each chat request with its user message, after ``delay``."""

    def respond(request: RecordedRequest) -> Reply:
        return dataclasses.replace(Reply.chat(request.json["messages"][-1]["content"]), delay=delay)

    return respond


def limited(
    client: httpx.Client, base_url: str, directory: Path, name: str, slots: int
) -> LimitedCompleter:
    backend = OpenAIChatBackend(client, base_url=base_url, api_key="k", model="m")
    return LimitedCompleter(backend, InFlightLimit(directory, name, slots))


def call_in_threads(
    completers: list[LimitedCompleter], calls: int, tag: str = ""
) -> list[tuple[str, str]]:
    """Each completer in its own thread, all started together, makes ``calls`` calls; returns
    (question, answer) pairs."""
    start = threading.Barrier(len(completers))

    def run(index: int, completer: LimitedCompleter) -> list[tuple[str, str]]:
        start.wait(WAIT)
        pairs = []
        for call in range(calls):
            question = f"{tag}t{index}c{call}"
            pairs.append((question, completer.complete("sys", question)))
        return pairs

    with ThreadPoolExecutor(len(completers)) as pool:
        futures = [pool.submit(run, i, c) for i, c in enumerate(completers)]
        return [pair for future in futures for pair in future.result(WAIT)]


def run_worker(
    base_url: str, directory: str, worker: int, start: Any, results: Any, slots: int = 2
) -> None:
    """In a spawned process: 3 threads of 3 calls each through limits on ``directory``."""
    try:
        with make_client(WAIT) as client:
            completers = [
                limited(client, base_url, Path(directory), base_url, slots) for _ in range(3)
            ]
            start.wait(WAIT)  # every process contends from the same moment
            results.put((worker, call_in_threads(completers, 3, tag=f"w{worker}")))
    except BaseException as exc:
        results.put((worker, f"{type(exc).__name__}: {exc}"))
        raise


def hold_forever(directory: str, name: str, ready: Any) -> None:
    """In a spawned process: take the slot, say so, and never let it go."""
    with InFlightLimit(Path(directory), name, 1).acquire():
        ready.set()
        while True:
            time.sleep(60)


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    with make_client(WAIT) as http_client:
        yield http_client


@pytest.fixture
def locks(tmp_path: Path) -> Path:
    return tmp_path / "locks"  # not created: InFlightLimit makes it


def questions(tags: list[str], threads: int, calls: int) -> list[str]:
    return sorted(f"{tag}t{t}c{c}" for tag in tags for t in range(threads) for c in range(calls))


# -- the cap --------------------------------------------------------------------------------


def test_threads_of_one_process_reach_the_cap_and_never_exceed_it(
    client: httpx.Client, endpoint: ScriptedEndpoint, locks: Path
) -> None:
    endpoint.respond_with(echo(delay=0.1))
    completers = [limited(client, endpoint.base_url, locks, endpoint.base_url, 3)] * 12

    pairs = call_in_threads(completers, 3)

    assert len(pairs) == 36
    assert all(question == answer for question, answer in pairs)
    assert sorted(q for q, _ in pairs) == questions([""], 12, 3)
    assert len(endpoint.requests) == 36
    assert endpoint.max_in_flight == 3
    assert endpoint.in_flight == 0


def test_separate_limit_objects_of_one_endpoint_share_the_cap(
    client: httpx.Client, endpoint: ScriptedEndpoint, locks: Path
) -> None:
    endpoint.respond_with(echo(delay=0.1))
    completers = [limited(client, endpoint.base_url, locks, "shared", 2) for _ in range(8)]

    pairs = call_in_threads(completers, 2)

    assert all(question == answer for question, answer in pairs)
    assert len(pairs) == 16
    assert endpoint.max_in_flight == 2


def test_processes_share_the_cap_through_the_lock_folder(
    endpoint: ScriptedEndpoint, locks: Path
) -> None:
    endpoint.respond_with(echo(delay=0.1))
    start, results = SPAWN.Barrier(4), SPAWN.Queue()
    workers = [
        SPAWN.Process(
            target=run_worker, args=(endpoint.base_url, str(locks), i, start, results), daemon=True
        )
        for i in range(4)
    ]
    for worker in workers:
        worker.start()
    try:
        outcomes = dict(results.get(timeout=WAIT * 2) for _ in workers)
    finally:
        for worker in workers:
            worker.join(WAIT)
            if worker.is_alive():
                worker.kill()

    assert [w.exitcode for w in workers] == [0, 0, 0, 0], outcomes
    pairs = [pair for i in range(4) for pair in outcomes[i]]
    assert all(question == answer for question, answer in pairs)
    assert sorted(q for q, _ in pairs) == questions(["w0", "w1", "w2", "w3"], 3, 3)
    assert len(endpoint.requests) == 36
    assert endpoint.max_in_flight == 2


def test_different_endpoints_do_not_share_slots(
    client: httpx.Client, endpoint: ScriptedEndpoint, locks: Path
) -> None:
    endpoint.respond_with(echo(delay=0.1))
    first = limited(client, endpoint.base_url, locks, "http://one.example/v1", 1)
    second = limited(client, endpoint.base_url, locks, "http://two.example/v1", 1)

    pairs = call_in_threads([first, second] * 4, 2)

    assert all(question == answer for question, answer in pairs)
    assert len(pairs) == 16
    assert endpoint.max_in_flight == 2
    assert first.limit.paths[0] != second.limit.paths[0]


def test_a_killed_process_releases_its_slot(locks: Path) -> None:
    name = "http://model.example/v1"
    ready = SPAWN.Event()
    holder = SPAWN.Process(target=hold_forever, args=(str(locks), name, ready), daemon=True)
    holder.start()
    try:
        assert ready.wait(WAIT), "the holding process never took the slot"
        limit = InFlightLimit(locks, name, 1)
        with pytest.raises(TimeoutError), limit.acquire(timeout=0.05):
            pass  # the other process holds the only slot

        os.kill(holder.pid, signal.SIGKILL)
        holder.join(WAIT)
        assert holder.exitcode == -signal.SIGKILL

        with limit.acquire(timeout=WAIT):
            acquired = True
        assert acquired
    finally:
        if holder.is_alive():
            holder.kill()
            holder.join(WAIT)


# -- acquire --------------------------------------------------------------------------------


def test_slot_files_are_named_after_the_endpoint_hash(locks: Path) -> None:
    name = "http://model.example/v1"
    key = hashlib.sha256(name.encode()).hexdigest()[:16]
    limit = InFlightLimit(locks, name, 2)

    assert locks.is_dir()
    assert limit.paths == (locks / f"{key}-0.lock", locks / f"{key}-1.lock")
    with limit.acquire(), limit.acquire():  # both slots, from one thread
        assert sorted(p.name for p in locks.iterdir()) == [f"{key}-0.lock", f"{key}-1.lock"]


@pytest.mark.parametrize("holder", ["same process", "other open file"])
def test_timeout_names_the_endpoint_when_every_slot_isheld(locks: Path, holder: str) -> None:
    name = "http://model.example/v1"
    limit = InFlightLimit(locks, name, 2)
    with contextlib.ExitStack() as holding:
        holding.enter_context(limit.acquire())
        if holder == "same process":  # the in-process semaphore runs out first
            holding.enter_context(InFlightLimit(locks, name, 2).acquire())
        else:  # as another process would: a lock on an open file description of its own
            holding.callback(os.close, lock_a_free_slot(limit))

        with pytest.raises(TimeoutError, match=re.escape(repr(name))), limit.acquire(0.05):
            pass
        with pytest.raises(TimeoutError, match=re.escape(repr(name))), limit.acquire(0):
            pass

    with limit.acquire(timeout=0), limit.acquire(timeout=0):
        pass  # both slots are free again


def lock_a_free_slot(limit: InFlightLimit) -> int:
    for path in limit.paths:
        fd = os.open(path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
        else:
            return fd
    raise AssertionError("every slot is taken")


def held(path: Path) -> bool:
    """Whether some open file description holds the lock on ``path``."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def test_the_slot_is_released_when_the_block_raises(locks: Path) -> None:
    limit = InFlightLimit(locks, "ep", 1)
    with pytest.raises(RuntimeError, match="boom"), limit.acquire():
        raise RuntimeError("boom")
    with limit.acquire(timeout=0):
        pass
    assert not held(limit.paths[0])


def test_threads_wait_for_a_slot_instead_of_failing(locks: Path) -> None:
    limit = InFlightLimit(locks, "ep", 1)
    inside, peak, entered = 0, 0, []
    guard = threading.Lock()

    def work(i: int) -> None:
        nonlocal inside, peak
        with limit.acquire(timeout=WAIT):
            with guard:
                inside += 1
                peak = max(peak, inside)
            time.sleep(0.005)
            with guard:
                inside -= 1
                entered.append(i)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(work, range(16)))

    assert sorted(entered) == list(range(16))
    assert peak == 1


@pytest.mark.parametrize("slots", [0, -1])
def test_slots_below_one_are_rejected(locks: Path, slots: int) -> None:
    with pytest.raises(ValueError, match="slots"):
        InFlightLimit(locks, "ep", slots)


def test_a_negative_timeout_is_rejected(locks: Path) -> None:
    with pytest.raises(ValueError, match="timeout"), InFlightLimit(locks, "ep", 1).acquire(-1):
        pass


# -- LimitedCompleter ---------------------------------------------------------------------------


def test_limited_completer_delegates_schema_and_shows_the_inner_one(
    client: httpx.Client, endpoint: ScriptedEndpoint, locks: Path
) -> None:
    endpoint.enqueue(Reply.chat('{"ok": true}'))
    completer = limited(client, endpoint.base_url, locks, endpoint.base_url, 1)
    schema = ResponseSchema("verdict", {"type": "object"})

    assert completer.complete("sys", "grade", schema=schema) == '{"ok": true}'

    [request] = endpoint.requests
    assert request.json["response_format"]["json_schema"]["name"] == "verdict"
    assert completer.model == "m"
    assert repr(completer.inner) in repr(completer)
    assert not held(completer.limit.paths[0])


def test_limited_completer_releases_the_slot_when_the_call_fails(
    client: httpx.Client, endpoint: ScriptedEndpoint, locks: Path
) -> None:
    endpoint.enqueue(Reply(status=500, body="down"), Reply.chat("back"))
    completer = limited(client, endpoint.base_url, locks, endpoint.base_url, 1)

    with pytest.raises(Exception, match="down"):
        completer.complete("sys", "first")
    assert completer.complete("sys", "second") == "back"


# -- the loopback server's counters and latency -------------------------------------------------


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, "condition never became true"
        time.sleep(0.005)


def test_endpoint_counts_requests_handled_at_once(endpoint: ScriptedEndpoint) -> None:
    together = threading.Barrier(5)

    def respond(request: RecordedRequest) -> Reply:
        together.wait(WAIT)  # all five are inside the server at this point
        return Reply.chat("ok")

    endpoint.respond_with(respond)
    assert (endpoint.in_flight, endpoint.max_in_flight) == (0, 0)

    with ThreadPoolExecutor(5) as pool:
        codes = list(pool.map(lambda _: httpx.post(f"{endpoint.base_url}/x").status_code, range(5)))

    assert codes == [200] * 5
    assert endpoint.max_in_flight == 5
    assert endpoint.in_flight == 0

    endpoint.reset_peak()
    assert endpoint.max_in_flight == 0
    endpoint.respond_with(None)
    endpoint.enqueue(Reply.chat("one"))
    assert httpx.post(f"{endpoint.base_url}/x").status_code == 200
    assert endpoint.max_in_flight == 1


def test_endpoint_counts_a_request_through_its_delay(endpoint: ScriptedEndpoint) -> None:
    endpoint.enqueue(Reply(delay=WAIT, body="late"))

    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{endpoint.base_url}/x", timeout=0.1)

    assert endpoint.in_flight == 1  # still waiting out its delay
    endpoint.stop()
    wait_until(lambda: endpoint.in_flight == 0)
    assert endpoint.max_in_flight == 1


def test_endpoint_latency_delays_every_reply() -> None:
    with ScriptedEndpoint(latency=WAIT) as slow, httpx.Client() as http:
        slow.enqueue(Reply.chat("late"))
        with pytest.raises(httpx.ReadTimeout):
            http.post(f"{slow.base_url}/x", timeout=0.1)
        assert len(slow.requests) == 1
        assert slow.in_flight == 1  # answered by the script, held back by the latency
    wait_until(lambda: slow.in_flight == 0)


def test_endpoint_with_latency_still_answers() -> None:
    with ScriptedEndpoint(latency=0.01) as slow, httpx.Client(timeout=WAIT) as http:
        slow.enqueue(Reply.chat("hi"), Reply(status=429, body="slow down", delay=0.01))
        first = http.post(f"{slow.base_url}/x")
        second = http.post(f"{slow.base_url}/x")

    assert first.json()["choices"][0]["message"]["content"] == "hi"
    assert (second.status_code, second.text) == (429, "slow down")
    assert slow.latency == 0.01


def test_endpoint_rejects_a_negative_latency() -> None:
    with pytest.raises(ValueError, match="latency"):
        ScriptedEndpoint(latency=-1)


# --- the cap learned from the endpoint (max_in_flight = auto) --------------------------------


@pytest.mark.parametrize(
    ("reply", "capacity"),
    [
        (Reply(json={"total_slots": 3}), 3),
        (Reply(status=404, body="File Not Found"), None),
        (Reply(json={"total_slots": 0}), None),
        (Reply(json={"total_slots": True}), None),
        (Reply(json={"total_slots": "4"}), None),
        (Reply(json=[1, 2]), None),
        (Reply(body="<html>not json</html>"), None),
        (Reply(close=True), None),
    ],
)
def test_an_openai_endpoint_says_its_capacity_as_llama_server_does(
    reply: Reply, capacity: int | None
) -> None:
    with ScriptedEndpoint() as endpoint, make_client(5.0) as client:
        endpoint.enqueue(reply)
        backend = OpenAIChatBackend(client, base_url=endpoint.base_url, api_key="k", model="m")

        assert backend.capacity() == capacity

    [asked] = endpoint.requests
    assert (asked.method, asked.path) == ("GET", "/props")  # beside /v1, where llama-server says
    assert asked.headers["authorization"] == "Bearer k"


def _settings(base_url: str, cap: int | str, agent: str) -> Any:
    from pytest_openkata.contracts.config import EvalSettings, HttpSettings, SandboxSettings

    return EvalSettings(
        backend="http",
        judge_backend="http",
        model="m",
        judge_model="m",
        http=HttpSettings(base_url=base_url),
        max_in_flight=cap,
        sandbox=SandboxSettings(agent=agent),
    )


@pytest.mark.parametrize(("agent", "held"), [("codex", 1), ("claude-code", 0)])
def test_a_sandboxed_agent_pointed_at_the_endpoint_holds_one_of_its_slots(
    locks: Path, agent: str, held: int
) -> None:
    """Codex in the sandbox talks to the http backend's URL, Claude Code to Anthropic's: only
    the first run takes a slot of the http endpoint's cap, for as long as it runs."""
    from pytest_openkata.core.build import build_backends

    with make_client(5.0) as client:
        backends = build_backends(_settings("http://127.0.0.1:9/v1", 2, agent), client, None, locks)
        assert isinstance(backends.agent, LimitedCompleter)
        limit = backends.agent.limit
        assert isinstance(limit, InFlightLimit)

        with backends.sandbox_in_flight():
            assert limit.in_use() == held
        assert limit.in_use() == 0


def test_a_learned_cap_is_asked_once_and_shared_by_the_agent_and_the_judge(locks: Path) -> None:
    from pytest_openkata.core.build import build_backends

    with ScriptedEndpoint() as endpoint, make_client(5.0) as client:
        endpoint.respond_with(
            lambda request: (
                Reply(json={"total_slots": 1}) if request.method == "GET" else Reply.chat("yes")
            )
        )
        backends = build_backends(
            _settings(endpoint.base_url, "auto", "codex"), client, None, locks
        )
        assert not endpoint.requests  # nothing asked before a call needs it

        with backends.sandbox_in_flight():
            # The sandboxed agent holds the server's only slot: a judge call cannot start.
            blocked = ThreadPoolExecutor(1).submit(backends.judge.complete, "", "q")
            with pytest.raises(TimeoutError):
                blocked.result(timeout=0.5)
        assert blocked.result(timeout=WAIT) == "yes"
        backends.agent.complete("", "q")

    assert [r.path for r in endpoint.requests] == ["/props", *["/v1/chat/completions"] * 2]


def test_sandboxed_runs_leave_the_last_slot_to_direct_calls_and_judges(locks: Path) -> None:
    """Two sandboxed runs on a two-slot endpoint: the second waits, holding nothing, while the
    first runs; the other slot stays free for direct calls and judges all along."""
    from pytest_openkata.core.build import build_backends

    settings = _settings("http://127.0.0.1:9/v1", 2, "codex")
    with make_client(5.0) as client:
        backends = build_backends(settings, client, None, locks)
        assert isinstance(backends.agent, LimitedCompleter)
        limit = backends.agent.limit
        assert isinstance(limit, InFlightLimit)

        def second_run() -> int:
            with backends.sandbox_in_flight():
                return limit.in_use()

        with backends.sandbox_in_flight():
            second = ThreadPoolExecutor(1).submit(second_run)
            with pytest.raises(TimeoutError):
                second.result(timeout=0.5)
            assert limit.in_use() == 1
            with limit.acquire(timeout=0):  # a judge's call starts at once
                assert limit.in_use() == 2
        assert second.result(timeout=WAIT) == 1
        assert limit.in_use() == 0


@pytest.mark.parametrize(("slots", "long_at_once"), [(1, 1), (2, 1), (3, 2)])
def test_long_holds_take_one_slot_fewer_than_there_are(
    locks: Path, slots: int, long_at_once: int
) -> None:
    limit = InFlightLimit(locks, "http://127.0.0.1:9/v1", slots)

    def late_run() -> int:
        with limit.acquire_long():
            return limit.in_use()

    with contextlib.ExitStack() as held:
        for _ in range(long_at_once):
            held.enter_context(limit.acquire_long())
        late = ThreadPoolExecutor(1).submit(late_run)
        with pytest.raises(TimeoutError):
            late.result(timeout=0.3)
        assert limit.in_use() == long_at_once
    assert late.result(timeout=WAIT) == 1
