"""A sandboxed scenario's baseline arm, in real containers: without the skill the workspace has
no ``skill/`` folder, and at a git ref it holds the skill's files of that ref."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, reports_under, write_scenario, write_skill

LIST_SKILL = "List it.\nSTANDIN: shell ls -R /workspace/skill 2>&1 || echo no-skill-folder\n"


def _skill(root: Path) -> Path:
    skill = write_skill(root, "s", {})
    (skill / "references").mkdir()
    (skill / "references" / "guide.md").write_text("the current guide\n")
    folder = write_scenario(skill, "scenario-0", {"x": 1}, sandbox=True)
    (folder / "task.md").write_text(LIST_SKILL)
    return skill


def _judged_texts(endpoint: ScriptedEndpoint) -> list[str]:
    return [
        r.json["messages"][1]["content"]
        for r in endpoint.requests
        if r.json["messages"][0]["role"] == "system"
    ]


def _args(endpoint: ScriptedEndpoint, image: str, baseline: str) -> tuple[str, ...]:
    return (
        *eval_args(endpoint.base_url),
        "--eval-sandbox-image", image,
        "--eval-sandbox-mounts", "none",
        "--eval-baseline", baseline,
    )  # fmt: skip


def test_the_without_skill_arm_has_no_skill_folder_in_its_workspace(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
) -> None:
    _skill(pytester.path)

    result = pytester.runpytest("skills", *_args(endpoint, standin_image, "without-skill"))

    with_skill, without = _judged_texts(endpoint)
    assert "guide.md" in with_skill
    assert "no-skill-folder" not in with_skill
    assert "no-skill-folder" in without
    assert "guide.md" not in without
    [report] = reports_under(pytester.path)
    assert json.loads(report.read_text())["scenarios"][0]["baseline"]["arm"] == "without-skill"
    assert result.ret == pytest.ExitCode.OK


def test_the_arm_at_a_git_ref_has_that_ref_s_skill_files(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
) -> None:
    skill = _skill(pytester.path)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    (skill / "references" / "guide.md").rename(skill / "references" / "old-guide.md")
    for args in (["init", "-q"], ["add", "skills"], ["commit", "-q", "-m", "v1"], ["tag", "v1"]):
        subprocess.run([*git, *args], cwd=pytester.path, check=True, capture_output=True)
    (skill / "references" / "old-guide.md").rename(skill / "references" / "guide.md")

    pytester.runpytest("skills", *_args(endpoint, standin_image, "v1"))

    with_skill, at_ref = _judged_texts(endpoint)
    assert re.search(r"\bguide\.md\b", with_skill)
    assert "old-guide.md" not in with_skill
    assert "old-guide.md" in at_ref
