"""The workspace of a sandboxed run: its files and their tar, snapshots, their diff and the text
the judge reads (spec section 6 steps 6-13).

:func:`workspace_files` lists what goes into the workspace, :func:`workspace_archive` packs it
(with the agent's own files) as the tar put into a sandbox, and :func:`workspace_digest` hashes
it for the cache key of a sandboxed run.

A snapshot maps each regular file of the workspace, by its ``/``-separated relative path, to
its content. A sandboxed run takes one before and one after the agent run from the tar stream
the sandbox environment's ``get_archive`` yields; the stream is read in memory and nothing is
extracted to the host disk, so no member (symlink, hardlink, ``..`` path) can write or read
outside it.

Compared with the reference (spec section 13 item 17):

- a file larger than ``max_file_bytes`` keeps only its first bytes, with its full size and a
  SHA-256 of its full content, so that the diff still sees changes beyond the kept bytes;
- snapshots leave out the tool files the agent did not produce (``skill/`` by default, and
  the agent's own files with :func:`tool_files_of`);
- the judge text shows binary files as a note, and caps each file and the total content.

With no limit reached and no binary file, ``judge_text`` gives the reference's text exactly.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import io
import os
import tarfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from pytest_openkata.contracts.results import (
    FileChange,
    FileContent,
    Snapshot,
    WorkspaceDiff,
)
from pytest_openkata.core.files import SkillReader, files_under, skill_files
from pytest_openkata.core.scenario_setup import DirectoryFixture
from pytest_openkata.core.tile import is_tile_dir, load_tile, tile_files

DEFAULT_MAX_FILE_BYTES = 1 << 20
TOOL_FOLDERS = ("skill",)  # what every workspace holds that the agent did not produce
_READ_CHUNK = 1 << 16


def default_exclude(path: str) -> bool:
    """True for the tool files every workspace holds: ``skill/**``. The files an agent puts
    into its workspace itself are left out with :func:`tool_files_of`."""
    top = path.split("/", 1)[0]
    return top in TOOL_FOLDERS


def tool_files_of(agent_files: Iterable[tuple[str, bytes]]) -> Callable[[str], bool]:
    """True for ``skill/**`` and for the top folders (or files) of the files the agent put
    into its workspace itself (its configuration folder): the agent did not produce them."""
    tops = {*TOOL_FOLDERS, *(name.split("/", 1)[0] for name, _ in agent_files)}
    return lambda path: path.split("/", 1)[0] in tops


def exclude_nothing(path: str) -> bool:
    """Keep every file, as the reference does."""
    return False


DEFAULT_EXCLUDE: Callable[[str], bool] = default_exclude


# --- reading file content with a cap ---------------------------------------------------------


def _read_capped(stream: IO[bytes], max_file_bytes: int) -> FileContent:
    """Read the first ``max_file_bytes`` bytes; when more follow, read on only to hash them."""
    head = stream.read(max_file_bytes)
    rest = stream.read(_READ_CHUNK)
    if not rest:
        return FileContent(head)
    digest = hashlib.sha256(head)
    size = len(head)
    while rest:
        digest.update(rest)
        size += len(rest)
        rest = stream.read(_READ_CHUNK)
    return FileContent(head, truncated=True, full_size=size, sha256=digest.hexdigest())


# --- snapshots from a tar stream -------------------------------------------------------------


class _ChunkReader(io.RawIOBase):
    """A read-only file over an iterable of byte chunks, pulled lazily as reads need them.

    ``read(n)`` returns ``n`` bytes unless the chunks run out, so that tarfile's compression
    sniffing sees a full first block even when the chunks are tiny.
    """

    def __init__(self, chunks: Iterable[bytes]) -> None:
        super().__init__()
        self._chunks: Iterator[bytes] = iter(chunks)
        self._current = b""
        self._pos = 0

    def readable(self) -> bool:
        return True

    def _next_chunk(self) -> bool:
        for chunk in self._chunks:
            if chunk:
                self._current, self._pos = bytes(chunk), 0
                return True
        return False

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            return self.readall()
        parts: list[bytes] = []
        while size > 0 and (self._pos < len(self._current) or self._next_chunk()):
            piece = self._current[self._pos : self._pos + size]
            self._pos += len(piece)
            size -= len(piece)
            parts.append(piece)
        return b"".join(parts)

    def readall(self) -> bytes:
        parts = [self._current[self._pos :]]
        self._current, self._pos = b"", 0
        parts.extend(bytes(chunk) for chunk in self._chunks)
        return b"".join(parts)

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _member_path(name: str, *, strip_top: bool) -> str | None:
    """The member's relative path, or None when it is unsafe (absolute, ``..``) or empty."""
    if name.startswith("/"):
        return None
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if ".." in parts:
        return None
    if strip_top:
        parts = parts[1:]
    return "/".join(parts) or None


def snapshot_from_tar(
    chunks: Iterable[bytes],
    *,
    strip_top: bool = True,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    exclude: Callable[[str], bool] = DEFAULT_EXCLUDE,
) -> Snapshot:
    """The regular files of a tar stream, read in memory (nothing is extracted).

    Directories, symlinks, hardlinks and devices are skipped, and no link is followed. With
    ``strip_top``, the first path component (the folder's own name, ``workspace/``) is removed
    and a file at the top level is skipped. Members with an absolute or ``..`` path are
    skipped. A path that occurs twice keeps its last content, as extraction would. A corrupt or
    empty stream raises ``tarfile.TarError``.
    """
    snapshot: Snapshot = {}
    with tarfile.open(fileobj=_ChunkReader(chunks), mode="r|*") as archive:
        for member in archive:
            if not member.isreg():
                continue
            path = _member_path(member.name, strip_top=strip_top)
            if path is None or exclude(path):
                continue
            stream = archive.extractfile(member)
            if stream is not None:
                snapshot[path] = _read_capped(stream, max_file_bytes)
    return snapshot


# --- snapshots from a host folder ------------------------------------------------------------


def _walk_files(folder: Path, prefix: str) -> Iterator[tuple[str, Path]]:
    """Regular files under ``folder``, recursively, with no symlink followed."""
    with os.scandir(folder) as entries:
        for entry in entries:
            rel = prefix + entry.name
            if entry.is_dir(follow_symlinks=False):
                yield from _walk_files(Path(entry.path), rel + "/")
            elif entry.is_file(follow_symlinks=False):
                yield rel, Path(entry.path)


def snapshot_directory(
    root: Path,
    *,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    exclude: Callable[[str], bool] = DEFAULT_EXCLUDE,
) -> Snapshot:
    """The regular files under a host folder, with the same options as ``snapshot_from_tar``.

    Symlinks (to files or folders) are neither listed nor followed. A file that cannot be
    opened is left out, as the reference ignores read errors.
    """
    snapshot: Snapshot = {}
    for rel, path in _walk_files(root, ""):
        if exclude(rel):
            continue
        try:
            with path.open("rb") as stream:
                snapshot[rel] = _read_capped(stream, max_file_bytes)
        except OSError:
            continue
    return snapshot


# --- the diff --------------------------------------------------------------------------------


def diff_snapshots(before: Snapshot, after: Snapshot) -> WorkspaceDiff:
    """Compare two snapshots by content (bytes, and full size and digest when truncated)."""
    added = [(path, after[path]) for path in sorted(after.keys() - before.keys())]
    deleted = sorted(before.keys() - after.keys())
    common = sorted(before.keys() & after.keys())
    modified = [(path, after[path]) for path in common if after[path] != before[path]]
    unchanged = [path for path in common if after[path] == before[path]]
    return WorkspaceDiff(added=added, modified=modified, deleted=deleted, unchanged=unchanged)


# --- the judge text --------------------------------------------------------------------------


@dataclass
class _Budget:
    """The file content characters shown so far in the judge text, against its limit."""

    limit: int
    used: int = 0
    exhausted: bool = False

    def take(self, count: int) -> bool:
        """Count ``count`` more characters, or mark the budget exhausted when they do not fit."""
        if self.exhausted or self.used + count > self.limit:
            self.exhausted = True
            return False
        self.used += count
        return True


def _file_block(path: str, content: FileContent, max_file_chars: int, budget: _Budget) -> str:
    header = f"**{path}**\n"
    if budget.exhausted:
        return header + _limit_note(budget)
    if content.is_binary:
        return header + f"(binary file, {content.full_size} bytes, content not shown)\n\n"
    text = content.text
    shown = text[:max_file_chars]
    if not budget.take(len(shown)):
        return header + _limit_note(budget)
    block = header + f"```\n{shown}\n```\n\n"
    if content.truncated or len(shown) < len(text):
        total = content.full_size if content.truncated else len(text)
        block += f"(truncated: showing {len(shown)} of {total} characters)\n\n"
    return block


def _limit_note(budget: _Budget) -> str:
    return f"(not shown: the judge text size limit of {budget.limit} characters was reached)\n\n"


def _section(
    title: str,
    files: list[tuple[str, FileContent]],
    max_file_chars: int,
    budget: _Budget,
) -> str:
    if not files:
        return ""
    blocks = [_file_block(path, content, max_file_chars, budget) for path, content in files]
    return f"### {title}\n\n" + "".join(blocks)


def _deleted_section(paths: list[str]) -> str:
    if not paths:
        return ""
    return "### Deleted Files\n\n" + "".join(f"- {path}\n" for path in paths) + "\n"


def judge_text(
    output: str,
    diff: WorkspaceDiff,
    *,
    max_file_chars: int = 20_000,
    max_total_chars: int = 200_000,
) -> str:
    """The agent's output and the workspace changes, as the judge reads them (step 13).

    Unchanged files are not listed, as in the reference. A binary file is shown as a note; a
    text file is cut after ``max_file_chars`` characters (or was cut by the snapshot) with a
    note after its block; once the shown content would pass ``max_total_chars``, that file and
    every later one are listed with a note instead. The agent output is never cut.
    """
    budget = _Budget(limit=max_total_chars)
    return (
        "## Agent Output\n\n"
        + output
        + "\n\n## Workspace Changes\n\n"
        + _section("Added Files", diff.added, max_file_chars, budget)
        + _section("Modified Files", diff.modified, max_file_chars, budget)
        + _deleted_section(diff.deleted)
    )


# --- the diff as authors read it ---------------------------------------------------------------


def _lines(data: bytes) -> list[str]:
    """The file's lines, each with its ``\n``; split at ``\n`` only, as diff and git do (a
    form feed or U+2028 is part of its line)."""
    parts = data.decode("utf-8", errors="replace").split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    return [*lines, parts[-1]] if parts[-1] else lines


def _diff_line(line: str) -> str:
    """A line of the diff as text: a last line without its newline is marked, as diff does."""
    return line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"


def _unified(path: str, before: bytes | None, after: FileContent | None) -> str:
    """A unified diff of one file's text, or a note where its text cannot be shown."""
    if after is not None and after.is_binary:
        return f"(binary file, {after.full_size} bytes, content not shown)\n"
    if before is not None and FileContent(before).is_binary:
        return f"(binary file, {len(before)} bytes, content not shown)\n"
    old = _lines(before) if before is not None else []
    new = _lines(after.data) if after is not None else []
    diff = difflib.unified_diff(
        old,
        new,
        fromfile="/dev/null" if before is None else f"a/{path}",
        tofile="/dev/null" if after is None else f"b/{path}",
        lineterm="\n",
    )
    text = "".join(_diff_line(line) for line in diff)
    if after is not None and after.truncated:
        text += f"(the snapshot kept the first {len(after.data)} of {after.full_size} bytes)\n"
    return text


def file_changes(before: Mapping[str, bytes], diff: WorkspaceDiff) -> tuple[FileChange, ...]:
    """Each added, modified and deleted file of ``diff`` as a unified diff against the
    workspace ``before`` the agent ran (its task and inputs), in path order."""
    changes = [
        *(FileChange(p, "added", _unified(p, None, c)) for p, c in diff.added),
        *(FileChange(p, "modified", _unified(p, before.get(p), c)) for p, c in diff.modified),
        *(FileChange(p, "deleted", _unified(p, before.get(p), None)) for p in diff.deleted),
    ]
    return tuple(sorted(changes, key=lambda change: change.path))


def workspace_files(
    skill_dir: Path, scenario_dir: Path, *, skill: Path | bool | None = True
) -> list[tuple[str, bytes]]:
    """The workspace's files by name: ``skill/…``, ``task.md`` and the contents of ``inputs/``.
    Symlinks leading out of the skill are never followed.

    ``skill`` says where ``skill/`` comes from: the skill folder itself (True), another copy
    of the skill (a folder: the skill at an earlier version), or nowhere (False or None: a
    baseline arm without the skill)."""
    reader = SkillReader(skill_dir)
    found = []
    if skill is not False and skill is not None:
        source = skill_dir if skill is True else skill
        source_reader = reader if skill is True else SkillReader(source)
        if is_tile_dir(skill_dir):  # the scenario's own folder: a copy at a ref has no evals/
            parts = [(f"skill/{rel}", path) for rel, path in tile_files(load_tile(source))]
        else:
            parts = [("skill/SKILL.md", source / "SKILL.md")]
            parts += [(f"skill/{src}/{rel}", path) for src, rel, path in skill_files(source)]
        for name, path in parts:
            data = source_reader.read(path)
            if data is not None:
                found.append((name, data))
    sources = [("task.md", scenario_dir / "task.md"), *files_under(scenario_dir / "inputs")]
    for name, path in sources:
        data = reader.read(path)
        if data is not None:
            found.append((name, data))
    return found


def fixture_files(
    skill_dir: Path, fixtures: Iterable[DirectoryFixture]
) -> list[tuple[str, bytes, bool]]:
    """The files of scenario.json's directory fixtures as the workspace gets them: by name at
    each fixture's install path, their bytes, and whether they are executable (a fixture's
    scripts stay runnable). Symlinks leading out of the skill are never followed."""
    reader = SkillReader(skill_dir)
    found = []
    for fixture in fixtures:
        prefix = "" if fixture.install_path == "." else f"{fixture.install_path}/"
        for rel, path in files_under(fixture.source):
            data = reader.read(path)
            if data is not None:
                executable = bool(path.stat().st_mode & 0o111)
                found.append((prefix + rel, data, executable))
    return found


def fixtures_digest(skill_dir: Path, fixtures: Iterable[DirectoryFixture]) -> str:
    """A sha256 of the fixtures' names, contents and modes (part of a sandboxed run's cache
    key when the scenario has fixtures)."""
    digest = hashlib.sha256()
    for name, data, executable in fixture_files(skill_dir, fixtures):
        encoded = name.encode()
        digest.update(len(encoded).to_bytes(8, "big") + encoded + bytes([executable]))
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def _add_file(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = int(time.time())
    tar.addfile(info, io.BytesIO(data))


def workspace_archive(
    skill_dir: Path,
    scenario_dir: Path,
    agent_files: Iterable[tuple[str, bytes]] = (),
    *,
    prefix: str = "",
    extra: Iterable[tuple[str, bytes]] = (),
    skill: Path | bool | None = True,
) -> bytes:
    """The workspace (:func:`workspace_files`, ``skill`` as there) and the agent's own files
    as a tar, each name under ``prefix``, followed by the ``extra`` files as named."""
    return files_archive(
        [
            *(
                (prefix + name, data)
                for name, data in workspace_files(skill_dir, scenario_dir, skill=skill)
            ),
            *((prefix + name, data) for name, data in agent_files),
            *extra,
        ]
    )


def files_archive(files: Iterable[tuple[str, bytes]], *, mode: int = 0o644) -> bytes:
    """A tar of the files, by name, each with ``mode``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in files:
            _add_file(tar, name, data, mode)
    return buffer.getvalue()


def workspace_digest(
    skill_dir: Path, scenario_dir: Path, *, skill: Path | bool | None = True
) -> str:
    """A sha256 of the workspace's names and contents (the cache key of a sandboxed run)."""
    digest = hashlib.sha256()
    for name, data in workspace_files(skill_dir, scenario_dir, skill=skill):
        encoded = name.encode()
        digest.update(len(encoded).to_bytes(8, "big") + encoded)
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


# --- the diff as JSON data (for the result cache) ----------------------------------------------


def _content_to_json(content: FileContent) -> dict[str, Any]:
    data: dict[str, Any] = {"data": base64.b64encode(content.data).decode("ascii")}
    if content.truncated:
        data.update(truncated=True, full_size=content.full_size, sha256=content.sha256)
    return data


def _content_from_json(data: Mapping[str, Any]) -> FileContent:
    return FileContent(
        base64.b64decode(data["data"]),
        truncated=bool(data.get("truncated", False)),
        full_size=int(data.get("full_size", -1)),
        sha256=data.get("sha256"),
    )


def diff_to_json(diff: WorkspaceDiff) -> dict[str, Any]:
    """The diff as JSON data; :func:`diff_from_json` gives it back equal."""
    return {
        "added": [[path, _content_to_json(content)] for path, content in diff.added],
        "modified": [[path, _content_to_json(content)] for path, content in diff.modified],
        "deleted": list(diff.deleted),
        "unchanged": list(diff.unchanged),
    }


def diff_from_json(data: Mapping[str, Any]) -> WorkspaceDiff:
    """A diff from :func:`diff_to_json`'s data; raises ValueError, KeyError or TypeError for
    data of another shape."""
    return WorkspaceDiff(
        added=[(str(path), _content_from_json(content)) for path, content in data["added"]],
        modified=[(str(path), _content_from_json(content)) for path, content in data["modified"]],
        deleted=[str(path) for path in data["deleted"]],
        unchanged=[str(path) for path in data["unchanged"]],
    )
