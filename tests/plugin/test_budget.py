"""The price table and the run's hard budget, against a real scripted endpoint whose answers
say how many tokens they used: every figure below is exact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_openkata.core.runlog import logs_newest_first, read_run_log
from tests.support.endpoint import RecordedRequest, Reply, ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, reports_under, write_skill

PROMPT_TOKENS, COMPLETION_TOKENS = 100, 50
TRIAL_TOKENS = 2 * (PROMPT_TOKENS + COMPLETION_TOKENS)  # one agent call and one judge call


def _counting(script: EvalScript):  # type: ignore[no-untyped-def]
    """The script's answers, each saying it used 100 input and 50 output tokens."""

    def respond(request: RecordedRequest) -> Reply:
        reply = script(request)
        usage = {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": COMPLETION_TOKENS}
        return Reply(json={**reply.json, "usage": usage})

    return respond


@pytest.fixture
def counted(endpoint: ScriptedEndpoint) -> EvalScript:
    script = EvalScript()
    endpoint.respond_with(_counting(script))
    return script


def _run_log(root: Path) -> dict[str, object]:
    """The newest run log's completeness, budget record and run."""
    logged = read_run_log(logs_newest_first(root / ".openkata/runs")[0])
    return {"complete": logged.info.complete, "budget": logged.extras.get("budget"), "run": logged}


def test_a_budget_reached_without_xdist_cuts_the_run_where_it_is(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, counted: EvalScript
) -> None:
    """Each trial spends 300 tokens: with a budget of 500, scenario-0's first two trials run
    (300, then 600), its third and every later scenario never start."""
    skill = write_skill(pytester.path, "s", {f"scenario-{n}": {"a": 1} for n in range(3)})
    for n in range(3):
        options = skill / f"evals/scenario-{n}/scenario.json"
        options.write_text(json.dumps({"trials": 3, "sandbox": False}))

    result = pytester.runpytest(
        "skills/s",
        *eval_args(endpoint.base_url, "--eval-budget-tokens", "500", "--eval-concurrency", "1"),
        *("--eval-html", "run.html", "--eval-markdown", "run.md"),
    )

    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=1, skipped=2)
    assert counted.agent_calls == counted.judge_calls == 2
    assert reports_under(pytester.path) == []  # partial: nothing published
    log = _run_log(pytester.path)
    assert log["complete"] is False
    assert log["budget"] == [
        {
            "tokens": 500,
            "usd": 0.0,
            "spent_tokens": 2 * TRIAL_TOKENS,
            "spent_usd": 0.0,
            "spent_unknown": True,  # no model is priced: the cost is unknown
            "reached": True,
            "not_run": ["skills/s/evals::scenario-1", "skills/s/evals::scenario-2"],
        }
    ]
    said = "Budget reached: spent at least 600 tokens, {}0.0000 of a budget of 500 tokens"
    for view, dollar in (("run.html", "$"), ("run.md", "\\$")):  # Markdown escapes it
        text = (pytester.path / view).read_text()
        assert said.format(dollar) in text, view
        assert "did not finish" not in text, view
    [kept] = log["run"].results  # type: ignore[attr-defined]
    assert [trial.index for trial in kept.trials] == [1, 2]
    result.stdout.fnmatch_lines(
        [
            "*Budget reached: spent at least 600 tokens, $0.0000 of a budget of 500 tokens; "
            "2 scenarios not run*",
            "*budget reached (spent at least 600 tokens, $0.0000 of 500 tokens): threshold not "
            "enforced, exit 0*",
        ]
    )


def test_a_budget_is_shared_by_xdist_workers(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, counted: EvalScript
) -> None:
    """Two workers, one scenario at a time each, and a budget one trial spends: each worker
    starts at most the scenario it holds when the other's spend is not yet counted, so one or
    two of the six run, and the ledger holds exactly what they spent."""
    write_skill(pytester.path, "s", {f"scenario-{n}": {"a": 1} for n in range(6)})
    price = ("--eval-price", "claude-sonnet-4.6=10,20")

    result = pytester.runpytest(
        "skills/s",
        "-n",
        "2",
        *eval_args(
            endpoint.base_url, "--eval-budget-usd", "0.001", "--eval-concurrency", "1", *price
        ),
    )

    assert result.ret == pytest.ExitCode.OK
    ran = counted.agent_calls
    assert 1 <= ran <= 2
    result.assert_outcomes(passed=ran, skipped=6 - ran)
    [record] = _run_log(pytester.path)["budget"]  # type: ignore[misc]
    call_usd = PROMPT_TOKENS / 1e6 * 10 + COMPLETION_TOKENS / 1e6 * 20
    assert record["reached"] is True
    assert record["spent_tokens"] == ran * TRIAL_TOKENS
    assert record["spent_usd"] == pytest.approx(ran * 2 * call_usd)
    assert record["spent_unknown"] is False
    assert len(record["not_run"]) == 6 - ran
    assert reports_under(pytester.path) == []
    assert list((pytester.path / ".pytest_cache/d/openkata-budget").iterdir()) == []


def test_a_run_within_its_budget_is_complete_and_says_what_it_spent(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, counted: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"a": 1}})

    result = pytester.runpytest(
        "skills/s", *eval_args(endpoint.base_url, "--eval-budget-tokens", "10000")
    )

    assert result.ret == pytest.ExitCode.OK
    assert len(reports_under(pytester.path)) == 1
    log = _run_log(pytester.path)
    assert log["complete"] is True
    [record] = log["budget"]  # type: ignore[misc]
    assert (record["spent_tokens"], record["reached"]) == (TRIAL_TOKENS, False)
    result.stdout.fnmatch_lines(["*threshold*"])
    result.stdout.no_fnmatch_line("*budget reached*")


def test_a_budget_in_dollars_needs_every_model_priced(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, counted: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"a": 1}})

    result = pytester.runpytest(
        "skills/s",
        *eval_args(
            endpoint.base_url,
            "--eval-budget-usd",
            "1",
            "--eval-judge-model",
            "judge-x",
            "--eval-price",
            "claude-sonnet-4.6=1,2",
        ),
    )

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*budget.usd needs a price for the model 'judge-x'*"])
    assert endpoint.requests == []


def test_the_price_table_prices_each_model_before_the_role_prices(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, counted: EvalScript
) -> None:
    """The agent model is in the table (and free there: a known cost of 0); the judge model is
    not, so the judge's role prices apply to it."""
    write_skill(pytester.path, "s", {"scenario-0": {"a": 1}})
    (pytester.path / ".openkata-eval.yaml").write_text(
        "prices:\n  agent-m: {input: 0, output: 0}\n  other: [5, 5]\n"
    )

    pytester.runpytest(
        "skills/s",
        *eval_args(
            endpoint.base_url,
            "--eval-model",
            "agent-m",
            "--eval-judge-model",
            "judge-m",
            "--eval-price-agent-input",
            "99",
            "--eval-price-judge-input",
            "2",
        ),
    )

    usage = json.loads(reports_under(pytester.path)[0].read_text())["usage"]
    assert usage["agent"]["cost_usd"] == 0
    assert usage["judge"]["cost_usd"] == pytest.approx(PROMPT_TOKENS / 1e6 * 2)


@pytest.mark.parametrize("spread", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_the_estimate_builds_every_prompt_and_calls_no_model(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, counted: EvalScript, spread: list[str]
) -> None:
    """Two scenarios, two trials, a baseline arm and three votes: 2 x 2 x 2 agent calls and
    three times as many judge calls, priced for the agent model only."""
    write_skill(pytester.path, "s", {"scenario-0": {"a": 1}, "scenario-1": {"b": 2}})

    result = pytester.runpytest(
        "skills/s",
        *spread,
        *eval_args(
            endpoint.base_url,
            "--eval-estimate",
            "--eval-trials",
            "2",
            "--eval-judge-votes",
            "3",
            "--eval-baseline",
            "without-skill",
            "--eval-judge-model",
            "judge-x",
            "--eval-price",
            "claude-sonnet-4.6=1,2",
            "--eval-estimate-output-tokens",
            "100",
        ),
    )

    assert result.ret == pytest.ExitCode.OK
    assert endpoint.requests == []
    result.stdout.fnmatch_lines(
        [
            "*openkata cost estimate*",
            "*assumed 100 output tokens long*",
            "skills/s: 2 scenarios; agent 8 calls, ~* in / ~800 out tokens, $*; judge 24 calls, "
            "~* in / ~2,400 out tokens, cost unknown (no price for judge-x); total cost unknown "
            "(no price for judge-x)",
            "Total: 2 scenarios; *",
        ]
    )
    assert not (pytester.path / ".openkata").exists()
    assert reports_under(pytester.path) == []


def test_the_estimate_prices_what_it_estimates(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint
) -> None:
    """The agent's input is the prompt the run sends, at four characters a token: the figures
    follow from its length."""
    write_skill(pytester.path, "s", {"scenario-0": {"a": 1}})
    from pytest_openkata.core.prompt import build_prompt

    skill = pytester.path / "skills/s"
    prompt = build_prompt(skill, skill / "evals/scenario-0")
    tokens = -(-len(prompt) // 4)

    result = pytester.runpytest(
        "skills/s",
        *eval_args(
            endpoint.base_url,
            "--eval-estimate",
            "--eval-price",
            "claude-sonnet-4.6=1000000,0",
            "--eval-estimate-output-tokens",
            "0",
        ),
    )

    result.stdout.fnmatch_lines(
        [f"skills/s: 1 scenario; agent 1 calls, ~{tokens:,} in / ~0 out tokens, ${tokens:,.4f}; *"]
    )
    assert endpoint.requests == []


def test_shards_record_their_spend_and_the_merge_sums_it(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, counted: EvalScript
) -> None:
    """Each of two shards holds two scenarios and a budget one trial spends: each runs one
    and leaves one; the merge sums what they spent and says the budget was reached."""
    from tests.support.shards import merge

    write_skill(pytester.path, "s", {f"scenario-{n}": {"a": 1} for n in range(4)})
    args = eval_args(
        endpoint.base_url,
        "--eval-budget-tokens",
        "1",
        "--eval-concurrency",
        "1",
        "--eval-price",
        "claude-sonnet-4.6=0,0",  # free: a known cost
    )
    for index in (1, 2):
        shard = pytester.runpytest("skills", *args, "--eval-shard", f"{index}/2")
        shard.assert_outcomes(passed=1, skipped=1)

    merged = merge(pytester.path, ".openkata/shards")

    assert merged.returncode == 0, merged.stdout + merged.stderr
    spent = f"spent {2 * TRIAL_TOKENS} tokens, $0.0000"
    assert f"Budget reached: {spent} of a budget of 1 tokens; 2 scenarios not run" in (
        merged.stdout
    )
    assert merged.stdout.splitlines()[-1] == (
        f"budget reached ({spent} of 1 tokens): threshold not enforced, exit 0"
    )
    assert reports_under(pytester.path) == []
    [record] = _run_log(pytester.path)["budget"]  # type: ignore[misc]
    assert (record["spent_tokens"], record["reached"], len(record["not_run"])) == (600, True, 2)


def test_evaluate_holds_the_budget_too(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, counted: EvalScript
) -> None:
    """The Python API, with one scenario at a time: the first scenario spends the budget, the
    second is not run, and the run's log says so."""
    from tests.architecture.test_core_without_pytest import run_without_pytest

    write_skill(pytester.path, "s", {"scenario-0": {"a": 1}, "scenario-1": {"a": 1}})

    result = run_without_pytest(
        f"""
        from pytest_openkata import evaluate
        (summary,) = evaluate(
            "skills", backend="http", http={{"base_url": {endpoint.base_url!r}}},
            concurrency=1, budget={{"tokens": 1}},
        )
        print(summary.complete, [r.name for r in summary.results])
        """,
        cwd=pytester.path,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "['scenario-0']"]
    [record] = _run_log(pytester.path)["budget"]  # type: ignore[misc]
    assert (record["spent_tokens"], record["reached"]) == (TRIAL_TOKENS, True)
    assert record["not_run"] == ["skills/s/evals/scenario-1"]
    assert reports_under(pytester.path) == []


def test_the_estimate_counts_pairwise_calls_and_a_rejudge_only_judges(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, counted: EvalScript
) -> None:
    """Pairwise judging adds two judge calls per trial; a re-judge makes no agent call, and
    its trials are the recorded run's."""
    write_skill(pytester.path, "s", {"scenario-0": {"a": 1}})
    base = ("--eval-estimate", "--eval-estimate-output-tokens", "10")
    pairwise = pytester.runpytest(
        "skills/s",
        *eval_args(
            endpoint.base_url,
            *base,
            "--eval-trials",
            "2",
            "--eval-baseline",
            "same",
            "--eval-judge-pairwise",
        ),
    )
    # 2 trials x 2 arms: 4 agent calls, 4 votes, and 2 x 2 pairwise calls.
    pairwise.stdout.fnmatch_lines(["skills/s: 1 scenario; agent 4 calls, *; judge 8 calls, *"])

    pytester.runpytest("skills/s", *eval_args(endpoint.base_url, "--eval-trials", "3"))
    [log] = sorted((pytester.path / ".openkata" / "runs").glob("*.jsonl"))
    requests = len(endpoint.requests)
    rejudge = pytester.runpytest(
        "skills/s", *eval_args(endpoint.base_url, *base, "--eval-rejudge", str(log))
    )

    rejudge.stdout.fnmatch_lines(["skills/s: 1 scenario; agent 0 calls; judge 3 calls, *"])
    assert len(endpoint.requests) == requests


def test_a_ledger_left_by_a_run_killed_outright_is_removed_by_the_next(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, counted: EvalScript
) -> None:
    """The ledger is named as the plugin's temporary files are: one whose process is gone is
    the next budgeted run's to remove; the run's own is gone when it ends."""
    import os
    import subprocess
    import sys

    from pytest_openkata.infra.tempfiles import new_temp_file

    write_skill(pytester.path, "s", {"scenario-0": {"a": 1}})
    folder = pytester.path / ".pytest_cache" / "d" / "openkata-budget"
    folder.mkdir(parents=True)
    descriptor, own = new_temp_file(folder)
    os.close(descriptor)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    prefix, host, _pid, rest = own.name.split("-", 3)
    left = own.rename(own.with_name(f"{prefix}-{host}-{gone.pid}-{rest}"))

    result = pytester.runpytest(
        "skills/s", *eval_args(endpoint.base_url, "--eval-budget-tokens", "100000")
    )

    assert result.ret == pytest.ExitCode.OK
    assert not left.exists()
    assert list(folder.iterdir()) == []


def test_without_the_cache_provider_a_shared_folder_open_to_others_is_refused(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, counted: EvalScript
) -> None:
    """The processes of a run without pytest's cache share a folder of a predictable name in
    the temporary folder: one that another user could have made, or write to, is refused."""
    import hashlib
    import os
    import tempfile

    write_skill(pytester.path, "s", {"scenario-0": {"a": 1}})
    digest = hashlib.sha256(str(pytester.path).encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"openkata-budget-{digest}-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    try:
        folder.chmod(0o777)
        result = pytester.runpytest(
            "skills/s",
            "-p",
            "no:cacheprovider",
            *eval_args(endpoint.base_url, "--eval-budget-tokens", "100000"),
        )
    finally:
        folder.chmod(0o700)
        for leftover in folder.iterdir():
            leftover.unlink()
        folder.rmdir()

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"{folder} is not a private folder of this user" in result.stderr.str()
    assert counted.agent_calls == 0


def test_a_rejudge_spends_only_its_judge_calls(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, counted: EvalScript
) -> None:
    """A re-judge of a run of one agent call and one judge call (150 tokens each) makes one
    judge call: its budget, run log and usage line count those 150 tokens, not the recorded
    agent's; the recorded agent's calls stay in the trial as where its answer came from."""
    write_skill(pytester.path, "s", {"scenario-a": {"a": 1}})
    first = pytester.runpytest("skills/s", *eval_args(endpoint.base_url))
    assert first.ret == pytest.ExitCode.OK
    [source] = logs_newest_first(pytester.path / ".openkata/runs")
    agent_calls = counted.agent_calls

    rejudged = pytester.runpytest(
        "skills/s",
        *eval_args(endpoint.base_url, "--eval-rejudge", str(source)),
        *("--eval-budget-tokens", "100000", "--eval-judge-model", "judge-b"),
    )

    assert rejudged.ret == pytest.ExitCode.OK, rejudged.stdout.str()
    assert counted.agent_calls == agent_calls
    logged = _run_log(pytester.path)
    [budget] = logged["budget"]  # type: ignore[misc]
    assert budget["spent_tokens"] == PROMPT_TOKENS + COMPLETION_TOKENS
    [trial] = logged["run"].trials  # type: ignore[attr-defined]
    assert trial.trial.usage.agent.calls == 0
    assert trial.trial.usage.judge.calls == 1
    assert trial.trial.recorded_agent.calls == 1
    assert trial.trial.recorded_agent.input_tokens == PROMPT_TOKENS
    rejudged.stdout.fnmatch_lines(
        [
            "*Usage: agent 0 calls, * s; judge 1 call, 100 in / 50 out tokens*",
            "*Budget: spent at least 150 tokens, *",
        ]
    )
