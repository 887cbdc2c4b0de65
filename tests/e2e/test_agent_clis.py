"""Real agent CLIs (Claude Code, Codex) answering through the CLI backend, offline, against the
local model: Claude Code on llama-server's Anthropic route, Codex on its Responses route; and
the version a real CLI tells, recorded by a sandboxed trial;
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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import pytest

from pytest_openkata.contracts.agents import AgentSettings, ContinuesSession, GivesTranscript
from pytest_openkata.contracts.errors import AgentFailedError, AgentTimeoutError
from pytest_openkata.core.activation import LOADED, NOT_LOADED, activation
from pytest_openkata.core.agent_backend import CLIBackend
from pytest_openkata.core.conversation import Conversation, converse, scripted
from pytest_openkata.core.skill_delivery import (
    discovering_agent,
    installed_folder,
    installed_skill_files,
)
from pytest_openkata.local.model import LocalModelServer
from pytest_openkata.local.steps import cache_dir
from pytest_openkata.providers.agents import make_agent
from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, sandbox_args, write_skill

pytestmark = pytest.mark.e2e

NPM_PACKAGES = (
    "@anthropic-ai/claude-code",
    "@openai/codex",
    # ACP agents (the last tests of this module).
    "opencode-ai",
    "@qwen-code/qwen-code",
    "@zed-industries/codex-acp",
    "@zed-industries/claude-code-acp",
)
NPM_CLIS = ("claude", "codex", "opencode", "qwen", "codex-acp", "claude-code-acp")
NPM_INSTALL_TIMEOUT = 1800
CLI_TIMEOUT = 400.0  # Codex sends a long system prompt: about 50 s idle, 160 s under load
CLAUDE_MAX_OUTPUT_TOKENS = "256"
CUT_AT_THE_MAXIMUM = f"exceeded the {CLAUDE_MAX_OUTPUT_TOKENS} output token maximum"
PROMPT = "Reply with one word: hello"
# Installed delivery's discovery is over before the model's first token: no need to wait for it.
DISCOVERY_TIMEOUT = 90.0


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


def test_claude_code_discovers_an_installed_skill_where_it_is_put(
    npm_bin: Path, local_model: LocalModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Installed delivery with the real CLI: the skill goes into ``.claude/skills/<name>/`` of
    a fresh working folder, Claude Code (started without ``--bare``) lists it among the skills
    its init event says it found, and its events are read into the transcript. Whether the
    135M model then loads it is not the point."""
    skill = tmp_path / "skills" / "zebra-inventory"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: zebra-inventory\ndescription: Use for zebra inventories.\n---\n# Zebras\n"
    )
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CLAUDE_CODE_MAX_OUTPUT_TOKENS", CLAUDE_MAX_OUTPUT_TOKENS)
    claude = make_agent(
        "claude",
        AgentSettings(executable=str(npm_bin / "claude"), anthropic_base_url=local_model.root_url),
    )
    agent, folder = discovering_agent(claude)
    files = installed_skill_files(folder, skill)
    seen: list[list[str]] = []
    folders: list[Path] = []

    @contextlib.contextmanager
    def installed() -> Iterator[Path]:
        with installed_folder(files) as cwd:
            folders.append(cwd)
            seen.append(
                sorted(p.relative_to(cwd).as_posix() for p in cwd.rglob("*") if p.is_file())
            )
            yield cwd

    backend = CLIBackend(
        agent, model="smollm2", timeout=DISCOVERY_TIMEOUT, workspace_agent=True,
        skills_folder=folder,
    ).in_folder(installed)  # fmt: skip

    assert isinstance(agent, GivesTranscript)
    try:
        transcript = backend.complete_transcribed("", PROMPT)[1]
    except AgentFailedError as exc:
        # A rambling answer is cut at the maximum and Claude Code exits 1 (see the first
        # test); its events, init included, are still on its standard output.
        assert CUT_AT_THE_MAXIMUM in str(exc)  # noqa: PT017
        transcript = agent.transcript(exc.output)
    except AgentTimeoutError as exc:
        # Without --bare the request carries every tool and the skill listing, which a busy
        # 2-core machine reads for minutes. What this test is about happened before the
        # first request: the init event, which the partial output holds.
        transcript = agent.transcript(exc.partial_output)

    assert seen == [[".claude/skills/zebra-inventory/SKILL.md"]]
    assert not folders[0].exists()  # removed once the CLI ended
    assert transcript is not None
    assert transcript.source == "claude stream-json"
    assert "zebra-inventory" in transcript.extras["skills_offered"].split(", ")
    assert activation(transcript, ("zebra-inventory",)) in (LOADED, NOT_LOADED)


def _logging_wrapper(cli: Path, folder: Path) -> tuple[Path, Path]:
    """An executable that runs the real ``cli`` with its arguments, and logs each call: a
    line of its arguments and its ``CLAUDE_CONFIG_DIR`` / ``CODEX_HOME`` in ``calls.log``,
    and what the CLI printed in ``output-<n>``. Which session each call continued, as the CLI
    itself was asked and answered."""
    log = folder / "calls.log"
    wrapper = folder / f"logged-{cli.name}"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'printf \'%s|%s|%s\\n\' "$*" "$CLAUDE_CONFIG_DIR" "$CODEX_HOME" >> \'{log}\'\n'
        f"out='{folder}'/output-$(wc -l < '{log}')\n"
        f'\'{cli}\' "$@" > "$out"\n'
        "status=$?\n"
        'cat "$out"\n'
        'exit "$status"\n'
    )
    wrapper.chmod(0o755)
    return wrapper, log


def _follow_up_session(
    agent_name: str, settings: AgentSettings, workdir: Path, prompts: tuple[str, str]
) -> Conversation:
    backend = _backend(agent_name, settings, workdir)
    with backend.session() as send:
        return converse(send, prompts[0], prompts[0], scripted(prompts[1:]))


@dataclass(frozen=True)
class _Calls:
    """What the logging wrapper saw: each call's arguments and state folder, and the session
    the first call's output named."""

    arguments: list[str]
    folders: list[str]
    first_session: str


def _calls(agent_name: str, folder: Path, log: Path) -> _Calls:
    lines = [line.split("|") for line in log.read_text().splitlines()]
    agent = make_agent(agent_name, AgentSettings())
    assert isinstance(agent, ContinuesSession)
    session = agent.session_id((folder / "output-1").read_text())
    assert session
    return _Calls([line[0] for line in lines], [line[1] or line[2] for line in lines], session)


def _assert_both_turns(conversation: Conversation, follow_up: str) -> None:
    transcript = conversation.transcript
    assert transcript is not None
    said = [(step.role, step.text) for step in transcript.steps if step.kind == "message"]
    user_at = said.index(("user", follow_up))
    assert any(role == "assistant" for role, _ in said[:user_at])  # the first turn's answer
    assert transcript.final_text == conversation.answer == conversation.turns[1].agent
    assert [turn.user for turn in conversation.turns] == [PROMPT, follow_up]


FOLLOW_UP = "Now reply with one word: goodbye"


# Claude Code's first answer from the 135M model is sometimes cut at the maximum (see above):
# the conversation is tried again, this many times at most.
CLAUDE_ATTEMPTS = 3


def test_claude_code_continues_its_session_for_a_follow_up(
    npm_bin: Path, local_model: LocalModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAUDE_CODE_MAX_OUTPUT_TOKENS", CLAUDE_MAX_OUTPUT_TOKENS)
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    conversation: Conversation | None = None
    for attempt in range(1, CLAUDE_ATTEMPTS + 1):
        folder = tmp_path / f"attempt-{attempt}"
        folder.mkdir()
        wrapper, log = _logging_wrapper(npm_bin / "claude", folder)
        settings = AgentSettings(executable=str(wrapper), anthropic_base_url=local_model.root_url)
        try:
            conversation = _follow_up_session("claude", settings, folder, (PROMPT, FOLLOW_UP))
            break
        except AgentFailedError as exc:  # an answer cut at the maximum (see above)
            assert CUT_AT_THE_MAXIMUM in str(exc)  # noqa: PT017
            if len(log.read_text().splitlines()) == 2:
                break  # the second turn's answer was cut: its session was resumed all the same
    else:
        pytest.xfail("every first answer of the local model went past the output token maximum")

    calls = _calls("claude", folder, log)
    assert len(calls.arguments) == 2
    assert "--resume" not in calls.arguments[0]
    assert f"--resume {calls.first_session}" in calls.arguments[1]
    assert calls.folders[0] == calls.folders[1] != ""  # one configuration folder for both
    assert not Path(calls.folders[0]).exists()  # removed when the session ended
    if conversation is not None:
        _assert_both_turns(conversation, FOLLOW_UP)


def test_codex_resumes_its_session_for_a_follow_up(
    npm_bin: Path, local_model: LocalModelServer, tmp_path: Path
) -> None:
    wrapper, log = _logging_wrapper(npm_bin / "codex", tmp_path)
    settings = AgentSettings(executable=str(wrapper), openai_base_url=local_model.base_url)

    conversation = _follow_up_session("codex", settings, tmp_path, (PROMPT, FOLLOW_UP))

    calls = _calls("codex", tmp_path, log)
    assert len(calls.arguments) == 2
    assert calls.arguments[0].startswith("exec ")
    assert "--ephemeral" not in calls.arguments[0]  # its session files are kept for the next
    assert calls.arguments[1].startswith("exec resume ")
    assert calls.arguments[1].split()[-2:] == [calls.first_session, "-"]
    assert calls.folders[0] == calls.folders[1] != ""  # one CODEX_HOME for both turns
    assert not Path(calls.folders[0]).exists()
    _assert_both_turns(conversation, FOLLOW_UP)


def test_a_sandboxed_trial_records_the_real_clis_version_and_its_images_id(
    npm_bin: Path,
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
    docker_client: docker.DockerClient,
) -> None:
    # The real Claude Code binary, with the host's C library, mounted into the sandbox image;
    # it answers --version whatever becomes of the trial (no model is reachable from there).
    binary = Path(os.path.realpath(npm_bin / "claude"))
    on_path = pytester.path / "on-path"
    on_path.mkdir()
    (on_path / "claude").symlink_to(f"/opt/claude/{binary.name}")
    mounts = ",".join(
        f"{os.path.realpath(host)}:{target}"
        for host, target in (
            (binary.parent, "/opt/claude"),
            (on_path, "/usr/local/bin"),
            ("/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu"),
            ("/lib64", "/lib64"),
        )
    )
    write_skill(pytester.path, "s", {"scenario-box": {"x": 1}}, sandbox=True)
    host_version = subprocess.run(
        [str(npm_bin / "claude"), "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()

    pytester.runpytest(
        "skills",
        *sandbox_args(endpoint.base_url, standin_image, "--eval-sandbox-timeout", "20"),
        "--eval-sandbox-agent", "claude",
        "--eval-sandbox-network", "none",
        "--eval-sandbox-mounts", mounts,
    )  # fmt: skip

    (log,) = (pytester.path / ".openkata/runs").glob("*.jsonl")
    (trial,) = [json.loads(line) for line in log.read_text().splitlines()][1:]
    assert trial["environment"]["agent_version"] == host_version
    assert trial["environment"]["image_id"] == docker_client.images.get(standin_image).id
    assert trial["environment"]["image_id"].startswith("sha256:")


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


# --- an ACP agent in the sandbox: the client on the host, the agent in the container ----------


def _native(npm_bin: Path, program: str) -> Path:
    """The native binary of an ACP agent's npm package: codex-acp's npm command is a Node
    launcher for its ``codex-acp-<platform>`` binary; opencode's is the binary itself."""
    if program == "opencode":
        return Path(os.path.realpath(npm_bin / "opencode"))
    for name in os.listdir(npm_bin):
        if name.startswith(f"{program}-"):
            return Path(os.path.realpath(npm_bin / name))
    pytest.fail(f"no native {program} binary in {npm_bin}", pytrace=False)


@pytest.mark.parametrize(
    ("agent", "program"), [("acp:codex", "codex-acp"), ("acp:opencode", "opencode")]
)
def test_an_acp_agent_runs_a_scenario_in_the_sandbox_and_its_session_is_its_transcript(
    agent: str,
    program: str,
    npm_bin: Path,
    local_model: LocalModelServer,
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    use_engine: str,
    standin_image: str,
) -> None:
    # The agent's native binary, with the host's C library, mounted read-only into the
    # sandbox image as the program the preset runs; the model is reached on the host's
    # network. The client stays on the host.
    for variable, bound in ACP_OUTPUT_BOUNDS.items():  # passed into the sandbox
        monkeypatch.setenv(variable, bound)
    binary = _native(npm_bin, program)
    on_path = pytester.path / "on-path"
    on_path.mkdir()
    (on_path / program).symlink_to(f"/opt/agent/{binary.name}")
    mounts = ",".join(
        f"{os.path.realpath(host)}:{target}"
        for host, target in (
            (binary.parent, "/opt/agent"),
            (on_path, "/usr/local/bin"),
            ("/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu"),
            ("/lib64", "/lib64"),
        )
    )
    skill = write_skill(pytester.path, "s", {"scenario-box": {"x": 1}}, sandbox=True)
    (skill / "evals/scenario-box/task.md").write_text("Create a file hello.txt saying hello.\n")

    result = pytester.runpytest_subprocess(
        "skills/s",
        "--eval-base-url", local_model.base_url,
        "--eval-model", local_model.model,
        "--eval-judge-backend", "command",
        "--eval-agent-command", JUDGE_COMMAND,
        "--eval-sandbox-image", standin_image,
        "--eval-sandbox-agent", agent,
        "--eval-sandbox-network", "host",
        "--eval-sandbox-mounts", mounts,
        "--eval-sandbox-timeout", ACP_TIMEOUT,
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
    # The real agent's session updates, sent from the container, read into the transcript.
    assert transcript["source"] == "acp session/update"
    assert transcript["outcome"] == "success"
    assert transcript["final_text"] == trial["trace"]["output"]
    assert any(step["kind"] == "message" for step in transcript["steps"])


def test_claude_code_acp_runs_as_root_on_the_host_whatever_is_sandbox_says(
    npm_bin: Path, local_model: LocalModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An environment that says IS_SANDBOX=yes (as some CI machines do) made the adapter ask
    # Claude Code for its permission bypass, which Claude Code refuses to root unless the
    # variable is exactly "1": the session never started. On the host the preset empties it.
    monkeypatch.setenv("IS_SANDBOX", "yes")
    monkeypatch.setenv("PATH", f"{npm_bin}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CLAUDE_CODE_MAX_OUTPUT_TOKENS", CLAUDE_MAX_OUTPUT_TOKENS)
    settings = AgentSettings(anthropic_base_url=local_model.root_url)
    backend = _backend("acp:claude", settings, tmp_path)

    try:
        answer, transcript = backend.complete_transcribed("", PROMPT)
    except AgentFailedError as exc:
        # The session started and the prompt reached the model; a rambling 135M answer is
        # cut at the maximum, and the adapter answers the prompt with Claude Code's error.
        assert "the agent answered with an error" in str(exc)  # noqa: PT017
        assert CUT_AT_THE_MAXIMUM in str(exc)  # noqa: PT017
        assert "root/sudo" not in str(exc)  # noqa: PT017
        return
    assert transcript is not None
    assert transcript.source == "acp session/update"
    assert transcript.final_text == answer
