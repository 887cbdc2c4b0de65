"""``max_in_flight = auto``: the run asks the server how many requests it serves at once
(llama-server's ``total_slots`` in ``GET /props``) and never sends more; a call's time limit
then runs only while the server works on it. The server here is a real HTTP server on loopback
that works like llama-server: it serves ``slots`` requests at once and queues the others."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

from tests.support.endpoint import RecordedRequest, Reply, ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_skill

Serve = Callable[["SlotServer"], ScriptedEndpoint]
SCENARIOS = {f"scenario-{n}": {"a": 2, "b": 1} for n in range(6)}


@dataclass
class SlotServer:
    """Answers ``GET /props`` with its slots (None: a 404, as servers that do not say) and
    every chat request after ``work`` seconds in one of its ``slots``; a request that finds
    them all busy waits in its queue, as llama-server's do. ``peak`` is the most chat requests
    it had at once, queued or served."""

    slots: int | None
    work: float
    script: EvalScript = field(default_factory=EvalScript)
    props_asked: int = 0
    peak: int = 0
    _sent: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._serving = threading.BoundedSemaphore(self.slots or 64)

    def __call__(self, request: RecordedRequest) -> Reply:
        if request.method == "GET":
            with self._lock:
                self.props_asked += request.path == "/props"
            if request.path != "/props" or self.slots is None:
                return Reply(status=404, body="not found")
            return Reply(json={"total_slots": self.slots, "model_alias": "scripted"})
        with self._lock:
            self._sent += 1
            self.peak = max(self.peak, self._sent)
        try:
            with self._serving:
                time.sleep(self.work)
                return self.script(request)
        finally:
            with self._lock:
                self._sent -= 1


@pytest.fixture
def serve() -> Iterator[Serve]:
    endpoints: list[ScriptedEndpoint] = []

    def start(server: SlotServer) -> ScriptedEndpoint:
        endpoint = ScriptedEndpoint().start()
        endpoint.respond_with(server)
        endpoints.append(endpoint)
        return endpoint

    yield start
    for endpoint in endpoints:
        endpoint.stop()


def test_auto_sends_no_more_requests_at_once_than_the_server_has_slots(
    pytester: pytest.Pytester, serve: Serve
) -> None:
    write_skill(pytester.path, "s", SCENARIOS)
    server = SlotServer(slots=2, work=0.2)
    endpoint = serve(server)

    result = pytester.runpytest(
        "skills/s",
        *eval_args(endpoint.base_url, "--eval-concurrency", "6", "--eval-max-in-flight", "auto"),
    )

    assert result.ret == pytest.ExitCode.OK
    assert server.peak == 2
    assert server.script.agent_calls == server.script.judge_calls == len(SCENARIOS)
    assert server.props_asked == 1  # once, for the agent and the judge of one endpoint
    result.stdout.fnmatch_lines(["openkata: *max_in_flight=auto*"])


def test_the_cap_is_the_servers_across_xdist_workers(
    pytester: pytest.Pytester, serve: Serve
) -> None:
    write_skill(pytester.path, "s", SCENARIOS)
    server = SlotServer(slots=1, work=0.2)
    endpoint = serve(server)

    result = pytester.runpytest(
        "skills/s",
        "-n",
        "2",
        *eval_args(endpoint.base_url, "--eval-concurrency", "3", "--eval-max-in-flight", "auto"),
    )

    assert result.ret == pytest.ExitCode.OK
    assert server.peak == 1
    assert server.script.agent_calls == len(SCENARIOS)


def test_a_call_waiting_for_a_busy_server_keeps_its_whole_time_limit(
    pytester: pytest.Pytester, serve: Serve
) -> None:
    """Eight calls at once to a server of one slot: without the cap the last ones wait in the
    server's queue while their two seconds run out; with it each waits for a slot in the run,
    and has its two seconds once the server works on it."""
    write_skill(pytester.path, "s", {f"scenario-{n}": {"a": 1} for n in range(8)})
    options = ("--eval-concurrency", "8", "--eval-direct-timeout", "2")
    uncapped_server = SlotServer(slots=1, work=0.5)
    uncapped = pytester.runpytest("skills/s", *eval_args(serve(uncapped_server).base_url, *options))
    capped_server = SlotServer(slots=1, work=0.5)
    capped = pytester.runpytest(
        "skills/s",
        *eval_args(serve(capped_server).base_url, *options, "--eval-max-in-flight", "auto"),
    )

    assert uncapped.ret == pytest.ExitCode.TESTS_FAILED
    uncapped.stdout.fnmatch_lines(["*scenario error: agent: *timed out after 2*"])
    assert capped.ret == pytest.ExitCode.OK
    assert capped_server.peak == 1
    assert capped_server.script.judge_calls == 8


def test_a_server_that_does_not_say_is_not_capped(pytester: pytest.Pytester, serve: Serve) -> None:
    write_skill(pytester.path, "s", SCENARIOS)
    server = SlotServer(slots=None, work=0.3)
    endpoint = serve(server)

    result = pytester.runpytest(
        "skills/s",
        *eval_args(endpoint.base_url, "--eval-concurrency", "4", "--eval-max-in-flight", "auto"),
    )

    assert result.ret == pytest.ExitCode.OK
    assert server.props_asked == 1
    assert server.peak > 2


def test_a_run_answered_from_the_cache_asks_the_server_nothing(
    pytester: pytest.Pytester, serve: Serve
) -> None:
    write_skill(pytester.path, "s", dict(list(SCENARIOS.items())[:2]))
    server = SlotServer(slots=2, work=0)
    endpoint = serve(server)
    args = eval_args(endpoint.base_url, "--eval-max-in-flight", "auto")
    assert pytester.runpytest("skills/s", *args).ret == pytest.ExitCode.OK
    asked = len(endpoint.requests)

    repeat = pytester.runpytest("skills/s", *args)

    assert repeat.ret == pytest.ExitCode.OK
    assert len(endpoint.requests) == asked
