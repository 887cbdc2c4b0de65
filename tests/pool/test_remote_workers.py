"""xdist workers on another host. A worker over ssh (``--tx ssh=…``) into a network namespace
(:class:`~tests.support.engines.SshHost`), running in a copy of the project at another path,
gives the same pass/fail, exit status, results JSON, JUnit and run log as local workers, all
written on the controller's side; the controller's settings reach it and the controller's API
key does not (it uses its host's own), over ssh and through an execnet socket server
(``--tx socket=…``); ``max_in_flight`` holds across the hosts, also for workers started there
by a proxy gateway (``--px``, ``--tx popen//via=…``); and what xdist cannot hand a remote
worker is a usage error.

Everything is real: sshd, execnet, the plugin in child pytest runs, and the scripted model
endpoint listening on the host's end of the namespace's link, so that the endpoint tells the
hosts apart by the address each request comes from. The namespace shares this machine's file
system, so the remote checkout is a copy at another path, and the remote worker runs this
virtualenv's python, as a remote host with the same checkout and environment would.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_openkata.contracts.config import EvalSettings
from tests.pool.conftest import SSH_HOST_API_KEY
from tests.support.endpoint import RecordedRequest, ScriptedEndpoint
from tests.support.engines import SshHost
from tests.support.evals import EvalScript, eval_args, reports_under, write_skill

SCENARIOS = {
    "scenario-0": {"a": 10, "b": 5},
    "scenario-1": {"c": 8},
    "scenario-2": {"d": 3, "e": 3},
    "scenario-3": {"f": 1},
}
FAILING = {"b": (False, "b is missing"), "d": (False, "d & <e> differ")}  # s scores 79 %
MANY = {f"scenario-{n}": {"a": 2, "b": 1} for n in range(8)}
MODEL = "model-of-the-controller"
JUDGE_MODEL = "judge-of-the-controller"
CONTROLLER_API_KEY = "key-of-the-controller"
PYTHON = sys.executable  # this virtualenv's: the remote host's environment at the same path
TIMEOUT = 300  # a child run that hangs fails the test instead of the suite
# Each worker writes down which OPENKATA_EVAL_* variables its process has, in its rootdir.
RECORD_ENVIRONMENT = """
import json, os

def pytest_configure(config):
    worker = getattr(config, "workerinput", None)
    if worker is not None:
        names = sorted(name for name in os.environ if name.startswith("OPENKATA_EVAL_"))
        path = config.rootpath / f"environment-{worker['workerid']}.json"
        path.write_text(json.dumps(names))
"""


# --- the project, its remote copy, the endpoint -------------------------------------------


def _project(root: Path, scenarios: dict[str, dict[str, int]]) -> Path:
    """A skills project whose tests are its skills (``testpaths``), recording each worker's
    environment."""
    write_skill(root, "s", scenarios)
    (root / "pytest.ini").write_text("[pytest]\ntestpaths = skills\n")
    (root / "conftest.py").write_text(RECORD_ENVIRONMENT)
    return root


def _copy(project: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's checkout on the other host: a copy at another path."""
    copy = tmp_path_factory.mktemp("other-host") / "checkout"
    shutil.copytree(project, copy)
    return copy


@pytest.fixture
def project(pytester: pytest.Pytester) -> Path:
    return _project(pytester.path, SCENARIOS)


@pytest.fixture
def remote_checkout(project: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _copy(project, tmp_path_factory)


@pytest.fixture
def script() -> EvalScript:
    return EvalScript(verdicts=dict(FAILING))


@pytest.fixture
def both_hosts_endpoint(ssh_host: SshHost, script: EvalScript) -> Iterator[ScriptedEndpoint]:
    """The scripted endpoint on the host's end of the namespace's link: both hosts reach it,
    each from its own address."""
    with ScriptedEndpoint(host=ssh_host.root_address) as server:
        server.respond_with(script)
        yield server


@pytest.fixture
def controller_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings given only through the controller's environment, with its own API key."""
    monkeypatch.setenv("OPENKATA_EVAL_MODEL", MODEL)
    monkeypatch.setenv("OPENKATA_EVAL_JUDGE_MODEL", JUDGE_MODEL)
    monkeypatch.setenv("OPENKATA_EVAL_HTTP_API_KEY", CONTROLLER_API_KEY)


# --- running and reading a run ------------------------------------------------------------


def _ssh_worker(host: SshHost, checkout: Path) -> str:
    return f"{host.execnet_spec(PYTHON)}//chdir={checkout}"


def _local_and_ssh(host: SshHost, checkout: Path) -> tuple[str, ...]:
    """One worker here and one on the ssh host, in its checkout; a worker that cannot start
    ends the run rather than being started again and again."""
    ssh = _ssh_worker(host, checkout)
    return ("--dist", "load", "--tx", "popen", "--tx", ssh, "--max-worker-restart", "0")


def _local_and_proxied(host: SshHost, checkout: Path) -> tuple[str, ...]:
    """One worker here and two started on the ssh host by a proxy gateway in its checkout:
    xdist copies nothing and rewrites no path for a ``popen`` worker without ``chdir``. The
    proxy runs in execnet's ``thread`` model: in xdist's own (``main_thread_only``) it starts
    one worker only and fails the second ("concurrent remote_exec would cause deadlock")."""
    proxy = f"id=other//execmodel=thread//{host.execnet_spec(PYTHON)}//chdir={checkout}"
    return ("--dist", "load", "--px", proxy, "--tx", "popen", "--tx", "2*popen//via=other")


def _run(pytester: pytest.Pytester, endpoint: ScriptedEndpoint, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        *eval_args(endpoint.base_url, "--eval-cache=off", "-v", *args), timeout=TIMEOUT
    )


def _take_outputs(root: Path) -> tuple[dict[str, Any], list[dict[str, Any]], ET.Element]:
    """The run's results JSON (in the skill's folder under ``root``, for the controller's
    model), run log records and JUnit, removed from there (the next run writes its own)."""
    [report] = reports_under(root)
    assert report.parent == root / "skills" / "s" / "evals" / "results" / MODEL
    [log] = (root / ".openkata" / "runs").glob("*.jsonl")
    junit = root / "junit.xml"
    outputs = (
        json.loads(report.read_text()),
        [json.loads(line) for line in log.read_text().splitlines()],
        ET.parse(junit).getroot(),
    )
    for path in (report, log, junit):
        path.unlink()
    return outputs


def _without_usage(report: dict[str, Any]) -> dict[str, Any]:
    """A results JSON without its measured seconds and the time it was written."""
    report = {k: v for k, v in report.items() if k not in ("usage", "timestamp")}
    report["scenarios"] = [
        {k: v for k, v in s.items() if k != "usage"} for s in report["scenarios"]
    ]
    return report


def _trials(records: list[dict[str, Any]]) -> dict[str, tuple[Any, ...]]:
    """Each scenario's trial record in a run log: its skill folder, outcome and criteria."""
    return {
        r["scenario"]: (r["skill_dir"], r["passed"], r["score"], r["criteria"])
        for r in records
        if r["record"] == "trial"
    }


def _outcomes(junit: ET.Element) -> dict[tuple[str, str], str]:
    """Every JUnit testcase (class name, name) with its outcome."""
    return {
        (case.get("classname", ""), case.get("name", "")): (
            "error"
            if case.find("error") is not None
            else "failure"
            if case.find("failure") is not None
            else "passed"
        )
        for case in junit.iter("testcase")
    }


def _ran_on(result: pytest.RunResult, worker: str) -> list[str]:
    """The scenarios whose outcome ``-v`` shows from ``worker``."""
    shown = re.compile(rf"\[{worker}\] \[ *\d+%\] (?:PASSED|FAILED) skills/s/evals::(\S+)")
    return [found.group(1) for line in result.outlines if (found := shown.match(line))]


def _from(endpoint: ScriptedEndpoint, address: str) -> list[RecordedRequest]:
    return [request for request in endpoint.requests if request.client == address]


def _models(requests: list[RecordedRequest]) -> set[tuple[str, str]]:
    """The models that agent and judge calls (those with a system prompt) asked for."""
    return {
        ("judge" if r.json["messages"][0]["role"] == "system" else "agent", r.json["model"])
        for r in requests
    }


def _environment_of(root: Path, worker: str) -> list[str]:
    return json.loads((root / f"environment-{worker}.json").read_text())


# --- the tests ----------------------------------------------------------------------------


@pytest.mark.parametrize(("threshold", "status"), [("60", 0), ("95", 1)], ids=["above", "below"])
def test_an_ssh_worker_gives_the_same_outcome_reports_and_junit_as_local_ones(
    pytester: pytest.Pytester,
    ssh_host: SshHost,
    both_hosts_endpoint: ScriptedEndpoint,
    project: Path,
    remote_checkout: Path,
    controller_environment: None,
    monkeypatch: pytest.MonkeyPatch,
    threshold: str,
    status: int,
) -> None:
    """The threshold comes from the controller's environment only: the gate is the
    controller's, whichever host ran the scenarios."""
    monkeypatch.setenv("OPENKATA_EVAL_THRESHOLD", threshold)
    junit = "--junitxml=junit.xml"

    local = _run(pytester, both_hosts_endpoint, "-n", "2", junit)
    local_report, local_log, local_junit = _take_outputs(project)
    remote = _run(pytester, both_hosts_endpoint, *_local_and_ssh(ssh_host, remote_checkout), junit)
    remote_report, remote_log, remote_junit = _take_outputs(project)

    assert local.ret == remote.ret == status
    remote.stdout.fnmatch_lines([f"  Overall: 79% {'PASS' if status == 0 else 'FAIL'} *"])
    assert _ran_on(remote, "gw1")  # the ssh worker ran scenarios...
    assert _from(both_hosts_endpoint, ssh_host.address)  # ...and called the model from there
    # Pass and fail of every scenario and criterion, as JUnit has them, all of them listed.
    assert _outcomes(remote_junit) == _outcomes(local_junit)
    assert {name for (cls, name) in _outcomes(remote_junit) if cls == "skills.s.evals"} == set(
        SCENARIOS
    )
    criteria = {k: v for k, v in _outcomes(remote_junit).items() if k[0] != "skills.s.evals"}
    assert criteria == {
        (f"skills.s.evals.{scenario}", name): "failure" if name in FAILING else "passed"
        for scenario, points in SCENARIOS.items()
        for name in points
    }
    # The results JSON, at the controller's skill folder only, and the run log alike.
    assert _without_usage(remote_report) == _without_usage(local_report)
    assert remote_report["config"]["agent_model"] == MODEL
    assert remote_report["threshold"] == int(threshold)
    assert _trials(remote_log) == _trials(local_log)
    assert {skill_dir for skill_dir, *_ in _trials(remote_log).values()} == {"skills/s"}
    assert reports_under(remote_checkout) == []
    assert not (remote_checkout / ".openkata").exists()
    assert not (remote_checkout / "junit.xml").exists()


@pytest.mark.parametrize("kind", ["ssh", "socket"])
def test_the_controllers_settings_reach_a_remote_worker_but_not_its_api_key(
    pytester: pytest.Pytester,
    ssh_host: SshHost,
    both_hosts_endpoint: ScriptedEndpoint,
    project: Path,
    remote_checkout: Path,
    controller_environment: None,
    kind: str,
) -> None:
    """Over ssh, and through an execnet socket server whose environment has the host's key."""
    with contextlib.ExitStack() as stack:
        if kind == "ssh":
            workers = _local_and_ssh(ssh_host, remote_checkout)
        else:
            own = {"OPENKATA_EVAL_HTTP_API_KEY": SSH_HOST_API_KEY}
            server = stack.enter_context(ssh_host.socket_server(PYTHON, own))
            workers = (
                *("--dist", "load", "--tx", "popen", "--tx", f"{server}//chdir={remote_checkout}"),
                *("--max-worker-restart", "0"),
            )
        result = _run(pytester, both_hosts_endpoint, *workers)

    assert result.ret == pytest.ExitCode.TESTS_FAILED  # 79 % < 95 %
    assert _ran_on(result, "gw1")
    # The remote worker's process has its host's API key and none of the controller's variables.
    assert _environment_of(remote_checkout, "gw1") == ["OPENKATA_EVAL_HTTP_API_KEY"]
    assert _environment_of(project, "gw0") == [
        "OPENKATA_EVAL_HTTP_API_KEY",
        "OPENKATA_EVAL_JUDGE_MODEL",
        "OPENKATA_EVAL_MODEL",
    ]
    # Yet it calls the controller's models, with its own key.
    remote = _from(both_hosts_endpoint, ssh_host.address)
    local = _from(both_hosts_endpoint, ssh_host.root_address)
    assert len(remote) + len(local) == 2 * len(SCENARIOS)
    for requests, key in ((remote, SSH_HOST_API_KEY), (local, CONTROLLER_API_KEY)):
        assert {r.headers["authorization"] for r in requests} == {f"Bearer {key}"}
        assert _models(requests) <= {("agent", MODEL), ("judge", JUDGE_MODEL)}
    assert _models(remote) == {("agent", MODEL), ("judge", JUDGE_MODEL)}
    assert CONTROLLER_API_KEY not in result.stdout.str() + result.stderr.str()
    [report] = reports_under(project)
    assert report.parent == project / "skills" / "s" / "evals" / "results" / MODEL
    assert reports_under(remote_checkout) == []


@pytest.mark.parametrize("workers", [_local_and_ssh, _local_and_proxied], ids=["ssh", "proxy"])
def test_max_in_flight_holds_across_hosts(
    pytester: pytest.Pytester,
    ssh_host: SshHost,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    workers: Callable[[SshHost, Path], tuple[str, ...]],
) -> None:
    """With a cap of 2 for one worker here and one (over ssh) or two (through a proxy) on the
    ssh host, in another folder (so other lock files), the endpoint never has more than 2
    requests at once; without the cap the same run has more, so the cap is what holds them.
    The cap is given in the controller's environment only."""
    checkout = _copy(_project(pytester.path, MANY), tmp_path_factory)
    with ScriptedEndpoint(host=ssh_host.root_address, latency=0.3) as endpoint:
        endpoint.respond_with(EvalScript())
        options = (*workers(ssh_host, checkout), "--eval-concurrency", "3")
        monkeypatch.setenv("OPENKATA_EVAL_MAX_IN_FLIGHT", "2")
        capped = _run(pytester, endpoint, *options)
        capped_peak = endpoint.max_in_flight
        capped_hosts = {request.client for request in endpoint.requests}
        endpoint.reset_peak()
        monkeypatch.delenv("OPENKATA_EVAL_MAX_IN_FLIGHT")
        uncapped = _run(pytester, endpoint, *options)

    assert capped.ret == uncapped.ret == pytest.ExitCode.OK
    assert _ran_on(capped, "gw1")
    assert capped_hosts == {ssh_host.address, ssh_host.root_address}
    assert capped_peak <= 2
    assert endpoint.max_in_flight > 2


def test_max_in_flight_below_the_number_of_hosts_is_a_usage_error(
    pytester: pytest.Pytester,
    ssh_host: SshHost,
    both_hosts_endpoint: ScriptedEndpoint,
    project: Path,
    remote_checkout: Path,
) -> None:
    workers = _local_and_ssh(ssh_host, remote_checkout)

    result = _run(pytester, both_hosts_endpoint, *workers, "--eval-max-in-flight", "1")

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: pytest-openkata: max_in_flight 1 cannot be shared by the workers of 2 "
            "hosts or folders (each needs at least one request in flight): set it to 2 or more"
        ]
    )
    assert "INTERNALERROR" not in result.stdout.str()
    assert both_hosts_endpoint.requests == []
    assert not list(project.glob("environment-*")) + list(remote_checkout.glob("environment-*"))


def test_a_path_argument_reaches_an_ssh_worker_absolute_under_an_rsyncdir(
    pytester: pytest.Pytester,
    ssh_host: SshHost,
    both_hosts_endpoint: ScriptedEndpoint,
    project: Path,
    remote_checkout: Path,
) -> None:
    """xdist hands an ssh worker only the paths under an ``--rsyncdir`` (which it copies
    into the worker's folder): a relative one is a usage error that says so, not an internal
    error of xdist; an absolute one under ``--rsyncdir`` runs there. Workers started by a
    proxy gateway in the remote checkout take the relative path as it is."""
    workers = _local_and_ssh(ssh_host, remote_checkout)
    skills = str(project / "skills")

    relative = _run(pytester, both_hosts_endpoint, "skills", *workers)
    absolute = _run(pytester, both_hosts_endpoint, skills, "--rsyncdir", skills, *workers)
    [absolute_report] = reports_under(project)
    absolute_report.unlink()
    proxied = _run(
        pytester, both_hosts_endpoint, "skills", *_local_and_proxied(ssh_host, remote_checkout)
    )

    assert relative.ret == pytest.ExitCode.USAGE_ERROR
    relative.stderr.fnmatch_lines(
        ["ERROR: pytest-openkata: skills: xdist hands workers on other hosts only paths *"]
    )
    assert "INTERNALERROR" not in relative.stdout.str()
    assert absolute.ret == proxied.ret == pytest.ExitCode.TESTS_FAILED  # 79 % < 95 %
    assert _ran_on(absolute, "gw1")
    assert _ran_on(proxied, "gw1") + _ran_on(proxied, "gw2")
    [proxied_report] = reports_under(project)
    results = project / "skills" / "s" / "evals" / "results" / EvalSettings().model
    assert absolute_report.parent == proxied_report.parent == results
    assert reports_under(remote_checkout) == []


def test_an_ssh_worker_needs_no_copy_of_the_controllers_config_file(
    pytester: pytest.Pytester,
    ssh_host: SshHost,
    both_hosts_endpoint: ScriptedEndpoint,
    project: Path,
    remote_checkout: Path,
) -> None:
    """The settings file named on the command line is the controller's: a worker gets the
    settings it gave, and one whose host lacks the file runs all the same."""
    (project / "openkata.yaml").write_text(f"threshold: 60\nmodel: {MODEL}\n")
    workers = _local_and_ssh(ssh_host, remote_checkout)

    result = _run(pytester, both_hosts_endpoint, "--eval-config=openkata.yaml", *workers)

    assert result.ret == pytest.ExitCode.OK  # 79 % >= 60 %
    assert _ran_on(result, "gw1")
    assert {r.json["model"] for r in _from(both_hosts_endpoint, ssh_host.address)} == {MODEL}
