"""Follow-up turns in a sandbox, in a real container: every turn runs in the same environment,
each later one continuing the session the previous turn's events named, and the workspace
is diffed after the last turn. The agent is a shell stand-in that prints Claude Code's
``stream-json`` events (read by the real reader); a busybox image holds no Claude Code."""

from __future__ import annotations

from pathlib import Path

import docker

from pytest_openkata.contracts.sandboxes import AgentCommand
from pytest_openkata.core.conversation import scripted
from pytest_openkata.core.sandboxed import SandboxSetup, run_agent_in_sandbox
from pytest_openkata.core.scenario import load_scenario
from pytest_openkata.infra.retry import NO_RETRY
from pytest_openkata.providers.agents.claude import ClaudeAgent
from pytest_openkata.providers.sandboxes.docker import DockerLimits, DockerProvider
from tests.support.evals import write_scenario, write_skill

# Each turn: the session --resume names (else a new one), a line in notes.txt, and its events.
STANDIN = r"""session=fresh-$$
if [ "$1" = --resume ]; then session=$2; fi
prompt=$(cat)
mkdir -p /tmp/turns
turn=$(ls /tmp/turns | wc -l)
touch /tmp/turns/$turn
echo "turn $turn: $prompt" >> notes.txt
printf '{"type":"system","subtype":"init","session_id":"%s"}\n' "$session"
printf '{"type":"result","subtype":"success","session_id":"%s",' "$session"
printf '"result":"answer %s in %s"}\n' "$turn" "$session"
"""


def _agent() -> AgentCommand:
    claude = ClaudeAgent()
    argv = ["sh", ".standin/claude"]
    return AgentCommand(
        "claude",
        argv,
        files=((".standin/claude", STANDIN.encode()),),
        read_output=lambda output: (claude.clean(output), claude.transcript(output)),
        session_argv=argv,
        session_of=claude.session_id,
        continue_argv=lambda session: [*argv, "--resume", session],
    )


def test_follow_ups_continue_the_session_in_the_same_container(
    use_engine: str, docker_client: docker.DockerClient, standin_image: str, tmp_path: Path
) -> None:
    skill = write_skill(tmp_path, "s", {})
    folder = write_scenario(skill, "scenario-0", {"x": 1}, sandbox=True)
    scenario = load_scenario(folder)
    provider = DockerProvider(
        docker_client, DockerLimits(standin_image, cpus=1.0, memory="256m", pids=64)
    )
    setup = SandboxSetup(provider, _agent(), "none", 60.0)

    result, _ = run_agent_in_sandbox(
        scenario,
        "The first prompt",
        setup,
        NO_RETRY,
        follow=scripted(["Second prompt", "Third prompt"]),
        task="The task",
    )

    first_session = result.turns[0].agent.split(" in ")[1]
    assert first_session.startswith("fresh-")
    assert [(turn.user, turn.agent) for turn in result.turns] == [
        ("The task", f"answer 0 in {first_session}"),
        ("Second prompt", f"answer 1 in {first_session}"),
        ("Third prompt", f"answer 2 in {first_session}"),
    ]
    assert result.output == f"answer 2 in {first_session}"  # the last turn's answer
    assert result.changes is not None
    [(path, content)] = result.changes.added  # after the last turn, the helper left out
    assert path == "notes.txt"
    assert content.data == (
        b"turn 0: The first prompt\nturn 1: Second prompt\nturn 2: Third prompt\n"
    )
    assert result.transcript is not None
    users = [step.text for step in result.transcript.steps if step.role == "user"]
    assert users == ["Second prompt", "Third prompt"]
    assert result.text.startswith(f"## Agent Output\n\nanswer 2 in {first_session}\n\n")
