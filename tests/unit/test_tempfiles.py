"""Which temporary files a run removes: only its own kind, of this host, whose writer is gone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pytest_openkata.infra.tempfiles import new_temp_file, new_temp_folder, remove_stale


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def _named_for(path: Path, pid: int, host: str | None = None) -> Path:
    """``path``, a temporary file of this process, renamed as if ``pid`` (of ``host``, a tag
    of 8 hex digits) had made it."""
    prefix, own_host, _pid, rest = path.name.split("-", 3)
    renamed = path.with_name(f"{prefix}-{host or own_host}-{pid}-{rest}")
    path.rename(renamed)
    return renamed


def _new_file(folder: Path) -> Path:
    descriptor, path = new_temp_file(folder)
    os.close(descriptor)
    return path


def test_the_files_and_folders_of_dead_writers_are_removed(tmp_path: Path) -> None:
    dead = _dead_pid()
    file = _named_for(_new_file(tmp_path), dead)
    folder = _named_for(new_temp_folder(tmp_path), dead)
    (folder / "SKILL.md").write_text("extracted half-way")

    assert sorted(remove_stale(tmp_path)) == sorted([file, folder])
    assert list(tmp_path.iterdir()) == []


def test_live_writers_other_hosts_and_other_files_are_left_alone(tmp_path: Path) -> None:
    mine = _new_file(tmp_path)  # this process's: alive
    other_host = _named_for(_new_file(tmp_path), _dead_pid(), host="00000000")
    foreign = [tmp_path / ".report-abc.tmp", tmp_path / "notes.tmp", tmp_path / ".openkata-x.tmp"]
    for path in foreign:
        path.write_text("not ours to remove")

    assert remove_stale(tmp_path) == []
    assert sorted(tmp_path.iterdir()) == sorted([mine, other_host, *foreign])


def test_depth_looks_into_that_many_levels_of_folders(tmp_path: Path) -> None:
    dead = _dead_pid()
    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    found = [_named_for(_new_file(tmp_path / "a" / "b"), dead)]
    deeper = _named_for(_new_file(tmp_path / "a" / "b" / "c"), dead)

    assert remove_stale(tmp_path / "missing", depth=2) == []
    assert remove_stale(tmp_path, depth=2) == found
    assert deeper.exists()
