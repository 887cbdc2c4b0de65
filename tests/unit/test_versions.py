"""The skill's version from every manifest, in the documented order: a skill's CHANGELOG,
then its Tessl plugin's, then tile.json beside it; a tile's tile.json first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_openkata.core.lint.skill import changelog_rule
from pytest_openkata.core.versions import read_skill_version

RELEASED = "# Changelog\n\n## [Unreleased]\n\n## [1.2.3] - 2026-06-01\n"


def _skill(root: Path, *, changelog: str | None = None, **manifests: dict) -> Path:
    """A skill folder (SKILL.md beside evals/) with the given files; ``manifests`` maps
    ``tile`` and ``plugin`` to their JSON."""
    (root / "evals").mkdir(parents=True)
    (root / "SKILL.md").write_text("---\nname: s\ndescription: d\n---\n")
    if changelog is not None:
        (root / "CHANGELOG.md").write_text(changelog)
    if "tile" in manifests:
        (root / "tile.json").write_text(json.dumps(manifests["tile"]))
    if "plugin" in manifests:
        (root / ".tessl-plugin").mkdir()
        (root / ".tessl-plugin" / "plugin.json").write_text(json.dumps(manifests["plugin"]))
    return root


@pytest.mark.parametrize(
    ("changelog", "manifests", "version"),
    [
        (RELEASED, {"plugin": {"version": "0.2.0"}, "tile": {"version": "0.1.0"}}, "1.2.3"),
        ("# Changelog\n\n## [Unreleased]\n", {"plugin": {"version": "0.2.0"}}, "0.2.0"),
        (None, {"plugin": {"version": "0.2.0"}, "tile": {"version": "0.1.0"}}, "0.2.0"),
        (None, {"plugin": {"name": "o/s"}, "tile": {"version": "0.1.0"}}, "0.1.0"),
        (None, {"plugin": {"version": 2}, "tile": {"version": "  "}}, ""),
        (None, {}, ""),
    ],
    ids=[
        "the changelog first",
        "the plugin where the changelog has no release",
        "the plugin before tile.json",
        "tile.json where the plugin has no version",
        "no version a string",
        "nothing",
    ],
)
def test_a_skills_version_comes_from_the_first_manifest_that_gives_one(
    tmp_path: Path, changelog: str | None, manifests: dict, version: str
) -> None:
    skill = _skill(tmp_path / "s", changelog=changelog, **manifests)

    assert read_skill_version(skill) == version


def test_a_plugin_gives_its_version_to_the_skills_in_its_skills_folder(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin"
    (plugin / ".tessl-plugin").mkdir(parents=True)
    (plugin / ".tessl-plugin" / "plugin.json").write_text(
        json.dumps({"name": "o/p", "version": "3.1.0", "skills": "./skills"})
    )
    inside = _skill(plugin / "skills" / "inside")
    outside = _skill(plugin / "elsewhere" / "outside")

    assert read_skill_version(inside) == "3.1.0"
    assert read_skill_version(outside) == ""


def test_a_broken_manifest_gives_no_version_and_the_next_one_is_read(tmp_path: Path) -> None:
    skill = _skill(tmp_path / "s", tile={"version": "0.1.0"})
    (skill / ".tessl-plugin").mkdir()
    (skill / ".tessl-plugin" / "plugin.json").write_text("{not json")

    assert read_skill_version(skill) == "0.1.0"


def test_a_tiles_own_version_comes_first(tmp_path: Path) -> None:
    tile = tmp_path / "t"
    (tile / "skills" / "a").mkdir(parents=True)
    (tile / "skills" / "a" / "SKILL.md").write_text("# a\n")
    (tile / "tile.json").write_text(
        json.dumps(
            {"name": "o/t", "version": "4.0.0", "skills": {"a": {"path": "skills/a/SKILL.md"}}}
        )
    )
    (tile / "CHANGELOG.md").write_text(RELEASED)

    assert read_skill_version(tile) == "4.0.0"


def test_lint_asks_for_a_changelog_only_where_no_manifest_gives_a_version(
    tmp_path: Path,
) -> None:
    versioned = _skill(tmp_path / "versioned", plugin={"version": "0.2.0"})
    bare = _skill(tmp_path / "bare")

    assert changelog_rule(versioned) == []
    [finding] = changelog_rule(bare)
    assert finding.rule == "changelog"
    assert ".tessl-plugin/plugin.json" in finding.message


@pytest.mark.parametrize(
    ("front", "changelog", "version"),
    [
        ("metadata:\n  version: 2.0.1 # x-release-please-version\n", None, "2.0.1"),
        ("version: 4\n", None, "4"),
        ("metadata:\n  version: 2.0.1\n", "## [3.0.0] - 2026-01-01\n", "3.0.0"),
        ("metadata:\n  category: workflow\n", None, ""),
    ],
)
def test_a_version_in_skill_md_front_matter_comes_after_every_manifest(
    tmp_path: Path, front: str, changelog: str | None, version: str
) -> None:
    skill = tmp_path / "to-issues"
    skill.mkdir()
    (skill / "SKILL.md").write_text(f"---\nname: to-issues\ndescription: d\n{front}---\n\n# x\n")
    if changelog is not None:
        (skill / "CHANGELOG.md").write_text(f"# Changelog\n\n{changelog}")

    assert read_skill_version(skill) == version
    assert (changelog_rule(skill) == []) is bool(version)


def test_a_claude_code_plugin_gives_its_version_after_a_tessl_one(tmp_path: Path) -> None:
    # A repository that is a Claude Code plugin holding its skill in skills/ (no CHANGELOG in
    # the skill): the plugin's version is the skill's, as a Tessl plugin's would be.
    plugin = tmp_path / "plugin"
    (plugin / ".claude-plugin").mkdir(parents=True)
    (plugin / ".claude-plugin" / "plugin.json").write_text(
        json.dumps({"name": "design-team", "version": "5.1.1"})
    )
    design = _skill(plugin / "skills" / "design")
    listed = _skill(plugin / "extra" / "listed")
    outside = _skill(plugin / "elsewhere" / "outside")
    (plugin / ".claude-plugin" / "plugin.json").write_text(
        json.dumps(
            {"name": "design-team", "version": "5.1.1", "skills": ["skills", "extra/listed"]}
        )
    )

    assert read_skill_version(design) == "5.1.1"
    assert read_skill_version(listed) == "5.1.1"  # a skill folder named itself
    assert read_skill_version(outside) == ""
    assert changelog_rule(design) == []
    (plugin / ".tessl-plugin").mkdir()
    (plugin / ".tessl-plugin" / "plugin.json").write_text(json.dumps({"version": "6.0.0"}))
    assert read_skill_version(design) == "6.0.0"
