"""The command agent's events file, end to end: a scripted command writes JSON Lines to the file
``OPENKATA_AGENT_EVENTS`` names and prints its answer; a real scenario run reads the file into
the trial's transcript (masked and bounded as any other), and a line it cannot read is an
error naming the file and the line, never a criterion judged."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from pytest_openkata.contracts.transcripts import ARGUMENT_CHARS
from pytest_openkata.providers.agents.command_events import read_command_events
from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, write_skill

SECRET = "sk-events-secret-0123456789abcdef"
ANSWER = "The command's answer, long enough to be judged on its own merits."
# Inside a text: a line separator of Unicode's and a terminal escape, which must neither split
# the line nor reach the terminal.
HOSTILE = "one\u2028two\x1b[2J"
EVENTS = [
    {"type": "skill_loaded", "name": "s"},
    {"type": "file_read", "path": "skills/s/SKILL.md"},
    {"type": "message", "text": f"Reading the skill. {HOSTILE}"},
    {
        "type": "tool_call",
        "name": "Bash",
        "arguments": {"command": "ls", "padding": "x" * (ARGUMENT_CHARS * 2)},
        "result": f"token {SECRET}",
        "status": "ok",
    },
    {"type": "tool_call", "name": "Write", "arguments": "notes.md", "status": "error"},
    {"type": "file_written", "path": "notes.md"},
    {"type": "usage", "input_tokens": 600, "output_tokens": 20, "cost_usd": 0.01, "turns": 1},
    {"type": "usage", "input_tokens": 300, "output_tokens": 10, "turns": 1},
    {"type": "message", "text": ANSWER},
]


def _command(events_file: Path) -> str:
    """A command that reads its prompt, copies ``events_file`` to its events file and answers."""
    return (
        f'cat > /dev/null; cp {shlex.quote(str(events_file))} "$OPENKATA_AGENT_EVENTS"; '
        f"echo {shlex.quote(ANSWER)}"
    )


def _run(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, lines: list[str]
) -> pytest.RunResult:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    events_file = pytester.path / "scripted-events.jsonl"
    events_file.write_text("".join(line + "\n" for line in lines))
    return pytester.runpytest_subprocess(
        "skills/s",
        "--eval-backend", "command",
        "--eval-agent-command", _command(events_file),
        "--eval-judge-backend", "http",
        "--eval-base-url", endpoint.base_url,
    )  # fmt: skip


def _trial(root: Path) -> dict:
    [log] = (root / ".openkata" / "runs").glob("*.jsonl")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    [trial] = [record for record in records if record["record"] == "trial"]
    return trial


def test_a_lone_surrogate_escape_in_the_events_file_reads_as_the_replacement_character() -> None:
    message = {"type": "message", "text": "step \ud800"}  # json.dumps writes the escape

    transcript = read_command_events(json.dumps(message) + "\n", "the answer")

    assert [step.text for step in transcript.steps] == ["step \ufffd"]


def test_a_commands_events_file_becomes_its_transcript(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENKATA_EVAL_HTTP_API_KEY", SECRET)

    result = _run(pytester, endpoint, [json.dumps(event, ensure_ascii=False) for event in EVENTS])

    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert "\x1b" not in result.stdout.str()
    trial = _trial(pytester.path)
    assert trial["trace"]["output"] == ANSWER + "\n"  # the answer is what it printed
    transcript = trial["trace"]["transcript"]
    assert transcript["source"] == "command events file"
    steps = [(s["kind"], s["tool"] or s["role"], s["status"]) for s in transcript["steps"]]
    assert steps == [
        ("message", "assistant", ""),
        ("tool_call", "Bash", "ok"),
        ("tool_call", "Write", "error"),
        ("message", "assistant", ""),
    ]
    assert transcript["steps"][0]["text"] == f"Reading the skill. {HOSTILE}"  # one line
    bash = transcript["steps"][1]
    assert bash["result"] == "token ***"  # masked
    assert bash["arguments"].startswith('{"command": "ls", "padding": "xxx')
    assert bash["arguments"].endswith("more characters cut]")  # bounded
    assert transcript["steps"][2]["arguments"] == "notes.md"  # a string is kept as it is
    assert transcript["skills_loaded"] == [{"name": "s", "subagent": ""}]
    assert transcript["files_read"] == ["skills/s/SKILL.md"]
    assert transcript["files_written"] == ["notes.md"]
    figures = ("input_tokens", "output_tokens", "turns", "cost_usd")
    assert [transcript[key] for key in figures] == [900, 30, 2, 0.01]  # usage lines add up
    assert transcript["final_text"] == ANSWER + "\n"
    assert SECRET not in next((pytester.path / ".openkata" / "runs").glob("*.jsonl")).read_text()


@pytest.mark.parametrize(
    ("bad_line", "reason"),
    [
        ("{not json", "not JSON"),
        ('["a list"]', "not a JSON object"),
        ('{"type": "thought", "text": "x"}', "'type' must be one of message, tool_call"),
        ('{"type": "tool_call", "arguments": {}}', "'name' must be a string"),
        ('{"type": "usage", "input_tokens": -1}', "'input_tokens' must be a whole number"),
        ('{"type": "message", "text": "\\u001b[2J"', "not JSON"),
        # Its texts are walked for lone surrogates, which a line nested this deep defeats.
        ('{"type": "message", "t": ' + "[" * 900 + '"\\ud800"' + "]" * 900 + "}", "nested"),
    ],
)
def test_a_line_of_the_events_file_that_cannot_be_read_is_an_error_naming_it(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    bad_line: str,
    reason: str,
) -> None:
    lines = [json.dumps(EVENTS[0]), "", bad_line]

    result = _run(pytester, endpoint, lines)

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [f"*scenario error: agent: command: events file ($OPENKATA_AGENT_EVENTS) line 3: {reason}*"]
    )
    assert "\x1b" not in result.stdout.str()
    assert script.judge_calls == 0  # an error, never a criterion judged failed
