"""The temporary files of the plugin's atomic writes, and the removal of those a killed writer
left behind.

A report, a cache entry or a skill extracted at a git ref is made under a temporary name in its
folder first, then linked or renamed to its own. A writer killed in between (SIGKILL, an
out-of-memory kill, a power cut) leaves the temporary file for good, however large. So each
gets a name of its own, ``.openkata-<host>-<pid>-<random>.tmp``, and the next run that writes
to the folder removes those whose writer is gone (:func:`remove_stale`).

The writer is gone when its process is: ``<pid>`` is the writer's process, ``<host>`` the first
8 hex digits of the SHA-256 of the host name and, on Linux, of the process's pid namespace (a
container sharing the folder sees other pids). A file of another host or namespace (a folder on
a network file system) is never removed, since its pid means nothing here. Not by age: a live
writer of a large report on a slow disk, or one paused (SIGSTOP, a debugger), may be as old as
a dead one's. Not by a lock held on the file: between creating the file and locking it, a
removal would take a live writer's file, and locks do not work on every network file system.
A pid reused by another process only keeps the file until that one ends too.

A run's own working folders in the system's temporary folder (an agent's private folders, a
skill installed for it, skills extracted at git refs, a private Docker engine's runtime) are
removed by the run itself on every exit it sees. A run killed outright leaves them, so they are
named ``openkata-<kind>-<host>-<pid>-<random>`` (:func:`run_folder`, :func:`new_run_folder`) and
the next run removes those of this user whose run is gone, by the same rule
(:func:`remove_stale_run_folders`). One with something still mounted inside it is left alone:
removing it would reach into the mounted file system.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from pytest_openkata.infra.mounts import mounted_under
from pytest_openkata.infra.processes import host_tag, process_gone

__all__ = [
    "REMOVED",
    "new_run_folder",
    "new_temp_file",
    "new_temp_folder",
    "remove_stale",
    "remove_stale_run_folders",
    "run_folder",
    "stale_entries",
    "stale_folders_line",
]

REMOVED = "removed a temporary file left by a killed run"
"""How a removed file is announced, before its path."""

_PREFIX = ".openkata-"
_SUFFIX = ".tmp"
# mkstemp's random part is made of lowercase letters, digits and "_".
_NAME = re.compile(r"\.openkata-(?P<host>[0-9a-f]{8})-(?P<pid>[0-9]+)-[a-z0-9_]+\.tmp")
_RUN_FOLDER = re.compile(r"openkata-.+-(?P<host>[0-9a-f]{8})-(?P<pid>[0-9]+)-[a-z0-9_]+")


def _prefix() -> str:
    # The pid is read at each call: a forked process writes under its own.
    return f"{_PREFIX}{host_tag()}-{os.getpid()}-"


def new_temp_file(folder: Path) -> tuple[int, Path]:
    """A new temporary file in ``folder`` (open descriptor, path), named as the module says."""
    descriptor, name = tempfile.mkstemp(prefix=_prefix(), suffix=_SUFFIX, dir=folder)
    return descriptor, Path(name)


def new_temp_folder(folder: Path) -> Path:
    """A new temporary folder in ``folder``, named as the module says."""
    return Path(tempfile.mkdtemp(prefix=_prefix(), suffix=_SUFFIX, dir=folder))


def _stale(entry: os.DirEntry[str]) -> bool:
    found = _NAME.fullmatch(entry.name)
    return found is not None and found["host"] == host_tag() and process_gone(int(found["pid"]))


def stale_entries(folder: Path) -> list[Path]:
    """The temporary files and folders of this module in ``folder`` whose writer's process is
    gone (none when the folder cannot be read)."""
    try:
        return [Path(entry.path) for entry in os.scandir(folder) if _stale(entry)]
    except OSError:
        return []


def remove_stale(folder: Path, *, depth: int = 0) -> list[Path]:
    """Remove the temporary files and folders of this module in ``folder`` whose writer's
    process is gone, and return their paths. With ``depth``, the folders that many levels below
    ``folder`` are looked into too (symlinks are not followed). Never raises: a missing or
    unreadable folder has nothing to remove, and an entry that cannot be removed (or that
    another run removed first) is left out, as is a folder with something mounted inside it.
    """
    removed: list[Path] = []
    try:
        listing = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in listing:
        if _stale(entry):
            try:
                if not entry.is_dir(follow_symlinks=False):
                    os.unlink(entry.path)
                elif mounted_under(entry.path):
                    continue
                else:
                    shutil.rmtree(entry.path)
            except OSError:
                continue
            removed.append(Path(entry.path))
        elif depth > 0 and entry.is_dir(follow_symlinks=False):
            removed.extend(remove_stale(Path(entry.path), depth=depth - 1))
    return removed


def _run_prefix(kind: str) -> str:
    return f"openkata-{kind}-{host_tag()}-{os.getpid()}-"


def run_folder(kind: str) -> tempfile.TemporaryDirectory[str]:
    """A new working folder of this run in the system's temporary folder, removed when its
    ``with`` block ends (errors ignored: an agent may leave files it cannot be made to drop);
    named as the module says, so that the next run removes it when this one is killed."""
    return tempfile.TemporaryDirectory(prefix=_run_prefix(kind), ignore_cleanup_errors=True)


def new_run_folder(kind: str) -> Path:
    """A new working folder of this run in the system's temporary folder, named as
    :func:`run_folder`'s; removing it is the caller's."""
    return Path(tempfile.mkdtemp(prefix=_run_prefix(kind)))


def remove_stale_run_folders() -> list[Path]:
    """Remove this user's run folders (:func:`run_folder`) in the system's temporary folder
    whose run's process is gone, and return their paths. Never raises, as
    :func:`remove_stale`; a folder with a mount point inside it is left."""
    folder = Path(tempfile.gettempdir())
    try:
        listing = list(os.scandir(folder))
    except OSError:
        return []
    stale = [entry for entry in listing if _stale_run_folder(entry)]
    if not stale:
        return []
    removed: list[Path] = []
    for entry in stale:
        if mounted_under(entry.path):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        if not os.path.lexists(entry.path):
            removed.append(Path(entry.path))
    return removed


def _stale_run_folder(entry: os.DirEntry[str]) -> bool:
    found = _RUN_FOLDER.fullmatch(entry.name)
    if found is None or found["host"] != host_tag():
        return False
    try:
        mine = (
            entry.is_dir(follow_symlinks=False)
            and entry.stat(follow_symlinks=False).st_uid == os.getuid()
        )
    except OSError:
        return False
    return mine and process_gone(int(found["pid"]))


def stale_folders_line(removed: list[Path]) -> str | None:
    """``openkata: removed 2 temporary folders left by a killed run in /tmp``, or None when
    none was removed."""
    if not removed:
        return None
    folders = "1 temporary folder" if len(removed) == 1 else f"{len(removed)} temporary folders"
    return f"openkata: removed {folders} left by a killed run in {tempfile.gettempdir()}"
