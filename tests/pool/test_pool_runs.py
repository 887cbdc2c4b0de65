"""Sandboxed scenarios spread over a pool of two real engines, as users run them: one engine at
``tcp://`` with mutual TLS, one reached over ``ssh://`` in a network namespace. Each engine is
checked at the start with a line of its own, the scenarios go to both, the report and the
terminal name the engine of each, an engine killed mid-run is taken out and its scenario runs
again on the other, and no container is left on either (those of a killed run are swept by
the next run's check)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from pytest_openkata.providers.sandboxes.docker import MANAGED
from tests.pool.conftest import build_image, require_engines
from tests.support.endpoint import ScriptedEndpoint
from tests.support.engines import SshEngine, TlsEngine
from tests.support.evals import EvalScript, reports_under, sandbox_args, write_scenario, write_skill

TIMEOUT = 300


@pytest.fixture
def endpoint() -> Iterator[ScriptedEndpoint]:
    with ScriptedEndpoint() as server:
        server.respond_with(EvalScript())
        yield server


def _skill(root: Path, scenarios: int, sleep: int = 0) -> Path:
    """Skill ``s`` with sandboxed scenarios whose stand-in agent sleeps, then writes a file."""
    skill = write_skill(root, "s", {})
    for index in range(scenarios):
        folder = write_scenario(skill, f"scenario-{index}", {"x": 1}, sandbox=True)
        lines = [f"Do task {index}."]
        if sleep:
            lines.append(f"STANDIN: sleep {sleep}")
        lines.append(f"STANDIN: write out-{index}.txt done")
        (folder / "task.md").write_text("\n".join(lines) + "\n")
    return skill


def _command(endpoint: ScriptedEndpoint, image: str, hosts: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        "skills",
        "-p",
        "no:cacheprovider",
        *sandbox_args(endpoint.base_url, image),
        "--eval-sandbox-hosts",
        hosts,
        "--eval-sandbox-per-host",
        "1",
        "--eval-concurrency",
        "4",
        *extra,
    ]


def _environment(tls: TlsEngine | None, ssh: SshEngine | None) -> dict[str, str]:
    """The run's environment: the ssh engine's HOME (paramiko reads ~/.ssh there), the TLS
    engine's certificates as DOCKER_CERT_PATH, and no DOCKER_HOST (the pool names engines)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENKATA_EVAL_", "DOCKER_"))}
    if ssh is not None:
        env["HOME"] = str(ssh.home)
    if tls is not None:
        env["DOCKER_CERT_PATH"] = str(tls.cert_path)
    return env


def _run(command: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False
    )


def _report(root: Path) -> dict:
    (path,) = reports_under(root)
    return json.loads(path.read_text())


def _managed(client: docker.DockerClient) -> list:
    """The plugin's containers on the engine, listed in one answer of the engine (never
    looked at one by one, which a container removed meanwhile would fail)."""
    return list(client.api.containers(all=True, filters={"label": f"{MANAGED}=true"}))


def test_scenarios_spread_over_a_tls_and_an_ssh_engine_each_checked_and_named(
    tls_engine: TlsEngine, ssh_engine: SshEngine, endpoint: ScriptedEndpoint, tmp_path: Path
) -> None:
    _skill(tmp_path, scenarios=4, sleep=2)
    hosts = f"tls={tls_engine.url},remote={ssh_engine.url}"
    command = _command(endpoint, tls_engine.image, hosts, "-rA")
    done = _run(command, tmp_path, _environment(tls_engine, ssh_engine))

    assert done.returncode == 0, done.stdout + done.stderr
    header = [line for line in done.stdout.splitlines() if line.startswith("openkata: engine")]
    assert len(header) == 2
    assert header[0].startswith(f"openkata: engine tls ({tls_engine.url}): Docker ")
    assert ", TLS, " in header[0]
    assert header[1].startswith(f"openkata: engine remote ({ssh_engine.url}): Docker ")
    for line in header:
        assert line.endswith(f"image {tls_engine.image} present; up to 1 sandbox at once")
    report = _report(tmp_path)
    engines = {scenario["name"]: scenario["engine"] for scenario in report["scenarios"]}
    assert sorted(engines) == [f"scenario-{i}" for i in range(4)]
    # One sandbox at a time per engine: the scenarios running at once are on both.
    assert set(engines.values()) == {"tls", "remote"}
    for name, engine in engines.items():
        block = done.stdout.split(f"  {name}: ", 1)[1].split("\n\n", 1)[0]
        assert f"    Engine: {engine}\n" in block + "\n"
    # Nothing of the run is left on either engine.
    for engine in (tls_engine, ssh_engine):
        with contextlib.closing(engine.client()) as client:
            assert _managed(client) == []


def test_an_engine_that_cannot_be_reached_is_left_out_and_the_others_run(
    ssh_engine: SshEngine, endpoint: ScriptedEndpoint, tmp_path: Path
) -> None:
    _skill(tmp_path, scenarios=2)
    closed = f"tcp://127.0.0.1:{_closed_port()}"
    hosts = f"gone={closed},remote={ssh_engine.url}"
    done = _run(
        _command(endpoint, ssh_engine.image, hosts, "-q"), tmp_path, _environment(None, ssh_engine)
    )

    assert done.returncode == 0, done.stdout + done.stderr
    left_out = f"openkata: engine gone ({closed}): left out: no Docker engine answers at {closed}"
    # -q shows no header: the summary says it all the same.
    assert any(line.startswith(left_out) for line in done.stdout.splitlines())
    report = _report(tmp_path)
    assert {scenario["engine"] for scenario in report["scenarios"]} == {"remote"}


def test_an_engine_without_its_client_certificate_is_left_out_saying_why(
    tls_engine: TlsEngine, ssh_engine: SshEngine, endpoint: ScriptedEndpoint, tmp_path: Path
) -> None:
    _skill(tmp_path, scenarios=1)
    missing = tmp_path / "no-certs"
    missing.mkdir()
    hosts = f"tls={tls_engine.url},remote={ssh_engine.url}"
    command = _command(
        endpoint, tls_engine.image, hosts, "--eval-sandbox-tls-cert-path", str(missing)
    )
    done = _run(command, tmp_path, _environment(None, ssh_engine))

    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        f"openkata: engine tls ({tls_engine.url}): left out: {tls_engine.url}: the TLS folder "
        f"{missing} lacks ca.pem, cert.pem, key.pem"
    ) in done.stdout
    assert _report(tmp_path)["scenarios"][0]["engine"] == "remote"


def test_engines_of_different_cas_take_their_certificates_from_a_folder_each(
    tls_engine: TlsEngine, doomed_engine: TlsEngine, endpoint: ScriptedEndpoint, tmp_path: Path
) -> None:
    _skill(tmp_path, scenarios=2, sleep=2)
    certificates = tmp_path / "certs"
    shutil.copytree(tls_engine.cert_path, certificates / "first")
    shutil.copytree(doomed_engine.cert_path, certificates / "second")
    hosts = f"first={tls_engine.url},second={doomed_engine.url}"
    command = _command(
        endpoint, tls_engine.image, hosts, "--eval-sandbox-tls-cert-path", str(certificates)
    )
    done = _run(command, tmp_path, _environment(None, None))

    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count(", TLS, ") == 2
    assert {scenario["engine"] for scenario in _report(tmp_path)["scenarios"]} == {
        "first",
        "second",
    }


def _closed_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_for_container(client: docker.DockerClient, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not _managed(client):
        assert process.poll() is None, "the run ended before a sandbox started on the engine"
        assert time.monotonic() < deadline, "no sandbox started on the engine"
        time.sleep(0.2)


def _killed_mid_run(
    engine: TlsEngine, command: list[str], cwd: Path, env: dict[str, str]
) -> tuple[int, str]:
    """Run ``command``, kill ``engine`` once a sandbox runs on it; the exit status and output."""
    process = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        with contextlib.closing(engine.client()) as client:
            _wait_for_container(client, process)
        engine.kill()
        output, _ = process.communicate(timeout=TIMEOUT)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            process.communicate(timeout=60)
    return process.returncode, output


@pytest.fixture
def doomed_engine() -> Iterator[TlsEngine]:
    """A TLS engine of the test's own, to be killed."""
    require_engines()
    with TlsEngine() as engine:
        build_image(engine)
        yield engine


def test_an_engine_killed_mid_run_is_taken_out_and_its_scenario_runs_again_on_the_other(
    doomed_engine: TlsEngine, ssh_engine: SshEngine, endpoint: ScriptedEndpoint, tmp_path: Path
) -> None:
    _skill(tmp_path, scenarios=2, sleep=5)
    hosts = f"doomed={doomed_engine.url},remote={ssh_engine.url}"
    command = _command(endpoint, doomed_engine.image, hosts, "-rA")
    returncode, output = _killed_mid_run(
        doomed_engine, command, tmp_path, _environment(doomed_engine, ssh_engine)
    )

    assert returncode == 0, output
    report = _report(tmp_path)
    assert {scenario["engine"] for scenario in report["scenarios"]} == {"remote"}
    assert all(scenario["pass"] for scenario in report["scenarios"])
    moved = [line for line in output.splitlines() if line.startswith("    Engine: remote (")]
    assert len(moved) == 1
    # Lost while its sandbox ran, or while it was being made.
    assert re.search(r"engine doomed: (\w[\w ]*: )?the Docker engine stopped answering", moved[0])
    with contextlib.closing(ssh_engine.client()) as client:
        assert _managed(client) == []
    # The killed engine comes back holding the killed run's container; the next run's check
    # at its start sweeps it, since the run that made it is over.
    doomed_engine.restart()
    with contextlib.closing(doomed_engine.client()) as client:
        assert len(_managed(client)) == 1
        again = _run(
            _command(endpoint, doomed_engine.image, hosts, "--collect-only", "-q"),
            tmp_path,
            _environment(doomed_engine, ssh_engine),
        )
        assert again.returncode == 0, again.stdout + again.stderr
        assert _managed(client) == []


def test_a_scenario_whose_only_engine_is_lost_errors_saying_which_and_why(
    doomed_engine: TlsEngine, endpoint: ScriptedEndpoint, tmp_path: Path
) -> None:
    _skill(tmp_path, scenarios=1, sleep=30)
    command = _command(endpoint, doomed_engine.image, f"doomed={doomed_engine.url}", "-q")
    returncode, output = _killed_mid_run(
        doomed_engine, command, tmp_path, _environment(doomed_engine, None)
    )

    assert returncode == 1, output
    # Lost while its sandbox ran, or while it started (then the pool has no engine left).
    (error,) = [line for line in output.splitlines() if line.startswith("    ERROR: sandbox: ")]
    assert re.search(r"engine doomed: (\w[\w ]*: )?the Docker engine stopped answering", error)
    assert "scenario errored" in output.splitlines()[-1]
