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
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from pytest_openkata.infra.processes import host_tag, process_gone

__all__ = ["REMOVED", "new_temp_file", "new_temp_folder", "remove_stale"]

REMOVED = "removed a temporary file left by a killed run"
"""How a removed file is announced, before its path."""

_PREFIX = ".openkata-"
_SUFFIX = ".tmp"
# mkstemp's random part is made of lowercase letters, digits and "_".
_NAME = re.compile(r"\.openkata-(?P<host>[0-9a-f]{8})-(?P<pid>[0-9]+)-[a-z0-9_]+\.tmp")


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


def remove_stale(folder: Path, *, depth: int = 0) -> list[Path]:
    """Remove the temporary files and folders of this module in ``folder`` whose writer's
    process is gone, and return their paths. With ``depth``, the folders that many levels below
    ``folder`` are looked into too (symlinks are not followed). Never raises: a missing or
    unreadable folder has nothing to remove, and an entry that cannot be removed (or that
    another run removed first) is left out.
    """
    removed: list[Path] = []
    try:
        listing = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in listing:
        if _stale(entry):
            try:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
            except OSError:
                continue
            removed.append(Path(entry.path))
        elif depth > 0 and entry.is_dir(follow_symlinks=False):
            removed.extend(remove_stale(Path(entry.path), depth=depth - 1))
    return removed
