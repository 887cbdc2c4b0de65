"""Failures of the local-model tooling are clear and quick, never a hang."""

from __future__ import annotations

import stat
import types
from pathlib import Path

import pytest

from pytest_openkata import localmodel
from pytest_openkata.localmodel import (
    LocalModelError,
    LocalModelServer,
    build_server,
    main,
    server_binary,
)


def _script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_a_server_that_exits_at_start_is_reported_with_its_output(tmp_path: Path) -> None:
    binary = _script(tmp_path, "llama-server", 'echo "error: model file is corrupt"; exit 3')

    with pytest.raises(LocalModelError) as info:
        LocalModelServer(binary, tmp_path / "weights.gguf").start()

    assert "llama-server exited with 3 while starting" in str(info.value)
    assert "model file is corrupt" in str(info.value)


def test_a_server_that_never_answers_gives_up_after_the_start_timeout(tmp_path: Path) -> None:
    binary = _script(tmp_path, "llama-server", "echo loading; exec sleep 600")
    server = LocalModelServer(binary, tmp_path / "weights.gguf", start_timeout=1)

    with pytest.raises(LocalModelError) as info:
        server.start()

    assert f"did not answer on {server.root_url} within 1 s" in str(info.value)
    assert "loading" in str(info.value)
    with pytest.raises(LocalModelError):
        _ = server.pid  # stopped: no process is left behind


def test_a_missing_binary_is_reported(tmp_path: Path) -> None:
    with pytest.raises(LocalModelError, match="cannot start"):
        LocalModelServer(tmp_path / "absent", tmp_path / "weights.gguf").start()


def test_a_failed_build_names_the_step_and_shows_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENKATA_LOCAL_MODEL_CACHE", str(tmp_path))

    with pytest.raises(LocalModelError) as info:
        build_server("0.0.0.999999", log=lambda message: None)

    message = str(info.value)
    assert "pip download" in message
    assert "llama-cpp-python==0.0.0.999999" in message
    assert not server_binary("0.0.0.999999").exists()
    assert list(tmp_path.iterdir()) == []  # the build folder is removed


def test_a_cached_binary_is_reused_without_building(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENKATA_LOCAL_MODEL_CACHE", str(tmp_path))
    cached = server_binary("1.2.3")
    cached.parent.mkdir(parents=True)
    cached.write_text("binary")

    assert build_server("1.2.3", log=lambda message: None) == cached


def test_run_without_a_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["run"])
    assert info.value.code == 2
    assert "run needs a command" in capsys.readouterr().err


def test_run_points_the_command_at_the_server_with_a_patient_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = types.SimpleNamespace(base_url="http://127.0.0.1:8123/v1", model="smollm2")
    monkeypatch.delenv("OPENKATA_EVAL_DIRECT_TIMEOUT", raising=False)
    monkeypatch.setenv("OPENKATA_EVAL_BACKEND", "kiro")

    environment = localmodel._environment(server)  # type: ignore[arg-type]

    assert environment["OPENKATA_EVAL_BACKEND"] == "http"
    assert environment["OPENKATA_EVAL_HTTP_BASE_URL"] == "http://127.0.0.1:8123/v1"
    assert environment["OPENKATA_EVAL_MODEL"] == "smollm2"
    assert environment["OPENKATA_EVAL_DIRECT_TIMEOUT"] == "600"
    monkeypatch.setenv("OPENKATA_EVAL_DIRECT_TIMEOUT", "30")
    assert localmodel._environment(server)["OPENKATA_EVAL_DIRECT_TIMEOUT"] == "30"  # type: ignore[arg-type]
