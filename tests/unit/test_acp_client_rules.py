"""What the ACP client lets an agent touch: files inside the workspace only, and an edit
approved only when every file it names is there (one that names none is not)."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import schema

from pytest_openkata.providers.agents.acp_client import _an_edit_in, _inside


def _edit(*paths: str, kind: str = "edit") -> schema.ToolCallUpdate:
    return schema.ToolCallUpdate(
        tool_call_id="c1",
        kind=kind,
        locations=[schema.ToolCallLocation(path=path) for path in paths] or None,
    )


def test_an_edit_is_approved_only_when_it_names_files_all_in_the_workspace(
    tmp_path: Path,
) -> None:
    inside = str(tmp_path / "notes.md")

    assert _an_edit_in(_edit(inside), tmp_path)
    assert not _an_edit_in(_edit(), tmp_path)  # names no file: cannot be told to stay
    assert not _an_edit_in(_edit(inside, "/etc/passwd"), tmp_path)
    assert not _an_edit_in(_edit(inside, kind="execute"), tmp_path)  # not an edit at all


@pytest.mark.parametrize("given", ["/etc/passwd", "../outside.txt", "link/secret.txt"])
def test_a_path_leading_out_of_the_workspace_is_refused(tmp_path: Path, given: str) -> None:
    workspace = tmp_path / "w"
    workspace.mkdir()
    (tmp_path / "outside.txt").write_text("x")
    (workspace / "link").symlink_to(tmp_path)

    assert _inside(given if given.startswith("/") else str(workspace / given), workspace) is None
    assert _inside(str(workspace / "notes.md"), workspace) == workspace / "notes.md"
