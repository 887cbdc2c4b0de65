"""``python -m pytest_openkata convert``: every format written as openkata folders loads, with
the scenario loader, to the criteria, checks and task of the neutral model; openkata written
as skill-creator's evals.json and back is identical where evals.json can hold it; nothing is
overwritten, and what a target cannot hold is named."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_openkata.core.formats import EvalScenario, detect_formats
from pytest_openkata.core.formats.writers import (
    ConvertError,
    folder_name,
    openkata_files,
    write_evals_json,
    write_openkata,
)
from pytest_openkata.core.scenario import check_of, load_scenario
from pytest_openkata.infra.processes import host_tag
from tests.support import format_layouts as layouts


def read_all(folder: Path) -> list[EvalScenario]:
    (fmt,) = detect_formats(folder)
    return [fmt.load(source) for source in fmt.scenarios(folder)]


LAYOUTS: dict[str, Callable[[Path], Path]] = {
    "skill-creator": layouts.skill_creator,
    "waza": layouts.waza,
    "skillgrade": layouts.skillgrade,
    "harbor": layouts.harbor,
    "openkata": layouts.openkata,
}


@pytest.mark.parametrize("name", LAYOUTS)
def test_each_format_written_as_openkata_loads_to_the_same_criteria_checks_and_task(
    tmp_path: Path, name: str
) -> None:
    scenarios = read_all(LAYOUTS[name](tmp_path / "src"))
    skill = tmp_path / "out" / "csv-tidy"
    layouts.write(skill / "SKILL.md", layouts.SKILL_MD)
    write_openkata(scenarios, skill / "evals")
    for scenario in scenarios:
        folder = skill / "evals" / folder_name(scenario.name)
        loaded = load_scenario(folder)
        assert loaded.contents["task.md"].decode().rstrip("\n") == scenario.task.rstrip("\n")
        assert [(c.name, c.description, c.max_score) for c in loaded.criteria] == [
            (c.name, c.description, c.weight) for c in scenario.criteria
        ]
        assert loaded.context == scenario.context
        expected = [check_of(scenario.source.path, i, c) for i, c in enumerate(scenario.checks)]
        assert [repr(c) for c in loaded.checks] == [repr(c) for c in expected]
        assert loaded.trials == scenario.trials
        assert loaded.follow_ups == scenario.follow_ups
        assert loaded.simulated_user == scenario.simulated_user
        assert loaded.sandbox == scenario.sandbox.sandbox
        assert loaded.network == scenario.sandbox.network
        # A run gives the sandbox what the format asks (Harbor and Skillgrade do).
        assert (loaded.cpus, loaded.memory_mb) == (
            scenario.sandbox.cpus,
            scenario.sandbox.memory_mb,
        )
        for item in scenario.inputs:
            assert (folder / "inputs" / item.path).read_bytes() == item.content
        # What the layout does not hold is read back by the openkata format, as written.
        (again,) = [s for s in read_all(skill) if s.name == folder.name]
        assert (again.setup, [f.install_path for f in again.fixtures]) == (
            scenario.setup,
            [f.install_path for f in scenario.fixtures],
        )
        assert (again.sandbox.cpus, again.sandbox.memory_mb) == (
            scenario.sandbox.cpus,
            scenario.sandbox.memory_mb,
        )


def test_a_harbor_solution_becomes_the_scenarios_reference_solution(tmp_path: Path) -> None:
    scenarios = read_all(layouts.harbor(tmp_path / "src"))
    write_openkata(scenarios, tmp_path / "skill" / "evals")
    solve = tmp_path / "skill" / "evals" / "scenario-sort-csv" / "solution" / "solve.sh"
    assert solve.read_text().startswith("#!/bin/bash\n")


def test_a_solution_folder_that_is_a_link_is_not_copied_through(tmp_path: Path) -> None:
    (scenario,) = read_all(layouts.harbor(tmp_path / "src"))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "id_rsa").write_text("a private key\n")
    linked = tmp_path / "linked-solution"
    linked.symlink_to(outside)

    with pytest.raises(ConvertError, match="linked-solution: is a symbolic link"):
        write_openkata([replace(scenario, solution=linked)], tmp_path / "skill" / "evals")
    assert not list((tmp_path / "skill" / "evals").rglob("id_rsa"))


def test_openkata_to_evals_json_and_back_is_identical_where_evals_json_holds_it(
    tmp_path: Path,
) -> None:
    skill = tmp_path / "csv-tidy"
    layouts.write(skill / "SKILL.md", layouts.SKILL_MD)
    scenario = skill / "evals" / "scenario-eval-1"
    layouts.write(scenario / "task.md", "Count the rows of people.csv.\n")
    statement = "The answer says there are two rows"
    layouts.write(
        scenario / "criteria.json",
        json.dumps(
            {
                "context": "Two data rows and a header.",
                "checklist": [{"name": statement, "description": statement, "max_score": 1}],
            }
        ),
    )
    checks = [
        {"name": "says two", "type": "output_regex", "pattern": "two \\(2\\)", "max_score": 1},
        {
            "name": "no three",
            "type": "output_regex",
            "pattern": "three",
            "absent": True,
            "max_score": 1,
        },
    ]
    layouts.write(scenario / "checks.json", json.dumps(checks))
    layouts.write(scenario / "inputs" / "data" / "people.csv", "name\nal\nbo\n")
    (original,) = read_all(skill)

    target = tmp_path / "exported" / "csv-tidy"
    notes = write_evals_json([original], target)
    assert notes == []
    (back,) = read_all(target)
    assert (original.name, back.name) == ("scenario-eval-1", "eval-1")
    assert openkata_files(back) == openkata_files(original)
    # And written again as openkata folders, the files are the same bytes.
    write_openkata([back], tmp_path / "again" / "evals")
    for rel, content in openkata_files(original)[0].items():
        assert (tmp_path / "again" / "evals" / "scenario-eval-1" / rel).read_bytes() == content


def test_what_evals_json_cannot_hold_is_named(tmp_path: Path) -> None:
    (scenario,) = read_all(layouts.openkata(tmp_path / "src"))
    notes = [str(n) for n in write_evals_json([scenario], tmp_path / "out")]
    assert "scenario-1: its name (it becomes eval-1)" in notes
    assert "scenario-1: criterion 'sorted''s name and weight" in notes
    assert "scenario-1: check 'file there' (file)" in notes
    assert "scenario-1: directory fixtures" in notes
    assert "scenario-1: setup commands" in notes
    assert "scenario-1: trials 2" in notes


def test_a_waza_code_grader_converts_to_expression_checks_that_evals_json_cannot_hold(
    tmp_path: Path,
) -> None:
    task = {
        "id": "t",
        "inputs": {"prompt": "Say hi."},
        "graders": [
            {"name": "shape", "type": "code", "config": {"assertions": ["'hi' in output"]}}
        ],
    }
    scenarios = read_all(layouts.waza(tmp_path / "src", task))
    skill = tmp_path / "out" / "csv-tidy"
    layouts.write(skill / "SKILL.md", layouts.SKILL_MD)
    write_openkata(scenarios, skill / "evals")

    loaded = load_scenario(skill / "evals" / folder_name("t"))

    [expression] = [c for c in loaded.checks if c.type == "output_expression"]
    assert (expression.name, expression.expression) == ("shape: 'hi' in output", "'hi' in output")
    notes = [str(n) for n in write_evals_json(scenarios, tmp_path / "back")]
    assert "t: check \"shape: 'hi' in output\" (output_expression)" in notes


def test_a_sandbox_image_that_evals_json_cannot_hold_is_named(tmp_path: Path) -> None:
    (scenario,) = read_all(layouts.skillgrade(tmp_path / "src"))
    notes = [str(n) for n in write_evals_json([scenario], tmp_path / "out")]
    assert "sort-rows: the image or Dockerfile of its sandbox" in notes


def convert(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_openkata", "convert", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        timeout=120,
    )


def test_convert_writes_openkata_folders_names_what_is_left_and_never_overwrites(
    tmp_path: Path,
) -> None:
    source = layouts.skillgrade(tmp_path / "src")
    dest = tmp_path / "skill" / "evals"
    done = convert(str(source), "--to", str(dest), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "wrote 1 scenario(s)" in done.stdout
    assert "sort-rows: threshold 0.8" in done.stdout
    assert "image" not in done.stdout  # carried over: the scenario runs in its own image
    written = dest / "scenario-sort-rows"
    assert json.loads((written / "scenario.json").read_text())["image"] == "node:20-slim"
    assert json.loads((written / "criteria.json").read_text())["checklist"][0]["max_score"] == 3
    before = {p: p.read_bytes() for p in written.rglob("*") if p.is_file()}

    again = convert(str(source), "--to", str(dest), cwd=tmp_path)
    assert again.returncode == 2
    assert "already exists" in again.stderr
    assert "sort-rows" in again.stderr
    assert {p: p.read_bytes() for p in written.rglob("*") if p.is_file()} == before


def test_convert_back_to_evals_json_and_a_bad_source_is_an_error_naming_file_and_key(
    tmp_path: Path,
) -> None:
    source = layouts.skill_creator(tmp_path / "src")
    done = convert(
        str(source), "--to", str(tmp_path / "out"), "--to-format", "skill-creator", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    written = json.loads((tmp_path / "out" / "evals" / "evals.json").read_text())
    given = json.loads((source / "evals" / "evals.json").read_text())
    assert written["evals"][0] == given["evals"][0]
    # A statement among assertions is written as an expectation: both are judged alike.
    assert [openkata_files(s) for s in read_all(tmp_path / "out")] == [
        openkata_files(s) for s in read_all(source)
    ]
    assert (tmp_path / "out" / "evals" / "files" / "people.csv").read_bytes() == (
        source / "evals" / "files" / "people.csv"
    ).read_bytes()

    spec = source / "evals" / "evals.json"
    bad_eval = {"id": 1, "prompt": "p", "assertions": [{"type": "llm", "value": "r"}]}
    spec.write_text(json.dumps({"evals": [bad_eval]}))
    bad = convert(str(source), "--to", str(tmp_path / "other"), cwd=tmp_path)
    assert bad.returncode == 2
    assert "evals.json: evals[0].assertions[0].type: assertion type 'llm'" in bad.stderr
    assert "(skill-creator format)" in bad.stderr
    assert not (tmp_path / "other").exists()


def test_a_scenario_name_that_leads_out_of_the_target_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    task = {"id": "../escaped", "name": "t", "inputs": {"prompt": "Go."}}
    task["graders"] = [{"name": "g", "type": "prompt", "config": {"prompt": "ok"}}]
    scenarios = read_all(layouts.waza(tmp_path / "src", task))
    with pytest.raises(ConvertError, match="cannot be a folder's name"):
        write_openkata(scenarios, tmp_path / "skill" / "evals")
    assert not (tmp_path / "skill").exists()
    assert not (tmp_path / "escaped").exists()


def test_evals_json_is_never_overwritten_and_nothing_is_written_then(tmp_path: Path) -> None:
    scenarios = read_all(layouts.skill_creator(tmp_path / "src"))
    target = tmp_path / "out"
    layouts.write(target / "evals" / "files" / "people.csv", "mine\n")
    with pytest.raises(ConvertError, match=r"people\.csv: already exists"):
        write_evals_json(scenarios, target)
    assert not (target / "evals" / "evals.json").exists()
    assert (target / "evals" / "files" / "people.csv").read_text() == "mine\n"


def test_a_target_that_cannot_be_written_is_an_error_naming_it_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    source = layouts.skill_creator(tmp_path / "src")
    (tmp_path / "a-file").write_text("not a folder\n")

    done = convert(str(source), "--to", str(tmp_path / "a-file" / "evals"), cwd=tmp_path)

    assert done.returncode == 2
    assert "a-file" in done.stderr
    assert "nothing written" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_scenario_that_fails_to_be_written_leaves_none_of_them_written(tmp_path: Path) -> None:
    scenarios = read_all(layouts.skill_creator(tmp_path / "src"))
    dest = tmp_path / "skill" / "evals"
    first, second = scenarios
    broken = replace(second, solution=tmp_path / "no-such-solution")  # copying it fails

    with pytest.raises(FileNotFoundError):
        write_openkata([first, broken], dest)

    assert list(dest.iterdir()) == []  # not the first one either, nor a temporary folder


def test_a_temporary_folder_a_killed_convert_left_is_removed_by_the_next(tmp_path: Path) -> None:
    dest = tmp_path / "skill" / "evals"
    dest.mkdir(parents=True)
    # A temporary folder of a writer that is gone (no process has this pid).
    left = dest / f".openkata-{host_tag()}-999999999-abc.tmp"
    left.mkdir()
    (left / "task.md").write_text("half written\n")

    write_openkata(read_all(layouts.skill_creator(tmp_path / "src")), dest)

    assert not left.exists()
    assert sorted(p.name for p in dest.iterdir()) == ["scenario-eval-1", "scenario-eval-2"]
