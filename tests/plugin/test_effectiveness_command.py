"""``python -m pytest_openkata effectiveness`` as a user runs it, in a real git repository, on
reports written by this plugin's own results JSON reporter and on one in the Go runner's
exact format."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pytest_openkata.core.summary import summarise
from pytest_openkata.infra.config import EvalSettings
from pytest_openkata.providers.reporters import RunReport
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

EXPECTED_JSON = """\
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


def plugin_run(skill_dir: Path, finished_at: datetime) -> None:
    """What a complete run of the skill's two scenarios reports: each 5 of 8 points, so an
    overall 62.5 %; the plugin's reporter reads the version from the skill's CHANGELOG."""
    names = ("scenario-0", "scenario-1")
    results = [
        replace(
            scenario(name, [judged("a", 5, True), judged("b", 3, False)], skill="review", total=2),
            skill_dir=str(skill_dir),
        )
        for name in names
    ]
    settings = EvalSettings(backend="http", model="openai/gpt-4o", model_label="GPT-4o")
    run = RunReport(
        summaries=summarise(results, settings.threshold, skill_dir.parent),
        settings=settings,
        finished_at=finished_at,
        rootdir=skill_dir.parent,
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
    result = effectiveness(project, "--json")

    assert result.returncode == 0, result.stderr
    assert result.stdout == EXPECTED_JSON
    assert result.stderr == ""


def test_text_output(project: Path) -> None:
    result = effectiveness(project)

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "draft 0.1.0 (CHANGELOG.md)",
        "  no model counts for 0.1.0",
        "review 1.1.0 (git tag skills/review/v1.1.0)",
        '  anthropic/claude-sonnet-4.6 "Sonnet 4.6": 33%',
        "    FAIL scenario-0: Test scenario",
        "    FAIL scenario-1: (error: judge: judge parse failed after retry: no JSON found in"
        " judge response)",
        '  openai_gpt-4o "GPT-4o": 63%',
        "    FAIL scenario-0: about scenario-0",
        "    FAIL scenario-1: about scenario-1",
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
        "  review 1.2.0 (git tag skills/review/v1.2.0): anthropic/claude-sonnet-4.6:"
        " newest report is for 1.1.0, current version is 1.2.0",
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
