"""The offline sandbox of the quick start: an image built with no registry, a private engine,
and the whole example skill scored on the local model, then answered from the cache.

Real pieces only: debootstrap from Debian's mirror and Codex from npm (both cached), the test
session's Docker engine or a private dockerd, llama-server. A 135M model's answers are not
checked for content; the plumbing is.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
from pathlib import Path

import docker
import pytest

from pytest_openkata.core.results_json import parse_report
from pytest_openkata.local.model import LocalModelError
from pytest_openkata.local.sandbox import (
    CODEX_VERSION,
    LocalEngine,
    engine_answers,
    image_tag,
    prepare_image,
    rootfs_archive,
    sandbox_steps,
)

pytestmark = pytest.mark.e2e

EXAMPLE_SKILL = Path(__file__).resolve().parents[2] / "skills" / "commit-message"
QUICK_START_TIMEOUT = 1800  # four scenarios, two of them Codex in a container, on 2 CPU cores


def test_the_image_holds_git_codex_and_the_workspace(
    sandbox_archive: Path, docker_client: docker.DockerClient, docker_host: str
) -> None:
    lines: list[str] = []
    tag = prepare_image(docker_host, log=lines.append)
    assert tag == image_tag()

    output = docker_client.containers.run(
        tag,
        [
            "sh",
            "-c",
            "pwd; git --version; codex --version; rg --version | head -n 1; git config user.email",
        ],
        network_mode="none",
        remove=True,
    ).decode()

    first, git, codex, rg, email = output.splitlines()
    assert first == "/workspace"
    assert git.startswith("git version ")
    assert codex == f"codex-cli {CODEX_VERSION}"
    assert rg.startswith("ripgrep ")
    assert email == "agent@openkata.invalid"
    # Asked again, the engine has it: nothing is built or imported.
    again: list[str] = []
    assert prepare_image(docker_host, log=again.append) == tag
    assert again == [f"sandbox image {tag}: present"]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.skipif(os.geteuid() != 0, reason="debootstrap runs as root only")
def test_a_failed_debootstrap_names_the_step_and_leaves_nothing_half_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENKATA_LOCAL_MODEL_CACHE", str(tmp_path / "cache"))
    mirror = f"http://127.0.0.1:{_closed_port()}/debian"
    monkeypatch.setenv("OPENKATA_LOCAL_SANDBOX_MIRROR", mirror)
    lines: list[str] = []

    with pytest.raises(LocalModelError) as raised:
        rootfs_archive(log=lines.append)

    message = str(raised.value)
    assert message.startswith("`/usr/sbin/debootstrap --variant=minbase")
    assert "exited with 1" in message
    [started] = lines  # the step started, and never said it was done
    assert started.startswith(f"debootstrap bookworm from {mirror} … (log: ")
    sandbox = tmp_path / "cache" / "sandbox"
    assert [p.name for p in sandbox.iterdir() if p.suffix != ".log"] == ["build.lock"]


def test_a_private_engine_is_started_and_stopped_and_holds_its_data_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENKATA_LOCAL_MODEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENKATA_LOCAL_ENGINE", "private")
    lines: list[str] = []

    with LocalEngine(log=lines.append) as engine:
        assert engine.private
        assert engine_answers(engine.host)
        pid = engine.pid
        socket_path = Path(engine.host.removeprefix("unix://"))
        # One engine per data folder: a second run waits (here not at all), and is told, not
        # given a broken engine.
        monkeypatch.setenv("OPENKATA_LOCAL_MODEL_WAIT", "0")
        with pytest.raises(LocalModelError, match=r"is using the private Docker engine in .*, and"):
            LocalEngine(log=lines.append).start()

    assert pid is not None
    assert not Path(f"/proc/{pid}").exists()
    assert not socket_path.parent.exists()
    assert (tmp_path / "cache" / "docker" / "data").is_dir()  # kept: the image survives
    assert any(line.startswith("Docker engine at unix://") for line in lines)
    with LocalEngine(log=lines.append) as again:  # the data folder is free again
        assert engine_answers(again.host)


def _one_file_archive() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo("marker")
        archive.addfile(info, io.BytesIO(b""))
    return buffer.getvalue()


@pytest.mark.skipif(os.geteuid() != 0, reason="a private engine runs as root only")
def test_what_the_sandbox_still_needs_is_known_before_its_private_engine_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENKATA_LOCAL_MODEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENKATA_LOCAL_ENGINE", "private")
    tag = image_tag()

    def still_needed() -> list[str]:
        engine = LocalEngine(log=lambda _: None).reserve()
        try:
            assert engine.pid is None  # reserved, not started
            return [step.what for step in sandbox_steps(engine)]
        finally:
            engine.stop()

    assert still_needed() == [
        "installing @openai/codex",
        "building the sandbox image's root file system",
        "importing the sandbox image",
    ]
    # The engine gets an image of that name (a one-file stand-in): the engine has it when it
    # starts again, so nothing is left to build or import.
    with LocalEngine(log=lambda _: None) as engine:
        client = docker.DockerClient(base_url=engine.host, timeout=120)
        repository, _, version = tag.partition(":")
        client.api.import_image_from_data(_one_file_archive(), repository, version)
        client.close()
    assert still_needed() == []


def test_a_configured_engine_that_does_not_answer_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/nothing.sock")

    with pytest.raises(LocalModelError, match=r"DOCKER_HOST=unix://.*nothing\.sock does not"):
        LocalEngine(log=lambda _: None).start()


def _quick_start(project: Path, docker_host: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """Command 1 of the README, as a user types it, in ``project``, on the session's engine."""
    return subprocess.run(
        [
            sys.executable, "-m", "pytest_openkata.localmodel", "run", "--",
            sys.executable, "-m", "pytest", "skills/commit-message", "--eval-output", "reports/",
            "--eval-html", "reports/commit-message.html", "-p", "no:randomly", *extra,
        ],
        cwd=project,
        env={**os.environ, "DOCKER_HOST": docker_host},
        capture_output=True,
        text=True,
        timeout=QUICK_START_TIMEOUT,
        check=False,
    )  # fmt: skip


SCORE_LINE = re.compile(r"^    Score: .*$|^    ERROR: .*$", re.MULTILINE)
ACTIVATION_LINE = re.compile(r"^  Skill loaded in [01] of 1 trial$", re.MULTILINE)


def test_the_quick_start_scores_the_whole_skill_offline_and_a_repeat_comes_from_the_cache(
    tmp_path: Path, sandbox_archive: Path, docker_host: str, local_model_files: object
) -> None:
    project = tmp_path / "project"
    shutil.copytree(
        EXAMPLE_SKILL,
        project / "skills" / "commit-message",
        ignore=shutil.ignore_patterns("results"),
    )

    first = _quick_start(project, docker_host)
    [first_report] = (project / "reports").glob("results-*.json")
    second = _quick_start(project, docker_host, "--eval-compare", str(first_report))

    output = first.stdout + first.stderr
    reports = sorted((project / "reports").glob("results-*.json"))
    assert len(reports) == 2, output
    report = parse_report(reports[0].read_text())
    entries = report.scenarios or []
    assert sorted(e.name for e in entries) == sorted(
        p.name for p in (EXAMPLE_SKILL / "evals").glob("scenario-*")
    )
    assert [e.error for e in entries] == [None] * 4, output
    sandboxed = [e.name for e in entries if json.loads(
        (EXAMPLE_SKILL / "evals" / e.name / "scenario.json").read_text()
    ).get("sandbox")]  # fmt: skip
    assert len(sandboxed) == 2
    scores = SCORE_LINE.findall(first.stdout)
    assert len(scores) == 4, output
    assert not [line for line in scores if "ERROR" in line], output
    # The repeat: the same scores, every agent answer and verdict from the cache.
    assert SCORE_LINE.findall(second.stdout) == scores, second.stdout + second.stderr
    assert second.returncode == first.returncode
    usage = re.search(r"^  Usage: (.*)$", second.stdout, re.MULTILINE)
    assert usage is not None, second.stdout
    assert usage.group(1) == (
        "agent 0 calls, 0.0 s (+4 from the cache); judge 0 calls, 0.0 s (+4 from the cache)"
    )
    assert "sandbox image" in first.stderr
    assert "first answer in" in first.stderr
    # Codex said what it did in the sandbox: whether it loaded the skill is told for both
    # sandboxed scenarios (a 135M model's choice is not checked), and the repeat, from the
    # cache, tells the same.
    activation = ACTIVATION_LINE.findall(first.stdout)
    assert len(activation) == 2, output
    assert ACTIVATION_LINE.findall(second.stdout) == activation
    # The repeat compared with the first run: the same answers, nothing changed.
    assert (
        f"  Compared with {first_report.name}: 0 regressions, 0 improvements, 4 unchanged, "
        "0 new, 0 missing"
    ) in second.stdout, second.stdout
    # Each run left its HTML report (the second beside the first) and its run log.
    pages = sorted((project / "reports").glob("commit-message*.html"))
    assert [p.name for p in pages] == ["commit-message-2.html", "commit-message.html"]
    for page in pages:
        html = page.read_text()
        assert all(e.name in html for e in entries)
    assert "HTML report: reports/commit-message.html" in first.stdout
    assert len(list((project / ".openkata" / "runs").glob("*.jsonl"))) == 2

    # Does the skill help? The with-skill arm comes from the cache, the baseline arm runs.
    compared = _quick_start(project, docker_host, "--eval-baseline", "without-skill")

    shown = compared.stdout + compared.stderr
    assert re.search(
        r"^  Uplift against without-skill: with the skill [0-9.]+%, without-skill [0-9.]+% "
        r"over 4 scenarios; difference [+-][0-9.]+ points \(95% CI [+-][0-9.]+ to [+-][0-9.]+\)$",
        compared.stdout,
        re.MULTILINE,
    ), shown
    assert re.search(
        r"^    normalized gain -?[0-9.]+; p = [0-9.e-]+ \(sign-flip exact\); criteria: McNemar "
        r"p = [0-9.e-]+ \(\d+ passed with the skill only, \d+ without it only\); verdict: "
        r"(improves|regresses|no-difference|inconclusive)$",
        compared.stdout,
        re.MULTILINE,
    ), shown
    assert "left out:" not in compared.stdout, shown
    assert SCORE_LINE.findall(compared.stdout) == scores  # the gate's arm is unchanged
    [newest] = sorted(set((project / "reports").glob("results-*.json")) - set(reports))
    uplift = json.loads(newest.read_text())["uplift"]
    assert uplift["arm"] == "without-skill"
    assert uplift["scenarios"] == 4
    assert set(uplift) >= {
        "with", "without", "difference", "ci95", "normalized_gain", "p_value", "test", "verdict",
    }  # fmt: skip
    baseline_usage = re.search(r"^  Usage: agent (\d+) calls?, ", compared.stdout, re.MULTILINE)
    assert baseline_usage is not None
    assert int(baseline_usage.group(1)) == 4, shown  # only the baseline arm ran
