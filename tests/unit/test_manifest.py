"""The manifest's drift rules (which differences refuse which comparison), reading a manifest
back from a file, and the model ids a backend records from its endpoint's answers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.contracts.results import (
    CallStats,
    ScenarioResult,
    TrialEnvironment,
    TrialResult,
    TrialTrace,
    Usage,
)
from pytest_openkata.contracts.transcripts import Transcript
from pytest_openkata.core.manifest import (
    BASELINE,
    COMPARE,
    MERGE,
    REJUDGE,
    Drift,
    DriftError,
    Manifest,
    ManifestError,
    check_drift,
    command_digest,
    compare_manifests,
    merged_manifest,
)
from pytest_openkata.core.run_manifest import build_manifest, skill_digest
from pytest_openkata.core.runlog import RunLogError, parse_run_log
from pytest_openkata.core.shards import recorded_settings
from pytest_openkata.infra.reported_models import REPORTED_MODEL_MAX_CHARS, recording_models
from pytest_openkata.providers.backends.anthropic import AnthropicMessagesBackend
from pytest_openkata.providers.backends.http import OpenAIChatBackend
from tests.support.endpoint import Reply, ScriptedEndpoint


def _manifest(**changes: object) -> Manifest:
    """A manifest of skill ``skills/s`` with one scenario; ``changes`` by dotted field."""
    data: dict[str, dict[str, object]] = {
        "agent": {
            "backend": "http",
            "model": "m",
            "reported_models": ["m-2026-01"],
            "cli_versions": [],
        },
        "judge": {
            "backend": "http",
            "model": "j",
            "reported_models": ["j-2026-01"],
            "votes": 3,
            "fence": True,
            "reason_max_chars": 0,
        },
        "sandbox": {"image": "openkata-eval:latest", "image_ids": ["sha256:aa"]},
        "skills": {"skills/s": "s1"},
        "scenarios": {"skills/s::a": {"task": "t1", "criteria": "c1", "inputs": "i1"}},
        "settings": {"skill_delivery": "prompt", "trials": 3, "threshold": 80},
    }
    version = "1.4.0"
    for dotted, value in changes.items():
        if dotted == "plugin_version":
            version = str(value)
            continue
        section, _, key = dotted.partition(".")
        if section == "scenarios":
            scenario, part = key.rsplit(".", 1)
            data["scenarios"][scenario] = {**data["scenarios"][scenario], part: value}  # type: ignore[dict-item]
        else:
            data[section] = {**data[section], key: value}
    return Manifest.from_dict({"plugin_version": version, **data}, source="test")


def _refusing(drift: Drift) -> list[str]:
    return [item.field for item in drift.refusing]


def _reported(drift: Drift) -> list[str]:
    return [item.field for item in drift.items if not item.refuses]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("agent.model", "other"),
        ("agent.reported_models", ["m-2026-03"]),
        ("agent.cli_versions", ["2.0.1"]),
        ("judge.model", "cheaper"),
        ("judge.reported_models", ["j-2026-03"]),
        ("judge.votes", 1),
        ("judge.fence", False),
        ("sandbox.image_ids", ["sha256:bb"]),
        ("settings.skill_delivery", "installed"),
    ],
)
def test_what_makes_a_comparison_with_an_earlier_run_meaningless_refuses_it(
    field: str, value: object
) -> None:
    drift = compare_manifests(
        _manifest(), _manifest(**{field: value}), comparison=COMPARE, against="earlier.jsonl"
    )

    if field == "agent.cli_versions":  # unknown before (a direct run): not a difference
        assert drift.empty
        return
    assert _refusing(drift) == [field]
    with pytest.raises(DriftError) as raised:
        check_drift(drift, allow=False)
    [item] = drift.items
    assert f"{field}: {item.before} before, {item.after} now" in str(raised.value)
    assert "Set allow_drift (--eval-allow-drift) to compare anyway" in str(raised.value)
    assert check_drift(drift, allow=True).allowed


def test_the_skill_the_plugin_version_and_precision_are_only_reported_by_a_comparison() -> None:
    drift = compare_manifests(
        _manifest(),
        _manifest(
            **{
                "plugin_version": "1.4.1",
                "skills.skills/s": "s2",
                "scenarios.skills/s::a.task": "t2",
                "settings.trials": 10,
                "sandbox.image": "openkata-eval:next",
            }
        ),
        comparison=COMPARE,
        against="earlier.jsonl",
    )

    assert _refusing(drift) == []
    assert _reported(drift) == [
        "plugin_version",
        "sandbox.image",
        "scenario skills/s::a task",
        "settings.trials",
        "skill skills/s",
    ]
    assert check_drift(drift, allow=False) == drift  # nothing refuses: no error, not "allowed"
    assert drift.items[0].describe() == "plugin_version: '1.4.0' before, '1.4.1' now"


def test_an_id_list_one_side_lacks_is_unknown_not_different() -> None:
    cached = _manifest(**{"agent.reported_models": [], "judge.reported_models": []})

    assert compare_manifests(_manifest(), cached, comparison=COMPARE, against="x").empty
    assert compare_manifests(cached, _manifest(), comparison=MERGE, against="x").empty


def test_a_merge_refuses_every_difference_but_the_reported_settings() -> None:
    drift = compare_manifests(
        _manifest(),
        _manifest(**{"skills.skills/s": "s2", "settings.threshold": 90}),
        comparison=MERGE,
        against="out/1/shard-1-of-2.jsonl",
    )

    assert _refusing(drift) == ["skill skills/s"]
    assert _reported(drift) == ["settings.threshold"]


def test_shards_compared_with_what_the_shards_before_them_said_together_find_any_drift() -> None:
    """Shard 1 reports no model (its answers came from the cache), shards 2 and 3 two
    snapshots: compared with shards 1 and 2 together, shard 3 drifted."""
    first = _manifest(**{"agent.reported_models": []})
    second = _manifest(**{"agent.reported_models": ["gpt-4o-2024-05-13"]})
    third = _manifest(**{"agent.reported_models": ["gpt-4o-2024-08-06"]})
    assert compare_manifests(first, third, comparison=MERGE, against="1").empty

    seen = merged_manifest(first, second)
    drift = compare_manifests(seen, third, comparison=MERGE, against="1, 2")

    assert seen.agent["reported_models"] == ["gpt-4o-2024-05-13"]
    assert _refusing(drift) == ["agent.reported_models"]
    assert drift.refusing[0].describe() == (
        "agent.reported_models: ['gpt-4o-2024-05-13'] before, ['gpt-4o-2024-08-06'] now"
    )


def test_manifests_merged_keep_each_field_s_first_value_and_join_the_id_lists() -> None:
    first = _manifest(**{"judge.reported_models": [], "settings.trials": 3})
    later = _manifest(
        **{
            "judge.reported_models": ["j-2"],
            "agent.reported_models": ["m-2026-02"],
            "settings.trials": 5,
            "settings.category": "style",
            "skills.skills/t": "t1",
        }
    )

    seen = merged_manifest(first, later)

    assert seen.judge["reported_models"] == ["j-2"]
    assert seen.agent["reported_models"] == ["m-2026-01", "m-2026-02"]
    assert seen.settings["trials"] == 3
    assert seen.settings["category"] == "style"
    assert seen.skills == {"skills/s": "s1", "skills/t": "t1"}


def test_a_rejudge_may_change_the_judge_and_the_criteria_not_what_the_answers_came_from() -> None:
    changed_judge = _manifest(
        **{
            "judge.model": "cheaper",
            "judge.votes": 5,
            "scenarios.skills/s::a.criteria": "c2",
        }
    )
    drift = compare_manifests(_manifest(), changed_judge, comparison=REJUDGE, against="run.jsonl")
    assert _refusing(drift) == []
    assert len(drift.items) == 3

    changed_task = _manifest(**{"scenarios.skills/s::a.task": "t2", "agent.model": "other"})
    drift = compare_manifests(_manifest(), changed_task, comparison=REJUDGE, against="run.jsonl")
    assert _refusing(drift) == ["agent.model"]
    assert _reported(drift) == ["scenario skills/s::a task"]


def test_a_rejudge_refuses_another_agent_and_only_reports_what_shaped_the_agent_s_run() -> None:
    """No agent runs in a re-judge: the settings that shaped the recorded agent's run, the
    image asked for and the criteria selected are reported; what the reports would name as
    the agent of the answers, and what the trials recorded of it, refuse."""
    recorded = _manifest(
        **{
            "settings.direct_timeout": 300,
            "settings.agent_command": "sha256:aa",
            "settings.sandbox.timeout": 600,
            "settings.category": "",
        }
    )
    shaping = _manifest(
        **{
            "settings.skill_delivery": "installed",
            "settings.direct_timeout": 600,
            "settings.agent_command": "sha256:bb",
            "settings.sandbox.timeout": 900,
            "settings.category": "style",
            "sandbox.image": "other:latest",
        }
    )
    drift = compare_manifests(recorded, shaping, comparison=REJUDGE, against="run.jsonl")
    assert _refusing(drift) == []
    assert len(_reported(drift)) == 6
    assert _refusing(compare_manifests(recorded, shaping, comparison=COMPARE, against="x")) == [
        "settings.agent_command",
        "settings.category",
        "settings.direct_timeout",
        "settings.sandbox.timeout",
        "settings.skill_delivery",
    ]

    for field, value in (
        ("agent.backend", "anthropic"),
        ("agent.model", "other"),
        ("agent.reported_models", ["m-2026-03"]),
        ("agent.cli_versions", ["2.0.1"]),
        ("sandbox.image_ids", ["sha256:bb"]),
    ):
        before = _manifest(**{"agent.cli_versions": ["2.0.0"]})
        after = _manifest(**{"agent.cli_versions": ["2.0.0"], field: value})
        drift = compare_manifests(before, after, comparison=REJUDGE, against="run.jsonl")
        assert _refusing(drift) == [field]


def test_a_manifest_read_with_a_command_line_holds_its_digest() -> None:
    """A log written before commands were digested holds the command line: read back, it is
    the digest, so that a drift never shows the line (nor its secret)."""
    command = "API_KEY=sk-s3cr3t /home/alice/run.sh"
    read = _manifest(**{"settings.agent_command": command})
    digested = _manifest(**{"settings.agent_command": read.settings["agent_command"]})

    assert read.settings["agent_command"].startswith("sha256:")
    assert "s3cr3t" not in json.dumps(read.to_dict())
    assert read == digested


def test_the_arms_of_a_run_compare_only_what_their_trials_recorded() -> None:
    own = Manifest("", agent={"reported_models": ["big"]})
    baseline = Manifest("", agent={"reported_models": ["small"]})

    drift = compare_manifests(baseline, own, comparison=BASELINE, against="the baseline arm b")

    assert _refusing(drift) == ["agent.reported_models"]
    assert drift.refusal() == (
        "refused to compare with the baseline arm b (baseline): it drifted: "
        "agent.reported_models: ['small'] before, ['big'] now. "
        "Set allow_drift (--eval-allow-drift) to compare anyway"
    )


def test_a_missing_manifest_refuses_nothing_and_says_so() -> None:
    drift = compare_manifests(None, _manifest(), comparison=COMPARE, against="old.json")

    assert drift.missing == "old.json records no manifest"
    assert drift.refusal() is None
    assert drift.lines() == ["Drift against old.json not checked: old.json records no manifest"]


def test_a_drift_reads_back_from_its_record() -> None:
    drift = compare_manifests(
        _manifest(), _manifest(**{"judge.model": "x"}), comparison=COMPARE, against="a"
    )
    allowed = check_drift(drift, allow=True)

    assert Drift.from_dict(json.loads(json.dumps(allowed.to_dict()))) == allowed


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        ([], "log: line 1: manifest: must be an object, not []"),
        ({"plugin_version": 1}, "log: line 1: manifest.plugin_version: must be a string"),
        ({"plugin_version": "1", "judge": "j"}, "log: line 1: manifest.judge: must be an object"),
        (
            {"plugin_version": "1", "skills": {"skills/s": 3}},
            "log: line 1: manifest.skills.skills/s: must be a digest",
        ),
        (
            {"plugin_version": "1", "agent": {"reported_models": ["m", {"x": 1}]}},
            "log: line 1: manifest.agent.reported_models: must be a list of texts",
        ),
    ],
)
def test_a_run_log_whose_manifest_is_malformed_is_refused_naming_the_field(
    manifest: object, message: str
) -> None:
    head = {"record": "run", "schema": 1, "finished_at": "2026-01-01T00:00:00Z"}
    text = json.dumps({**head, "manifest": manifest}) + "\n"

    with pytest.raises(RunLogError) as raised:
        parse_run_log(text, source="log")

    assert str(raised.value) == message
    with pytest.raises(ManifestError):
        Manifest.from_dict(manifest, source="log: line 1")


# --- the model ids the backends record ---------------------------------------------------------


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client() as shared:
        yield shared


def test_the_http_backend_records_the_model_its_endpoint_says_answered(
    endpoint: ScriptedEndpoint, client: httpx.Client
) -> None:
    backend = OpenAIChatBackend(client, base_url=endpoint.base_url, api_key="k", model="gpt-4o")
    long_id = "x" * (REPORTED_MODEL_MAX_CHARS + 50)
    endpoint.enqueue(
        Reply.chat("a", model="gpt-4o-2024-08-06"),
        Reply.chat("b", model=" \x1b[2Jg\u2028pt "),
        Reply.chat("c", model=long_id),
        Reply(json={"model": 7, "choices": [{"message": {"content": "d"}}]}),
    )

    with recording_models() as models:
        answers = [backend.complete("", prompt) for prompt in "1234"]

    assert answers == ["a", "b", "c", "d"]
    assert models == ["gpt-4o-2024-08-06", "\\x1b[2Jg\\u2028pt", "x" * REPORTED_MODEL_MAX_CHARS]


def test_the_anthropic_backend_records_the_model_its_endpoint_says_answered(
    endpoint: ScriptedEndpoint, client: httpx.Client
) -> None:
    backend = AnthropicMessagesBackend(
        client, base_url=endpoint.base_url, api_key="k", model="claude-x"
    )
    endpoint.enqueue(Reply.message({"type": "text", "text": "hi"}))

    with recording_models() as models:
        assert backend.complete("", "u") == "hi"

    assert models == ["claude-scripted"]


def test_a_skill_s_digest_is_of_its_files_without_its_evals_or_bytecode(tmp_path: Path) -> None:
    skill = tmp_path / "s"
    (skill / "scripts" / "__pycache__").mkdir(parents=True)
    (skill / "SKILL.md").write_text("# s\n")
    (skill / "scripts" / "run.py").write_text("print(1)\n")
    before = skill_digest(skill)

    (skill / "scripts" / "__pycache__" / "run.cpython-311.pyc").write_bytes(b"\0")
    (skill / "evals" / "results" / "m").mkdir(parents=True)
    (skill / "evals" / "results" / "m" / "r.json").write_text("{}")
    assert skill_digest(skill) == before

    (skill / "scripts" / "run.py").write_text("print(2)\n")
    assert skill_digest(skill) != before

    changed = skill_digest(skill)  # an evals folder below the top is the skill's content
    (skill / "scripts" / "evals").mkdir()
    (skill / "scripts" / "evals" / "data.txt").write_text("x\n")
    assert skill_digest(skill) != changed


def test_the_manifest_takes_the_model_an_agent_cli_s_events_named(tmp_path: Path) -> None:
    skill = tmp_path / "skills" / "s"
    skill.mkdir(parents=True)
    told = Transcript("claude stream-json", extras={"model": "claude-x-2026\x1b[0m"})
    trial = TrialResult(
        index=1,
        criteria=[],
        score=0,
        max_score=0,
        percentage=0.0,
        passed=True,
        usage=Usage(judge=CallStats(calls=1, models=("judge-1",))),
        trace=TrialTrace(transcript=told),
        environment=TrialEnvironment(agent_version="2.0.1 (Claude Code)", image_id="sha256:ab"),
    )
    result = ScenarioResult(
        "s", str(skill), "a", "", [], 0, 0, 0.0, True, trials=[trial], digests={"task": "t"}
    )

    manifest = build_manifest(EvalSettings(backend="claude"), [result], tmp_path, "1.0")

    assert manifest.agent["reported_models"] == ["claude-x-2026\\x1b[0m"]
    assert manifest.agent["cli_versions"] == ["2.0.1 (Claude Code)"]
    assert manifest.judge["reported_models"] == ["judge-1"]
    assert manifest.sandbox["image_ids"] == ["sha256:ab"]
    assert manifest.scenarios == {"skills/s::a": {"task": "t"}}


def test_a_shard_records_the_agent_command_as_its_digest() -> None:
    command = "API_KEY=sk-s3cr3t /home/alice/run.sh"
    recorded = recorded_settings(EvalSettings(agent_command=command))

    assert recorded["agent_command"] == command_digest(command)
    assert "s3cr3t" not in json.dumps(recorded)
    assert "/home/alice" not in json.dumps(recorded)
    # The merge reads the settings back: the digest is kept, as the manifest records it.
    assert command_digest(EvalSettings(**recorded).agent_command) == recorded["agent_command"]
