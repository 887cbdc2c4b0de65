"""Which temporary files and folders a run removes: only its own kind, of this host, whose writer
or run is gone."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from pytest_openkata.infra.processes import host_tag
from pytest_openkata.infra.tempfiles import (
    new_run_folder,
    new_temp_file,
    new_temp_folder,
    remove_stale,
    remove_stale_run_folders,
    run_folder,
    stale_folders_line,
)


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


def _run_folder_of(pid: int, kind: str = "claude", host: str | None = None) -> Path:
    """A run folder of this process's, renamed as if the run ``pid`` (of ``host``) had made it."""
    folder = new_run_folder(kind)
    own = f"-{host_tag()}-{os.getpid()}-"
    return folder.rename(
        folder.with_name(folder.name.replace(own, f"-{host or host_tag()}-{pid}-"))
    )


@pytest.fixture
def temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The system's temporary folder, for this test: ``tmp_path``."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_run_folders_of_runs_that_are_gone_are_removed_with_what_they_hold(
    temporary: Path,
) -> None:
    dead = _dead_pid()
    agent = _run_folder_of(dead, "acp:gemini")
    (agent / "sessions" / "a").mkdir(parents=True)
    (agent / "sessions" / "a" / "log.jsonl").write_text("{}")
    events = _run_folder_of(dead, "codex-events")

    assert sorted(remove_stale_run_folders()) == sorted([agent, events])
    assert list(temporary.iterdir()) == []
    assert stale_folders_line([agent, events]) == (
        f"openkata: removed 2 temporary folders left by a killed run in {temporary}"
    )
    assert stale_folders_line([]) is None


def test_run_folders_of_live_runs_other_hosts_and_others_are_left_alone(temporary: Path) -> None:
    with run_folder("skills") as live:
        other_host = _run_folder_of(_dead_pid(), host="00000000")
        foreign = [temporary / "openkata-refs-x", temporary / f"pytest-of-{_dead_pid()}"]
        for path in foreign:
            path.mkdir()
        plain_file = temporary / f"openkata-x-{host_tag()}-{_dead_pid()}-abcdefgh"
        plain_file.write_text("a file, not a run's folder")

        assert remove_stale_run_folders() == []
        assert sorted(temporary.iterdir()) == sorted([Path(live), other_host, *foreign, plain_file])
    assert not Path(live).exists()


def test_a_symlink_named_as_a_run_folder_is_not_followed(
    temporary: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    target = tmp_path_factory.mktemp("elsewhere")
    (target / "keep").write_text("not the run's")
    link = temporary / f"openkata-claude-{host_tag()}-{_dead_pid()}-abcdefgh"
    link.symlink_to(target, target_is_directory=True)

    assert remove_stale_run_folders() == []
    assert (target / "keep").exists()
    assert link.is_symlink()


_MOUNTED = """
import json, subprocess, sys, tempfile
from pathlib import Path
from pytest_openkata.infra.tempfiles import remove_stale_run_folders
tempfile.tempdir = sys.argv[1]
stale = Path(sys.argv[2])
mount = stale / "exec" / "net ns"  # written \\040 in the kernel's list
mount.mkdir(parents=True)
subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(mount)], check=True)
(mount / "default").write_text("inside the mount")
removed = remove_stale_run_folders()
print(json.dumps({"removed": [str(p) for p in removed], "kept": (mount / "default").exists()}))
"""


@pytest.mark.parametrize("through", ["the folder", "a symlink"])
def test_a_run_folder_with_something_mounted_inside_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, through: str
) -> None:
    if shutil.which("unshare") is None:
        pytest.fail("unshare (util-linux) is needed to mount in a namespace of the test's own")
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    if through == "a symlink":  # TMPDIR on another disk: the kernel lists the resolved path
        (tmp_path / "link").symlink_to(temporary, target_is_directory=True)
        temporary = tmp_path / "link"
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    stale = temporary / f"openkata-dockerd-{host_tag()}-{_dead_pid()}-abcdefgh"
    unmounted = _run_folder_of(_dead_pid(), "dockerd")
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", sys.executable, "-c", _MOUNTED,
         str(temporary), str(stale)],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr

    seen = json.loads(done.stdout)
    assert seen == {"removed": [str(unmounted)], "kept": True}
    assert stale.exists()
