"""Installed skill delivery in a real container: the skill is in the workspace where the agent
discovers skills, the workspace has no ``skill/`` copy, and neither the installed files nor
what the agent writes beside them are among its changes; a baseline arm without the skill
gets none."""

from __future__ import annotations

from pathlib import Path

import docker

from pytest_openkata.contracts.sandboxes import AgentCommand
from pytest_openkata.core.sandboxed import SandboxSetup, run_agent_in_sandbox
from pytest_openkata.core.scenario import load_scenario
from pytest_openkata.infra.retry import NO_RETRY
from pytest_openkata.providers.sandboxes.docker import DockerLimits, DockerProvider
from tests.support.evals import write_scenario, write_skill

STANDIN = AgentCommand(
    "kiro-cli",
    ["kiro-cli", "chat", "--no-interactive", "--model", "model-x"],
    skills_folder=".claude/skills",
)
TASK = (
    "Use the skill.\n"
    "STANDIN: shell find /workspace -type f | sort\n"
    "STANDIN: shell cat /workspace/.claude/skills/s/references/guide.md\n"
    "STANDIN: write .claude/skills/s/notes.md the agent's own notes\n"
    "STANDIN: write answer.md the answer\n"
)


def test_the_installed_skill_is_where_the_agent_looks_and_not_a_change(
    use_engine: str, docker_client: docker.DockerClient, standin_image: str, tmp_path: Path
) -> None:
    skill = write_skill(tmp_path, "s", {})
    (skill / "references").mkdir()
    (skill / "references" / "guide.md").write_text("GUIDE-TEXT\n")
    folder = write_scenario(skill, "scenario-0", {"x": 1}, sandbox=True)
    (folder / "task.md").write_text(TASK)
    scenario = load_scenario(folder)
    provider = DockerProvider(docker_client, DockerLimits(standin_image, 1.0, "256m", 64))
    setup = SandboxSetup(provider, STANDIN, "none", 60.0)

    installed, _ = run_agent_in_sandbox(scenario, TASK, setup, NO_RETRY)
    without, _ = run_agent_in_sandbox(scenario, TASK, setup, NO_RETRY, skill=False)

    listed = installed.output
    assert "/workspace/.claude/skills/s/SKILL.md" in listed
    assert "/workspace/.claude/skills/s/references/guide.md" in listed
    assert "GUIDE-TEXT" in listed
    assert "/workspace/skill/" not in listed  # no pasted copy in the workspace
    assert installed.changes is not None
    assert [path for path, _ in installed.changes.added] == ["answer.md"]
    changes = installed.text.split("## Workspace Changes", 1)[1]
    assert ".claude" not in changes  # the judge never sees the installed files as changes
    assert "**answer.md**" in changes
    assert "/workspace/.claude/skills/s/SKILL.md" not in without.output
    assert "GUIDE-TEXT" not in without.output
