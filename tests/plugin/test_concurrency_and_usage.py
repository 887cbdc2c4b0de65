"""Scenarios at once in one process, the in-flight cap across xdist workers, rate limits and
usage, against a real scripted endpoint that counts the requests it serves at the same time."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import replace
from unittest.mock import ANY

import pytest

from tests.support.endpoint import RecordedRequest, Reply, ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, reports_under, write_skill

SCENARIOS = {f"scenario-{n}": {"a": 2, "b": 1} for n in range(8)}


@pytest.fixture
def slow_endpoint(script_for_slow: EvalScript) -> Iterator[ScriptedEndpoint]:
    """Every answer takes 0.3 s, so that calls made at once overlap on the server."""
    with ScriptedEndpoint(latency=0.3) as server:
        server.respond_with(script_for_slow)
        yield server


@pytest.fixture
def script_for_slow() -> EvalScript:
    return EvalScript()


def _item_order(result: pytest.RunResult) -> list[str]:
    return [
        line.split("::")[1].split(" ")[0]
        for line in result.stdout.lines
        if line.startswith("skills/s/evals::scenario-") and " PASSED" in line
    ]


def test_scenarios_run_concurrently_but_are_reported_in_order(
    pytester: pytest.Pytester, slow_endpoint: ScriptedEndpoint, script_for_slow: EvalScript
) -> None:
    write_skill(pytester.path, "s", SCENARIOS)

    result = pytester.runpytest(
        "skills/s", "-v", *eval_args(slow_endpoint.base_url, "--eval-concurrency", "4")
    )

    assert result.ret == pytest.ExitCode.OK
    assert 2 <= slow_endpoint.max_in_flight <= 4
    assert _item_order(result) == list(SCENARIOS)
    assert script_for_slow.agent_calls == script_for_slow.judge_calls == len(SCENARIOS)
    [report] = reports_under(pytester.path)
    assert [s["name"] for s in json.loads(report.read_text())["scenarios"]] == list(SCENARIOS)


def test_concurrency_one_runs_one_scenario_at_a_time(
    pytester: pytest.Pytester, slow_endpoint: ScriptedEndpoint
) -> None:
    write_skill(pytester.path, "s", dict(list(SCENARIOS.items())[:3]))

    result = pytester.runpytest(
        "skills/s", *eval_args(slow_endpoint.base_url, "--eval-concurrency", "1")
    )

    assert result.ret == pytest.ExitCode.OK
    assert slow_endpoint.max_in_flight == 1


def test_a_scenario_waiting_for_its_judge_leaves_its_slot_to_the_next_agent(
    pytester: pytest.Pytester, slow_endpoint: ScriptedEndpoint
) -> None:
    """Concurrency counts calls in flight, not scenarios in progress: with 2 slots, the third
    scenario's agent call takes the first free slot, before the first two are judged."""
    write_skill(pytester.path, "s", dict(list(SCENARIOS.items())[:3]))

    result = pytester.runpytest(
        "skills/s", *eval_args(slow_endpoint.base_url, "--eval-concurrency", "2")
    )

    assert result.ret == pytest.ExitCode.OK
    kinds = [
        "judge" if r.json["messages"][0]["role"] == "system" else "agent"
        for r in slow_endpoint.requests
    ]
    assert sorted(kinds) == ["agent"] * 3 + ["judge"] * 3
    # Scenario-2's agent took the first slot released, at most one judge call came first
    # (through the second slot). Had a scenario kept its slot until judged, both judge calls
    # would have come before it, as neither can end before both began.
    third_agent = [i for i, kind in enumerate(kinds) if kind == "agent"][2]
    assert third_agent <= 3
    assert slow_endpoint.max_in_flight == 2


def test_connections_are_kept_for_every_call_slot(pytester: pytest.Pytester) -> None:
    """At a concurrency above httpx's 20 kept connections, every call still reuses one."""
    write_skill(pytester.path, "s", {f"scenario-{n}": {"a": 1} for n in range(48)})

    with ScriptedEndpoint(latency=0.3, keep_alive=True) as endpoint:
        endpoint.respond_with(EvalScript())
        result = pytester.runpytest(
            "skills/s", *eval_args(endpoint.base_url, "--eval-concurrency", "24")
        )

    assert result.ret == pytest.ExitCode.OK
    assert len(endpoint.requests) == 96
    assert endpoint.max_in_flight == 24
    assert endpoint.connections <= 24


def test_a_conftest_override_of_the_backends_is_used_for_its_skill_only(
    pytester: pytest.Pytester, slow_endpoint: ScriptedEndpoint, script_for_slow: EvalScript
) -> None:
    write_skill(pytester.path, "s", dict(list(SCENARIOS.items())[:3]))
    write_skill(pytester.path, "t", dict(list(SCENARIOS.items())[:3]))
    with ScriptedEndpoint() as other:
        other_script = EvalScript(verdicts={"a": (False, "judged by t's own endpoint")})
        other.respond_with(other_script)
        (pytester.path / "skills" / "t" / "conftest.py").write_text(
            "import pytest\n"
            "from pytest_openkata.providers.backends.http import make_client\n"
            "from pytest_openkata.contracts.config import HttpSettings\n"
            "from pytest_openkata.core.build import build_backends\n\n\n"
            "@pytest.fixture(scope='session')\n"
            "def openkata_backends(openkata_settings, openkata_sandbox):\n"
            f"    http = HttpSettings(base_url={other.base_url!r})\n"
            "    settings = openkata_settings.model_copy(update={'http': http})\n"
            "    with make_client(30.0) as client:\n"
            "        yield lambda: build_backends(settings, client, openkata_sandbox)\n"
        )

        result = pytester.runpytest(
            "skills", *eval_args(slow_endpoint.base_url, "--eval-concurrency", "4")
        )

    assert (script_for_slow.agent_calls, other_script.agent_calls) == (3, 3)
    result.stdout.fnmatch_lines(["skills/t", "  scenario-0: *", "    ✗ a (0/2) — judged by t's*"])


def test_the_in_flight_cap_holds_across_xdist_workers(
    pytester: pytest.Pytester, slow_endpoint: ScriptedEndpoint
) -> None:
    write_skill(pytester.path, "s", SCENARIOS)
    options = ("-n", "2", "--eval-concurrency", "3", "--eval-cache", "off")

    capped = pytester.runpytest(
        "skills/s", *eval_args(slow_endpoint.base_url, *options, "--eval-max-in-flight", "2")
    )
    capped_peak = slow_endpoint.max_in_flight
    slow_endpoint.reset_peak()
    uncapped = pytester.runpytest("skills/s", *eval_args(slow_endpoint.base_url, *options))

    assert capped.ret == uncapped.ret == pytest.ExitCode.OK
    assert capped_peak == 2
    assert slow_endpoint.max_in_flight > 2  # without the cap, the two workers overlap more


def test_a_retry_after_beyond_the_budget_gives_up_and_says_why(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"a": 1}})
    script.agent_replies.append(Reply(status=429, body="slow down", headers={"Retry-After": "20"}))

    result = pytester.runpytest(
        "skills/s", *eval_args(endpoint.base_url, "--eval-retry-budget", "5")
    )

    result.stdout.fnmatch_lines(
        [
            "scenario error: agent: gave up after 1 attempt: the retry budget of 5 s would be "
            "exceeded: HTTP 429: slow down"
        ]
    )
    assert script.agent_calls == 1


def test_server_errors_are_retried_up_to_the_configured_attempts(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"a": 1}})
    failing = Reply(status=502, body="bad gateway", headers={"Retry-After": "0"})
    script.agent_replies.extend([failing] * 5)

    result = pytester.runpytest(
        "skills/s", *eval_args(endpoint.base_url, "--eval-retry-attempts", "5")
    )

    result.stdout.fnmatch_lines(
        ["scenario error: agent: failed after 5 attempts: HTTP 502: bad gateway"]
    )
    assert script.agent_calls == 5


def _with_tokens(script: EvalScript, prompt_tokens: int, completion_tokens: int):  # type: ignore[no-untyped-def]
    def respond(request: RecordedRequest) -> Reply:
        reply = script(request)
        body = {
            **reply.json,
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
        }
        return Reply(json=body)

    return respond


def test_usage_and_cost_are_reported_and_summarised(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"a": 1}, "scenario-1": {"b": 1}})
    endpoint.respond_with(_with_tokens(EvalScript(), 1000, 200))
    prices = (
        "--eval-price-agent-input", "3", "--eval-price-agent-output", "15",
        "--eval-price-judge-input", "1", "--eval-price-judge-output", "5",
    )  # fmt: skip

    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url, *prices))

    report = json.loads(reports_under(pytester.path)[0].read_text())
    agent_cost = 1000 / 1e6 * 3 + 200 / 1e6 * 15
    judge_cost = 1000 / 1e6 * 1 + 200 / 1e6 * 5
    assert report["scenarios"][0]["usage"] == {
        "agent": {"calls": 1, "cached": 0, "input_tokens": 1000, "output_tokens": 200,
                  "seconds": ANY, "cost_usd": pytest.approx(agent_cost)},
        "judge": {"calls": 1, "cached": 0, "input_tokens": 1000, "output_tokens": 200,
                  "seconds": ANY, "cost_usd": pytest.approx(judge_cost)},
    }  # fmt: skip
    assert report["usage"]["agent"]["input_tokens"] == 2000
    assert report["usage"]["judge"]["cost_usd"] == pytest.approx(2 * judge_cost)
    result.stdout.fnmatch_lines(
        [
            "  Usage: agent 2 calls, 2,000 in / 400 out tokens, * s; judge 2 calls, 2,000 in / "
            f"400 out tokens, * s; cost ${2 * (agent_cost + judge_cost):.4f}"
        ]
    )


def test_without_prices_no_cost_is_claimed(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"a": 1}})

    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url))

    usage = json.loads(reports_under(pytester.path)[0].read_text())["usage"]
    assert "cost_usd" not in usage["agent"]
    assert usage["agent"]["calls"] == 1
    result.stdout.no_fnmatch_line("*cost $*")


def test_stopping_early_drops_the_scenarios_started_ahead(pytester: pytest.Pytester) -> None:
    """Under ``-x`` no call starts once pytest has stopped: scenario-0 fails at once while the
    other agents take 5 s, so only the agent handed scenario-0's slot may also call."""
    write_skill(pytester.path, "s", SCENARIOS)
    script = EvalScript()
    script.agent_reply_when["scenario-0."] = Reply(status=400, body="bad request")

    def answer(request: RecordedRequest) -> Reply:
        reply = script(request)
        return reply if reply.status == 400 else replace(reply, delay=5.0)

    with ScriptedEndpoint() as endpoint:
        endpoint.respond_with(answer)
        result = pytester.runpytest(
            "skills/s", "-x", *eval_args(endpoint.base_url, "--eval-concurrency", "3")
        )
        # Read from the raw body: a call cut off when the run's client closed at its end
        # reaches the server without a whole JSON body, and still names its scenario.
        called = {
            found.group(0)
            for request in endpoint.requests
            if (found := re.search(r"scenario-\d+", request.body.decode(errors="replace")))
        }

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*partial run: 1 of 8*", "*stopping after 1 failures*"])
    # Scenarios 0, 1 and 2 took the 3 slots in pytest's order and scenario-0's passed to
    # scenario-3; each called only if its turn to prepare came before pytest stopped. The 4
    # other scenarios were waiting for a slot when pytest stopped, and never called.
    assert "scenario-0" in called
    assert called <= {"scenario-0", "scenario-1", "scenario-2", "scenario-3"}
    assert script.judge_calls == 0
