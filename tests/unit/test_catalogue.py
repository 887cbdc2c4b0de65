"""The catalogue's rule and the plugin's (skills, current version, the report per model,
version filter, rounding), where they differ, and ``versions.json`` splicing, on real git
repositories and real files in tmp_path."""

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
    ReportDecodeError,
    Rule,
    SkillEntry,
    VersionsFileError,
    current_version,
    effectiveness,
    read_catalogue,
    read_report,
    read_skill,
    rule_differences,
    splice_versions,
)
from pytest_openkata.core.earlier import newest_report

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


def test_without_a_tag_the_catalogue_has_the_default_and_the_plugin_the_changelog(
    tmp_path: Path,
) -> None:
    root = git_repo(tmp_path, "skills/other/v2.0.0")
    skill(root, "logged", "# Changelog\n\n## [Unreleased]\n\n## [1.2.3] - 2026-06-01\n")
    skill(root, "bare")

    catalogue = current_version(root, "logged")
    logged, bare = current_version(root, "logged", Rule.PLUGIN), current_version(root, "bare")

    assert (catalogue.version, catalogue.source) == ("0.0.0", "default")
    assert (logged.version, logged.source) == ("1.2.3", "CHANGELOG.md")
    assert (bare.version, bare.source) == ("0.0.0", "default")


def test_a_tag_that_names_no_version_is_the_empty_version_for_the_catalogue(
    tmp_path: Path,
) -> None:
    root = git_repo(tmp_path, "skills/x/v")
    skill(root, "x", "## [0.3.0]\n")

    catalogue, plugin = current_version(root, "x"), current_version(root, "x", Rule.PLUGIN)

    assert (catalogue.version, catalogue.source) == ("", "git tag skills/x/v")
    assert (plugin.version, plugin.source) == ("0.3.0", "CHANGELOG.md")


def test_outside_a_repository_and_without_git_there_is_no_tag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    skill(tmp_path, "x", "## [0.3.0]\n")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))

    outside = current_version(tmp_path, "x", Rule.PLUGIN)
    monkeypatch.setenv("PATH", str(tmp_path / "no-such-bin"))
    without_git = current_version(tmp_path, "x", Rule.PLUGIN)

    assert outside.source == without_git.source == "CHANGELOG.md"
    assert outside.version == without_git.version == "0.3.0"


# --- reports per model -----------------------------------------------------------------------


def test_the_catalogue_finds_only_the_folders_directly_under_results(tmp_path: Path) -> None:
    x = skill(tmp_path, "x")
    report(results(x, "flat") / "a.json")
    report(results(x, "org/model") / "a.json")
    report(results(x, "org/deeper/model") / "a.json")
    report(results(x, "own") / "a.json")
    report(results(x, "own/nested") / "a.json")
    report(x / "evals" / "results" / "loose.json")  # in no model folder
    (results(x, "empty")).mkdir(parents=True)
    (results(x, "dir.json")).mkdir()  # a folder is no report
    (results(x, "linked")).symlink_to(results(x, "flat"))  # a link is no model folder

    catalogue = [m.model for m in read_skill(tmp_path, "x").models]
    plugin = [m.model for m in read_skill(tmp_path, "x", Rule.PLUGIN).models]

    assert catalogue == ["flat", "own"]
    assert plugin == ["flat", "org/deeper/model", "org/model", "own", "own/nested"]


def test_the_catalogue_reads_the_greatest_file_name_and_the_plugin_the_latest_timestamp(
    tmp_path: Path,
) -> None:
    x = skill(tmp_path, "x")
    folder = results(x, "m")
    greatest = report(folder / "results-2026-01-01T000000.json", timestamp="2026-01-01T00:00:00Z")
    newest = report(folder / "2026-06-01T000000.json", timestamp="2026-06-01T00:00:00Z")
    report(folder / "2026-03-01T000000.json", timestamp="2026-03-01T00:00:00Z")
    report(folder / "Z-upper.json", timestamp="2026-02-01T00:00:00Z")  # "Z" < "r" in bytes

    (catalogue,) = read_skill(tmp_path, "x").models
    (plugin,) = read_skill(tmp_path, "x", Rule.PLUGIN).models

    assert catalogue.path == greatest
    assert plugin.path == newest


def test_file_names_are_compared_as_go_compares_them_byte_by_byte(tmp_path: Path) -> None:
    folder = results(skill(tmp_path, "x"), "m")
    report(folder / "\uff41.json", overall=10)  # U+FF41: EF BD 81
    report(folder / "\U0001f600.json", overall=20)  # U+1F600: F0 9F 98 80, greater in bytes
    report(folder / "\u00e9.json", overall=30)

    (model,) = read_skill(tmp_path, "x").models

    assert model.path.name == "\U0001f600.json"


def test_equal_timestamps_are_told_apart_by_the_number_of_the_name(tmp_path: Path) -> None:
    folder = results(skill(tmp_path, "x"), "m")
    report(folder / "2026-06-01T000000.json", overall=10)
    report(folder / "2026-06-01T000000-3.json", overall=30, timestamp="2026-06-01T02:00:00+02:00")
    report(folder / "2026-06-01T000000-2.json", overall=20)

    (model,) = read_skill(tmp_path, "x", Rule.PLUGIN).models

    # The third report of the second is the newest, as the earlier-run loader takes it; the
    # catalogue's plain string order would take the unnumbered name ("." sorts after "-").
    assert model.path.name == "2026-06-01T000000-3.json"
    assert model.facts is not None
    assert model.facts.overall_percentage == 30
    newest = newest_report(folder)
    assert newest == model.path


def test_the_catalogue_lists_real_folders_with_a_readable_skill_md(tmp_path: Path) -> None:
    skill(tmp_path, "plain")
    (tmp_path / "linked").symlink_to(tmp_path / "plain")
    (tmp_path / "tile").mkdir()
    (tmp_path / "tile" / "tile.json").write_text(
        '{"name": "o/tile", "version": "1.0.0", "docs": "docs.md"}'
    )
    (tmp_path / "tile" / "docs.md").write_text("# docs\n")
    (tmp_path / "folder-md" / "SKILL.md").mkdir(parents=True)
    (tmp_path / "loose.md").write_text("# not a folder\n")

    catalogue = read_catalogue(tmp_path)
    plugin = read_catalogue(tmp_path, Rule.PLUGIN)

    assert [s.name for s in catalogue.skills] == ["plain"]
    assert [s.name for s in plugin.skills] == ["linked", "plain", "tile"]
    assert [(d.skill, d.text) for d in rule_differences(catalogue, plugin)] == [
        (
            "linked",
            "listed at version 0.0.0 (default); the catalogue's rule does not list it"
            " (a symbolic link, and the catalogue lists only real folders)",
        ),
        (
            "tile",
            "listed at version 1.0.0 (tile.json); the catalogue's rule does not list it"
            " (no SKILL.md)",
        ),
    ]


def test_by_the_plugins_rule_a_report_that_cannot_be_decoded_is_skipped_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = results(skill(tmp_path, "x"), "m")
    good = report(folder / "2026-01-01T000000.json", timestamp="2026-01-01T00:00:00Z")
    (folder / "2026-06-01T000000.json").write_text("{not json")
    (folder / "2026-06-02T000000.json").write_text(
        '{"skill_version": "1.0.0", "overall_percentage": 90}'
    )
    (folder / "2026-06-03T000000.json").write_text(
        '{"timestamp": "2026-06-03T00:00:00Z", "overall_percentage": "90"}'
    )
    (folder / "2026-06-04T000000.json").write_text('{"timestamp": "June"}')
    (folder / "2026-06-05T000000.json").write_text(
        '{"timestamp": "2026-06-05T00:00:00Z", "scenarios": [{"name": "s", "pass": "yes"}]}'
    )

    entry = read_skill(tmp_path, "x", Rule.PLUGIN)
    code = main([str(tmp_path), "--plugin-rule"])

    (model,) = entry.models
    assert model.path == good
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


def test_the_catalogue_drops_a_model_whose_report_cannot_be_decoded_and_reads_no_other(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = git_repo(tmp_path / "skills", "skills/x/v1.0.0")
    folder = results(skill(root, "x"), "m")
    good = report(folder / "2026-01-01T000000.json", timestamp="2026-01-01T00:00:00Z")
    broken = folder / "2026-06-01T000000.json"
    broken.write_text('{"skill_version": "1.0.0", "overall_percentage": "90"}')

    x = read_skill(root, "x")
    code = main([str(root), "--json"])

    (model,) = x.models
    assert (model.path, model.facts, model.counted) == (broken, None, False)
    assert model.why_dropped == (
        "its report cannot be decoded: overall_percentage: Input should be a valid number"
    )
    assert code == 0
    out = capsys.readouterr()
    assert json.loads(out.out) == {"skills": {"x": {"version": "1.0.0"}}}
    assert f"note: skipped {broken}: overall_percentage: Input should be" in out.err
    assert (
        f"note: x: by the plugin's rule: m: 100% (the newest report by timestamp is {good.name},"
        f" not {broken.name})"
    ) in out.err


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

    code = main([str(tmp_path), "--json", "--plugin-rule"])

    (catalogue,) = read_skill(tmp_path, "x").models
    (plugin,) = read_skill(tmp_path, "x", Rule.PLUGIN).models
    assert catalogue.facts is None
    assert plugin.path == good
    assert code == 0
    assert "note: skipped" in capsys.readouterr().err


def test_a_named_pipe_is_no_report_and_is_not_waited_on(tmp_path: Path) -> None:
    folder = results(skill(tmp_path, "x"), "m")
    folder.mkdir(parents=True)
    os.mkfifo(folder / "2026-06-01T000000.json")

    (model,) = read_skill(tmp_path, "x").models

    assert model.why_dropped == "its report cannot be decoded: cannot read: not a regular file"


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

    entry = read_skill(tmp_path, "x", Rule.PLUGIN)

    assert not entry.skipped
    (model,) = entry.models
    assert model.facts is not None
    assert model.path.name == "2026-06-02T000000.json"
    assert model.facts.label == ""
    assert [(s.name, s.passed) for s in model.facts.scenarios] == [("s", False)]


def test_only_the_keys_the_catalogue_needs_are_decoded(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(
        '{"timestamp": "2026-06-01T00:00:00Z", "threshold": "not an int", "extra": [1],'
        ' "config": {"agent_model": 7}, "scenarios": [{"name": "s", "criteria": "?"}]}'
    )

    facts = read_report(path)

    assert (facts.skill_version, facts.overall_percentage, facts.label) == ("", 0.0, "")
    assert [(s.name, s.description, s.passed) for s in facts.scenarios] == [("s", "", False)]


def test_the_catalogue_needs_no_timestamp_and_the_plugins_rule_does(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text('{"skill_version": "1.0.0", "timestamp": 7, "overall_percentage": 50}')

    facts = read_report(path)

    assert (facts.skill_version, facts.timestamp, facts.effectiveness) == ("1.0.0", None, 50)
    with pytest.raises(ReportDecodeError, match=r"^timestamp: Input should be a valid string"):
        read_report(path, Rule.PLUGIN)


def test_keys_nulls_and_bytes_are_decoded_as_gos_decoder_does(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(
        '{"skill_version": "1.0.0", "S\u212aILL_VERSION": "1.1.0", "OVERALL_PERCENTAGE": 40,'
        ' "config": {"model_label": "bad # byte"}, "\u017fcenarios":'
        ' [null, {"NAME": "s", "pa\u00df": true}]}'.encode().replace(b"#", b"\xff")
    )
    null = tmp_path / "null.json"
    null.write_text("null")

    facts = read_report(path)

    # A key matches its field regardless of case (the Kelvin sign is a k, the long s an s, a
    # sharp s no "ss"), and the last key for a field counts, even after the exact one.
    assert (facts.skill_version, facts.overall_percentage) == ("1.1.0", 40)
    assert facts.label == "bad \ufffd byte"  # a byte that is no UTF-8
    assert [(s.name, s.passed) for s in facts.scenarios] == [("", False), ("s", False)]
    assert read_report(null).skill_version == ""


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
    catalogue = read_catalogue(tree, Rule.PLUGIN)

    (flat,) = entry(catalogue, "alpha").models
    (nested,) = entry(catalogue, "gamma").models
    assert flat.facts is not None
    assert nested.facts is not None
    assert flat.facts.label == "Flat <1>"
    assert nested.facts.label == ""


# --- the command's output --------------------------------------------------------------------

CATALOGUE_JSON = """\
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
      "version": "0.0.0"
    },
    "gamma": {
      "version": "0.0.0"
    }
  }
}
"""

PLUGIN_JSON = """\
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


@pytest.mark.parametrize(
    ("option", "expected", "notes"),
    [
        (
            [],
            CATALOGUE_JSON,
            [
                "note: beta: by the plugin's rule: version 0.2.0 (CHANGELOG.md)",
                "note: gamma: by the plugin's rule: org/m: 62%"
                " (a nested folder, which the catalogue does not read)",
            ],
        ),
        (
            ["--plugin-rule"],
            PLUGIN_JSON,
            [
                "note: beta: by the catalogue's rule: version 0.0.0 (default)",
                "note: gamma: by the catalogue's rule: org/m: not shown"
                " (a nested folder, which the catalogue does not read)",
            ],
        ),
    ],
)
def test_json_output_is_exact_and_the_other_rules_view_is_a_note(
    tree: Path,
    capsys: pytest.CaptureFixture[str],
    option: list[str],
    expected: str,
    notes: list[str],
) -> None:
    code = main([str(tree), "--json", *option])

    out = capsys.readouterr()
    assert code == 0
    assert out.out == expected
    assert "models" not in json.loads(out.out)["skills"]["beta"]
    assert out.err.splitlines() == notes


def test_text_output_shows_versions_sources_models_why_one_is_dropped_and_the_differences(
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
        "beta 0.0.0 (default)",
        "  old: not counted: newest report is for 0.1.0, current version is 0.0.0"
        f" ({results(tree / 'beta', 'old') / 'a.json'})",
        "  no model counts for 0.0.0",
        "  by the plugin's rule: version 0.2.0 (CHANGELOG.md)",
        "gamma 0.0.0 (default)",
        "  no model counts for 0.0.0",
        "  by the plugin's rule: org/m: 62% (a nested folder, which the catalogue does not read)",
    ]


def test_text_output_by_the_plugins_rule_says_what_the_catalogue_shows(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report(results(tree / "beta", "old") / "a.json", version="0.2.0", label="Old", overall=10)

    code = main([str(tree), "--plugin-rule"])

    assert code == 0
    assert capsys.readouterr().out.splitlines() == [
        "alpha 1.1.0 (git tag skills/alpha/v1.1.0)",
        '  flat "Flat <1>": 63%',
        "    pass scenario-a: about a",
        "    FAIL scenario-b: about b",
        "beta 0.2.0 (CHANGELOG.md)",
        '  old "Old": 10%',
        "    pass scenario-a: about a",
        "  by the catalogue's rule: version 0.0.0 (default)",
        "  by the catalogue's rule: old: not counted: newest report is for 0.2.0, current version"
        " is 0.0.0",
        "gamma 0.0.0 (default)",
        "  org/m: 62%",
        "  by the catalogue's rule: org/m: not shown"
        " (a nested folder, which the catalogue does not read)",
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
    assert capsys.readouterr().out == CATALOGUE_JSON


# --- --check ---------------------------------------------------------------------------------


def test_a_version_only_the_changelog_gives_and_a_report_without_timestamp_are_differences(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = git_repo(tmp_path / "skills")
    logged = skill(root, "logged", "## [1.2.3]\n")
    report(results(logged, "m") / "a.json", version="1.2.3", overall=80, label="M")
    untimed = results(skill(root, "untimed"), "m")
    untimed.mkdir(parents=True)
    (untimed / "a.json").write_text('{"skill_version": "0.0.0", "overall_percentage": 70}')

    code = main([str(root)])

    assert code == 0
    assert capsys.readouterr().out.splitlines() == [
        "logged 0.0.0 (default)",
        f"  m: not counted: newest report is for 1.2.3, current version is 0.0.0"
        f" ({results(logged, 'm') / 'a.json'})",
        "  no model counts for 0.0.0",
        "  by the plugin's rule: version 1.2.3 (CHANGELOG.md)",
        '  by the plugin\'s rule: m "M": 80% (for version 1.2.3)',
        "untimed 0.0.0 (default)",
        "  m: 70%",
        "  by the plugin's rule: m: not shown (the plugin's rule can decode none of its reports)",
    ]


@pytest.mark.parametrize(("option", "models"), [([], 1), (["--plugin-rule"], 2)])
def test_check_passes_when_every_newest_report_is_for_the_current_version(
    tree: Path, capsys: pytest.CaptureFixture[str], option: list[str], models: int
) -> None:
    code = main([str(tree), "--check", *option])

    assert code == 0
    assert capsys.readouterr().out == (
        "OK: every model's newest report is for its skill's current version "
        f"(skills: 3, counted models: {models})\n"
    )


def test_check_lists_every_model_left_behind_by_a_version_bump(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    git(tree, "tag", "skills/alpha/v1.2.0")
    (tree / "gamma" / "CHANGELOG.md").write_text("## [0.1.0]\n")

    code = main([str(tree), "--check"])

    assert code == 1
    assert capsys.readouterr().out.splitlines() == [
        "1 models have no counted report for their skill's current version"
        " (bump the version first and run the evals after the bump):",
        "  alpha 1.2.0 (git tag skills/alpha/v1.2.0): flat:"
        " newest report is for 1.1.0, current version is 1.2.0",
    ]
    assert main([str(tree), "--check", "--plugin-rule"]) == 1
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

    update = splice_versions(VERSIONS, read_catalogue(tree, Rule.PLUGIN), "versions.json")

    assert update.text == UPDATED
    assert (update.added, update.replaced, update.removed) == (("alpha",), ("gamma",), ("beta",))
    assert update.not_in_file == ("delta",)
    assert update.not_under_root == ("only-in-file",)


def test_splicing_a_file_already_up_to_date_changes_nothing(tree: Path) -> None:
    update = splice_versions(UPDATED, read_catalogue(tree, Rule.PLUGIN), "versions.json")

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

    code = main([str(tree), "--update-versions", str(versions), "--plugin-rule"])

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

    assert main([str(tree), "--update-versions", str(versions), "--plugin-rule"]) == 0
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


def test_text_output_shows_control_characters_of_a_report_as_escapes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An errored scenario's description holds its error, which may hold a model's text."""
    root = git_repo(tmp_path / "skills")
    skill(root, "alpha")
    hostile = " (error: agent: \x1b[2J\x1b]0;pwned\x07 cleared)"
    report(results(root / "alpha", "m") / "a.json", version="0.0.0", overall=0.0,
           scenarios=(("scenario-a", hostile, False),))  # fmt: skip

    assert main([str(root)]) == 0

    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert "\x07" not in out
    assert "FAIL scenario-a: (error: agent: \\x1b[2J\\x1b]0;pwned\\x07 cleared)" in out
