"""tile.json: which folders are tiles, what a tile's context holds, and its errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_openkata.core.jsonfiles import ScenarioLoadError
from pytest_openkata.core.lint import lint_scenario, lint_skill
from pytest_openkata.core.prompt import skill_part
from pytest_openkata.core.scenario import discover_scenarios
from pytest_openkata.core.tile import is_tile_dir, load_tile, tile_files, unit_name
from pytest_openkata.core.versions import read_skill_version
from pytest_openkata.core.workspace import workspace_files
from tests.support.tiles import CONTEXT_FILES, TILE_JSON, write_tile


def test_a_tiles_context_lists_its_skills_docs_and_rules_in_order(tmp_path: Path) -> None:
    tile = write_tile(tmp_path, {})

    files = tile_files(load_tile(tile))

    assert [rel for rel, _path in files] == list(CONTEXT_FILES)
    assert all(path == tile / rel for rel, path in files)


def test_a_file_listed_twice_is_in_the_context_once(tmp_path: Path) -> None:
    tile = write_tile(
        tmp_path, {}, tile_json={**TILE_JSON, "steering": {"again": {"rules": "docs/setup.md"}}}
    )

    rels = [rel for rel, _path in tile_files(load_tile(tile))]

    assert rels.count("docs/setup.md") == 1
    assert rels[-1] == "docs/setup.md"  # where it came first: with the docs


def test_docs_at_the_tiles_root_are_the_entry_file_alone(tmp_path: Path) -> None:
    tile = write_tile(tmp_path, {}, tile_json={**TILE_JSON, "docs": "README.md"})

    rels = [rel for rel, _path in tile_files(load_tile(tile))]

    assert "README.md" in rels
    assert "tile.json" not in rels
    assert not any(rel.startswith("evals/") for rel in rels)


def test_the_prompt_and_the_workspace_hold_the_same_files_at_the_same_paths(
    tmp_path: Path,
) -> None:
    tile = write_tile(tmp_path, {"c": {"criteria": {"a": 100}}})

    parts = skill_part(tile)
    workspace = dict(workspace_files(tile, tile / "evals" / "c"))

    assert parts == [f"--- {rel} ---\n{text}" for rel, text in CONTEXT_FILES.items()]
    skill_files = {name: data for name, data in workspace.items() if name.startswith("skill/")}
    assert skill_files == {f"skill/{rel}": text.encode() for rel, text in CONTEXT_FILES.items()}


def test_a_skill_folder_with_evals_stays_a_skill_whatever_its_tile_json_says(
    tmp_path: Path,
) -> None:
    skill = tmp_path / "s"
    (skill / "evals").mkdir(parents=True)
    (skill / "SKILL.md").write_text("# s\n")
    (skill / "tile.json").write_text(json.dumps({"name": "o/s", "version": "9.0.0"}))
    docs_only = tmp_path / "t"
    docs_only.mkdir()
    (docs_only / "tile.json").write_text("{}")

    assert not is_tile_dir(skill)
    assert (unit_name(skill), read_skill_version(skill)) == ("s", "9.0.0")
    assert is_tile_dir(docs_only)


def test_a_tiles_evals_take_every_scenario_folder_whatever_its_name(tmp_path: Path) -> None:
    tile = write_tile(tmp_path, {"b-flow": {"criteria": {"a": 1}}, "a-flow": {"criteria": {}}})
    (tile / "evals" / "results").mkdir()  # reports: no task.md, not a scenario
    (tile / "evals" / "scenario-9").mkdir()  # the reference's name: a scenario, even empty

    found = [entry.name for entry in discover_scenarios(tile / "evals", "scenario-*")]

    assert found == ["a-flow", "b-flow", "scenario-9"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("[1, 2]", "tile.json: must be a JSON object"),
        (
            json.dumps({"skills": {"x": {"path": "/etc/SKILL.md"}}}),
            "tile.json: skills.x.path: '/etc/SKILL.md' must be a path inside the tile",
        ),
        (json.dumps({"skills": {"x": {}}}), "tile.json: skills.x.path: is required"),
        (json.dumps({"skills": ["a"]}), 'tile.json: skills: must be an object (got ["a"])'),
        (
            json.dumps({"name": "empty"}),
            "tile.json: lists no skills, docs or steering rules: the tile has no context",
        ),
    ],
    ids=["not-object", "absolute", "no-path", "skills-list", "no-context"],
)
def test_tile_json_errors_name_the_file_and_key(tmp_path: Path, data: str, message: str) -> None:
    tile = tmp_path / "t"
    tile.mkdir()
    (tile / "tile.json").write_text(data)

    with pytest.raises(ScenarioLoadError) as raised:
        load_tile(tile)

    assert str(raised.value) == message


def test_a_symlink_leading_out_of_the_tile_is_refused(tmp_path: Path) -> None:
    tile = write_tile(tmp_path, {})
    (tmp_path / "secret.md").write_text("secret\n")
    (tile / "rules.md").unlink()
    (tile / "rules.md").symlink_to(tmp_path / "secret.md")

    with pytest.raises(ScenarioLoadError, match=r"steering\.house-style\.rules: 'rules\.md' leads"):
        load_tile(tile)


def test_the_corpus_skills_with_a_tile_json_of_themselves_stay_skills(corpus: Path) -> None:
    with_tile_json = sorted(p.parent for p in (corpus / "skills").glob("*/tile.json"))

    assert len(with_tile_json) == 11
    for skill in with_tile_json:
        assert not is_tile_dir(skill), skill
        assert unit_name(skill) == skill.name
        skill_md = (skill / "SKILL.md").read_text(encoding="utf-8", errors="replace")
        assert skill_part(skill)[0] == skill_md  # the reference's prompt: SKILL.md first


def test_lint_knows_a_tiles_names_and_that_it_needs_no_skill_md(tmp_path: Path) -> None:
    task = "Use the observability tile and the metrics skill.\n"
    tile = write_tile(
        tmp_path,
        {"c": {"criteria": {"a": 100}, "options": {"description": "d"}, "task": task}},
    )

    scenario = lint_scenario(tile / "evals" / "c")
    skill = lint_skill(tile)

    assert scenario["files"] == []  # a tile has no SKILL.md of its own
    assert [(f.severity, f.line) for f in scenario["task-names-skill"]] == [
        ("error", 1),  # "the observability tile": the tile named as such
        ("error", 1),  # "the metrics skill": a listed skill named as such
    ]
    assert "'metrics'" in scenario["task-names-skill"][1].message
    assert skill["skill-md"] == []
    assert skill["changelog"] == []  # tile.json's version


@pytest.mark.parametrize("name", ["../../x", "a/b", "..", "a\\b"])
def test_a_tile_skill_name_that_is_no_single_folder_name_is_an_error(
    tmp_path: Path, name: str
) -> None:
    tile = tmp_path / "t"
    (tile / "skills" / "a").mkdir(parents=True)
    (tile / "skills" / "a" / "SKILL.md").write_text("# a\n")
    (tile / "tile.json").write_text(
        json.dumps({"name": "o/t", "skills": {name: {"path": "skills/a/SKILL.md"}}})
    )

    with pytest.raises(ScenarioLoadError) as caught:
        load_tile(tile)

    assert caught.value.field == f"skills.{name}"
    assert "one folder name" in caught.value.message
