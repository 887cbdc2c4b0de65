"""Writing report files so that nothing is lost: atomically, and never over an existing file.

A report is written to a temporary file in its folder first and then hard-linked to its
name; ``os.link`` fails instead of replacing, so a report already there (or one a concurrent
writer just made) is kept and the new one takes the next free name, ``<stem>-2<suffix>``.
Before that, the temporary files that killed writers left in the folder are removed
(:mod:`pytest_openkata.infra.tempfiles`).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Iterator
from contextlib import suppress
from pathlib import Path

from pytest_openkata.infra.tempfiles import new_temp_file, remove_stale

__all__ = ["write_new_report"]

_DIR_MODE = 0o755
_FILE_MODE = 0o644


def write_new_report(
    path: Path,
    text: str | bytes,
    others: Iterable[Path] | None = None,
    *,
    removed: list[Path] | None = None,
) -> Path:
    """Write ``text`` atomically to ``path`` or, if taken, to the first free name of ``others``
    (default ``<stem>-2<suffix>``, ``-3``...; the names must not run out). A ``path`` that is
    a folder raises :class:`IsADirectoryError`.

    The content goes to a temporary file in the target folder first and is then
    hard-linked to the final name; ``os.link`` fails instead of replacing, so an existing
    report is never overwritten, even by a concurrent writer. Returns the path written.
    The temporary files of killed writers found in the folder are removed first and added to
    ``removed``, for the caller to say so.
    """
    path = Path(path)
    if path.is_dir():  # else the report would go to <folder>-2 beside it
        raise IsADirectoryError(f"{path} is a folder, not a file name")
    _make_folders(path.parent)
    swept = remove_stale(path.parent)
    if removed is not None:
        removed.extend(swept)
    temp = _write_temp_file(path.parent, text)
    try:
        written = _link_to_free_name(temp, path, others)
    finally:
        temp.unlink(missing_ok=True)
    _fsync_folder(path.parent)
    return written


def _make_folders(folder: Path) -> None:
    """Like Go's ``os.MkdirAll(folder, 0755)``: every missing level gets mode 0755.

    ``Path.mkdir(parents=True)`` would create the intermediate levels with mode 0777.
    """
    missing = list(itertools.takewhile(lambda p: not p.exists(), (folder, *folder.parents)))
    for level in reversed(missing):
        with suppress(FileExistsError):
            level.mkdir(mode=_DIR_MODE)


def _write_temp_file(folder: Path, text: str | bytes) -> Path:
    fd, temp = new_temp_file(folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8") if isinstance(text, str) else text)
            handle.flush()
            os.chmod(temp, _FILE_MODE)
            os.fsync(handle.fileno())
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return temp


def _link_to_free_name(temp: Path, path: Path, others: Iterable[Path] | None) -> Path:
    candidates = _candidate_paths(path) if others is None else itertools.chain([path], others)
    for candidate in candidates:
        try:
            os.link(temp, candidate)
        except FileExistsError:
            continue
        return candidate
    raise AssertionError("unreachable: the candidate names never run out")


def _fsync_folder(folder: Path) -> None:
    """Make the new directory entry durable; best effort, not every platform allows it."""
    with suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _candidate_paths(path: Path) -> Iterator[Path]:
    numbered = (path.with_name(f"{path.stem}-{n}{path.suffix}") for n in itertools.count(2))
    return itertools.chain([path], numbered)
