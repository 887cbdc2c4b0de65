"""``python -m pytest_openkata init`` and ``new-scenario``, through the real entry point.

What they write must load as the plugin loads it, sum its weights to 100 (spec section 11b's
weight check, section 13 item 34), carry a version the report reads (spec section 10's
``skill_version`` rule), and never overwrite a file.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from pytest_openkata.__main__ import main
from pytest_openkata.core.scenario import load_scenario
from pytest_openkata.core.versions import read_skill_version

SCENARIO_FILES = ("task.md", "criteria.json", "scenario.json")


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The commands run in an empty folder, as from a repository's root."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def front_matter(skill_md: Path) -> dict[str, object]:
    text = skill_md.read_text(encoding="utf-8")
    match = re.match(r"---\n(.*?)\n---\n", text, re.DOTALL)
    assert match, text
    data = yaml.safe_load(match.group(1))
    assert isinstance(data, dict)
    return data


def weights_as_the_reference_script_sums_them(criteria: Path) -> int:
    """``scripts/check-eval-weights.sh``: the number after ``"max_score": `` on each line."""
    lines = criteria.read_text(encoding="utf-8").splitlines()
    return sum(
        int(line.split('"max_score": ')[1].rstrip(",")) for line in lines if '"max_score":' in line
    )


def assert_good_scenario(folder: Path, *, sandbox: bool, skill_name: str) -> None:
    criteria = json.loads((folder / "criteria.json").read_text(encoding="utf-8"))
    assert criteria["type"] == "weighted_checklist"
    assert criteria["context"]
    points = [c["max_score"] for c in criteria["checklist"]]
    assert sum(points) == 100
    assert weights_as_the_reference_script_sums_them(folder / "criteria.json") == 100
    for criterion in criteria["checklist"]:
        assert len(criterion["description"]) > len(criterion["name"]) + 20, criterion
    options = json.loads((folder / "scenario.json").read_text(encoding="utf-8"))
    assert options["sandbox"] is sandbox
    assert options["description"]
    task = (folder / "task.md").read_text(encoding="utf-8")
    assert task.strip()
    assert skill_name not in task

    scenario = load_scenario(folder)

    assert scenario.sandbox is sandbox
    assert scenario.name == folder.name
    assert [c.max_score for c in scenario.criteria] == points
    assert scenario.description == options["description"]


# --- init ----------------------------------------------------------------------------------


def test_init_writes_a_skill_whose_scenario_loads(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = datetime.now(UTC).date()
    code, out, err = run(capsys, "init", "skills/my-skill")
    after = datetime.now(UTC).date()

    assert (code, err) == (0, "")
    skill = here / "skills" / "my-skill"
    example = skill / "evals" / "scenario-example"
    assert out.splitlines()[:5] == [
        "wrote skills/my-skill/SKILL.md",
        "wrote skills/my-skill/CHANGELOG.md",
        "wrote skills/my-skill/evals/scenario-example/task.md",
        "wrote skills/my-skill/evals/scenario-example/criteria.json",
        "wrote skills/my-skill/evals/scenario-example/scenario.json",
    ]
    meta = front_matter(skill / "SKILL.md")
    assert meta["name"] == "my-skill"
    assert isinstance(meta["description"], str)
    assert "TODO" in meta["description"]
    body = (skill / "SKILL.md").read_text(encoding="utf-8")
    assert "# My skill\n" in body
    assert "## Rules\n" in body
    changelog = (skill / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "## [Unreleased]\n" in changelog
    dates = {f"## [0.1.0] - {day.isoformat()}" for day in (before, after)}
    assert any(line in dates for line in changelog.splitlines()), changelog
    assert read_skill_version(skill) == "0.1.0"
    assert sorted(p.name for p in example.iterdir()) == sorted(SCENARIO_FILES)
    assert_good_scenario(example, sandbox=False, skill_name="my-skill")


def test_init_as_a_subprocess(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest_openkata", "init", "skills/sub-skill"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert "wrote skills/sub-skill/SKILL.md\n" in result.stdout
    assert front_matter(tmp_path / "skills/sub-skill/SKILL.md")["name"] == "sub-skill"
    assert_good_scenario(
        tmp_path / "skills/sub-skill/evals/scenario-example", sandbox=False, skill_name="sub-skill"
    )


def test_a_second_init_keeps_edited_files_byte_for_byte(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, "init", "skills/s")
    skill = here / "skills" / "s"
    edited = b"---\r\nname: s\r\ndescription: mine\r\n---\r\n\xff not even UTF-8\r\n"
    (skill / "SKILL.md").write_bytes(edited)
    criteria = skill / "evals/scenario-example/criteria.json"
    criteria.write_bytes(b"{}")
    (skill / "CHANGELOG.md").unlink()

    code, out, _ = run(capsys, "init", "skills/s")

    assert code == 0
    assert (skill / "SKILL.md").read_bytes() == edited
    assert criteria.read_bytes() == b"{}"
    assert read_skill_version(skill) == "0.1.0"
    lines = out.splitlines()
    assert "kept  skills/s/SKILL.md" in lines
    assert "wrote skills/s/CHANGELOG.md" in lines
    assert "kept  skills/s/evals/scenario-example/criteria.json" in lines


def test_init_of_the_current_folder_names_the_skill_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    skill = tmp_path / "skills" / "here-skill"
    skill.mkdir(parents=True)
    monkeypatch.chdir(skill)

    code, out, _ = run(capsys, "init", ".")

    assert code == 0
    assert out.splitlines()[0] == "wrote SKILL.md"  # relative to the current folder
    assert front_matter(skill / "SKILL.md")["name"] == "here-skill"


def test_init_adds_no_example_beside_existing_scenarios(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = here / "skills/s/evals/scenario-0"
    scenario.mkdir(parents=True)
    (scenario / "task.md").write_text("A real task.\n")

    code, out, _ = run(capsys, "init", "skills/s")

    assert code == 0
    assert not (here / "skills/s/evals/scenario-example").exists()
    assert "no example scenario: skills/s/evals already holds 1 scenario" in out
    assert (here / "skills/s/SKILL.md").is_file()
    assert sorted(p.name for p in scenario.iterdir()) == ["task.md"]


def test_init_leaves_an_example_scenario_that_holds_files_alone(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    example = here / "skills/s/evals/scenario-example"
    example.mkdir(parents=True)
    (example / "task.md").write_text("Mine.\n")

    code, out, _ = run(capsys, "init", "skills/s")

    assert code == 0
    assert sorted(p.name for p in example.iterdir()) == ["task.md"]
    assert (example / "task.md").read_text() == "Mine.\n"
    assert "kept  skills/s/evals/scenario-example/task.md" in out.splitlines()
    assert "not written: criteria.json, scenario.json" in out


@pytest.mark.parametrize(
    "name", ["My-Skill", "my_skill", "-lead", "trail-", "double--hyphen", "dot.ted", "a" * 65]
)
def test_init_refuses_a_folder_name_that_is_not_a_skill_name(
    here: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    code, out, err = run(capsys, "init", f"skills/{name}")

    assert code == 2
    assert "error: skill name" in err
    assert repr(name) in err
    assert out == ""
    assert not (here / "skills").exists()


def test_init_without_a_folder_prints_the_usage(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "init")

    assert code == 2
    assert err.startswith("usage: python -m pytest_openkata init")
    assert "required: skill" in err


def test_init_where_a_file_blocks_the_folder_exits_1(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (here / "skills").write_text("a file, not a folder\n")

    code, _, err = run(capsys, "init", "skills/s")

    assert code == 1
    assert err.startswith("error: cannot create folder skills/s: ")
    assert (here / "skills").read_text() == "a file, not a folder\n"


def test_init_that_cannot_write_the_scenario_exits_1_after_the_skill_files(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (here / "skills/s").mkdir(parents=True)
    (here / "skills/s/evals").write_text("a file\n")

    code, out, err = run(capsys, "init", "skills/s")

    assert code == 1
    assert "wrote skills/s/SKILL.md" in out.splitlines()
    assert err.startswith("error: cannot create folder skills/s/evals/scenario-example: ")


# --- new-scenario --------------------------------------------------------------------------


@pytest.fixture
def skill(here: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    assert main(["init", "skills/notes-kit"]) == 0
    capsys.readouterr()
    return here / "skills" / "notes-kit"


@pytest.mark.parametrize("given", ["edge-case", "scenario-edge-case"])
def test_new_scenario_adds_a_direct_scenario(
    skill: Path, capsys: pytest.CaptureFixture[str], given: str
) -> None:
    code, out, err = run(capsys, "new-scenario", "skills/notes-kit", given)

    assert (code, err) == (0, "")
    folder = skill / "evals" / "scenario-edge-case"
    assert out.splitlines()[:3] == [
        f"wrote skills/notes-kit/evals/scenario-edge-case/{n}" for n in SCENARIO_FILES
    ]
    assert sorted(p.name for p in folder.iterdir()) == sorted(SCENARIO_FILES)
    assert_good_scenario(folder, sandbox=False, skill_name="notes-kit")


def test_new_scenario_with_sandbox_has_an_inputs_folder(
    skill: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "new-scenario", "skills/notes-kit", "0", "--sandbox")

    assert code == 0
    folder = skill / "evals" / "scenario-0"
    readme = folder / "inputs" / "README.md"
    assert "wrote skills/notes-kit/evals/scenario-0/inputs/README.md" in out.splitlines()
    assert "copied into the sandbox workspace" in readme.read_text(encoding="utf-8")
    assert_good_scenario(folder, sandbox=True, skill_name="notes-kit")


def test_new_scenario_keeps_an_existing_scenario_and_writes_nothing(
    skill: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = skill / "evals" / "scenario-0"
    folder.mkdir()
    (folder / "task.md").write_bytes(b"my task\r\n")

    code, out, _ = run(capsys, "new-scenario", "skills/notes-kit", "0", "--sandbox")

    assert code == 0
    assert out.splitlines() == [
        "kept  skills/notes-kit/evals/scenario-0/task.md",
        "nothing written: skills/notes-kit/evals/scenario-0 already holds files",
    ]
    assert sorted(p.name for p in folder.iterdir()) == ["task.md"]
    assert (folder / "task.md").read_bytes() == b"my task\r\n"


def test_new_scenario_fills_an_empty_scenario_folder(
    skill: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (skill / "evals" / "scenario-1").mkdir()

    code, _, _ = run(capsys, "new-scenario", "skills/notes-kit", "1")

    assert code == 0
    assert_good_scenario(skill / "evals" / "scenario-1", sandbox=False, skill_name="notes-kit")


def test_new_scenario_needs_a_skill_with_skill_md(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (here / "skills/bare").mkdir(parents=True)

    code, out, err = run(capsys, "new-scenario", "skills/bare", "0")

    assert code == 2
    assert out == ""
    assert err.startswith("error: skills/bare/SKILL.md not found")
    assert "python -m pytest_openkata init skills/bare" in err
    assert not (here / "skills/bare/evals").exists()


@pytest.mark.parametrize(
    "scenario_id", ["../escape", "a/b", "", "scenario-", "Upper", ".hidden", "two words", "x-"]
)
def test_new_scenario_refuses_an_id_that_is_not_a_safe_folder_name(
    skill: Path, capsys: pytest.CaptureFixture[str], scenario_id: str
) -> None:
    listed = sorted(p.name for p in (skill / "evals").iterdir())

    code, out, err = run(capsys, "new-scenario", "skills/notes-kit", scenario_id)

    assert code == 2
    assert out == ""
    assert f"error: scenario ID {scenario_id!r} is not a safe folder name" in err
    assert sorted(p.name for p in (skill / "evals").iterdir()) == listed


def test_new_scenario_with_missing_arguments_prints_the_usage(
    skill: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "new-scenario", "skills/notes-kit")

    assert code == 2
    assert err.startswith("usage: python -m pytest_openkata new-scenario")


def test_new_scenario_that_cannot_write_exits_1(
    skill: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (skill / "evals" / "scenario-0").write_text("a file where the folder goes\n")

    code, _, err = run(capsys, "new-scenario", "skills/notes-kit", "0")

    assert code == 1
    assert err.startswith("error: cannot create folder skills/notes-kit/evals/scenario-0: ")
