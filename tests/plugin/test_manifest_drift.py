"""The reproducibility manifest and drift, as users meet them: real runs against a scripted
endpoint that reports which model answered (the ``model`` field of its responses), compared
with an earlier run, between arms and across shards."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_openkata.core.runlog import LOG_NAME
from tests.support.endpoint import RecordedRequest, Reply, ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_skill
from tests.support.shards import NO_CACHE, merge

SCENARIOS = {"scenario-a": {"x": 10, "y": 5}, "scenario-b": {"z": 3}}
JUDGE_MODEL = "judge-2026-01-15"


def _reporting(script: EvalScript, agent_model: str, baseline_model: str | None = None) -> Any:
    """The scripted answers, each saying it came from ``agent_model`` (the judge's from
    :data:`JUDGE_MODEL`; a baseline arm's agent calls, whose prompt lacks the skill, from
    ``baseline_model`` when given)."""

    def respond(request: RecordedRequest) -> Reply:
        reply = script(request)
        messages = request.json["messages"]
        if messages[0]["role"] == "system":
            model = JUDGE_MODEL
        elif baseline_model is not None and "Follow the rules." not in messages[-1]["content"]:
            model = baseline_model
        else:
            model = agent_model
        assert reply.json is not None
        return replace(reply, json={**reply.json, "model": model})

    return respond


def _run(pytester: pytest.Pytester, base_url: str, *extra: str) -> pytest.RunResult:
    return pytester.runpytest(
        "skills/s", *eval_args(base_url), "--eval-threshold", "0", "-p", "no:randomly", *extra
    )


def _logs(root: Path) -> list[Path]:
    """The run logs, oldest first (the second log of one second is ``…Z-2.jsonl``)."""

    def order(path: Path) -> tuple[str, int]:
        match = LOG_NAME.fullmatch(path.name)
        assert match is not None
        return match["stamp"], int(match["n"] or 1)

    return sorted((root / ".openkata" / "runs").glob("*.jsonl"), key=order)


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _drift_records(path: Path) -> list[dict[str, Any]]:
    return [r["data"] for r in _records(path) if r.get("kind") == "drift"]


def test_a_run_records_what_it_ran_with_and_refuses_a_comparison_across_another_model(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    skill = write_skill(pytester.path, "s", SCENARIOS)
    endpoint.respond_with(_reporting(script, "agent-2026-01-15"))
    first = _run(pytester, endpoint.base_url)
    assert first.ret == pytest.ExitCode.OK
    [log] = _logs(pytester.path)
    manifest = _records(log)[0]["manifest"]
    assert manifest["agent"]["reported_models"] == ["agent-2026-01-15"]
    assert manifest["judge"]["reported_models"] == [JUDGE_MODEL]
    assert manifest["judge"]["votes"] == 1
    assert list(manifest["skills"]) == ["skills/s"]
    assert set(manifest["scenarios"]) == {"skills/s::scenario-a", "skills/s::scenario-b"}
    assert set(manifest["scenarios"]["skills/s::scenario-a"]) == {"task", "criteria", "inputs"}
    [report] = skill.glob("evals/results/*/*.json")
    assert json.loads(report.read_text())["manifest"] == manifest  # one skill: the same

    endpoint.respond_with(_reporting(script, "agent-2026-03-01"))
    refused = _run(pytester, endpoint.base_url, "--eval-compare", str(log), *NO_CACHE)

    assert refused.ret == pytest.ExitCode.TESTS_FAILED
    expected = "agent.reported_models: ['agent-2026-01-15'] before, ['agent-2026-03-01'] now"
    shown = refused.stdout.str()
    assert f"Drift against {log.name} (refuses): {expected}" in shown
    assert f"Not compared: refused to compare with {log.name} (compare): it drifted" in shown
    assert "Compared with" not in shown
    assert "a comparison was refused: the runs drifted" in refused.stdout.lines[-1]
    [record] = _drift_records(_logs(pytester.path)[-1])
    assert record["allowed"] is False
    assert [item["field"] for item in record["items"]] == ["agent.reported_models"]

    allowed = _run(
        pytester, endpoint.base_url, "--eval-compare", str(log), "--eval-allow-drift",
        "--eval-markdown", "run.md", *NO_CACHE,
    )  # fmt: skip

    assert allowed.ret == pytest.ExitCode.OK
    shown = allowed.stdout.str()
    assert f"Compared with {log.name}: " in shown
    assert f"Drift against {log.name} (refuses): {expected}" in shown
    assert (
        f"Compared with {log.name} despite the drift: allow_drift (--eval-allow-drift) is on"
        in shown
    )
    [record] = _drift_records(_logs(pytester.path)[-1])
    assert record["allowed"] is True
    markdown = (pytester.path / "run.md").read_text()
    assert "despite the drift" in markdown
    assert "agent models reported agent-2026-03-01" in markdown


def test_an_earlier_run_without_a_manifest_is_compared_and_said_to_be_unchecked(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", SCENARIOS)
    _run(pytester, endpoint.base_url)
    [log] = _logs(pytester.path)
    records = _records(log)
    del records[0]["manifest"]  # as a log written before manifests
    log.write_text("".join(json.dumps(record) + "\n" for record in records))

    result = _run(pytester, endpoint.base_url, "--eval-compare", str(log))

    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            f"*Compared with {log.name}: *",
            f"*Drift against {log.name} not checked: {log.name} records no manifest*",
        ]
    )


def test_a_baseline_arm_answered_by_another_model_refuses_the_uplift(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 10}})
    endpoint.respond_with(_reporting(script, "agent-big", baseline_model="agent-small"))
    args = ("--eval-baseline", "without-skill", "--eval-markdown", "run.md")

    refused = _run(pytester, endpoint.base_url, *args)

    assert refused.ret == pytest.ExitCode.TESTS_FAILED
    assert (
        "Drift against the baseline arm without-skill (refuses): agent.reported_models: "
        "['agent-small'] before, ['agent-big'] now"
    ) in refused.stdout.str()
    assert "Uplift" not in refused.stdout.str()
    [report] = pytester.path.glob("skills/s/evals/results/*/*.json")
    assert "uplift" not in json.loads(report.read_text())

    report.unlink()
    allowed = _run(pytester, endpoint.base_url, *args, "--eval-allow-drift", *NO_CACHE)

    assert allowed.ret == pytest.ExitCode.OK
    allowed.stdout.fnmatch_lines(["*despite the drift: allow_drift (--eval-allow-drift) is on*"])
    [report] = pytester.path.glob("skills/s/evals/results/*/*.json")
    assert json.loads(report.read_text())["uplift"]["arm"] == "without-skill"


def test_a_shard_answered_by_another_model_is_refused_by_the_merge_unless_allowed(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", SCENARIOS)
    for index, model in ((1, "agent-2026-01-15"), (2, "agent-2026-03-01")):
        endpoint.respond_with(_reporting(script, model))
        pytester.runpytest(
            "skills", *eval_args(endpoint.base_url), *NO_CACHE,
            "--eval-shard", f"{index}/2", "--eval-shard-dir", f"out/{index}",
        )  # fmt: skip

    refused = merge(pytester.path, "out")

    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert refused.stderr == (
        "merge: out/2/shard-2-of-2.jsonl and out/1/shard-1-of-2.jsonl are not shards of one "
        "run: refused to compare with out/1/shard-1-of-2.jsonl (merge): it drifted: "
        "agent.reported_models: ['agent-2026-01-15'] before, ['agent-2026-03-01'] now. "
        "Set allow_drift (--eval-allow-drift) to compare anyway\n"
    )
    assert not list(pytester.path.glob("skills/s/evals/results/*/*.json"))

    allowed = merge(pytester.path, "out", "--allow-drift")

    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert "despite the drift: allow_drift (--eval-allow-drift) is on" in allowed.stdout
    [merged] = [log for log in _logs(pytester.path) if _drift_records(log)]
    [record] = _drift_records(merged)
    assert (record["comparison"], record["skill_dir"], record["allowed"]) == ("merge", "", True)
    manifest = _records(merged)[0]["manifest"]
    assert manifest["agent"]["reported_models"] == ["agent-2026-01-15", "agent-2026-03-01"]


HOSTILE_MODEL = "\x1b]0;pwned\x07<script>alert(1)</script>|*x*\u202e"


def test_a_hostile_model_id_never_drives_the_terminal_or_breaks_a_report(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 10}})
    _run(pytester, endpoint.base_url)
    [log] = _logs(pytester.path)
    endpoint.respond_with(_reporting(script, HOSTILE_MODEL))

    result = _run(
        pytester, endpoint.base_url, "--eval-compare", str(log), "--eval-allow-drift",
        "--eval-html", "run.html", "--eval-markdown", "run.md", *NO_CACHE,
    )  # fmt: skip

    assert result.ret == pytest.ExitCode.OK
    shown = result.stdout.str()
    for control in ("\x1b", "\x07", "\u202e"):
        assert control not in shown
    assert "agent.reported_models: ['gpt-4o'] before, ['\\x1b]0;pwned" in shown
    assert "\\x1b]0;pwned\\x07<script>alert(1)</script>" in shown
    latest = _logs(pytester.path)[-1]
    manifest = _records(latest)[0]["manifest"]
    assert manifest["agent"]["reported_models"] == [
        "\\x1b]0;pwned\\x07<script>alert(1)</script>|*x*\\u202e"
    ]
    html = (pytester.path / "run.html").read_text()
    assert "<script>alert(1)" not in html
    assert "\x1b" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    markdown = (pytester.path / "run.md").read_text()
    assert "<script>" not in markdown
    assert "\x1b" not in markdown
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in markdown


def test_an_agent_command_is_recorded_as_a_digest_never_as_its_text(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    """A command line may hold a secret and a home folder: the run log and the results JSON
    (which are shared) record its sha256, which still tells two commands apart."""
    skill = write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    secret, home = "sk-ant-api03-s3cr3t", "/home/alice/agents/run.sh"
    command = f"ANTHROPIC_API_KEY={secret} {home}"

    result = _run(pytester, endpoint.base_url, "--eval-agent-command", command)

    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    [log] = _logs(pytester.path)
    [report] = skill.glob("evals/results/*/*.json")
    for text in (log.read_text(), report.read_text()):
        assert secret not in text
        assert "/home/alice" not in text
    recorded = _records(log)[0]["manifest"]["settings"]["agent_command"]
    assert recorded == "sha256:" + hashlib.sha256(command.encode()).hexdigest()
    assert json.loads(report.read_text())["manifest"]["settings"]["agent_command"] == recorded
