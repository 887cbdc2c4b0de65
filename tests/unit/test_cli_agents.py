"""Agent CLIs and the CLI backend, with real subprocesses (spec section 5a; section 13 items 8,
9, 11). kiro-cli is the stand-in of tests/support/standins, put first on PATH."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import stat
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_openkata.contracts.agents import AgentInvocation, AgentSettings, ContinuesSession
from pytest_openkata.contracts.errors import (
    AGENT_CRASH,
    AgentConfigError,
    AgentFailedError,
    AgentNotFoundError,
    AgentTimeoutError,
    AnswerTooLargeError,
    BackendError,
    MalformedResponseError,
    error_cause,
)
from pytest_openkata.core.agent_backend import ERROR_OUTPUT_CHARS, CLIBackend, go_duration
from pytest_openkata.infra.text import clean_output
from pytest_openkata.providers.agents import make_agent
from pytest_openkata.providers.agents.claude import ClaudeAgent
from pytest_openkata.providers.agents.codex import CodexAgent
from pytest_openkata.providers.agents.command import CommandAgent
from pytest_openkata.providers.agents.kiro import (
    EVAL_AGENT_DIRECT,
    EVAL_AGENT_SANDBOX,
    KiroAgent,
    agent_config_json,
    prepare_agent_dir,
)

STANDINS = Path(__file__).resolve().parents[1] / "support" / "standins"
STANDIN_KIRO = STANDINS / "kiro-cli"

DIRECT_JSON = (
    '{"name":"eval-agent","resources":["file://skill/SKILL.md","file://skill/references/**",'
    '"file://skill/scripts/**","file://skill/assets/**"]}'
)
SANDBOX_JSON = (
    '{"allowedTools":["fs_read","fs_write","execute_bash","grep","glob"],"name":"eval-agent",'
    '"resources":["file://skill/SKILL.md","file://skill/references/**","file://skill/scripts/**",'
    '"file://skill/assets/**"],"tools":["fs_read","fs_write","execute_bash","grep","glob"]}'
)
SETTINGS = AgentSettings(
    anthropic_base_url="http://127.0.0.1:9/anthropic",
    anthropic_api_key="sk-ant-secret",
    openai_base_url="http://127.0.0.1:9/v1",
    openai_api_key="sk-openai-secret",
)

Log = Callable[[], list[dict[str, Any]]]


@pytest.fixture
def kiro_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("KIRO_STANDIN_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("PATH", f"{STANDINS}{os.pathsep}{os.environ.get('PATH', '')}")


@pytest.fixture
def kiro_log(kiro_on_path: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Log:
    path = tmp_path / "kiro-calls.jsonl"
    monkeypatch.setenv("KIRO_STANDIN_LOG", str(path))

    def records() -> list[dict[str, Any]]:
        return [json.loads(line) for line in path.read_text().splitlines()]

    return records


@pytest.fixture
def skill(tmp_path: Path) -> Path:
    folder = tmp_path / "skills" / "demo"
    (folder / "references").mkdir(parents=True)
    (folder / "SKILL.md").write_text("# Demo skill\n")
    return folder


def kiro_backend(**options: Any) -> CLIBackend:
    return CLIBackend(KiroAgent(), model=options.pop("model", "claude-sonnet-4.6"), **options)


def in_folder(folder: Path) -> Callable[[], contextlib.AbstractContextManager[Path | None]]:
    return lambda: contextlib.nullcontext(folder)


def wait_until_gone(pid: int, within: float = 10.0) -> bool:
    """True once ``pid`` no longer exists (an orphan is reaped by init a moment later)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


# ---------------------------------------------------------------------------------------------
# kiro: argv, prompt on stdin, agent folder


def test_kiro_plain_mode_passes_the_model_and_sends_the_prompt_on_stdin(kiro_log: Log) -> None:
    answer = kiro_backend(model="judge-model", timeout=30).complete("Be strict.", "Grade this.")

    [call] = kiro_log()
    assert call["argv"] == ["chat", "--no-interactive", "--model", "judge-model"]
    assert call["agent"] is None
    assert not call["trust_all_tools"]
    assert call["prompt_source"] == "stdin"
    assert call["prompt_head"] == "Be strict.\n\nGrade this."
    assert call["cwd"] == os.getcwd()
    assert answer == "Stand-in answer for: Be strict."


def test_an_empty_system_text_leaves_two_newlines_in_front(kiro_log: Log) -> None:
    kiro_backend(timeout=30).complete("", "Only the user text.")

    assert kiro_log()[0]["prompt_head"] == "\n\nOnly the user text."


def test_kiro_agent_mode_runs_in_a_prepared_agent_folder(kiro_log: Log, skill: Path) -> None:
    backend = kiro_backend(
        model="m1",
        timeout=30,
        workspace_agent=True,
        cwd_factory=functools.partial(prepare_agent_dir, skill),
    )

    backend.complete("system", "task")

    [call] = kiro_log()
    assert call["argv"] == ["chat", "--agent", "eval-agent", "--no-interactive", "--model", "m1"]
    assert not call["trust_all_tools"]
    assert Path(call["cwd"]).name.startswith("openkata-eval-agent-")
    assert call["agent_config"] == DIRECT_JSON
    assert call["skill_readable"]
    assert not Path(call["cwd"]).exists()  # removed once the CLI has exited


def test_a_300_kib_prompt_arrives_whole_through_stdin_and_never_in_argv(kiro_log: Log) -> None:
    user = "x" * (300 * 1024)

    kiro_backend(timeout=60).complete("system", user)

    [call] = kiro_log()
    assert call["prompt_source"] == "stdin"
    assert call["prompt_length"] == len("system\n\n") + len(user)
    assert max(len(arg) for arg in call["argv"]) < 100


def test_kiro_sandbox_invocation_trusts_all_tools_and_keeps_the_model() -> None:
    invocation = KiroAgent().invocation(model="m2", workspace_agent=True, sandboxed=True)

    assert invocation == AgentInvocation(
        ["kiro-cli", "chat", "--agent", "eval-agent", "--trust-all-tools", "--no-interactive",
         "--model", "m2"]
    )  # fmt: skip


def test_kiro_executable_can_be_overridden() -> None:
    agent = make_agent("kiro", AgentSettings(executable="/opt/kiro/bin/kiro-cli"))

    invocation = agent.invocation(model="m", workspace_agent=False)

    assert invocation.argv[:2] == ["/opt/kiro/bin/kiro-cli", "chat"]
    assert agent.name == "kiro-cli"


def test_agent_config_json_is_the_reference_text() -> None:
    assert agent_config_json(EVAL_AGENT_DIRECT) == DIRECT_JSON
    assert agent_config_json(EVAL_AGENT_SANDBOX) == SANDBOX_JSON


def test_agent_config_json_uses_go_escapes() -> None:
    assert (
        agent_config_json({"b": ["<&>"], "a": True}) == '{"a":true,"b":["\\u003c\\u0026\\u003e"]}'
    )


def test_agent_folder_layout(skill: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(skill.parent)  # a relative skill path still gives an absolute link

    with prepare_agent_dir(Path(skill.name)) as root:
        config = root / ".kiro" / "agents" / "eval-agent.json"
        assert root.name.startswith("openkata-eval-agent-")
        assert config.read_bytes() == DIRECT_JSON.encode()
        assert stat.S_IMODE(config.stat().st_mode) == 0o644
        assert stat.S_IMODE(config.parent.stat().st_mode) == 0o755
        link = root / "skill"
        assert link.is_symlink()
        assert os.path.isabs(os.readlink(link))
        assert link.resolve() == skill.resolve()
        assert (link / "SKILL.md").read_text() == "# Demo skill\n"
        assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == [
            ".kiro", ".kiro/agents", ".kiro/agents/eval-agent.json", "skill",
        ]  # fmt: skip

    assert not root.exists()
    assert skill.joinpath("SKILL.md").is_file()  # removing the link left the skill alone


def test_agent_folder_cleanup_without_with(skill: Path) -> None:
    folder = prepare_agent_dir(skill)
    assert folder.path.is_dir()

    folder.cleanup()

    assert not folder.path.exists()


def test_a_missing_skill_still_gives_an_agent_folder(tmp_path: Path) -> None:
    with prepare_agent_dir(tmp_path / "missing") as root:
        assert (root / "skill").is_symlink()
        assert not (root / "skill" / "SKILL.md").exists()


def test_kiro_output_is_cleaned() -> None:
    raw = "> Using model m\n\x1b[32mStand-in answer\x1b[0m for: x\n```text\nkept\n```\n"

    assert KiroAgent().clean(raw) == clean_output(raw) == "Stand-in answer for: x\nkept"


def test_kiro_answer_drops_the_header_and_ansi_codes(kiro_on_path: None) -> None:
    answer = kiro_backend(timeout=30).complete("First line", "rest")

    assert answer == "Stand-in answer for: First line"


def test_the_standin_acts_like_an_agent_editing_files(
    kiro_on_path: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KIRO_STANDIN_WRITE", "src/out.txt=written by the agent")
    workspace = tmp_path / "workspace"
    workspace.mkdir()

    kiro_backend(timeout=30, cwd_factory=in_folder(workspace)).complete("s", "u")

    assert (workspace / "src" / "out.txt").read_text() == "written by the agent"


def test_the_standin_rejects_an_unknown_option(kiro_on_path: None) -> None:
    completed = subprocess.run(
        [str(STANDIN_KIRO), "chat", "--unknown"], capture_output=True, text=True, check=False
    )

    assert completed.returncode == 2
    assert "usage: kiro-cli" in completed.stderr


# ---------------------------------------------------------------------------------------------
# Errors


def test_timeout_kills_the_cli_and_keeps_the_partial_output(
    kiro_on_path: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KIRO_STANDIN_SLEEP", "60")

    with pytest.raises(AgentTimeoutError) as caught:
        kiro_backend(model="slow", timeout=1).complete("s", "u")

    assert str(caught.value) == "kiro-cli timed out after 1s"
    assert caught.value.partial_output == "> Using model slow\n"
    assert caught.value.timeout == 1
    assert isinstance(caught.value, BackendError)
    assert not isinstance(caught.value, AgentFailedError)


def test_non_zero_exit_with_stderr(kiro_on_path: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KIRO_STANDIN_EXIT", "3")
    monkeypatch.setenv("KIRO_STANDIN_STDERR", "error: not logged in\nrun kiro-cli login\n")

    with pytest.raises(AgentFailedError) as caught:
        kiro_backend(timeout=30).complete("s", "u")

    assert str(caught.value) == (
        "kiro-cli failed: exit status 3\nstderr: error: not logged in\nrun kiro-cli login"
    )
    assert caught.value.exit_status == 3


def test_non_zero_exit_without_stderr(kiro_on_path: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KIRO_STANDIN_EXIT", "1")

    with pytest.raises(AgentFailedError, match=r"^kiro-cli failed: exit status 1$"):
        kiro_backend(timeout=30).complete("s", "u")


def _script(folder: Path, name: str, body: str) -> str:
    path = folder / name
    path.write_text(f"#!/bin/sh\ncat > /dev/null\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_a_cli_that_reports_its_error_on_stdout_shows_it(tmp_path: Path) -> None:
    # Claude Code's way: "API Error: ..." on standard output, nothing on standard error.
    backend = CLIBackend(
        ClaudeAgent(_script(tmp_path, "claude", 'echo "API Error: overloaded"; exit 1')),
        model="m",
        timeout=30,
    )

    with pytest.raises(AgentFailedError) as caught:
        backend.complete("s", "u")

    assert str(caught.value) == "claude failed: exit status 1\nstdout: API Error: overloaded"


def test_events_that_hold_no_answer_are_an_empty_answer_to_grade(tmp_path: Path) -> None:
    # The agent ended without a word: its own outcome, graded, not an error of the run.
    result = '{"type": "result", "subtype": "success", "is_error": false, "result": ""}'
    backend = CLIBackend(
        ClaudeAgent(_script(tmp_path, "claude", f"echo '{result}'")), model="m", timeout=30
    )

    answer, transcript = backend.complete_transcribed("s", "u")

    assert answer == ""
    assert transcript is not None


def _claude_printing(folder: Path, lines: str) -> CLIBackend:
    """A ``claude`` that prints ``lines`` as its events, whatever it is asked."""
    script = _script(folder, "claude", f"cat <<'EOF'\n{lines}\nEOF")
    return CLIBackend(ClaudeAgent(script), model="m", timeout=30)


def test_a_lone_surrogate_escape_in_the_events_reads_as_the_replacement_character(
    tmp_path: Path,
) -> None:
    # A stream cut inside an emoji's pair, or a hostile one: the answer and the transcript
    # hold U+FFFD, which every later request and report can carry.
    events = [
        {"type": "assistant", "message": {"content": [{"type": "text", "text": "step \ud800"}]}},
        {"type": "result", "subtype": "success", "is_error": False, "result": "done \ud800"},
    ]
    lines = "\n".join(json.dumps(event) for event in events)  # ASCII: the escape as sent

    answer, transcript = _claude_printing(tmp_path, lines).complete_transcribed("s", "u")

    assert answer == "done \ufffd"
    assert transcript is not None
    assert [step.text for step in transcript.steps] == ["step \ufffd"]


def test_a_prompt_holding_a_lone_surrogate_reaches_the_cli_as_the_replacement_character(
    tmp_path: Path,
) -> None:
    # A text that reached the prompt with one (a turn of a conversation, a task): sent as
    # U+FFFD, where encoding it would have crashed the scenario.
    received = tmp_path / "prompt.txt"
    backend = CLIBackend(CommandAgent(f"cat > {received}; echo answered"), model="m", timeout=30)

    assert backend.complete("", "task \ud800 end") == "answered\n"
    assert received.read_text(encoding="utf-8").endswith("task \ufffd end")


def test_events_nested_too_deeply_to_read_are_passed_over(tmp_path: Path) -> None:
    # An event holding a surrogate's escape is walked to make its texts valid; one nested
    # past what the walk can take is passed over, as a line that is not JSON is.
    deep = '{"type": "assistant", "x": ' + "[" * 900 + '"\\ud800"' + "]" * 900 + "}"
    result = '{"type": "result", "subtype": "success", "is_error": false, "result": "done"}'

    answer, _ = _claude_printing(tmp_path, f"{deep}\n{result}").complete_transcribed("s", "u")

    assert answer == "done"


def test_a_cli_without_events_answers_with_what_it_printed(tmp_path: Path) -> None:
    # An older Claude Code that ignores --output-format prints its answer as text.
    backend = CLIBackend(
        ClaudeAgent(_script(tmp_path, "claude", "echo 'a plain answer'")), model="m", timeout=30
    )

    answer, transcript = backend.complete_transcribed("s", "u")

    assert (answer, transcript) == ("a plain answer\n", None)


def test_only_the_end_of_a_long_output_goes_into_the_error(tmp_path: Path) -> None:
    script = 'for i in $(seq 1 2000); do echo "line $i"; done; echo "the reason"; exit 2'
    backend = CLIBackend(CommandAgent(script), model="m", timeout=30)

    with pytest.raises(AgentFailedError) as caught:
        backend.complete("s", "u")

    first_line, output = str(caught.value).split("\n", 1)
    assert first_line == "command failed: exit status 2"
    assert output.startswith("stdout: ...")
    assert output.endswith("line 2000\nthe reason")
    assert len(output) == len("stdout: ...") + ERROR_OUTPUT_CHARS


def test_an_answer_past_the_bound_stops_the_cli_and_errors(tmp_path: Path) -> None:
    pid_file = tmp_path / "cli.pid"
    # It would print for ever; the deadline is far off.
    command = f"echo $$ > {pid_file}; exec yes 'an answer that never ends'"
    backend = CLIBackend(CommandAgent(command), model="m", timeout=60, answer_max_bytes=64 << 10)

    with pytest.raises(AnswerTooLargeError) as caught:
        backend.complete("s", "u")

    assert str(caught.value) == (
        "command printed more than 64 KiB, the bound of answer_max_bytes; it was stopped"
    )
    assert isinstance(caught.value, MalformedResponseError)
    assert wait_until_gone(int(pid_file.read_text()))


def test_an_answer_of_exactly_the_bound_is_taken(tmp_path: Path) -> None:
    def backend(size: int) -> CLIBackend:
        command = f"head -c {size} /dev/zero | tr '\\0' a"
        return CLIBackend(CommandAgent(command), model="m", timeout=60, answer_max_bytes=4096)

    assert backend(4096).complete("s", "u") == "a" * 4096
    with pytest.raises(AnswerTooLargeError):
        backend(4097).complete("s", "u")


def test_standard_error_past_the_bound_is_cut_not_fatal(tmp_path: Path) -> None:
    command = "head -c 1000000 /dev/zero | tr '\\0' e >&2; echo; echo the reason >&2; exit 3"
    backend = CLIBackend(CommandAgent(command), model="m", timeout=60, answer_max_bytes=4096)

    with pytest.raises(AgentFailedError) as caught:
        backend.complete("s", "u")

    assert caught.value.stderr == "e" * 4096
    assert str(caught.value) == f"command failed: exit status 3\nstderr: {'e' * 4096}"


def test_usage_error_of_the_cli_is_reported_with_its_stderr(kiro_on_path: None) -> None:
    class BadFlagKiro(KiroAgent):
        def invocation(
            self, *, model: str, workspace_agent: bool, sandboxed: bool = False
        ) -> AgentInvocation:
            return AgentInvocation(["kiro-cli", "chat", "--bogus"])

    with pytest.raises(AgentFailedError) as caught:
        CLIBackend(BadFlagKiro(), model="m", timeout=30).complete("s", "u")

    assert str(caught.value).startswith("kiro-cli failed: exit status 2\nstderr: usage: kiro-cli")


def test_empty_output_is_an_error(kiro_on_path: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KIRO_STANDIN_REPLY", "")

    with pytest.raises(MalformedResponseError, match=r"^kiro-cli returned empty response$") as e:
        kiro_backend(timeout=30).complete("s", "u")

    # A CLI that printed nothing at all failed as a program: never retried as the endpoint's.
    assert error_cause(e.value, "") == AGENT_CRASH


def test_missing_kiro_names_path_and_install_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))

    with pytest.raises(AgentNotFoundError) as caught:
        kiro_backend(timeout=30).complete("s", "u")

    assert str(caught.value) == "kiro-cli not found in PATH\nInstall: https://docs.kiro.dev/install"


def test_missing_executable_given_by_path(tmp_path: Path) -> None:
    missing = tmp_path / "bin" / "claude"
    backend = CLIBackend(ClaudeAgent(str(missing)), model="m", timeout=30)

    with pytest.raises(AgentNotFoundError) as caught:
        backend.complete("s", "u")

    assert str(caught.value) == (
        f"claude not found at {missing}\nInstall: npm install -g @anthropic-ai/claude-code"
    )


def test_an_executable_that_cannot_run_is_a_failure(tmp_path: Path) -> None:
    not_executable = tmp_path / "codex"
    not_executable.write_text("#!/bin/sh\n")
    backend = CLIBackend(CodexAgent(str(not_executable)), model="m", timeout=30)

    # As a shell says it: the launcher that sets the parent-death signal cannot run it.
    with pytest.raises(AgentFailedError) as failed:
        backend.complete("s", "u")
    assert str(failed.value) == (
        f"codex failed: exit status 126\nstderr: {not_executable}: Permission denied"
    )


def test_a_cli_killed_by_a_signal(tmp_path: Path) -> None:
    backend = CLIBackend(CommandAgent("kill -TERM $$"), model="m", timeout=30)

    with pytest.raises(AgentFailedError, match=r"^command failed: signal: terminated$"):
        backend.complete("s", "u")


def test_error_texts_are_redacted(kiro_on_path: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KIRO_STANDIN_EXIT", "1")
    monkeypatch.setenv("KIRO_STANDIN_STDERR", "bad key sk-123456789")
    backend = kiro_backend(timeout=30, redact=lambda text: text.replace("sk-123456789", "***"))

    with pytest.raises(AgentFailedError) as caught:
        backend.complete("s", "u")

    assert str(caught.value) == "kiro-cli failed: exit status 1\nstderr: bad key ***"
    assert caught.value.stderr == "bad key ***"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (120, "2m0s"),
        (90, "1m30s"),
        (300, "5m0s"),
        (5, "5s"),
        (1, "1s"),
        (0, "0s"),
        (1.5, "1.5s"),
        (0.25, "250ms"),
        (0.0000015, "1.5µs"),
        (3600, "1h0m0s"),
        (3723.5, "1h2m3.5s"),
        (-90, "-1m30s"),
    ],
)
def test_go_duration(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text


def test_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="timeout must be positive"):
        CLIBackend(KiroAgent(), model="m", timeout=0)


# ---------------------------------------------------------------------------------------------
# Process group


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    command = f"sleep 300 & echo $! > {pid_file}; echo started; wait"
    backend = CLIBackend(CommandAgent(command), model="m", timeout=1)

    with pytest.raises(AgentTimeoutError) as caught:
        backend.complete("s", "u")

    assert caught.value.partial_output == "started\n"
    assert str(caught.value) == "command timed out after 1s"
    assert wait_until_gone(int(pid_file.read_text()))


def test_processes_left_behind_are_killed_when_the_cli_exits(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    command = f"sleep 300 & echo $! > {pid_file}; echo done"

    # Were the child's copy of stdout waited for, this call would end in AgentTimeoutError.
    answer = CLIBackend(CommandAgent(command), model="m", timeout=5).complete("s", "u")

    assert answer == "done\n"
    assert wait_until_gone(int(pid_file.read_text()))


@dataclass(frozen=True)
class _PrivateDirAgent:
    """An agent whose invocation asks for a private ``STATE_DIR``; the command shows it."""

    command: str
    name: str = "stateful"
    install_hint: str = ""
    output_in_errors: bool = True

    def invocation(
        self, *, model: str, workspace_agent: bool, sandboxed: bool = False
    ) -> AgentInvocation:
        return AgentInvocation(["/bin/sh", "-c", self.command], private_dirs=("STATE_DIR",))

    def clean(self, output: str) -> str:
        return output


def test_each_call_gets_a_fresh_private_folder_that_is_removed_afterwards(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STATE_DIR", "/the/users/own/state")
    backend = CLIBackend(
        _PrivateDirAgent('ls -A "$STATE_DIR"; echo "$STATE_DIR"; touch "$STATE_DIR/written"'),
        model="m",
        timeout=30,
    )

    first = backend.complete("s", "u").splitlines()
    second = backend.complete("s", "u").splitlines()

    assert len(first) == len(second) == 1  # empty folders: only the echoed path
    assert first[0] != second[0]
    assert first[0] != "/the/users/own/state"
    assert not Path(first[0]).exists()
    assert not Path(second[0]).exists()


# ---------------------------------------------------------------------------------------------
# claude and codex invocations


def test_claude_plain_invocation() -> None:
    invocation = make_agent("claude", SETTINGS).invocation(model="smollm2", workspace_agent=False)

    assert invocation.argv == [
        "claude", "-p", "--bare", "--model", "smollm2",
        "--output-format", "stream-json", "--verbose",
    ]  # fmt: skip
    assert invocation.env == {
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9/anthropic",
        "ANTHROPIC_API_KEY": "sk-ant-secret",
        "DISABLE_TELEMETRY": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    assert invocation.private_dirs == ("CLAUDE_CONFIG_DIR",)


def test_claude_workspace_agent_accepts_edits_but_bypasses_nothing_on_the_host() -> None:
    invocation = make_agent("claude", SETTINGS).invocation(model="m", workspace_agent=True)

    assert invocation.argv == [
        "claude", "-p", "--bare", "--model", "m", "--output-format", "stream-json", "--verbose",
        "--permission-mode", "acceptEdits",
    ]  # fmt: skip
    assert "IS_SANDBOX" not in invocation.env


def test_claude_sandboxed_skips_permissions() -> None:
    invocation = make_agent("claude", SETTINGS).invocation(
        model="m", workspace_agent=True, sandboxed=True
    )

    assert invocation.argv == [
        "claude", "-p", "--bare", "--model", "m", "--output-format", "stream-json", "--verbose",
        "--dangerously-skip-permissions",
    ]  # fmt: skip
    assert invocation.env["IS_SANDBOX"] == "1"
    assert invocation.private_dirs == ()  # the container's home starts clean


def test_claude_defaults_without_settings() -> None:
    agent = make_agent("claude", AgentSettings(executable="/x/claude"))

    invocation = agent.invocation(model="m", workspace_agent=False)

    assert invocation.argv[0] == "/x/claude"
    assert invocation.env["ANTHROPIC_API_KEY"] == "unused-key"
    assert "ANTHROPIC_BASE_URL" not in invocation.env
    assert agent.clean("  as is\n") == "  as is\n"
    assert "secret" not in repr(make_agent("claude", SETTINGS))


def codex_expected(sandbox: list[str], base_url: str = "http://127.0.0.1:9/v1") -> list[str]:
    return [
        "codex", "exec", "--json", "--skip-git-repo-check", "--ephemeral", *sandbox, "-m",
        "smollm2",
        "-c", 'model_provider="openkata"',
        "-c", 'model_providers.openkata.name="openkata"',
        "-c", f'model_providers.openkata.base_url="{base_url}"',
        "-c", 'model_providers.openkata.wire_api="responses"',
        "-c", 'model_providers.openkata.env_key="OPENKATA_CODEX_KEY"',
        "-",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("workspace_agent", "sandboxed", "sandbox"),
    [
        (False, False, ["-s", "read-only"]),
        (True, False, ["-s", "workspace-write"]),
        (True, True, ["--dangerously-bypass-approvals-and-sandbox"]),
    ],
)
def test_codex_invocations(workspace_agent: bool, sandboxed: bool, sandbox: list[str]) -> None:
    invocation = make_agent("codex", SETTINGS).invocation(
        model="smollm2", workspace_agent=workspace_agent, sandboxed=sandboxed
    )

    assert invocation.argv == codex_expected(sandbox)
    assert invocation.env == {"OPENKATA_CODEX_KEY": "sk-openai-secret"}


def test_codex_defaults_without_settings() -> None:
    agent = make_agent("codex", AgentSettings())

    invocation = agent.invocation(model="smollm2", workspace_agent=False)

    assert invocation.argv == codex_expected(["-s", "read-only"], "https://api.openai.com/v1")
    assert invocation.env == {"OPENKATA_CODEX_KEY": "unused-key"}


def test_claude_continues_a_session_with_resume_and_reads_its_id_from_the_events() -> None:
    agent = make_agent("claude", SETTINGS)
    assert isinstance(agent, ContinuesSession)
    first = agent.invocation(model="m", workspace_agent=True)

    start = agent.session_start(model="m", workspace_agent=True)
    following = agent.continuation("s-42", model="m", workspace_agent=True)

    assert start == first
    assert following.argv == [*first.argv, "--resume", "s-42"]
    assert following.private_dirs == ("CLAUDE_CONFIG_DIR",)  # kept for all turns on the host
    events = 'warning\n{"type":"system","subtype":"init","session_id":"s-42"}\n'
    assert agent.session_id(events) == "s-42"
    assert agent.session_id('{"type":"result","result":"no id"}') is None


@pytest.mark.parametrize(
    ("sandboxed", "policy"),
    [
        (False, ["-c", 'sandbox_mode="workspace-write"']),
        (True, []),
    ],
)
def test_codex_resumes_a_kept_session(sandboxed: bool, policy: list[str]) -> None:
    agent = make_agent("codex", SETTINGS)
    assert isinstance(agent, ContinuesSession)

    start = agent.session_start(model="smollm2", workspace_agent=True, sandboxed=sandboxed)
    following = agent.continuation(
        "0199-thread", model="smollm2", workspace_agent=True, sandboxed=sandboxed
    )

    bypass = ["--dangerously-bypass-approvals-and-sandbox"]
    expected_start = codex_expected(bypass if sandboxed else ["-s", "workspace-write"])
    expected_start.remove("--ephemeral")  # its session files are kept for the next turn
    assert start.argv == expected_start
    resumed = codex_expected(bypass if sandboxed else [])
    resumed.remove("--ephemeral")
    resumed[1:2] = ["exec", "resume"]
    # exec resume takes no -s: the policy goes in as a setting, before the id and the "-"
    assert following.argv == [*resumed[:-1], *policy, "0199-thread", "-"]
    kept = () if sandboxed else ("CODEX_HOME",)
    assert start.private_dirs == following.private_dirs == kept
    events = '{"type":"thread.started","thread_id":"0199-thread"}\n{"type":"turn.started"}\n'
    assert agent.session_id(events) == "0199-thread"


def test_kiro_and_the_command_agent_cannot_continue_a_session(tmp_path: Path) -> None:
    command = make_agent("command", AgentSettings(command="cat"))
    assert not isinstance(make_agent("kiro", AgentSettings()), ContinuesSession)
    assert not isinstance(command, ContinuesSession)
    backend = CLIBackend(command, model="m", timeout=30)

    with (
        pytest.raises(AgentConfigError, match=r"^the agent command cannot continue a session$"),
        backend.session(),
    ):
        pass


def test_the_sandboxed_agent_command_continues_claudes_session() -> None:
    from pytest_openkata.contracts.config import EvalSettings, SandboxSettings
    from pytest_openkata.core.sandboxed import sandbox_agent

    claude = sandbox_agent(EvalSettings(sandbox=SandboxSettings(agent="claude")))
    kiro = sandbox_agent(EvalSettings(sandbox=SandboxSettings(agent="kiro")))

    assert claude.session_argv == claude.argv
    assert claude.continue_argv is not None
    assert claude.continue_argv("s-1") == [*claude.argv, "--resume", "s-1"]
    assert kiro.continue_argv is None
    assert kiro.session_argv is None


# ---------------------------------------------------------------------------------------------
# command agent and registry


def test_command_agent_runs_in_its_folder_and_reads_the_prompt_on_stdin(tmp_path: Path) -> None:
    agent = make_agent("command", AgentSettings(command='pwd; cat; echo "|$OPENKATA_AGENT_MODEL"'))
    backend = CLIBackend(agent, model="local-m", timeout=30, cwd_factory=in_folder(tmp_path))

    answer = backend.complete("system text", "user text")

    assert answer == f"{tmp_path}\nsystem text\n\nuser text|local-m\n"


def test_command_agent_invocation() -> None:
    invocation = CommandAgent("my-agent --fast").invocation(model="m", workspace_agent=True)

    assert invocation == AgentInvocation(
        ["sh", "-c", "my-agent --fast"],
        {"OPENKATA_AGENT_MODEL": "m"},
        events_variable="OPENKATA_AGENT_EVENTS",
    )


def test_a_sandboxed_command_agent_gets_no_events_file() -> None:
    invocation = CommandAgent("my-agent").invocation(
        model="m", workspace_agent=True, sandboxed=True
    )

    assert invocation.events_variable == ""


@pytest.mark.parametrize("command", ["", "   "])
def test_an_empty_command_is_refused(command: str) -> None:
    with pytest.raises(AgentConfigError, match="command agent needs a shell command line"):
        make_agent("command", AgentSettings(command=command))


def test_an_unknown_agent_is_refused() -> None:
    with pytest.raises(
        AgentConfigError,
        match=r"^unknown agent 'gemini'; choose one of: acp, acp:claude, acp:codex, acp:gemini, "
        r"acp:opencode, acp:qwen, claude, codex, command, kiro$",
    ):
        make_agent("gemini", AgentSettings())


@pytest.mark.parametrize(
    ("name", "cli"), [("kiro", "kiro-cli"), ("claude", "claude"), ("codex", "codex")]
)
def test_registry_names(name: str, cli: str) -> None:
    agent = make_agent(name, AgentSettings())

    assert agent.name == cli
    assert agent.invocation(model="m", workspace_agent=False).argv[0] == cli
    assert agent.install_hint.startswith("Install: ")


def _call_in_a_thread(backend: CLIBackend) -> tuple[threading.Thread, list[BaseException]]:
    """``backend.complete`` called on a thread of its own, and the list its error goes to."""
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            backend.complete("s", "u")
        except BackendError as exc:
            outcome.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    return caller, outcome


def test_close_kills_the_calls_still_running(tmp_path: Path) -> None:
    started = tmp_path / "started"
    backend = CLIBackend(CommandAgent(f"touch {started}; sleep 300"), model="m", timeout=600)
    caller, outcome = _call_in_a_thread(backend)
    while not started.exists():
        time.sleep(0.01)
    backend.close()
    caller.join(60)

    assert not caller.is_alive()
    [error] = outcome
    assert isinstance(error, AgentFailedError)
    assert "signal: killed" in str(error)


def test_calls_made_after_close_start_no_cli(tmp_path: Path) -> None:
    started = tmp_path / "started"
    backend = CLIBackend(CommandAgent(f"touch {started}; sleep 300"), model="m", timeout=600)
    view = backend.in_folder(lambda: contextlib.nullcontext(tmp_path))
    backend.close()

    with pytest.raises(AgentFailedError, match=r"^command was not started: the run is stopping$"):
        view.complete("s", "u")
    assert not started.exists()


def test_a_close_while_a_cli_starts_ends_it(tmp_path: Path) -> None:
    # close() comes while a scenario's thread is starting its CLI: the CLI is started and
    # kept before close() takes over, and ended by it; none is left running.
    started, spawning = tmp_path / "started", threading.Event()
    backend = CLIBackend(CommandAgent(f"touch {started}; sleep 300"), model="m", timeout=600)
    real_popen = subprocess.Popen
    closing: list[threading.Thread] = []

    def popen_racing_close(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        closer = threading.Thread(target=backend.close)
        closer.start()  # waits for the start to be kept
        closing.append(closer)
        spawning.set()
        return real_popen(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subprocess, "Popen", popen_racing_close)
        caller, outcome = _call_in_a_thread(backend)
        assert spawning.wait(60)
    caller.join(60)
    closing[0].join(60)

    assert not caller.is_alive()
    assert not closing[0].is_alive()
    [error] = outcome
    assert "signal: killed" in str(error)


# --- what an agent asks of its sandbox ---------------------------------------------------------


def test_kiro_asks_for_its_credential_folders_and_its_config_other_agents_for_nothing() -> None:
    from pytest_openkata.contracts.config import EvalSettings, SandboxSettings
    from pytest_openkata.contracts.sandboxes import AgentCommand
    from pytest_openkata.core.sandboxed import sandbox_agent

    def agent(name: str) -> AgentCommand:
        return sandbox_agent(EvalSettings(sandbox=SandboxSettings(agent=name)))

    kiro, claude, codex = agent("kiro"), agent("claude"), agent("codex")

    # As the reference mounts them for kiro-cli; nothing of the host for the others, and no
    # folder for every agent unless sandbox.mounts names one.
    assert kiro.mounts == (("~/.aws", "/root/.aws"), ("~/.kiro", "/root/.kiro"))
    assert claude.mounts == codex.mounts == ()
    assert EvalSettings().sandbox.mounts == ()
    assert kiro.files == ((".kiro/agents/eval-agent.json", SANDBOX_JSON.encode()),)
    assert claude.files == codex.files == ()


# --- ACP agents: their invocations ---------------------------------------------------------


def _acp_agent_argv(invocation: AgentInvocation) -> list[str]:
    """The ACP agent's own command line, after the client's ``--``."""
    return invocation.argv[invocation.argv.index("--") + 1 :]


def test_an_acp_preset_runs_its_agent_through_the_acp_client() -> None:
    settings = AgentSettings(openai_base_url="http://127.0.0.1:9/v1", openai_api_key="k")

    invocation = make_agent("acp:qwen", settings).invocation(model="m", workspace_agent=True)

    assert invocation.argv[1:3] == ["-m", "pytest_openkata.providers.agents.acp_client"]
    assert invocation.argv[invocation.argv.index("--approve") + 1] == "edits"
    assert _acp_agent_argv(invocation) == [
        "qwen", "--acp", "--auth-type", "openai", "-m", "m",
        "--openai-base-url", "http://127.0.0.1:9/v1",
    ]  # fmt: skip
    assert invocation.env == {"OPENAI_API_KEY": "k"}  # the key never in argv


def test_a_plain_answer_of_an_acp_agent_approves_nothing() -> None:
    invocation = make_agent("acp:qwen", AgentSettings()).invocation(
        model="m", workspace_agent=False
    )

    assert invocation.argv[invocation.argv.index("--approve") + 1] == "none"


def test_opencode_is_given_a_provider_for_the_configured_base_url() -> None:
    settings = AgentSettings(openai_base_url="http://127.0.0.1:9/v1")

    invocation = make_agent("acp:opencode", settings).invocation(model="m", workspace_agent=True)

    assert _acp_agent_argv(invocation) == ["opencode", "acp"]
    config = json.loads(invocation.env["OPENCODE_CONFIG_CONTENT"])
    assert config["model"] == "openkata/m"
    provider = config["provider"]["openkata"]
    assert provider["npm"] == "@ai-sdk/openai-compatible"
    assert provider["options"]["baseURL"] == "http://127.0.0.1:9/v1"
    assert list(provider["models"]) == ["m"]
    assert provider["options"]["apiKey"] == "{env:OPENKATA_OPENCODE_KEY}"
    assert invocation.env["OPENKATA_OPENCODE_KEY"] == "unused-key"  # the key never in argv
    assert set(invocation.private_dirs) == {"XDG_DATA_HOME", "XDG_STATE_HOME"}


def test_the_acp_agent_runs_the_command_line_it_is_given_split_as_a_shell_would() -> None:
    agent = make_agent("acp", AgentSettings(command="my-agent --acp 'a b'"))

    invocation = agent.invocation(model="m", workspace_agent=True)

    assert _acp_agent_argv(invocation) == ["my-agent", "--acp", "a b"]
    assert invocation.env == {"OPENKATA_AGENT_MODEL": "m"}


def test_an_acp_command_line_that_cannot_be_split_is_refused() -> None:
    with pytest.raises(AgentConfigError, match=r"agent_command.*cannot be read"):
        make_agent("acp", AgentSettings(command="my-agent 'unclosed"))
