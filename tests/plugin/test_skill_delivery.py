"""The skill_delivery setting on the host: ``prompt`` pastes the skill into the prompt, as the
reference does; ``installed`` puts it where Claude Code discovers skills (a stand-in printing
Claude Code's events stands for it), leaves the prompt to the task, is recorded in the run log
and keeps the two deliveries' cached answers apart. An agent without a skills folder, or a
model backend, is a clear configuration error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, run_logs, write_skill
from tests.support.scripted_claude import ScriptedClaude, install_scripted_claude

TASK = "Do the task of scenario-a."


@pytest.fixture
def claude(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ScriptedClaude:
    standin, path = install_scripted_claude(tmp_path / "bin")
    monkeypatch.setenv("PATH", path)
    standin.plan("s", {TASK: ["load"]})
    return standin


def _skill(root: Path) -> Path:
    skill = write_skill(root, "s", {"scenario-a": {"x": 1}})
    (skill / "SKILL.md").write_text("---\nname: s\ndescription: tasks\n---\nRULE-IN-SKILL\n")
    (skill / "assets").mkdir()
    (skill / "assets" / "table.csv").write_text("a,b\n")
    return skill


def _run(pytester: pytest.Pytester, endpoint: ScriptedEndpoint, *extra: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "skills/s",
        "--eval-backend", "claude",
        "--eval-judge-backend", "http",
        "--eval-base-url", endpoint.base_url,
        *extra,
    )  # fmt: skip


def _log(root: Path, index: int) -> list[dict]:
    logs = run_logs(root)  # runs may end in the same second
    return [json.loads(line) for line in logs[index].read_text().splitlines()]


def test_installed_delivery_puts_the_skill_where_claude_looks_and_the_prompt_is_the_task(
    pytester: pytest.Pytester,
    claude: ScriptedClaude,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
) -> None:
    _skill(pytester.path)

    pasted = _run(pytester, endpoint)
    installed = _run(pytester, endpoint, "--eval-skill-delivery", "installed")
    again = _run(pytester, endpoint, "--eval-skill-delivery", "installed")

    assert pasted.ret == installed.ret == again.ret == pytest.ExitCode.OK, installed.stdout.str()
    first, second = claude.calls()  # the repeat came from the cache; prompt's did not serve it
    assert "RULE-IN-SKILL" in first["prompt"]
    assert "--bare" in first["argv"]
    assert not [f for f in first["files"] if f.startswith(".claude")]
    assert second["prompt"].strip() == TASK
    assert "--bare" not in second["argv"]
    assert second["files"] == [".claude/skills/s/SKILL.md", ".claude/skills/s/assets/table.csv"]

    for index, delivery in enumerate(["prompt", "installed", "installed"]):
        records = _log(pytester.path, index)
        assert records[0]["settings"]["skill_delivery"] == delivery
        [trial] = [r for r in records if r["record"] == "trial"]
        assert trial["trace"]["skill_delivery"] == delivery
    # The installed skill was loaded under its folder's name, as activation reads it.
    [trial] = [r for r in _log(pytester.path, 1) if r["record"] == "trial"]
    assert trial["trace"]["transcript"]["skills_loaded"] == [{"name": "s", "subagent": ""}]


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (
            ("--eval-backend", "command", "--eval-agent-command", "cat"),
            "command declares no skills folder",
        ),
        (("--eval-backend", "http"), "needs an agent CLI backend; http is a model backend"),
    ],
)
def test_installed_delivery_without_a_skills_folder_is_a_configuration_error(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    options: tuple[str, ...],
    said: str,
) -> None:
    _skill(pytester.path)

    result = pytester.runpytest_subprocess(
        "skills/s",
        *options,
        "--eval-base-url", endpoint.base_url,
        "--eval-skill-delivery", "installed",
    )  # fmt: skip

    result.assert_outcomes(errors=1)
    assert "skill_delivery installed" in result.stdout.str()
    assert said in result.stdout.str()
    assert not endpoint.requests  # nothing ran
