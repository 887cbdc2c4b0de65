"""The catalogue's rules (current version, newest report per model, version filter, rounding)
and ``versions.json`` splicing, on real git repositories and real files in tmp_path."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from pytest_openkata.commands.effectiveness import main
from pytest_openkata.core.catalogue import (
    Catalogue,
    SkillEntry,
    VersionsFileError,
    current_version,
    effectiveness,
    read_catalogue,
    read_report,
    read_skill,
    splice_versions,
)

# The test's own git commands ignore the developer's configuration (signing, hooks).
GIT_ENV = {
    **os.environ,
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}

Scenarios = Sequence[tuple[str, str, bool]] | None


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, env=GIT_ENV, capture_output=True)


def git_repo(root: Path, *tags: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q")
    git(root, "commit", "-q", "--allow-empty", "-m", "init")
    for tag in tags:
        git(root, "tag", tag)
    return root


def skill(root: Path, name: str, changelog: str | None = None) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"# {name}\n")
    if changelog is not None:
        (folder / "CHANGELOG.md").write_text(changelog)
    return folder


def report(
    path: Path,
    *,
    version: str = "1.0.0",
    timestamp: str = "2026-06-01T00:00:00Z",
    overall: float = 100.0,
    label: str = "",
    scenarios: Scenarios = (("scenario-a", "about a", True),),
) -> Path:
    """A results JSON as the Go runner writes it (model_label left out when empty)."""
    config = {"backend": "http", "agent_model": "m", "judge_model": "m"}
    if label:
        config["model_label"] = label
    data = {
        "skill": "s",
        "skill_version": version,
        "timestamp": timestamp,
        "config": config,
        "threshold": 95,
        "scenarios": [
            {
                "name": name,
                "description": about,
                "criteria": None,
                "score": 0,
                "max_score": 0,
                "percentage": 0,
                "pass": passed,
            }
            for name, about, passed in scenarios or ()
        ]
        or None,
        "overall_percentage": overall,
        "pass": overall >= 95,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def results(folder: Path, model: str) -> Path:
    return folder / "evals" / "results" / model


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """alpha: tagged 1.1.0, one counted flat model; beta: CHANGELOG 0.2.0, no reports; gamma:
    no version anywhere, a nested model without a label; and a folder that is no skill."""
    root = git_repo(tmp_path / "skills", "skills/alpha/v1.0.0", "skills/alpha/v1.1.0")
    alpha = skill(root, "alpha", "## [0.9.0]\n")
    report(
        results(alpha, "flat") / "2026-06-01T000000.json",
        version="1.1.0",
        overall=62.5,
        label="Flat <1>",
        scenarios=[("scenario-a", "about a", True), ("scenario-b", "about b", False)],
    )
    skill(root, "beta", "# Changelog\n\n## [Unreleased]\n\n## [0.2.0] - 2026-01-01\n")
    gamma = skill(root, "gamma")
    report(
        results(gamma, "org/m") / "2026-06-01T000000.json",
        version="0.0.0",
        overall=62.4,
        scenarios=None,
    )
    report(root / "not-a-skill" / "evals" / "results" / "m" / "x.json")
    return root


def entry(catalogue: Catalogue, name: str) -> SkillEntry:
    (found,) = [s for s in catalogue.skills if s.name == name]
    return found


# --- current version -------------------------------------------------------------------------


def test_the_highest_tag_by_version_order_is_the_current_version(tmp_path: Path) -> None:
    root = git_repo(
        tmp_path,
        "skills/x/v1.9.0",
        "skills/x/v1.10.0",
        "skills/x/v1.2.0",
        "skills/xy/v9.0.0",  # another skill's tags do not count
        "skills/other/v5.0.0",
    )
    skill(root, "x", "## [0.5.0]\n")

    version = current_version(root, "x")

    assert version.version == "1.10.0"  # by version, where a plain name order gives 1.9.0
    assert version.source == "git tag skills/x/v1.10.0"


def test_without_a_tag_the_changelog_then_the_default_is_the_version(tmp_path: Path) -> None:
    root = git_repo(tmp_path, "skills/other/v2.0.0")
    skill(root, "logged", "# Changelog\n\n## [Unreleased]\n\n## [1.2.3] - 2026-06-01\n")
    skill(root, "bare")

    logged, bare = current_version(root, "logged"), current_version(root, "bare")

    assert (logged.version, logged.source) == ("1.2.3", "CHANGELOG.md")
    assert (bare.version, bare.source) == ("0.0.0", "default")


def test_outside_a_repository_and_without_git_there_is_no_tag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    skill(tmp_path, "x", "## [0.3.0]\n")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))

    outside = current_version(tmp_path, "x")
    monkeypatch.setenv("PATH", str(tmp_path / "no-such-bin"))
    without_git = current_version(tmp_path, "x")

    assert outside.source == without_git.source == "CHANGELOG.md"
    assert outside.version == without_git.version == "0.3.0"


# --- reports per model -----------------------------------------------------------------------


def test_nested_model_folders_are_models(tmp_path: Path) -> None:
    x = skill(tmp_path, "x")
    report(results(x, "flat") / "a.json")
    report(results(x, "org/model") / "a.json")
    report(results(x, "org/deeper/model") / "a.json")
    report(x / "evals" / "results" / "loose.json")  # in no model folder
    (results(x, "empty")).mkdir(parents=True)

    models = [m.model for m in read_skill(tmp_path, "x").models]

    assert models == ["flat", "org/deeper/model", "org/model"]


def test_the_newest_report_is_the_greatest_timestamp_not_the_greatest_name(
    tmp_path: Path,
) -> None:
    x = skill(tmp_path, "x")
    folder = results(x, "m")
    report(folder / "results-2026-01-01T000000.json", timestamp="2026-01-01T00:00:00Z")
    newest = report(folder / "2026-06-01T000000.json", timestamp="2026-06-01T00:00:00Z")
    report(folder / "2026-03-01T000000.json", timestamp="2026-03-01T00:00:00Z")

    (model,) = read_skill(tmp_path, "x").models

    assert model.newest.path == newest


def test_equal_timestamps_are_told_apart_by_the_file_name(tmp_path: Path) -> None:
    folder = results(skill(tmp_path, "x"), "m")
    report(folder / "2026-06-01T000000.json", overall=10)
    report(folder / "2026-06-01T000000-2.json", overall=20)
    report(folder / "2026-06-01T000000-3.json", timestamp="2026-06-01T02:00:00+02:00")

    (model,) = read_skill(tmp_path, "x").models

    assert model.newest.path.name == "2026-06-01T000000.json"  # "." sorts after "-"
    assert model.newest.overall_percentage == 10


def test_a_report_that_cannot_be_decoded_is_skipped_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = results(skill(tmp_path, "x"), "m")
    good = report(folder / "2026-01-01T000000.json", timestamp="2026-01-01T00:00:00Z")
    (folder / "2026-06-01T000000.json").write_text("{not json")
    (folder / "2026-06-02T000000.json").write_text(
        '{"skill_version": "1.0.0", "overall_percentage": "90"}'
    )
    (folder / "2026-06-03T000000.json").write_text(
        '{"timestamp": "2026-06-03T00:00:00Z", "overall_percentage": "90"}'
    )
    (folder / "2026-06-04T000000.json").write_text('{"timestamp": "June"}')
    (folder / "2026-06-05T000000.json").write_text(
        '{"timestamp": "2026-06-05T00:00:00Z", "scenarios": [{"name": "s", "pass": "yes"}]}'
    )

    entry = read_skill(tmp_path, "x")
    code = main([str(tmp_path)])

    (model,) = entry.models
    assert model.newest.path == good
    reasons = {s.path.name: s.reason for s in entry.skipped}
    assert reasons["2026-06-01T000000.json"].startswith("Invalid JSON")
    assert reasons["2026-06-02T000000.json"] == "timestamp: Field required"
    assert reasons["2026-06-03T000000.json"].startswith("overall_percentage: Input should be")
    assert reasons["2026-06-04T000000.json"] == "timestamp: not an RFC 3339 time: 'June'"
    assert reasons["2026-06-05T000000.json"].startswith("scenarios.0.pass: Input should be")
    assert code == 0
    err = capsys.readouterr().err
    assert f"note: skipped {folder / '2026-06-01T000000.json'}: Invalid JSON" in err
    assert err.count("note: skipped") == 5


@pytest.mark.parametrize("number", ["1e400", "NaN", "Infinity", "-Infinity"])
def test_a_report_whose_overall_is_not_a_finite_number_is_skipped_as_go_skips_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], number: str
) -> None:
    folder = results(skill(tmp_path, "x"), "m")
    good = report(folder / "2026-01-01T000000.json", timestamp="2026-01-01T00:00:00Z")
    (folder / "2026-06-01T000000.json").write_text(
        '{"skill_version": "1.0.0", "timestamp": "2026-06-01T00:00:00Z", '
        f'"overall_percentage": {number}, "scenarios": null}}'
    )

    code = main([str(tmp_path), "--json"])

    (model,) = read_skill(tmp_path, "x").models
    assert model.newest is not None
    assert model.newest.path == good
    assert code == 0
    assert "note: skipped" in capsys.readouterr().err


def test_a_null_field_is_its_zero_value_as_gos_decoder_reads_it(tmp_path: Path) -> None:
    folder = results(skill(tmp_path, "x"), "m")
    folder.mkdir(parents=True)
    (folder / "2026-06-01T000000.json").write_text(
        '{"skill_version": "1.0.0", "timestamp": "2026-06-01T00:00:00Z", '
        '"overall_percentage": 80, "config": {"model_label": null}, "scenarios": null}'
    )
    (folder / "2026-06-02T000000.json").write_text(
        '{"skill_version": "1.0.0", "timestamp": "2026-06-02T00:00:00Z", '
        '"overall_percentage": 90, "config": null, "scenarios": [{"name": "s", "pass": null}]}'
    )

    entry = read_skill(tmp_path, "x")

    assert not entry.skipped
    (model,) = entry.models
    assert model.newest is not None
    assert model.newest.path.name == "2026-06-02T000000.json"
    assert model.newest.label == ""
    assert [(s.name, s.passed) for s in model.newest.scenarios] == [("s", False)]


def test_only_the_keys_the_catalogue_needs_are_decoded(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(
        '{"timestamp": "2026-06-01T00:00:00Z", "threshold": "not an int", "extra": [1],'
        ' "config": {"agent_model": 7}, "scenarios": [{"name": "s", "criteria": "?"}]}'
    )

    facts = read_report(path)

    assert (facts.skill_version, facts.overall_percentage, facts.label) == ("", 0.0, "")
    assert [(s.name, s.description, s.passed) for s in facts.scenarios] == [("s", "", False)]


def test_the_newest_report_counts_only_for_the_current_version(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "skills", "skills/x/v1.1.0")
    folder = results(skill(root, "x"), "m")
    report(folder / "2026-01-01T000000.json", version="1.1.0", timestamp="2026-01-01T00:00:00Z")
    report(folder / "2026-06-01T000000.json", version="1.0.0", timestamp="2026-06-01T00:00:00Z")
    report(results(root / "x", "fresh") / "a.json", version="1.1.0")

    x = read_skill(root, "x")

    assert [m.model for m in x.counted] == ["fresh"]
    (dropped,) = x.dropped  # the older report for 1.1.0 does not stand in for it
    assert dropped.model == "m"
    assert dropped.why_dropped == "newest report is for 1.0.0, current version is 1.1.0"


@pytest.mark.parametrize(
    ("overall", "expected"), [(62.5, 63), (62.4, 62), (62.49999, 62), (99.5, 100), (0.0, 0)]
)
def test_effectiveness_rounds_halves_up(overall: float, expected: int) -> None:
    assert effectiveness(overall) == expected


def test_the_label_is_the_config_model_label(tree: Path) -> None:
    catalogue = read_catalogue(tree)

    (flat,) = entry(catalogue, "alpha").models
    (nested,) = entry(catalogue, "gamma").models
    assert flat.newest.label == "Flat <1>"
    assert nested.newest.label == ""


# --- the command's output --------------------------------------------------------------------

EXPECTED_JSON = """\
{
  "skills": {
    "alpha": {
      "version": "1.1.0",
      "models": {
        "flat": {
          "label": "Flat \\u003c1\\u003e",
          "effectiveness": 63,
          "scenarios": [
            {
              "name": "scenario-a",
              "description": "about a",
              "pass": true
            },
            {
              "name": "scenario-b",
              "description": "about b",
              "pass": false
            }
          ]
        }
      }
    },
    "beta": {
      "version": "0.2.0"
    },
    "gamma": {
      "version": "0.0.0",
      "models": {
        "org/m": {
          "label": "",
          "effectiveness": 62,
          "scenarios": null
        }
      }
    }
  }
}
"""


def test_json_output_is_exact(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main([str(tree), "--json"])

    out = capsys.readouterr()
    assert code == 0
    assert out.out == EXPECTED_JSON
    assert "models" not in json.loads(out.out)["skills"]["beta"]


def test_text_output_shows_versions_sources_models_and_why_one_is_dropped(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report(results(tree / "beta", "old") / "a.json", version="0.1.0", label="Old")

    code = main([str(tree)])

    assert code == 0
    assert capsys.readouterr().out.splitlines() == [
        "alpha 1.1.0 (git tag skills/alpha/v1.1.0)",
        '  flat "Flat <1>": 63%',
        "    pass scenario-a: about a",
        "    FAIL scenario-b: about b",
        "beta 0.2.0 (CHANGELOG.md)",
        "  old: not counted: newest report is for 0.1.0, current version is 0.2.0"
        f" ({results(tree / 'beta', 'old') / 'a.json'})",
        "  no model counts for 0.2.0",
        "gamma 0.0.0 (default)",
        "  org/m: 62%",
    ]


@pytest.mark.parametrize("argv", [["--no-such-option"], ["missing-root"], ["a", "b"]])
def test_bad_arguments_or_a_missing_root_exit_2(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    assert main(argv) == 2


def test_the_root_defaults_to_skills(
    tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tree.parent)

    assert main(["--json"]) == 0
    assert capsys.readouterr().out == EXPECTED_JSON


# --- --check ---------------------------------------------------------------------------------


def test_check_passes_when_every_newest_report_is_for_the_current_version(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main([str(tree), "--check"])

    assert code == 0
    assert capsys.readouterr().out == (
        "OK: every model's newest report is for its skill's current version "
        "(skills: 3, counted models: 2)\n"
    )


def test_check_lists_every_model_left_behind_by_a_version_bump(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    git(tree, "tag", "skills/alpha/v1.2.0")
    (tree / "gamma" / "CHANGELOG.md").write_text("## [0.1.0]\n")

    code = main([str(tree), "--check"])

    assert code == 1
    assert capsys.readouterr().out.splitlines() == [
        "2 models have no counted report for their skill's current version"
        " (bump the version first and run the evals after the bump):",
        "  alpha 1.2.0 (git tag skills/alpha/v1.2.0): flat:"
        " newest report is for 1.1.0, current version is 1.2.0",
        "  gamma 0.1.0 (CHANGELOG.md): org/m: newest report is for 0.0.0, current version is 0.1.0",
    ]


def test_with_json_the_check_result_goes_to_stderr(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    git(tree, "tag", "skills/alpha/v1.2.0")

    code = main([str(tree), "--json", "--check"])

    out = capsys.readouterr()
    assert code == 1
    assert "flat: newest report is for 1.1.0" in out.err
    assert "models" not in json.loads(out.out)["skills"]["alpha"]


# --- --update-versions -----------------------------------------------------------------------

VERSIONS = """\
{
  "skills": {
    "alpha": {
      "version": "1.1.0",
      "description": "Ünïcode \\u003cb\\u003e — “quoted” \\u2028",
      "tags": [
        "x\\u0026y"
      ]
    },
    "beta": {
      "version": "0.2.0",
      "description": "b",
      "models": {
        "old": {
          "label": "Old",
          "effectiveness": 10,
          "scenarios": null
        }
      }
    },
    "gamma": {
      "models": {"stale": {"label": "", "effectiveness": 1, "scenarios": null}},
      "version": "0.0.0",
      "description":"hand  edited"
    },
    "only-in-file": {
      "version": "9.9.9",
      "description": "not under the root",
      "models": {
        "kept": {
          "label": "K",
          "effectiveness": 99,
          "scenarios": null
        }
      }
    }
  },
  "rules": {
    "r": {"version": "1.0.0", "n": 1.50}
  },
  "profiles": {}
}
"""

UPDATED = """\
{
  "skills": {
    "alpha": {
      "version": "1.1.0",
      "description": "Ünïcode \\u003cb\\u003e — “quoted” \\u2028",
      "tags": [
        "x\\u0026y"
      ],
      "models": {
        "flat": {
          "label": "Flat \\u003c1\\u003e",
          "effectiveness": 63,
          "scenarios": [
            {
              "name": "scenario-a",
              "description": "about a",
              "pass": true
            },
            {
              "name": "scenario-b",
              "description": "about b",
              "pass": false
            }
          ]
        }
      }
    },
    "beta": {
      "version": "0.2.0",
      "description": "b"
    },
    "gamma": {
      "models": {
        "org/m": {
          "label": "",
          "effectiveness": 62,
          "scenarios": null
        }
      },
      "version": "0.0.0",
      "description":"hand  edited"
    },
    "only-in-file": {
      "version": "9.9.9",
      "description": "not under the root",
      "models": {
        "kept": {
          "label": "K",
          "effectiveness": 99,
          "scenarios": null
        }
      }
    }
  },
  "rules": {
    "r": {"version": "1.0.0", "n": 1.50}
  },
  "profiles": {}
}
"""


def test_splicing_adds_replaces_and_removes_models_and_keeps_every_other_byte(
    tree: Path,
) -> None:
    skill(tree, "delta")

    update = splice_versions(VERSIONS, read_catalogue(tree), "versions.json")

    assert update.text == UPDATED
    assert (update.added, update.replaced, update.removed) == (("alpha",), ("gamma",), ("beta",))
    assert update.not_in_file == ("delta",)
    assert update.not_under_root == ("only-in-file",)


def test_splicing_a_file_already_up_to_date_changes_nothing(tree: Path) -> None:
    update = splice_versions(UPDATED, read_catalogue(tree), "versions.json")

    assert not update.changed
    assert update.text == UPDATED


def test_update_versions_rewrites_the_file_in_place_keeping_its_mode(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    skill(tree, "delta")
    web = tmp_path / "web"
    web.mkdir()
    versions = web / "versions.json"
    versions.write_bytes(VERSIONS.encode())
    versions.chmod(0o640)

    code = main([str(tree), "--update-versions", str(versions)])

    out = capsys.readouterr()
    assert code == 0
    assert versions.read_bytes() == UPDATED.encode()
    assert stat.S_IMODE(versions.stat().st_mode) == 0o640
    assert sorted(p.name for p in web.iterdir()) == ["versions.json"]  # no temporary file left
    assert out.out == (
        f"updated {versions}: models added for alpha; models replaced for gamma;"
        " models removed for beta\n"
    )
    assert f"note: skills under {tree} but not in {versions} (not added): delta" in out.err
    assert f"note: skills in {versions} but not under {tree} (left as they are): only-in-file" in (
        out.err
    )

    assert main([str(tree), "--update-versions", str(versions)]) == 0
    assert capsys.readouterr().out == f"{versions} is up to date\n"


def test_update_versions_keeps_windows_line_ends_outside_the_models(tree: Path) -> None:
    versions = tree.parent / "versions.json"
    crlf = VERSIONS.replace("\n", "\r\n").encode()
    versions.write_bytes(crlf)

    assert main([str(tree), "--update-versions", str(versions)]) == 0

    text = versions.read_bytes().decode()
    assert "\n" not in text.replace("\r\n", "")
    assert '"only-in-file": {\r\n      "version": "9.9.9",\r\n' in text
    assert '"rules": {\r\n    "r": {"version": "1.0.0", "n": 1.50}\r\n  },\r\n' in text
    assert json.loads(text)["skills"]["beta"] == {"version": "0.2.0", "description": "b"}


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json", "not JSON"),
        ("[]", "not a versions file: Input should be"),
        ('{"rules": {}}', "not a versions file: skills: Field required"),
        ('{"skills": []}', "not a versions file: skills: Input should be"),
        ('{"skills": {"alpha": {"description": "d"}}}', "skills.alpha.version: Field required"),
        ('{"skills": {"alpha": {"version": 1}}}', "skills.alpha.version: Input should be"),
        ('{"skills": {"alpha": {"version": "1", "models": []}}}', "skills.alpha.models: Input"),
        ('{"skills": {"alpha": {"version": "1", "version": "2"}}}', "duplicate key 'version'"),
        ('{"skills": {}} trailing', "not JSON: Extra data"),
    ],
)
def test_a_file_of_another_shape_is_an_error_and_stays_untouched(
    content: str, problem: str, tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    versions = tree.parent / "versions.json"
    versions.write_text(content)
    before = versions.stat()

    code = main([str(tree), "--update-versions", str(versions)])

    err = capsys.readouterr()
    assert code == 2
    assert err.out == ""  # nothing shown before the error
    assert err.err.startswith(f"error: {versions}: ")
    assert problem in err.err
    assert versions.read_text() == content
    assert versions.stat().st_mtime_ns == before.st_mtime_ns
    with pytest.raises(VersionsFileError, match=r"^versions\.json: "):
        splice_versions(content, read_catalogue(tree), "versions.json")


def test_a_missing_or_undecodable_versions_file_exits_2(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tree.parent / "missing.json"
    latin1 = tree.parent / "latin1.json"
    latin1.write_bytes(
        '{"skills": {"alpha": {"version": "1", "description": "é"}}}'.encode("latin-1")
    )

    assert main([str(tree), "--update-versions", str(missing)]) == 2
    assert f"error: cannot read {missing}: No such file or directory" in capsys.readouterr().err
    assert main([str(tree), "--update-versions", str(latin1)]) == 2
    assert f"error: {latin1}: not UTF-8: " in capsys.readouterr().err
    assert not missing.exists()
