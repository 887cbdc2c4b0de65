"""The live log's name and the removal of those left by runs that are gone: a live log of this
host whose process is gone is removed, one of a live process or of another host is left, and
nothing else in the folder is touched."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pytest_openkata.core.live_log import (
    is_live_log,
    live_log_name,
    live_state,
    remove_stale_live_logs,
)
from pytest_openkata.core.runlog import LOG_NAME
from pytest_openkata.infra.processes import host_tag


def _gone_pid() -> int:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout)


def test_a_live_log_is_named_by_its_start_host_and_process_and_is_no_run_log() -> None:
    name = live_log_name(datetime(2026, 12, 7, 4, 5, 6, tzinfo=UTC))
    assert name == f"20261207T040506Z.{host_tag()}-{os.getpid()}.live.jsonl"
    assert is_live_log(name)
    assert is_live_log(f".openkata/runs/{name}")
    assert LOG_NAME.fullmatch(name) is None  # never pruned or read as a finished run's log
    assert live_state(name) == "running"
    with pytest.raises(ValueError, match="not the name of a live log"):
        live_state("20261207T040506Z.jsonl")


def test_only_the_live_logs_of_gone_runs_of_this_host_are_removed(tmp_path: Path) -> None:
    other_host = "00000000" if host_tag() != "00000000" else "11111111"
    gone = f"20261207T040506Z.{host_tag()}-{_gone_pid()}.live.jsonl"
    mine = live_log_name(datetime(2026, 12, 7, 4, 5, 7, tzinfo=UTC))
    elsewhere = f"20261207T040506Z.{other_host}-{_gone_pid()}.live.jsonl"
    for name in (gone, mine, elsewhere, "20261207T040506Z.jsonl", "notes.txt"):
        (tmp_path / name).write_text("{}\n")

    assert live_state(gone) == "interrupted"
    assert live_state(elsewhere) == "running"  # its pid means nothing here
    assert remove_stale_live_logs(tmp_path) == [tmp_path / gone]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [mine, elsewhere, "20261207T040506Z.jsonl", "notes.txt"]
    )
    assert remove_stale_live_logs(tmp_path / "missing") == []
