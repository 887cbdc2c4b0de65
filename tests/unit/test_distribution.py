"""What the xdist controller hands its workers: the group of each gateway spec (whose workers
share lock files, hence a part of every cap), and a worker's settings, the controller's with
the worker's own secrets. Real xdist workers on another host are in
``tests/pool/test_remote_workers.py``."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import execnet
import pytest

from pytest_openkata.contracts.config import EvalSettings, HttpSettings
from pytest_openkata.plugin.distribution import (
    SETTINGS_INPUT,
    group_of,
    secrets_from,
    shareable,
    worker_settings,
)


def _group(spec: str) -> str:
    return group_of(execnet.XSpec(spec))


def test_workers_are_grouped_by_the_host_and_folder_they_run_in() -> None:
    assert _group("popen") == _group("popen//python=python3") == "local"
    # Another folder on this host has lock files of its own.
    assert _group("popen//chdir=/elsewhere") not in ("local", _group("popen//chdir=/other"))
    ssh = _group("ssh=a//chdir=/w")
    assert ssh == _group("ssh=a//chdir=/w//python=/venv/bin/python")
    assert len({ssh, _group("ssh=b//chdir=/w"), _group("ssh=a//chdir=/x")}) == 3
    assert _group("socket=10.0.0.2:8888//chdir=/w") not in ("local", ssh)


def test_a_popen_worker_started_through_a_proxy_runs_on_the_proxys_host() -> None:
    """``--px id=r//ssh=HOST --tx popen//via=r`` starts its workers on HOST, not here."""
    via = _group("popen//via=r")
    assert via != "local"
    assert via == _group("popen//via=r//python=python3")
    assert via != _group("popen//via=s")


def _worker(settings: EvalSettings) -> Any:
    """A stand-in for a worker's config: what the controller put in its workerinput."""
    return SimpleNamespace(workerinput={SETTINGS_INPUT: shareable(settings)})


def test_a_worker_runs_with_the_controllers_settings_and_its_own_secrets() -> None:
    controller = EvalSettings(model="m", threshold=60, http=HttpSettings(api_key="controller"))
    own = EvalSettings(model="own", http=HttpSettings(api_key="worker"))

    assert shareable(controller)["http"]["api_key"] == ""
    for given in (own, lambda: own):
        settings = worker_settings(_worker(controller), given)
        assert (settings.model, settings.threshold) == ("m", 60)
        assert settings.http.api_key == "worker"
    assert worker_settings(SimpleNamespace(), lambda: own) is own  # not a worker


def test_a_worker_whose_own_settings_do_not_resolve_takes_its_secrets_from_its_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its own settings serve only for their secrets: a config file its host lacks or a
    variable the controller's plugin does not know does not stop it."""
    monkeypatch.setenv("OPENKATA_EVAL_HTTP_API_KEY", "worker")
    monkeypatch.setenv("OPENKATA_EVAL_ANTHROPIC_API_KEY", "worker-anthropic")

    def broken() -> EvalSettings:
        raise pytest.UsageError("pytest-openkata: option --eval-config: x.yaml does not exist")

    settings = worker_settings(_worker(EvalSettings(model="m")), broken)

    assert settings.model == "m"
    assert (settings.http.api_key, settings.anthropic.api_key) == ("worker", "worker-anthropic")
    with pytest.raises(pytest.UsageError, match=r"x\.yaml"):
        worker_settings(SimpleNamespace(), broken)  # the controller's own settings must resolve
    only = secrets_from({"OPENKATA_EVAL_MODEL": "ignored", "OPENKATA_EVAL_HTTP_API_KEY": "k"})
    assert (only.model, only.http.api_key) == (EvalSettings().model, "k")
