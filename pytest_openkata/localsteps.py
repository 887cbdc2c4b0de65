"""The long steps of the local-model tooling: each is taken once however many runs want it,
and the disk is checked for those still to take before the first starts.

``python -m pytest_openkata.localmodel`` lists what it still has to build or install (what the
cache holds does not count) as :class:`Step`\\ s, each with the folder it writes to and about
how much it needs there; :func:`space_shortage` says when a disk does not have that much
free, so that a run that could not finish says so in seconds, not after a long compile. Two
runs wanting the same build at once take turns on its lock (:func:`build_lock`): the second
says that it waits, and then finds the first's result in the cache.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

MB = 1024 * 1024
GB = 1024 * MB


@dataclass(frozen=True)
class Step:
    """A long step still to take: what it is, the folder it writes to, and about how many
    bytes it needs there at its largest (downloads, work files and result together)."""

    what: str
    folder: Path
    space: int


def _existing(folder: Path) -> Path:
    """``folder``, or its nearest ancestor that exists (a step creates its folder)."""
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            return candidate
    return folder


def _size(space: int) -> str:
    return f"{space / GB:.1f} GB" if space >= GB else f"{space // MB} MB"


def space_shortage(steps: Iterable[Step]) -> str | None:
    """What is short, when the steps writing to one disk need more than it has free (the
    steps on one disk add up); None when every disk has room."""
    by_disk: dict[int, list[Step]] = {}
    for step in steps:
        by_disk.setdefault(os.stat(_existing(step.folder)).st_dev, []).append(step)
    for group in by_disk.values():
        needed = sum(step.space for step in group)
        free = shutil.disk_usage(_existing(group[0].folder)).free
        if needed > free:
            folder = os.path.commonpath([step.folder for step in group])
            names = [step.what for step in group]
            what = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
            return (
                f"not enough free disk space in {folder} for {what}: about {_size(needed)} "
                f"needed, {_size(free)} free"
            )
    return None


def held_by_another(lock_file: Path) -> bool:
    """Whether another process holds the lock of ``lock_file`` (a build under way)."""
    try:
        lock = lock_file.open()  # (flock needs no write access)
    except FileNotFoundError:  # nobody has built there yet
        return False
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        return False  # closing the file releases the lock


@contextlib.contextmanager
def build_lock(lock_file: Path, what: str, log: Callable[[str], None]) -> Iterator[None]:
    """Holds the lock of a build: at once when no other process holds it, otherwise once the
    other has finished, after saying that this one waits for it. ``what`` names the build
    ("building llama-server 0.3.36")."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with lock_file.open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"another run is {what}: waiting for it to finish")
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield
