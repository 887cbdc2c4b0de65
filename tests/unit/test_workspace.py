"""Workspace snapshots (host folders and in-memory tar streams), their diff and the judge text.

Spec references: section 6 steps 9-13, section 12 checks 10-15, section 13 item 17.
snapshot_from_tar reads the stream with tarfile's streaming mode and ``extractfile`` only: it
never extracts, so nothing reaches the host disk (not tested; see the module).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_openkata.contracts.results import FileContent, Snapshot, WorkspaceDiff
from pytest_openkata.core.workspace import (
    DEFAULT_EXCLUDE,
    diff_from_json,
    diff_snapshots,
    diff_to_json,
    exclude_nothing,
    judge_text,
    snapshot_directory,
    snapshot_from_tar,
    tool_files_of,
    workspace_archive,
    workspace_digest,
    workspace_files,
)
from tests.support.evals import write_scenario, write_skill

PNG_BYTES = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"


def snap(**files: bytes) -> Snapshot:
    return {path.replace("__", "/"): FileContent(data) for path, data in files.items()}


def chunked(data: bytes, size: int = 7) -> Iterator[bytes]:
    """A one-shot generator of ``size``-byte chunks, as docker's get_archive yields."""
    for start in range(0, len(data), size):
        yield data[start : start + size]


def make_tar(members: list[tarfile.TarInfo | tuple[str, bytes]], *, gz: bool = False) -> bytes:
    """A tar archive in memory; a (name, data) pair is a regular file."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for member in members:
            if isinstance(member, tuple):
                info = tarfile.TarInfo(member[0])
                info.size = len(member[1])
                archive.addfile(info, io.BytesIO(member[1]))
            else:
                archive.addfile(member)
    raw = buffer.getvalue()
    return gzip.compress(raw) if gz else raw


def special(name: str, kind: bytes, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info


# --- checks 10-11: host folders -------------------------------------------------------------


def test_snapshot_directory_keys_use_forward_slashes(tmp_path: Path) -> None:
    """Check 10."""
    (tmp_path / "a.txt").write_text("hello")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("world")

    snapshot = snapshot_directory(tmp_path)

    assert snapshot == {"a.txt": FileContent(b"hello"), "sub/b.txt": FileContent(b"world")}


def test_snapshot_of_an_empty_directory_is_empty(tmp_path: Path) -> None:
    """Check 11."""
    assert snapshot_directory(tmp_path) == {}


def test_snapshot_directory_follows_no_symlink(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    root = tmp_path / "root"
    root.mkdir()
    (root / "real.txt").write_text("real")
    os.symlink(outside / "secret.txt", root / "file-link.txt")
    os.symlink(outside, root / "dir-link")

    assert snapshot_directory(root) == {"real.txt": FileContent(b"real")}


def test_snapshot_directory_caps_and_excludes(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_bytes(b"x" * 50)
    (tmp_path / "skill").mkdir()
    (tmp_path / "skill" / "SKILL.md").write_text("# Skill")

    snapshot = snapshot_directory(tmp_path, max_file_bytes=10)

    assert list(snapshot) == ["big.txt"]
    assert snapshot["big.txt"].data == b"x" * 10
    assert snapshot["big.txt"].truncated
    assert snapshot["big.txt"].full_size == 50
    assert "skill/SKILL.md" in snapshot_directory(tmp_path, exclude=exclude_nothing)


# --- checks 12-13: the diff -----------------------------------------------------------------


def test_diff_sorts_changes_into_four_lists() -> None:
    """Check 12: modified entries carry the new content."""
    before = snap(**{"keep.txt": b"same", "modify.txt": b"old", "deleted.txt": b"gone"})
    after = snap(**{"keep.txt": b"same", "modify.txt": b"new", "added.txt": b"fresh"})

    diff = diff_snapshots(before, after)

    assert diff.added == [("added.txt", FileContent(b"fresh"))]
    assert diff.modified == [("modify.txt", FileContent(b"new"))]
    assert diff.deleted == ["deleted.txt"]
    assert diff.unchanged == ["keep.txt"]


def test_diff_of_a_snapshot_against_itself_has_no_changes() -> None:
    """Check 13."""
    snapshot = snap(**{"keep.txt": b"same"})

    diff = diff_snapshots(snapshot, snapshot)

    assert (diff.added, diff.modified, diff.deleted) == ([], [], [])
    assert diff.unchanged == ["keep.txt"]
    assert not diff.has_changes


def test_diff_lists_are_sorted_by_path() -> None:
    before = snap(**{"z.txt": b"1", "a.txt": b"1", "m__b.txt": b"1", "m__a.txt": b"1"})
    after = snap(**{"y.txt": b"2", "b.txt": b"2", "m__b.txt": b"2", "m__a.txt": b"2"})

    diff = diff_snapshots(before, after)

    assert [path for path, _ in diff.added] == ["b.txt", "y.txt"]
    assert [path for path, _ in diff.modified] == ["m/a.txt", "m/b.txt"]
    assert diff.deleted == ["a.txt", "z.txt"]


def test_truncated_files_differing_beyond_the_cap_are_modified() -> None:
    def tar_with(tail: bytes) -> Snapshot:
        raw = make_tar([("workspace/big.bin", b"h" * 100 + tail)])
        return snapshot_from_tar(chunked(raw, 512), max_file_bytes=10)

    same = diff_snapshots(tar_with(b"tail-1"), tar_with(b"tail-1"))
    changed = diff_snapshots(tar_with(b"tail-1"), tar_with(b"tail-2"))

    assert same.unchanged == ["big.bin"]
    assert [path for path, _ in changed.modified] == ["big.bin"]


# --- checks 14-15 and the exact layout: the judge text ---------------------------------------


def test_judge_text_names_every_section() -> None:
    """Check 14."""
    diff = WorkspaceDiff(
        added=[("new.md", FileContent(b"# New"))],
        modified=[("old.md", FileContent(b"# Changed"))],
        deleted=["removed.txt"],
    )

    text = judge_text("agent output here", diff)

    for expected in (
        "## Agent Output",
        "agent output here",
        "### Added Files",
        "new.md",
        "### Modified Files",
        "### Deleted Files",
        "removed.txt",
    ):
        assert expected in text


def test_judge_text_for_no_changes() -> None:
    """Check 15, and the text ends right after the changes header."""
    text = judge_text("agent output here", WorkspaceDiff())

    assert "## Agent Output" in text
    assert "### Added" not in text
    assert text == "## Agent Output\n\nagent output here\n\n## Workspace Changes\n\n"


def test_judge_text_layout_is_the_reference_one() -> None:
    diff = diff_snapshots(
        snap(**{"keep.txt": b"same", "m.txt": b"old", "d.txt": b"x", "e.txt": b"y"}),
        snap(**{"keep.txt": b"same", "m.txt": b"new\n", "a.txt": b"A", "sub__b.py": b""}),
    )

    text = judge_text("\x1b[32mdone\x1b[0m", diff)

    assert text == (
        "## Agent Output\n\n\x1b[32mdone\x1b[0m\n\n## Workspace Changes\n\n"
        "### Added Files\n\n"
        "**a.txt**\n```\nA\n```\n\n"
        "**sub/b.py**\n```\n\n```\n\n"
        "### Modified Files\n\n"
        "**m.txt**\n```\nnew\n\n```\n\n"
        "### Deleted Files\n\n"
        "- d.txt\n- e.txt\n\n"
    )


def test_judge_text_shows_a_binary_file_as_a_note() -> None:
    diff = WorkspaceDiff(added=[("logo.png", FileContent(PNG_BYTES))])

    text = judge_text("out", diff)

    assert text.endswith(
        "### Added Files\n\n"
        f"**logo.png**\n(binary file, {len(PNG_BYTES)} bytes, content not shown)\n\n"
    )
    assert "```" not in text


def test_judge_text_cuts_a_long_file_with_a_note() -> None:
    diff = WorkspaceDiff(modified=[("long.txt", FileContent(("é" * 30 + "tail").encode()))])

    text = judge_text("out", diff, max_file_chars=10)

    assert text.endswith(
        "### Modified Files\n\n"
        "**long.txt**\n```\néééééééééé\n```\n\n"
        "(truncated: showing 10 of 34 characters)\n\n"
    )


def test_judge_text_notes_a_file_cut_by_the_snapshot() -> None:
    content = FileContent(b"abcdef", truncated=True, full_size=5000, sha256="0" * 64)

    text = judge_text("out", WorkspaceDiff(added=[("log.txt", content)]))

    assert text.endswith(
        "**log.txt**\n```\nabcdef\n```\n\n(truncated: showing 6 of 5000 characters)\n\n"
    )


def test_judge_text_stops_showing_files_at_the_total_limit() -> None:
    diff = WorkspaceDiff(
        added=[("a.txt", FileContent(b"a" * 6)), ("b.txt", FileContent(b"b" * 6))],
        modified=[("c.txt", FileContent(b"c"))],
        deleted=["gone.txt"],
    )
    note = "(not shown: the judge text size limit of 10 characters was reached)\n\n"

    text = judge_text("out", diff, max_total_chars=10)

    assert text.endswith(
        "### Added Files\n\n"
        "**a.txt**\n```\naaaaaa\n```\n\n"
        f"**b.txt**\n{note}"
        "### Modified Files\n\n"
        f"**c.txt**\n{note}"
        "### Deleted Files\n\n- gone.txt\n\n"
    )


def test_judge_text_shows_content_that_exactly_fills_the_limit() -> None:
    diff = WorkspaceDiff(added=[("a.txt", FileContent(b"a" * 6)), ("b.txt", FileContent(b"b" * 4))])

    text = judge_text("out", diff, max_total_chars=10)

    assert "not shown" not in text
    assert "**b.txt**\n```\nbbbb\n```\n\n" in text


def test_the_total_limit_counts_only_the_shown_part_of_a_cut_file() -> None:
    diff = WorkspaceDiff(added=[("a.txt", FileContent(b"a" * 50)), ("b.txt", FileContent(b"b"))])

    text = judge_text("out", diff, max_file_chars=5, max_total_chars=6)

    assert "(truncated: showing 5 of 50 characters)" in text
    assert "**b.txt**\n```\nb\n```\n\n" in text


# --- FileContent -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "binary"),
    [
        (b"plain text\n", False),
        ("héllo wörld".encode(), False),
        (b"", False),
        (PNG_BYTES, True),
        (b"text\x00more", True),
        (b"latin-1 caf\xe9", True),
        (b"a" * 8192 + b"\x00", False),
    ],
)
def test_is_binary(data: bytes, binary: bool) -> None:
    assert FileContent(data).is_binary is binary


def test_sizes_default_to_the_bytes_held() -> None:
    content = FileContent(b"abc")

    assert (content.size, content.full_size, content.truncated) == (3, 3, False)
    with pytest.raises(ValueError, match="full_size"):
        FileContent(b"abc", full_size=2)


def test_a_character_cut_by_truncation_is_neither_binary_nor_garbled() -> None:
    raw = make_tar([("workspace/notes.md", "aé".encode() * 10)])

    content = snapshot_from_tar(chunked(raw), max_file_bytes=4)["notes.md"]

    assert content.data == b"a\xc3\xa9a"
    assert not content.is_binary
    assert content.text == "aéa"

    cut_mid_char = FileContent(b"a\xc3", truncated=True, full_size=30)
    assert not cut_mid_char.is_binary
    assert cut_mid_char.text == "a"


# --- snapshots from tar streams --------------------------------------------------------------


def test_snapshot_from_tar_keeps_regular_files_only() -> None:
    big = b"0123456789" * 300
    raw = make_tar(
        [
            special("workspace", tarfile.DIRTYPE),
            ("workspace/a.txt", b"hello"),
            special("workspace/sub", tarfile.DIRTYPE),
            special("workspace/sub/deep", tarfile.DIRTYPE),
            ("workspace/sub/deep/nested.txt", b"nested"),
            special("workspace/passwd", tarfile.SYMTYPE, "/etc/passwd"),
            special("workspace/hard.txt", tarfile.LNKTYPE, "workspace/a.txt"),
            special("workspace/fifo", tarfile.FIFOTYPE),
            special("workspace/tty", tarfile.CHRTYPE),
            ("../evil", b"evil"),
            ("workspace/../../evil2", b"evil"),
            ("/abs.txt", b"evil"),
            ("workspace/big.txt", big),
            ("workspace/image.png", PNG_BYTES),
        ]
    )

    snapshot = snapshot_from_tar(chunked(raw, 7), max_file_bytes=1000)

    assert sorted(snapshot) == ["a.txt", "big.txt", "image.png", "sub/deep/nested.txt"]
    assert snapshot["a.txt"] == FileContent(b"hello")
    assert snapshot["sub/deep/nested.txt"] == FileContent(b"nested")
    assert snapshot["image.png"].is_binary
    assert snapshot["big.txt"].data == big[:1000]
    assert snapshot["big.txt"].truncated
    assert snapshot["big.txt"].full_size == 3000
    assert not any(b"root:" in content.data for content in snapshot.values())


def test_snapshot_from_tar_reads_a_compressed_stream() -> None:
    raw = make_tar([("workspace/a.txt", b"hello")], gz=True)

    assert snapshot_from_tar(chunked(raw, 3)) == {"a.txt": FileContent(b"hello")}


def test_snapshot_from_tar_without_strip_top_keeps_the_folder() -> None:
    raw = make_tar([("workspace/a.txt", b"hello"), ("top.txt", b"top")])

    assert sorted(snapshot_from_tar(chunked(raw), strip_top=False)) == [
        "top.txt",
        "workspace/a.txt",
    ]
    assert sorted(snapshot_from_tar(chunked(raw))) == ["a.txt"]


def test_snapshot_from_tar_keeps_the_last_copy_of_a_path() -> None:
    raw = make_tar([("workspace/a.txt", b"first"), ("workspace/./a.txt", b"second")])

    assert snapshot_from_tar(chunked(raw)) == {"a.txt": FileContent(b"second")}


def test_snapshot_from_tar_rejects_a_broken_stream() -> None:
    with pytest.raises(tarfile.TarError):
        snapshot_from_tar(iter([]))
    with pytest.raises(tarfile.TarError):
        snapshot_from_tar(chunked(make_tar([("workspace/a.txt", b"x" * 2000)])[:700]))


# --- tool files ------------------------------------------------------------------------------


KIRO_FILES = ((".kiro/agents/eval-agent.json", b'{"name":"eval-agent"}'),)


@pytest.mark.parametrize(
    ("path", "excluded"),
    [
        ("skill/SKILL.md", True),
        ("skill/references/guide.md", True),
        (".kiro/agents/eval-agent.json", False),  # an agent's own files: tool_files_of
        ("skillful.md", False),
        ("skills/x.md", False),
        ("src/skill/x.md", False),
        (".kirorc", False),
        ("task.md", False),
    ],
)
def test_default_exclude(path: str, excluded: bool) -> None:
    assert DEFAULT_EXCLUDE(path) is excluded


@pytest.mark.parametrize(
    ("path", "excluded"),
    [
        ("skill/SKILL.md", True),
        ("skill/references/guide.md", True),
        (".kiro/agents/eval-agent.json", True),
        (".kiro/other.json", True),  # the whole top folder of the agent's files
        ("skillful.md", False),
        ("skills/x.md", False),
        ("src/skill/x.md", False),
        (".kirorc", False),
        ("task.md", False),
    ],
)
def test_tool_files_of_an_agent_with_its_own_files(path: str, excluded: bool) -> None:
    assert tool_files_of(KIRO_FILES)(path) is excluded


def test_tool_files_of_an_agent_without_files_are_the_default_ones() -> None:
    exclude = tool_files_of(())
    for path in ("skill/SKILL.md", ".kiro/agents/eval-agent.json", "task.md", "a/skill/b"):
        assert exclude(path) is DEFAULT_EXCLUDE(path)
    assert tool_files_of([("AGENTS.md", b"rules")])("AGENTS.md")  # a file at the top, too


def test_snapshot_from_tar_leaves_out_tool_files_by_default() -> None:
    raw = make_tar(
        [
            ("workspace/skill/SKILL.md", b"# Skill"),
            ("workspace/.kiro/agents/eval-agent.json", b"{}"),
            ("workspace/skillful.md", b"mine"),
        ]
    )

    assert sorted(snapshot_from_tar(chunked(raw))) == [
        ".kiro/agents/eval-agent.json",
        "skillful.md",
    ]
    assert list(snapshot_from_tar(chunked(raw), exclude=tool_files_of(KIRO_FILES))) == [
        "skillful.md"
    ]
    assert sorted(snapshot_from_tar(chunked(raw), exclude=exclude_nothing)) == [
        ".kiro/agents/eval-agent.json",
        "skill/SKILL.md",
        "skillful.md",
    ]


# --- the workspace and its archive -----------------------------------------------------------


def _skill_with_scenario(root: Path) -> tuple[Path, Path]:
    skill = write_skill(root, "s", {})
    (skill / "references").mkdir()
    (skill / "references" / "guide.md").write_text("a guide\n")
    (skill / "references" / "ACKNOWLEDGMENTS.md").write_text("thanks\n")
    scenario = write_scenario(
        skill, "scenario-0", {"x": 1}, inputs={"src/app.py": "print('hi')\n", "old.txt": "old\n"}
    )
    return skill, scenario


def test_workspace_files_hold_the_skill_the_task_and_the_inputs_contents(tmp_path: Path) -> None:
    skill, scenario = _skill_with_scenario(tmp_path)
    secret = tmp_path / "host-secret.txt"
    secret.write_text("host secret value\n")
    (scenario / "inputs" / "leak.txt").symlink_to(secret)
    (skill / "references" / "outside.md").symlink_to(secret)

    files = dict(workspace_files(skill, scenario))

    assert sorted(files) == [
        "old.txt",
        "skill/SKILL.md",
        "skill/references/guide.md",  # ACKNOWLEDGMENTS.md is excluded, as from the prompt
        "src/app.py",
        "task.md",
    ]
    assert files["task.md"] == b"Do the task of scenario-0.\n"
    assert b"host secret value\n" not in files.values()  # no symlink out of the skill is read


def test_workspace_archive_puts_the_workspace_and_the_agent_files_under_the_prefix(
    tmp_path: Path,
) -> None:
    skill, scenario = _skill_with_scenario(tmp_path)

    raw = workspace_archive(
        skill, scenario, KIRO_FILES, prefix="workspace/", extra=[("openkata/prompt.md", b"hi")]
    )

    with tarfile.open(fileobj=io.BytesIO(raw)) as archive:
        members = {m.name: m for m in archive.getmembers()}
        assert sorted(members) == [
            "openkata/prompt.md",  # the extra files keep their names: outside the workspace
            "workspace/.kiro/agents/eval-agent.json",
            "workspace/old.txt",
            "workspace/skill/SKILL.md",
            "workspace/skill/references/guide.md",
            "workspace/src/app.py",
            "workspace/task.md",
        ]
        assert all(m.isreg() and m.mode == 0o644 for m in members.values())
        prompt = archive.extractfile(members["openkata/prompt.md"])
        assert prompt is not None
        assert prompt.read() == b"hi"
        for name, data in (*workspace_files(skill, scenario), *KIRO_FILES):
            member = archive.extractfile(members[f"workspace/{name}"])
            assert member is not None
            assert member.read() == data


def test_workspace_archive_without_prefix_or_agent_files(tmp_path: Path) -> None:
    skill, scenario = _skill_with_scenario(tmp_path)

    raw = workspace_archive(skill, scenario)

    assert snapshot_from_tar(chunked(raw), strip_top=False, exclude=exclude_nothing) == {
        name: FileContent(data) for name, data in workspace_files(skill, scenario)
    }


def test_workspace_digest_follows_names_and_contents(tmp_path: Path) -> None:
    skill, scenario = _skill_with_scenario(tmp_path)
    first = workspace_digest(skill, scenario)

    assert workspace_digest(skill, scenario) == first
    (scenario / "inputs" / "old.txt").write_text("changed\n")
    changed = workspace_digest(skill, scenario)
    assert changed != first
    (scenario / "inputs" / "old.txt").rename(scenario / "inputs" / "new.txt")
    assert workspace_digest(skill, scenario) not in (first, changed)  # the name counts too


def test_a_diff_survives_its_json_form() -> None:
    diff = WorkspaceDiff(
        added=[("a.txt", FileContent(b"new")), ("b.bin", FileContent(PNG_BYTES))],
        modified=[("c.txt", FileContent(b"x" * 4, truncated=True, full_size=9, sha256="ab"))],
        deleted=["d.txt"],
        unchanged=["e.txt"],
    )

    assert diff_from_json(json.loads(json.dumps(diff_to_json(diff)))) == diff
