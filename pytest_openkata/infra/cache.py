"""A content-addressed cache of agent answers and judge verdicts, one small JSON file per entry.

An entry is found by a *key*: :func:`cache_key` hashes the entry's ``kind`` (``"agent"``,
``"judge"``, ...), the plugin version and a *material* mapping holding everything that decides
the result. Callers put into the material the backend kind, the model, the exact prompt or
messages sent, the sandbox image and the digest of the sandbox's inputs (:func:`folder_digest`),
the trial index and the vote index, so that a change to any of them is a different key and a
fresh computation, while an identical request is answered from disk. The plugin version is
always part of the key, so upgrading the plugin starts from an empty cache.

Errors are never cached: a failed agent call, a failed judge call or a broken sandbox run must
not be stored, so the next run tries again. Keeping them out is the *callers'* responsibility;
:class:`ResultCache` stores whatever dict it is given.

:class:`ResultCache` lays entries out as ``root/<kind>/<key[:2]>/<key>.json`` (the root lives
under pytest's cache folder, but this module knows nothing of pytest). Writes are atomic (a
temporary file in the same folder, renamed over the entry), so readers in other threads or
processes see either the old entry or the new one, never a partial file; the temporary files of
writers killed meanwhile are removed by :meth:`ResultCache.remove_stale`. There is no fsync:
after a power loss an entry may be empty or torn, and such an entry reads as a miss, which is
all a cache needs. A
cache must never fail a run: a write that fails with :class:`OSError` is counted in
``write_errors`` and forgotten, and an entry that cannot be read or is not a well-formed entry
for its key is a miss.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import re
import stat
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_openkata._version import __version__
from pytest_openkata.infra.tempfiles import new_temp_file, remove_stale

logger = logging.getLogger(__name__)

CACHE_MODES = ("on", "off", "refresh")
"""``on``: read and write; ``off``: neither; ``refresh``: never read, always write."""

ENTRY_FORMAT = 1
"""The ``format`` number written into (and required of) every entry file."""

_KIND_PATTERN = re.compile(r"[a-z][a-z0-9_-]*")
_KEY_PATTERN = re.compile(r"[0-9a-f]{64}")
_DIGEST_DOMAIN = b"pytest-openkata folder digest v1\x00"


def _jsonable(value: Any, where: str) -> Any:
    """``value`` as plain JSON data (mappings as dicts, tuples as lists), or TypeError.

    Stricter than :func:`json.dumps`, which would turn non-string dict keys into strings and
    write non-finite floats as ``NaN``/``Infinity`` (not JSON).
    """
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TypeError(f"{where}: {value!r} is not a finite number and has no JSON form")
        return value
    if isinstance(value, Mapping):
        plain: dict[str, Any] = {}
        for name, item in value.items():
            if not isinstance(name, str):
                raise TypeError(f"{where}: key {name!r} is not a string")
            plain[name] = _jsonable(item, f"{where}[{name!r}]")
        return plain
    if isinstance(value, list | tuple):
        return [_jsonable(item, f"{where}[{index}]") for index, item in enumerate(value)]
    raise TypeError(f"{where}: {type(value).__name__} {value!r:.80} is not JSON data")


def cache_key(kind: str, material: Mapping[str, Any]) -> str:
    """The hex sha256 of the canonical JSON of ``kind``, the plugin version and ``material``.

    The same material gives the same key whatever the order of its dicts; tuples count as
    lists. Raises TypeError when ``material`` holds anything that is not JSON data (objects,
    bytes, sets, non-string dict keys, NaN or infinities) rather than guessing a form for it.
    """
    if not isinstance(kind, str):
        raise TypeError(f"kind must be a string, got {type(kind).__name__}")
    if not isinstance(material, Mapping):
        raise TypeError(f"material must be a mapping, got {type(material).__name__}")
    document = {
        "kind": kind,
        "plugin_version": __version__,
        "material": _jsonable(material, "material"),
    }
    text = json.dumps(document, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    # surrogatepass: a lone surrogate in a string still encodes, to bytes no other text has.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _field(data: bytes) -> bytes:
    """``data`` prefixed by its length, so consecutive fields cannot run into each other."""
    return len(data).to_bytes(8, "big") + data


def _tree_entries(folder: Path) -> list[tuple[bytes, os.DirEntry[bytes]]]:
    """Every entry under ``folder`` as (relative ``/``-separated path, entry), unsorted.

    Symlinks are listed, never followed, and symlinked folders are not entered. A missing
    ``folder`` has no entries; a folder vanishing during the walk raises FileNotFoundError.
    """
    try:
        listing = os.scandir(os.fsencode(folder))
    except FileNotFoundError:
        return []
    found: list[tuple[bytes, os.DirEntry[bytes]]] = []
    pending: list[tuple[bytes, bytes]] = []
    prefix = b""
    while True:
        with listing:
            for entry in listing:
                relative = prefix + entry.name
                found.append((relative, entry))
                if entry.is_dir(follow_symlinks=False):
                    pending.append((entry.path, relative + b"/"))
        if not pending:
            break
        directory, prefix = pending.pop()
        listing = os.scandir(directory)
    return found


def _file_record(path: bytes) -> bytes:
    """Executable bit and content digest of the regular file at ``path``, not following a
    symlink that replaced it since it was listed."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    descriptor = os.open(path, flags)
    with open(descriptor, "rb", buffering=0) as handle:
        mode = os.fstat(handle.fileno()).st_mode
        content = hashlib.file_digest(handle, "sha256").digest()
    executable = b"\x01" if mode & stat.S_IXUSR else b"\x00"
    return executable + content


def folder_digest(folder: Path) -> str:
    """A hex sha256 over the tree under ``folder``, for keying a sandboxed run by its inputs.

    Entries are taken in sorted order of their relative ``/``-separated paths (compared as
    bytes). Each contributes its kind tag, its length-prefixed path and then: for a file, the
    owner-executable bit and the sha256 of its bytes (read in chunks); for a symlink, its
    length-prefixed target text (the link is never followed, so what it points at, inside or
    outside the folder, does not count); for a folder, nothing more (so empty folders count).
    Anything else (a FIFO, a socket, a device) counts by kind and path only. ``folder`` itself
    may be a symlink to a folder; a missing ``folder`` gives the digest of an empty tree.
    Other errors (an unreadable file, an entry that is not a folder) propagate.
    """
    digest = hashlib.sha256(_DIGEST_DOMAIN)
    for relative, entry in sorted(_tree_entries(folder), key=lambda pair: pair[0]):
        if entry.is_symlink():
            digest.update(b"l" + _field(relative) + _field(os.readlink(entry.path)))
        elif entry.is_dir(follow_symlinks=False):
            digest.update(b"d" + _field(relative))
        elif entry.is_file(follow_symlinks=False):
            digest.update(b"f" + _field(relative) + _file_record(entry.path))
        else:
            digest.update(b"o" + _field(relative))
    return digest.hexdigest()


def _check_address(kind: str, key: str) -> None:
    if not isinstance(kind, str) or not _KIND_PATTERN.fullmatch(kind):
        raise ValueError(f"cache kind must match [a-z][a-z0-9_-]*, got {kind!r}")
    if not isinstance(key, str) or not _KEY_PATTERN.fullmatch(key):
        raise ValueError(f"cache key must be 64 lowercase hex characters, got {key!r}")


class ResultCache:
    """Agent answers and judge verdicts on disk, by kind and key (see the module docstring).

    ``root`` None disables the cache like mode ``"off"``. The counters ``hits``, ``misses``,
    ``writes`` and ``write_errors`` count what reached the disk: a lookup skipped because the
    mode does not read (``off``, ``refresh``, no root) is neither a hit nor a miss.
    """

    def __init__(self, root: Path | None, mode: str = "on") -> None:
        if mode not in CACHE_MODES:
            raise ValueError(f"cache mode must be one of {', '.join(CACHE_MODES)}, got {mode!r}")
        self._root = None if root is None else Path(root)
        self._mode = mode
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.writes = 0
        self.write_errors = 0

    @property
    def root(self) -> Path | None:
        """The cache folder, or None when the cache has none."""
        return self._root

    @property
    def mode(self) -> str:
        """One of :data:`CACHE_MODES`."""
        return self._mode

    @property
    def enabled(self) -> bool:
        """Whether the cache touches the disk at all (it has a root and mode is not ``off``)."""
        return self._root is not None and self._mode != "off"

    def __repr__(self) -> str:
        return f"ResultCache(root={self._root!r}, mode={self._mode!r})"

    def path_for(self, kind: str, key: str) -> Path | None:
        """Where the entry for ``kind`` and ``key`` lives, or None without a root."""
        _check_address(kind, key)
        if self._root is None:
            return None
        return self._root / kind / key[:2] / f"{key}.json"

    def remove_stale(self) -> list[Path]:
        """Remove the temporary files of entries whose writer was killed (by any process: see
        :mod:`pytest_openkata.infra.tempfiles`) and return their paths; nothing without a root.
        """
        if self._root is None:
            return []
        return remove_stale(self._root, depth=2)  # root/<kind>/<key[:2]>/

    def _count(self, counter: str) -> None:
        with self._lock:
            setattr(self, counter, getattr(self, counter) + 1)

    def get(self, kind: str, key: str) -> dict[str, Any] | None:
        """The stored value, or None: a miss, or a mode that does not read.

        A missing, unreadable, truncated or foreign entry (not JSON, another format number,
        another key, a value that is not an object) is a miss; it never raises.
        """
        path = self.path_for(kind, key)
        if path is None or self._mode != "on":
            return None
        value = self._read(path, key)
        self._count("misses" if value is None else "hits")
        return value

    @staticmethod
    def _read(path: Path, key: str) -> dict[str, Any] | None:
        try:
            entry = json.loads(path.read_bytes())
        except (OSError, ValueError, RecursionError):
            return None
        if not isinstance(entry, dict):
            return None
        version = entry.get("format")
        if type(version) is not int or version != ENTRY_FORMAT or entry.get("key") != key:
            return None
        value = entry.get("value")
        return value if isinstance(value, dict) else None

    def put(self, kind: str, key: str, value: dict[str, Any]) -> None:
        """Store ``value`` for ``kind`` and ``key``, replacing any entry, when the mode writes.

        The write is atomic and concurrent writers of one key are safe (the last one wins).
        An OSError is logged, counted in ``write_errors`` and swallowed. A value that is not
        a dict of JSON data is a programming error and raises TypeError (or ValueError for a
        circular structure); it is read back as JSON gives it (tuples become lists).
        """
        path = self.path_for(kind, key)
        if path is None or not self.enabled:
            return
        if not isinstance(value, dict):
            raise TypeError(f"cache value must be a dict, got {type(value).__name__}")
        data = json.dumps(
            {"format": ENTRY_FORMAT, "key": key, "value": value}, sort_keys=True
        ).encode("ascii")
        try:
            self._write(path, data)
        except OSError as error:
            logger.debug("could not write cache entry %s: %s", path, error)
            self._count("write_errors")
            return
        self._count("writes")

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = new_temp_file(path.parent)
        try:
            with open(descriptor, "wb") as handle:
                handle.write(data)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
