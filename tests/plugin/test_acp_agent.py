"""ACP agents end to end: a scripted agent written with the ACP SDK (tests/support/acp_agent.py)
speaks the real protocol to the plugin's ACP client, as the ``acp`` agent with its command line
in ``--eval-agent-command``; the judge is a scripted endpoint on loopback. What the agent
reported becomes the trial's transcript; a crash, an agent that never answers and one that
ends without a word are errors naming the agent; hostile text breaks no report."""

from __future__ import annotations

import contextlib
import json
import shlex
import sys
from pathlib import Path

import psutil
import pytest

from pytest_openkata.contracts.agents import AgentSettings
from pytest_openkata.contracts.errors import AgentConfigError
from pytest_openkata.core.agent_backend import CLIBackend
from pytest_openkata.providers.agents import make_agent
from tests.support import acp_agent
from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, write_skill

SCRIPTED_AGENT = Path(acp_agent.__file__)


def _agent_command(script: str) -> str:
    return shlex.join([sys.executable, str(SCRIPTED_AGENT), script, "skills/s/SKILL.md"])


def _run(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: str, *extra: str
) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "skills/s",
        "--eval-backend", "acp",
        "--eval-agent-command", _agent_command(script),
        "--eval-judge-backend", "http",
        "--eval-base-url", endpoint.base_url,
        *extra,
    )  # fmt: skip


def _trial(root: Path) -> dict:
    [log] = (root / ".openkata" / "runs").glob("*.jsonl")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    [trial] = [record for record in records if record["record"] == "trial"]
    return trial


def test_an_acp_agents_session_becomes_its_transcript_and_the_judge_reads_its_answer(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})

    result = _run(pytester, endpoint, "work")

    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    answer = "".join(acp_agent.WORK_ANSWER_PARTS)
    judged = str(endpoint.requests[-1].json["messages"][-1]["content"])
    assert answer in judged
    assert "session_update" not in judged  # the judge reads the answer, not the events
    trial = _trial(pytester.path)
    assert trial["trace"]["output"] == answer
    transcript = trial["trace"]["transcript"]
    assert transcript["source"] == "acp session/update"
    steps = [(s["kind"], s["tool"] or s["role"], s["status"]) for s in transcript["steps"]]
    assert steps == [
        ("tool_call", "Read", "ok"),
        ("tool_call", "Bash", "error"),
        # A workspace agent on the host: an edit in its folder is allowed.
        ("tool_call", "Edit", "ok"),
        ("message", "assistant", ""),  # its two chunks, one message
    ]
    assert transcript["steps"][0]["result"] == "# s\n\nFollow the rules.\n"  # read for it
    assert transcript["steps"][1]["arguments"] == '{"command": "ls"}'
    assert transcript["steps"][2]["result"] == "written"
    assert (pytester.path / "notes.md").read_text() == "# notes\n"  # written for it
    assert transcript["skills_loaded"] == [{"name": "s", "subagent": ""}]
    assert [Path(path).name for path in transcript["files_read"]] == ["SKILL.md"]
    assert [Path(path).name for path in transcript["files_written"]] == ["notes.md"]
    usage = acp_agent.USAGE
    assert (transcript["input_tokens"], transcript["output_tokens"]) == (
        usage["input"],
        usage["output"],
    )
    assert transcript["cost_usd"] == acp_agent.COST_USD
    assert transcript["outcome"] == "success"
    assert transcript["final_text"] == answer


def test_an_acp_agent_giving_a_plain_answer_may_not_edit_files(tmp_path: Path) -> None:
    (tmp_path / "SKILL.md").write_text("# w\n")
    agent = make_agent(
        "acp",
        AgentSettings(command=shlex.join([sys.executable, str(SCRIPTED_AGENT), "work"])),
    )
    backend = CLIBackend(
        agent,
        model="m",
        timeout=120,
        workspace_agent=False,
        cwd_factory=lambda: contextlib.nullcontext(tmp_path),
    )

    answer, transcript = backend.complete_transcribed("", "go")

    assert answer == "".join(acp_agent.WORK_ANSWER_PARTS)
    assert not (tmp_path / "notes.md").exists()  # the client refused the edit
    assert transcript is not None
    [edit] = [step for step in transcript.tool_calls if step.tool == "Edit"]
    assert (edit.status, edit.result) == ("error", "refused")
    assert transcript.skills_loaded[0].name == tmp_path.name  # the folder of the SKILL.md read


def test_an_acp_agent_that_ends_without_a_word_gives_an_empty_answer_to_grade(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    script.verdicts = {"x": (False, "nothing was said")}

    result = _run(pytester, endpoint, "mute")

    # The agent's own outcome: graded like any answer, never an error of the run.
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["SUBFAILED[[]x (0/1)[]] skills/s/evals::scenario-a - *"])
    assert script.judge_calls == 1
    result.stdout.fnmatch_lines(["*nothing was said*"])
    assert "scenario error" not in result.stdout.str()


@pytest.mark.parametrize(
    ("scenario_script", "timeout", "error"),
    [
        ("crash", "120", "stderr: acp: the agent exited mid-session (status 3)"),
        ("silent", "3", "scenario error: agent: acp timed out after 3s"),
        ("refuse", "120", "stderr: acp: the agent answered with an error: refused*pwned*"),
    ],
)
def test_an_acp_agent_that_fails_is_an_error_naming_it(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    scenario_script: str,
    timeout: str,
    error: str,
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})

    result = _run(pytester, endpoint, scenario_script, "--eval-direct-timeout", timeout)

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"*{error}*"])
    assert "\x1b" not in result.stdout.str()  # the agent's own text, escaped
    assert script.judge_calls == 0  # an error, never a criterion judged failed
    # Neither the client nor the agent outlives the run, whichever way it ended.
    left = [
        process.info["pid"]
        for process in psutil.process_iter(["pid", "cmdline"])
        if str(pytester.path) in " ".join(process.info["cmdline"] or ())
        or (
            str(SCRIPTED_AGENT) in " ".join(process.info["cmdline"] or ())
            and scenario_script in (process.info["cmdline"] or ())
        )
    ]
    assert left == []


def test_hostile_text_from_an_acp_agent_breaks_no_report_and_never_reaches_the_terminal(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})

    result = _run(
        pytester,
        endpoint,
        "hostile",
        "--eval-output", "out/",
        "--eval-html", "report.html",
        "--eval-markdown", "report.md",
        "--eval-threshold", "0",
    )  # fmt: skip

    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert "\x1b" not in result.stdout.str()
    transcript = _trial(pytester.path)["trace"]["transcript"]
    assert transcript["steps"][0]["tool"].startswith("Tool\x1b[2J")  # kept as the agent gave it
    html = (pytester.path / "report.html").read_text()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    markdown = (pytester.path / "report.md").read_text()
    assert '{"x": "\\u001b[2J\\u001b]0;pwned' in markdown  # the call's arguments, as JSON
    [report] = (pytester.path / "out").glob("*.json")
    json.loads(report.read_text())  # reads back


def test_a_sandboxed_acp_agent_is_its_own_command_driven_from_the_host() -> None:
    """In the sandbox the command is the agent's own (no Python client in the image): the
    client drives it from the host. Claude Code's adapter is told it runs in a sandbox there
    (root may bypass its permissions only then), and never on the host: there the variable
    is emptied, whatever the user's environment says."""
    agent = make_agent("acp:claude", AgentSettings(anthropic_base_url="http://127.0.0.1:9"))

    boxed = agent.invocation(model="m", workspace_agent=True, sandboxed=True)
    on_host = agent.invocation(model="m", workspace_agent=True)

    assert boxed.argv == ["claude-code-acp"]
    assert boxed.driver is not None
    assert boxed.env["IS_SANDBOX"] == "1"
    assert boxed.env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"
    assert on_host.driver is None
    assert on_host.env["IS_SANDBOX"] == ""
    assert on_host.argv[1:3] == ["-m", "pytest_openkata.providers.agents.acp_client"]


def test_the_acp_agent_without_a_command_names_the_setting_and_the_presets() -> None:
    with pytest.raises(AgentConfigError, match=r"agent_command.*acp:opencode, acp:qwen"):
        make_agent("acp", AgentSettings())


# --- follow-up turns: the client loads the session and prompts it again ----------------------


def _with_follow_ups(root: Path, follow_ups: list[str]) -> None:
    write_skill(root, "s", {"scenario-a": {"x": 1}})
    options = {"description": "a conversation", "sandbox": False, "follow_ups": follow_ups}
    (root / "skills" / "s" / "evals" / "scenario-a" / "scenario.json").write_text(
        json.dumps(options)
    )


def test_an_acp_agent_continues_its_session_for_each_follow_up(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ACP_SESSIONS", str(tmp_path))
    _with_follow_ups(pytester.path, ["And the second?", "Third?"])

    result = _run(pytester, endpoint, "converse")

    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    [session] = list(tmp_path.glob("session-*.json"))  # one session, three prompts to it
    turns = _trial(pytester.path)["trace"]["turns"]
    assert [turn["user"] for turn in turns][1:] == ["And the second?", "Third?"]
    last = turns[-1]["agent"]
    assert last.startswith(f"turn 3 of {session.stem}: Third? (before: ")
    assert last.endswith("Do the task of scenario-a.; And the second?)")
    transcript = _trial(pytester.path)["trace"]["transcript"]
    # Each turn's own answer once: the replay of a loaded session is not read again.
    said = [step["text"] for step in transcript["steps"] if step["role"] == "assistant"]
    assert [text.split(":")[0] for text in said] == [
        f"turn {n} of {session.stem}" for n in (1, 2, 3)
    ]
    assert script.judge_calls == 1


def test_an_acp_agent_without_session_load_cannot_take_a_follow_up(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    _with_follow_ups(pytester.path, ["And the second?"])

    result = _run(pytester, endpoint, "work")

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["*acp: the agent cannot continue a session: it does not offer session/load*"]
    )
    assert script.judge_calls == 0
