"""Edges of the engine pool and of shards, found in review: a shard with no scenario, ordinary
tests between scenarios, an errored baseline arm, an interrupted shard, the cache setting of
the merged run, engines that cannot be reached or have an unusable URL, IPv6 engines.

Shards are driven as users run them (pytester against the scripted endpoint, then
``python -m pytest_openkata merge`` in a subprocess), as in ``tests/plugin/test_shards.py``;
the pool with the local engines of ``tests/support/local_sandbox.py``."""

from __future__ import annotations

import json
import socket

import pytest

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.contracts.sandboxes import SandboxProvider, SandboxSpec
from pytest_openkata.core.engine_pool import build_pool
from pytest_openkata.infra.config import resolve_settings
from pytest_openkata.providers.sandboxes.docker import from_settings as docker_provider
from tests.support.endpoint import RecordedRequest, Reply, ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_scenario, write_skill
from tests.support.local_sandbox import LocalEngine
from tests.support.shards import NO_CACHE, clear_reports, merge, reports, timeless

SPEC = SandboxSpec(name="scenario-0", network="host", env={})


# --- helpers -----------------------------------------------------------------------------------


def _scenarios(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if "/evals::" in line]


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# --- shards ------------------------------------------------------------------------------------


def test_a_shard_with_no_scenario_leaves_its_file_and_the_merge_is_the_unsharded_run(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    alpha = write_skill(pytester.path, "alpha", {})
    for index in range(2):
        write_scenario(alpha, f"scenario-{index}", {"a": 1})
    args = ("skills", *eval_args(endpoint.base_url), *NO_CACHE)
    whole = pytester.runpytest(*args)
    unsharded = reports(pytester.path)
    assert whole.ret == pytest.ExitCode.OK
    assert len(unsharded) == 1
    clear_reports(pytester.path)

    shards = [
        pytester.runpytest(*args, "--eval-shard", f"{i}/3", "--eval-shard-dir", f"out/{i}")
        for i in (1, 2, 3)
    ]
    merged = merge(pytester.path, "out/1", "out/2", "out/3")

    # The README: a shard "exits 1 when a scenario errored or a test failed, else 0".
    assert [shard.ret for shard in shards] == [pytest.ExitCode.OK] * 3
    assert merged.returncode == 0, merged.stdout + merged.stderr
    sharded = reports(pytester.path)
    assert sorted(sharded) == sorted(unsharded)
    assert [timeless(text) for text in sharded.values()] == [
        timeless(text) for text in unsharded.values()
    ]


def test_the_scenarios_are_balanced_whatever_ordinary_tests_lie_between_them(
    pytester: pytest.Pytester,
) -> None:
    for name in ("alpha", "beta"):
        skill = write_skill(pytester.path, name, {})
        write_scenario(skill, "scenario-0", {"a": 1})
        (skill / "tests").mkdir()
        (skill / "tests" / f"test_{name}.py").write_text("def test_helper():\n    pass\n")

    parts = [
        _scenarios(pytester.runpytest("skills", "--collect-only", "-q", "--eval-shard", f"{i}/2"))
        for i in (1, 2)
    ]

    # README: "the k-th scenario goes to part k mod N, so the parts are balanced (they differ
    # by one at most) ... Other selected tests are split alike."
    assert sorted(len(part) for part in parts) == [1, 1], parts


def test_a_baseline_arm_that_errored_fails_the_merge_as_it_fails_the_unsharded_run(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    alpha = write_skill(pytester.path, "alpha", {})
    for index in range(2):
        write_scenario(alpha, f"scenario-{index}", {"a": 1})

    def refuse_the_baseline(request: RecordedRequest) -> Reply:
        messages = request.json["messages"]
        agent_call = messages[0]["role"] != "system"
        if agent_call and "Follow the rules" not in json.dumps(messages):  # no SKILL.md
            return Reply(400, {"error": {"message": "refused"}})
        return script(request)

    endpoint.respond_with(refuse_the_baseline)
    args = ("skills", *eval_args(endpoint.base_url), *NO_CACHE, "--eval-baseline", "without-skill")
    whole = pytester.runpytest(*args)
    clear_reports(pytester.path)
    for index in (1, 2):
        pytester.runpytest(*args, "--eval-shard", f"{index}/2")

    merged = merge(pytester.path, ".openkata/shards")

    assert whole.ret == pytest.ExitCode.TESTS_FAILED
    assert whole.outlines[-1] == "alpha 100% >= 95%; 2 scenarios errored: exit 1"
    assert merged.returncode == 1, merged.stdout + merged.stderr
    assert merged.stdout.splitlines()[-1] == whole.outlines[-1]


def test_an_interrupted_shard_is_named_as_stopped_not_as_missing(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    alpha = write_skill(pytester.path, "alpha", {})
    for index in range(4):
        write_scenario(alpha, f"scenario-{index}", {"a": 1})
    args = ("skills", *eval_args(endpoint.base_url), *NO_CACHE)
    assert pytester.runpytest(*args, "--eval-shard", "1/2").ret == pytest.ExitCode.OK
    pytester.makeconftest(
        "import pytest\n\n\n"
        "def pytest_runtest_setup(item):\n"
        "    if item.name == 'scenario-3':\n"
        "        pytest.exit('stopped by the CI job', returncode=2)\n"
    )
    stopped = pytester.runpytest(*args, "--eval-shard", "2/2")
    assert stopped.ret == pytest.ExitCode.INTERRUPTED

    merged = merge(pytester.path, ".openkata/shards")

    assert merged.returncode == 2
    assert "stopped before it finished" in merged.stderr, merged.stderr


def test_the_merged_run_log_records_the_cache_setting_the_shards_ran_with(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    alpha = write_skill(pytester.path, "alpha", {})
    for index in range(2):
        write_scenario(alpha, f"scenario-{index}", {"a": 1})
    args = ("skills", *eval_args(endpoint.base_url), *NO_CACHE)
    for index in (1, 2):
        pytester.runpytest(*args, "--eval-shard", f"{index}/2")

    merged = merge(pytester.path, ".openkata/shards")

    assert merged.returncode == 0, merged.stdout + merged.stderr
    logs = sorted((pytester.path / ".openkata" / "runs").glob("*.jsonl"))
    heads = [json.loads(path.read_text().splitlines()[0]) for path in logs]
    assert len(heads) == 3  # the two shards' run logs and the merge's
    assert [head["settings"]["cache"] for head in heads] == ["off", "off", "off"]


# --- the engine pool and its settings -------------------------------------------------------------


def _settings(*hosts: str) -> EvalSettings:
    arguments: dict[str, object] = {"sandbox": {"hosts": ",".join(hosts), "per_host": 1}}
    return resolve_settings(ini={}, yaml_path=None, environ={}, cli={}, arguments=arguments)


@pytest.mark.parametrize("kind", ["ssh", "port"])
def test_an_engine_that_cannot_be_reached_is_left_out_not_raised(kind: str) -> None:
    url = f"ssh://ci@127.0.0.1:{_closed_port()}" if kind == "ssh" else "tcp://127.0.0.1:port"
    settings = _settings("good=ssh://good", f"bad={url}")
    good = LocalEngine()

    def factory(single: EvalSettings) -> SandboxProvider:
        ((name, _url),) = single.sandbox.hosts
        return good if name == "good" else docker_provider(single)

    pool = build_pool(settings, factory)
    try:
        (bad,) = [engine for engine in pool.engines if engine.name == "bad"]
        assert (bad.lost or "").startswith(f"no Docker engine answers at {url} ("), bad.lost
        assert bad.left_out_at_start
        assert getattr(pool.create(SPEC), "engine", "") == "good"
    finally:
        pool.close()


def test_a_run_with_an_unreachable_ssh_engine_says_it_is_left_out_and_runs(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "alpha", {"scenario-0": {"a": 1}})
    url = f"ssh://ci@127.0.0.1:{_closed_port()}"

    result = pytester.runpytest(
        "skills", *eval_args(endpoint.base_url), *NO_CACHE, "--eval-sandbox-hosts", f"far={url}"
    )

    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines([f"openkata: engine far ({url}): left out: *"])


@pytest.mark.parametrize("url", ["tcp://[::1]:2376", "ssh://ci@[fd00::5]:2222"])
def test_an_ipv6_engine_without_a_name_is_taken(url: str) -> None:
    settings = _settings(url)

    ((name, kept),) = settings.sandbox.hosts
    assert kept == url
    assert name == url.split("://")[1].rpartition("@")[2]  # [::1]:2376, [fd00::5]:2222
