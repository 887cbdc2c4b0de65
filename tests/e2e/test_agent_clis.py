"""Real agent CLIs (Claude Code, Codex) answering through the CLI backend, offline, against the
local model: Claude Code on llama-server's Anthropic route, Codex on its Responses route; and
real ACP agents (OpenCode, Qwen Code) running a scenario through the plugin's ACP client, on its
chat completions route.

The CLIs are installed once into ``~/.cache/pytest-openkata/npm`` (``npm install --prefix``);
a failed install is an error, never a skip. A 135M model's answer is not checked for content.

llama-server caps answers at ``--n-predict`` tokens only for requests without ``max_tokens``;
Claude Code asks for 32000, and a rambling 135M model would write until its context is full
(minutes, holding the server's one slot). ``CLAUDE_CODE_MAX_OUTPUT_TOKENS`` bounds it (Claude
Code fails an answer cut there). The server decodes greedily with a fixed seed, and nothing is
retried; Claude Code's own request changes from run to run (see the test).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_openkata.contracts.agents import AgentSettings
from pytest_openkata.contracts.errors import AgentFailedError
from pytest_openkata.core.agent_backend import CLIBackend
from pytest_openkata.local.model import LocalModelServer
from pytest_openkata.local.steps import cache_dir
from pytest_openkata.providers.agents import make_agent
from tests.support.evals import write_skill

pytestmark = pytest.mark.e2e

NPM_PACKAGES = (
    "@anthropic-ai/claude-code",
    "@openai/codex",
    # ACP agents (tests/e2e/test_acp_agents.py).
    "opencode-ai",
    "@qwen-code/qwen-code",
)
NPM_CLIS = ("claude", "codex", "opencode", "qwen")
NPM_INSTALL_TIMEOUT = 1800
CLI_TIMEOUT = 400.0  # Codex sends a long system prompt: about 50 s idle, 160 s under load
CLAUDE_MAX_OUTPUT_TOKENS = "256"
CUT_AT_THE_MAXIMUM = f"exceeded the {CLAUDE_MAX_OUTPUT_TOKENS} output token maximum"
PROMPT = "Reply with one word: hello"


@pytest.fixture(scope="session")
def npm_bin() -> Path:
    """The ``node_modules/.bin`` folder holding the CLIs of ``NPM_CLIS``, installed if needed."""
    prefix = cache_dir() / "npm"
    bin_dir = prefix / "node_modules" / ".bin"
    if all((bin_dir / cli).exists() for cli in NPM_CLIS):
        return bin_dir
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail("npm is not on PATH: the agent CLIs cannot be installed", pytrace=False)
    prefix.mkdir(parents=True, exist_ok=True)
    command = [npm, "install", "--no-fund", "--no-audit", "--prefix", str(prefix), *NPM_PACKAGES]
    try:
        completed = subprocess.run(
            command, capture_output=True, text=True, timeout=NPM_INSTALL_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{' '.join(command)} timed out:\n{exc.stdout}\n{exc.stderr}", pytrace=False)
    if completed.returncode != 0:
        pytest.fail(
            f"{' '.join(command)} exited with {completed.returncode}:\n"
            f"{completed.stdout}\n{completed.stderr}",
            pytrace=False,
        )
    missing = [cli for cli in NPM_CLIS if not (bin_dir / cli).exists()]
    if missing:
        pytest.fail(f"npm install did not provide {', '.join(missing)} in {bin_dir}", pytrace=False)
    return bin_dir


def _backend(agent_name: str, settings: AgentSettings, workdir: Path) -> CLIBackend:
    return CLIBackend(
        make_agent(agent_name, settings),
        model="smollm2",
        timeout=CLI_TIMEOUT,
        cwd_factory=lambda: contextlib.nullcontext(workdir),
    )


def test_claude_code_answers_through_the_anthropic_route(
    npm_bin: Path, local_model: LocalModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The state another Claude Code running at the same time can leave behind: its config
    # file gone, a backup beside it. Claude Code refuses to start from such a home, so the
    # agent must run from a private configuration folder.
    home = tmp_path / "home"
    (home / ".claude" / "backups").mkdir(parents=True)
    (home / ".claude" / "backups" / ".claude.json.backup.1796009521336").write_text("{}")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.setenv("CLAUDE_CODE_MAX_OUTPUT_TOKENS", CLAUDE_MAX_OUTPUT_TOKENS)
    settings = AgentSettings(
        executable=str(npm_bin / "claude"), anthropic_base_url=local_model.root_url
    )

    backend = _backend("claude", settings, tmp_path)

    answer: str | None
    try:
        answer, transcript = backend.complete_transcribed("", PROMPT)
        # Its events, as the real CLI prints them, read into the transcript.
        assert transcript is not None
        assert transcript.source == "claude stream-json"
        assert transcript.outcome == "success"
        assert transcript.final_text == answer
    except AgentFailedError as exc:
        # Claude Code's system prompt holds the date and the working folder, so its request,
        # and with it even a greedy answer, differs from one run to the next. A rambling
        # answer is cut at the maximum and Claude Code says so: it read the streamed answer
        # to its end through the route, which is what this test is about.
        assert CUT_AT_THE_MAXIMUM in str(exc)  # noqa: PT017
        answer = None

    assert not (home / ".claude.json").exists()
    assert answer is None or answer.strip()


def test_codex_answers_through_the_responses_route(
    npm_bin: Path, local_model: LocalModelServer, tmp_path: Path
) -> None:
    settings = AgentSettings(
        executable=str(npm_bin / "codex"), openai_base_url=local_model.base_url
    )

    answer, transcript = _backend("codex", settings, tmp_path).complete_transcribed("", PROMPT)

    assert answer.strip()
    # Its events, as the real CLI prints them, read into the transcript.
    assert transcript is not None
    assert transcript.source == "codex exec --json"
    assert transcript.turns == 1
    assert transcript.input_tokens
    assert transcript.final_text == answer


# --- ACP agents: a scenario run of a real ACP agent against the local model --------------------

# Each CLI asks for thousands of answer tokens, past llama-server's own cap; these bound them.
ACP_OUTPUT_BOUNDS = {
    "QWEN_CODE_MAX_OUTPUT_TOKENS": "48",
    "OPENCODE_EXPERIMENTAL_OUTPUT_TOKEN_MAX": "48",
}
ACP_TIMEOUT = "900"  # OpenCode's and Qwen Code's system prompts: minutes on a loaded machine
# The judge: a command that passes the one criterion, so the run's verdict is not the 135M
# model's to make (its answer is not the point; its events are).
JUDGE_COMMAND = 'cat > /dev/null; echo \'[{"name": "x", "pass": true, "reason": "ok"}]\''


@pytest.mark.parametrize(("agent", "reports_usage"), [("acp:opencode", True), ("acp:qwen", False)])
def test_an_acp_agent_runs_a_scenario_and_its_session_is_its_transcript(
    agent: str,
    reports_usage: bool,
    npm_bin: Path,
    local_model: LocalModelServer,
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", f"{npm_bin}{os.pathsep}{os.environ['PATH']}")
    for variable, bound in ACP_OUTPUT_BOUNDS.items():
        monkeypatch.setenv(variable, bound)
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})

    result = pytester.runpytest_subprocess(
        "skills/s",
        "--eval-backend", agent,
        "--eval-base-url", local_model.base_url,
        "--eval-model", local_model.model,
        "--eval-judge-backend", "command",
        "--eval-agent-command", JUDGE_COMMAND,
        "--eval-direct-timeout", ACP_TIMEOUT,
        "--eval-threshold", "0",
    )  # fmt: skip

    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    [log] = (pytester.path / ".openkata" / "runs").glob("*.jsonl")
    [trial] = [
        record
        for record in map(json.loads, log.read_text().splitlines())
        if record["record"] == "trial"
    ]
    transcript = trial["trace"]["transcript"]
    # Its session updates, as the real agent sent them, read into the transcript.
    assert transcript["source"] == "acp session/update"
    assert transcript["outcome"] == "success"
    assert trial["trace"]["output"].strip()
    assert transcript["final_text"] == trial["trace"]["output"]
    said = [step["text"] for step in transcript["steps"] if step["kind"] == "message"]
    assert said[-1] == trial["trace"]["output"]
    if reports_usage:  # OpenCode gives the prompt's usage in its response; Qwen Code none
        assert transcript["input_tokens"] > 0
