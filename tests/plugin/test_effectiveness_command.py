"""``python -m pytest_openkata effectiveness`` as a user runs it, in a real git repository, on
reports written by this plugin's own results JSON reporter and on one in the Go runner's
exact format: by default what the catalogue's own rule shows, with ``--plugin-rule`` the
plugin's, and in either case what the other rule would show instead."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.core.reporting import make_run
from pytest_openkata.core.summary import summarise
from pytest_openkata.providers.reporters.results_json import ResultsJsonReporter
from tests.support.results import judged, scenario

GIT_ENV = {
    **os.environ,
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}

# Spec section 10's example as the Go runner writes it, for a model whose "/" made it nest.
GO_REPORT = """\
{
  "skill": "review",
  "skill_version": "1.1.0",
  "timestamp": "2026-06-21T19:43:00Z",
  "config": {
    "backend": "kiro",
    "agent_model": "anthropic/claude-sonnet-4.6",
    "judge_model": "claude-sonnet-4.6",
    "model_label": "Sonnet 4.6"
  },
  "threshold": 95,
  "scenarios": [
    {
      "name": "scenario-0",
      "description": "Test scenario",
      "criteria": [
        {
          "name": "criterion-a",
          "pass": true,
          "score": 10,
          "max_score": 10,
          "reason": "well done"
        },
        {
          "name": "criterion-b",
          "pass": false,
          "score": 0,
          "max_score": 5,
          "reason": "missing"
        }
      ],
      "score": 10,
      "max_score": 15,
      "percentage": 66.66666666666666,
      "pass": false
    },
    {
      "name": "scenario-1",
      "description": " (error: judge: judge parse failed after retry: no JSON found in judge response)",
      "criteria": null,
      "score": 0,
      "max_score": 0,
      "percentage": 0,
      "pass": false
    }
  ],
  "overall_percentage": 33.33333333333333,
  "pass": false
}
"""  # noqa: E501  (the texts are the files', line for line)

CATALOGUE_JSON = """\
{
  "skills": {
    "draft": {
      "version": "0.0.0"
    },
    "review": {
      "version": "1.1.0",
      "models": {
        "openai_gpt-4o": {
          "label": "GPT-4o",
          "effectiveness": 63,
          "scenarios": [
            {
              "name": "scenario-0",
              "description": "about scenario-0",
              "pass": false
            },
            {
              "name": "scenario-1",
              "description": "about scenario-1",
              "pass": false
            }
          ]
        }
      }
    }
  }
}
"""

PLUGIN_JSON = """\
{
  "skills": {
    "draft": {
      "version": "0.1.0"
    },
    "review": {
      "version": "1.1.0",
      "models": {
        "anthropic/claude-sonnet-4.6": {
          "label": "Sonnet 4.6",
          "effectiveness": 33,
          "scenarios": [
            {
              "name": "scenario-0",
              "description": "Test scenario",
              "pass": false
            },
            {
              "name": "scenario-1",
              "description": " (error: judge: judge parse failed after retry: no JSON found in judge response)",
              "pass": false
            }
          ]
        },
        "openai_gpt-4o": {
          "label": "GPT-4o",
          "effectiveness": 63,
          "scenarios": [
            {
              "name": "scenario-0",
              "description": "about scenario-0",
              "pass": false
            },
            {
              "name": "scenario-1",
              "description": "about scenario-1",
              "pass": false
            }
          ]
        }
      }
    }
  }
}
"""  # noqa: E501


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, env=GIT_ENV, capture_output=True)


def effectiveness(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_openkata", "effectiveness", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def plugin_run(
    skill_dir: Path,
    finished_at: datetime,
    *,
    points: tuple[int, int] = (5, 3),
    model: str = "openai/gpt-4o",
    label: str = "GPT-4o",
    output: str = "",
) -> None:
    """What a complete run of the skill's two scenarios reports: each earns the first of
    ``points`` and misses the second (by default 5 of 8, so an overall 62.5 %); the plugin's
    reporter reads the version from the skill's CHANGELOG. With ``output`` (``--eval-output``)
    the report is ``<output>/results-<time>.json``."""
    names = ("scenario-0", "scenario-1")
    earned, missed = points
    results = [
        replace(
            scenario(
                name,
                [judged("a", earned, True), judged("b", missed, False)],
                skill="review",
                total=2,
            ),
            skill_dir=str(skill_dir),
        )
        for name in names
    ]
    settings = EvalSettings(backend="http", model=model, model_label=label, output=output)
    run = make_run(
        summarise(results, settings.threshold, skill_dir.parent),
        settings,
        finished_at,
        skill_dir.parent,
    )
    ResultsJsonReporter().report(run)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A repository whose skill ``review`` is tagged 1.1.0, with a plugin report for 1.0.0, a
    newer one for 1.1.0 and the Go runner's report; ``draft`` has no report."""
    skills = tmp_path / "skills"
    review = skills / "review"
    review.mkdir(parents=True)
    (review / "SKILL.md").write_text("# review\n")
    (review / "CHANGELOG.md").write_text("# Changelog\n\n## [1.0.0] - 2026-05-01\n")
    plugin_run(review, datetime(2026, 6, 1, 9, 0, tzinfo=UTC))
    (review / "CHANGELOG.md").write_text("## [1.1.0] - 2026-06-10\n\n## [1.0.0] - 2026-05-01\n")
    plugin_run(review, datetime(2026, 6, 10, 9, 0, tzinfo=UTC))
    go_report = review / "evals/results/anthropic/claude-sonnet-4.6/2026-06-21T194300.json"
    go_report.parent.mkdir(parents=True)
    go_report.write_text(GO_REPORT)
    draft = skills / "draft"
    draft.mkdir()
    (draft / "SKILL.md").write_text("# draft\n")
    (draft / "CHANGELOG.md").write_text("## [0.1.0]\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "skills")
    git(tmp_path, "tag", "skills/review/v1.0.0")
    git(tmp_path, "tag", "skills/review/v1.1.0")
    return tmp_path


def test_the_plugin_writes_the_reports_the_command_reads(project: Path) -> None:
    reports = sorted((project / "skills/review/evals/results").rglob("*.json"))

    assert [p.relative_to(project / "skills/review/evals/results").as_posix() for p in reports] == [
        "anthropic/claude-sonnet-4.6/2026-06-21T194300.json",
        "openai_gpt-4o/2026-06-01T090000.json",
        "openai_gpt-4o/2026-06-10T090000.json",
    ]
    assert json.loads(reports[1].read_text())["skill_version"] == "1.0.0"
    assert json.loads(reports[2].read_text())["skill_version"] == "1.1.0"


def test_json_output_of_plugin_and_go_reports(project: Path) -> None:
    catalogue = effectiveness(project, "--json")
    plugin = effectiveness(project, "--json", "--plugin-rule")

    assert catalogue.returncode == 0, catalogue.stderr
    assert catalogue.stdout == CATALOGUE_JSON
    assert catalogue.stderr.splitlines() == [
        "note: draft: by the plugin's rule: version 0.1.0 (CHANGELOG.md)",
        'note: review: by the plugin\'s rule: anthropic/claude-sonnet-4.6 "Sonnet 4.6": 33%'
        " (a nested folder, which the catalogue does not read)",
    ]
    assert plugin.returncode == 0, plugin.stderr
    assert plugin.stdout == PLUGIN_JSON
    assert plugin.stderr.splitlines() == [
        "note: draft: by the catalogue's rule: version 0.0.0 (default)",
        "note: review: by the catalogue's rule: anthropic/claude-sonnet-4.6: not shown"
        " (a nested folder, which the catalogue does not read)",
    ]


def test_text_output(project: Path) -> None:
    result = effectiveness(project)

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "draft 0.0.0 (default)",
        "  no model counts for 0.0.0",
        "  by the plugin's rule: version 0.1.0 (CHANGELOG.md)",
        "review 1.1.0 (git tag skills/review/v1.1.0)",
        '  openai_gpt-4o "GPT-4o": 63%',
        "    FAIL scenario-0: about scenario-0",
        "    FAIL scenario-1: about scenario-1",
        '  by the plugin\'s rule: anthropic/claude-sonnet-4.6 "Sonnet 4.6": 33%'
        " (a nested folder, which the catalogue does not read)",
    ]


def test_a_version_bump_without_new_evals_fails_the_check_and_empties_the_catalogue(
    project: Path,
) -> None:
    versions = project / "web" / "versions.json"
    versions.parent.mkdir()
    versions.write_text(
        '{\n  "skills": {\n    "review": {\n      "version": "1.1.0",\n'
        '      "description": "Reviews \\u003cdiffs\\u003e"\n    }\n  },\n'
        '  "rules": {},\n  "profiles": {}\n}\n'
    )

    before = effectiveness(project, "--check")
    updated = effectiveness(project, "--update-versions", "web/versions.json")
    git(project, "tag", "skills/review/v1.2.0")
    after = effectiveness(project, "--check")
    emptied = effectiveness(project, "--update-versions", "web/versions.json")

    assert before.returncode == 0
    assert before.stdout.startswith("OK: ")
    assert updated.returncode == 0, updated.stderr
    assert "models added for review" in updated.stdout
    assert "skills under skills but not in web/versions.json (not added): draft" in (updated.stderr)
    assert after.returncode == 1
    assert after.stdout.splitlines()[1:] == [
        "  review 1.2.0 (git tag skills/review/v1.2.0): openai_gpt-4o:"
        " newest report is for 1.1.0, current version is 1.2.0",
    ]
    assert emptied.returncode == 0
    assert "models removed for review" in emptied.stdout
    assert versions.read_text() == (
        '{\n  "skills": {\n    "review": {\n      "version": "1.1.0",\n'
        '      "description": "Reviews \\u003cdiffs\\u003e"\n    }\n  },\n'
        '  "rules": {},\n  "profiles": {}\n}\n'
    )


def test_a_missing_root_exits_2(tmp_path: Path) -> None:
    result = effectiveness(tmp_path)

    assert result.returncode == 2
    assert result.stderr == "error: skills is not a folder of skills\n"


# --- a repository where the two rules disagree -------------------------------------------------


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    """``review``, tagged 1.1.0, with reports of both namings and a nested model folder:

    - ``openai_gpt-4o``: a run to ``--eval-output`` on June 1 (``results-….json``, 10 %), then
      a run to the default place on June 10 (``2026-06-10T090000.json``, 90 %);
    - ``mistral``: ``results-….json`` of May, for 1.0.0, then June's report for 1.1.0;
    - ``anthropic/claude-sonnet-4.6``: the Go runner's report, nested by the ``/``.
    """
    review = tmp_path / "skills" / "review"
    review.mkdir(parents=True)
    (review / "SKILL.md").write_text("# review\n")
    (review / "CHANGELOG.md").write_text("## [1.0.0] - 2026-04-01\n")
    results = review / "evals" / "results"
    mistral = {"model": "mistral", "label": "Mistral"}
    plugin_run(
        review, datetime(2026, 5, 1, 9, 0, tzinfo=UTC), **mistral, output=f"{results}/mistral/"
    )
    (review / "CHANGELOG.md").write_text("## [1.1.0] - 2026-05-20\n\n## [1.0.0] - 2026-04-01\n")
    plugin_run(
        review,
        datetime(2026, 6, 1, 10, 0, tzinfo=UTC),
        points=(1, 9),
        output=f"{results}/openai_gpt-4o/",
    )
    plugin_run(review, datetime(2026, 6, 10, 9, 0, tzinfo=UTC), points=(9, 1))
    plugin_run(review, datetime(2026, 6, 10, 9, 0, tzinfo=UTC), **mistral)
    go_report = results / "anthropic/claude-sonnet-4.6/2026-06-21T194300.json"
    go_report.parent.mkdir(parents=True)
    go_report.write_text(GO_REPORT)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "skills")
    git(tmp_path, "tag", "skills/review/v1.1.0")
    return tmp_path


def models_of(document: str) -> dict[str, int]:
    models = json.loads(document)["skills"]["review"].get("models", {})
    return {model: entry["effectiveness"] for model, entry in models.items()}


def test_the_mixed_repository_holds_both_namings_and_a_nested_folder(mixed: Path) -> None:
    results = mixed / "skills/review/evals/results"

    assert sorted(p.relative_to(results).as_posix() for p in results.rglob("*.json")) == [
        "anthropic/claude-sonnet-4.6/2026-06-21T194300.json",
        "mistral/2026-06-10T090000.json",
        "mistral/results-2026-05-01T090000.json",
        "openai_gpt-4o/2026-06-10T090000.json",
        "openai_gpt-4o/results-2026-06-01T100000.json",
    ]


def test_by_default_the_text_is_what_the_catalogues_rule_shows_and_names_each_difference(
    mixed: Path,
) -> None:
    result = effectiveness(mixed)

    mistral = Path("skills/review/evals/results/mistral/results-2026-05-01T090000.json")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "review 1.1.0 (git tag skills/review/v1.1.0)",
        f"  mistral: not counted: newest report is for 1.0.0, current version is 1.1.0 ({mistral})",
        '  openai_gpt-4o "GPT-4o": 10%',
        "    FAIL scenario-0: about scenario-0",
        "    FAIL scenario-1: about scenario-1",
        '  by the plugin\'s rule: anthropic/claude-sonnet-4.6 "Sonnet 4.6": 33%'
        " (a nested folder, which the catalogue does not read)",
        '  by the plugin\'s rule: mistral "Mistral": 63% (the newest report by timestamp is'
        " 2026-06-10T090000.json, not results-2026-05-01T090000.json)",
        '  by the plugin\'s rule: openai_gpt-4o "GPT-4o": 90% (the newest report by timestamp is'
        " 2026-06-10T090000.json, not results-2026-06-01T100000.json)",
    ]


def test_with_plugin_rule_the_text_is_the_plugins_view_and_names_what_the_catalogue_shows(
    mixed: Path,
) -> None:
    result = effectiveness(mixed, "--plugin-rule")

    assert result.returncode == 0, result.stderr
    shown = [line for line in result.stdout.splitlines() if not line.startswith("    ")]
    assert shown == [
        "review 1.1.0 (git tag skills/review/v1.1.0)",
        '  anthropic/claude-sonnet-4.6 "Sonnet 4.6": 33%',
        '  mistral "Mistral": 63%',
        '  openai_gpt-4o "GPT-4o": 90%',
        "  by the catalogue's rule: anthropic/claude-sonnet-4.6: not shown"
        " (a nested folder, which the catalogue does not read)",
        "  by the catalogue's rule: mistral: not counted: newest report is for 1.0.0, current"
        " version is 1.1.0 (the report with the greatest file name is"
        " results-2026-05-01T090000.json, not 2026-06-10T090000.json)",
        '  by the catalogue\'s rule: openai_gpt-4o "GPT-4o": 10% (the report with the greatest'
        " file name is results-2026-06-01T100000.json, not 2026-06-10T090000.json)",
    ]


def test_json_check_and_update_versions_follow_the_catalogues_rule_unless_told(
    mixed: Path,
) -> None:
    versions = mixed / "versions.json"
    versions.write_text('{"skills": {"review": {"version": "1.1.0"}}}\n')

    catalogue = effectiveness(mixed, "--json")
    plugin = effectiveness(mixed, "--json", "--plugin-rule")
    check = effectiveness(mixed, "--check")
    plugin_check = effectiveness(mixed, "--check", "--plugin-rule")
    update = effectiveness(mixed, "--update-versions", "versions.json")
    written = versions.read_text()
    plugin_update = effectiveness(mixed, "--update-versions", "versions.json", "--plugin-rule")

    assert models_of(catalogue.stdout) == {"openai_gpt-4o": 10}
    assert models_of(plugin.stdout) == {
        "anthropic/claude-sonnet-4.6": 33,
        "mistral": 63,
        "openai_gpt-4o": 90,
    }
    assert 'note: review: by the plugin\'s rule: openai_gpt-4o "GPT-4o": 90%' in catalogue.stderr
    assert check.returncode == 1
    assert check.stdout.splitlines()[1:] == [
        "  review 1.1.0 (git tag skills/review/v1.1.0): mistral:"
        " newest report is for 1.0.0, current version is 1.1.0",
    ]
    assert 'note: review: by the plugin\'s rule: mistral "Mistral": 63%' in check.stderr
    assert plugin_check.returncode == 0, plugin_check.stdout
    assert (update.returncode, plugin_update.returncode) == (0, 0)
    assert models_of(written) == {"openai_gpt-4o": 10}
    assert "by the plugin's rule: anthropic/claude-sonnet-4.6" in update.stderr
    assert models_of(versions.read_text()) == models_of(plugin.stdout)
