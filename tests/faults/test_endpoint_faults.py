"""Hostile endpoints through the whole pipeline: whatever an endpoint does with its answer (send
it one byte at a time, send hundreds of megabytes, break off in the middle, send a page that is
not JSON, send JSON of the wrong shape), the run ends within its deadlines, the trial it hit
errors with a message that says what happened, the other scenarios are judged as usual, and
neither memory nor the run log grows with what the endpoint sent.

Each scenario of one skill meets one fault, from a real scripted endpoint on loopback: the agent's
call, or the judge's, gets the hostile reply; every other call gets the usual scripted answers.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from pytest_openkata.core.runlog import read_run_log
from tests.support.endpoint import RecordedRequest, Reply, ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_skill
from tests.support.subprocesses import run_pytest

DEADLINE = 2  # --eval-direct-timeout
MIB = 1 << 20
HUGE = 300 * MIB  # sent in chunks as the client reads them; the client stops at the bound
JUDGED = "scenario-ok"

# What each scenario's call gets instead of the usual answer: (whose call, reply, error text
# that follows "agent: " or "judge: ").
FAULTS: dict[str, tuple[str, Reply, str]] = {
    "scenario-drip": (
        "agent",
        replace(Reply.chat("an answer sent one byte every half second " * 4), drip=0.5),
        "POST {url}: timed out after 2s",
    ),
    "scenario-huge": (
        "agent",
        replace(Reply.chat("hidden at the end"), padding=HUGE),
        "POST {url}: the answer is larger than 4 MiB, the bound of answer_max_bytes",
    ),
    "scenario-reset": (
        "agent",
        replace(Reply.chat("broken off " * 100), reset_after=200),
        "POST {url}: connection closed or protocol error: ",
    ),
    "scenario-html": (
        "agent",
        Reply(
            body="<html>\n<h1>502 Bad Gateway</h1>\n</html>", headers={"Content-Type": "text/html"}
        ),
        "parsing response: HTTP 200 with Content-Type text/html, not JSON (Expecting value: line 1 "
        "column 1 (char 0)): <html>\\n<h1>502 Bad Gateway</h1>\\n</html>",
    ),
    "scenario-shape": (
        "agent",
        Reply(json={"choices": "not a list"}),
        "parsing response: choices is a str, not a list",
    ),
    "scenario-judge-drip": (
        "judge",
        replace(Reply.chat('[{"name": "x", "pass": true, "reason": "slow"}]'), drip=0.5),
        "POST {url}: timed out after 2s",
    ),
    "scenario-judge-huge": (
        "judge",
        replace(Reply.chat('[{"name": "x", "pass": true, "reason": "ok"}]'), padding=HUGE),
        "POST {url}: the answer is larger than 4 MiB, the bound of answer_max_bytes",
    ),
}


class HostileEndpoint:
    """The usual scripted answers, but a scenario of :data:`FAULTS` gets its fault: an agent
    call by its task, a judge call by the criteria's context."""

    def __init__(self, script: EvalScript) -> None:
        self.script = script
        self.faulted: dict[str, int] = dict.fromkeys(FAULTS, 0)

    def __call__(self, request: RecordedRequest) -> Reply:
        messages = request.json["messages"]
        whose = "judge" if messages[0]["role"] == "system" else "agent"
        text = messages[-1]["content"]
        for name, (target, reply, _error) in FAULTS.items():
            marker = f"Do the task of {name}." if target == "agent" else f"Context: ctx {name}\n"
            if whose == target and marker in text:
                self.faulted[name] += 1
                return reply
        return self.script(request)


@pytest.fixture
def hostile(pytester: pytest.Pytester, endpoint: ScriptedEndpoint) -> HostileEndpoint:
    write_skill(pytester.path, "s", {name: {"x": 10} for name in (*FAULTS, JUDGED)})
    responder = HostileEndpoint(EvalScript())
    endpoint.respond_with(responder)
    return responder


def test_every_fault_errors_its_trial_clearly_and_nothing_grows_with_it(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, hostile: HostileEndpoint
) -> None:
    url = f"{endpoint.base_url}/chat/completions"

    result = run_pytest(
        pytester.path,
        "skills/s",
        *eval_args(endpoint.base_url, "--eval-direct-timeout", str(DEADLINE)),
        "-p",
        "no:randomly",
    )

    out = result.stdout.decode()
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    [log_path] = (pytester.path / ".openkata" / "runs").glob("*.jsonl")
    assert log_path.stat().st_size < MIB  # nothing of the 300 MB answers was kept
    logged = {r.name: r for r in read_run_log(log_path).results}
    for name, (whose, _reply, error) in FAULTS.items():
        [trial] = logged[name].trials
        expected = f"{whose}: {error.format(url=url)}"
        assert trial.error is not None, name
        assert trial.error.startswith(expected), (name, trial.error)
        assert f"    ERROR: {expected}" in out, name
        assert trial.error_kind == "infrastructure", name
        assert trial.agent_output is None, name
        # Past the deadline or the bound, a call is neither retried nor asked again.
        assert hostile.faulted[name] == 1, name
    assert logged[JUDGED].trials[0].error is None
    assert logged[JUDGED].trials[0].percentage == 100


def test_the_bound_is_a_setting(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, hostile: HostileEndpoint
) -> None:
    pytester.path.joinpath(".openkata-eval.yaml").write_text("answer_max_bytes: 1m\n")

    result = run_pytest(
        pytester.path, "skills/s", *eval_args(endpoint.base_url), "-k", f"scenario-huge or {JUDGED}"
    )

    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout.decode()[-3000:]
    [log_path] = (pytester.path / ".openkata" / "runs").glob("*.jsonl")
    logged = {r.name: r for r in read_run_log(log_path).results}
    assert logged["scenario-huge"].trials[0].error == (
        f"agent: POST {endpoint.base_url}/chat/completions: the answer is larger than 1 MiB, "
        "the bound of answer_max_bytes"
    )
    assert logged[JUDGED].trials[0].percentage == 100
