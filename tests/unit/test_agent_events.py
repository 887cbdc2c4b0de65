"""Reading agents' event streams into the one transcript model: Claude Code's stream-json and
Codex's exec --json, as their CLIs print them, and ACP session updates as the plugin's ACP
client prints them."""

from __future__ import annotations

import json
from typing import Any

from pytest_openkata.contracts.transcripts import (
    MAX_STEPS,
    RESULT_CHARS,
    SkillLoad,
    Transcript,
)
from pytest_openkata.providers.agents.acp_events import read_acp_events
from pytest_openkata.providers.agents.claude_events import read_claude_events
from pytest_openkata.providers.agents.codex_events import read_codex_events


def _lines(*events: dict[str, Any]) -> str:
    return "".join(json.dumps(event) + "\n" for event in events)


def _assistant(*blocks: dict[str, Any], parent: str | None = None) -> dict[str, Any]:
    return {"type": "assistant", "message": {"content": list(blocks)}, "parent_tool_use_id": parent}


def _results(*blocks: dict[str, Any], parent: str | None = None) -> dict[str, Any]:
    return {"type": "user", "message": {"content": list(blocks)}, "parent_tool_use_id": parent}


CLAUDE_RUN = _lines(
    {"type": "system", "subtype": "init", "session_id": "s-1", "model": "smollm2", "tools": []},
    _assistant(
        {"type": "text", "text": "I will look at the skill."},
        {"type": "tool_use", "id": "t1", "name": "Skill", "input": {"skill": "commit-message"}},
    ),
    _results({"type": "tool_result", "tool_use_id": "t1", "content": "Loaded."}),
    _assistant(
        {"type": "tool_use", "id": "t2", "name": "Task", "input": {"prompt": "check the diff"}},
    ),
    _assistant(
        {
            "type": "tool_use",
            "id": "t3",
            "name": "Read",
            "input": {"file_path": "/work/.claude/skills/review/SKILL.md"},
        },
        parent="t2",
    ),
    _results(
        {"type": "tool_result", "tool_use_id": "t3", "content": [{"type": "text", "text": "# R"}]},
        parent="t2",
    ),
    _results({"type": "tool_result", "tool_use_id": "t2", "content": "done"}),
    _assistant(
        {"type": "tool_use", "id": "t4", "name": "Write", "input": {"file_path": "MSG.txt"}},
        {"type": "tool_use", "id": "t5", "name": "Bash", "input": {"command": "false"}},
    ),
    _results(
        {"type": "tool_result", "tool_use_id": "t4", "content": "written"},
        {"type": "tool_result", "tool_use_id": "t5", "content": "exit 1", "is_error": True},
    ),
    {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": "feat: add the parser",
        "num_turns": 4,
        "duration_ms": 2500,
        "total_cost_usd": 0.0125,
        "usage": {"input_tokens": 1200, "output_tokens": 80},
    },
)


def test_a_claude_run_becomes_its_steps_skills_files_and_figures() -> None:
    transcript = read_claude_events("a warning the CLI printed\n" + CLAUDE_RUN)

    assert transcript is not None
    assert transcript.source == "claude stream-json"
    assert [(s.kind, s.tool or s.role) for s in transcript.steps] == [
        ("message", "assistant"),
        ("tool_call", "Skill"),
        ("tool_call", "Task"),
        ("tool_call", "Read"),
        ("tool_call", "Write"),
        ("tool_call", "Bash"),
    ]
    read = transcript.steps[3]
    assert (read.subagent, read.result, read.status) == ("t2", "# R", "ok")
    assert transcript.steps[5].status == "error"
    # The skill loaded by the agent and the one its subagent read, each with who loaded it.
    assert transcript.skills_loaded == (SkillLoad("commit-message"), SkillLoad("review", "t2"))
    assert transcript.files_read == ("/work/.claude/skills/review/SKILL.md",)
    assert transcript.files_written == ("MSG.txt",)
    assert (transcript.turns, transcript.input_tokens, transcript.output_tokens) == (4, 1200, 80)
    assert (transcript.cost_usd, transcript.seconds) == (0.0125, 2.5)
    assert (transcript.outcome, transcript.final_text) == ("success", "feat: add the parser")
    assert [s.tool for s in transcript.last_tool_calls(2)] == ["Write", "Bash"]


def test_a_claude_run_that_failed_says_so() -> None:
    failed = _lines({"type": "result", "subtype": "error_max_turns", "is_error": True})

    transcript = read_claude_events(failed)

    assert transcript is not None
    assert transcript.outcome == "error: error_max_turns"


def test_output_without_events_gives_no_transcript() -> None:
    plain = "feat: add the parser\n\nA plain answer, as -p prints without stream-json.\n"

    assert read_claude_events(plain) is None
    assert read_codex_events(plain) is None
    assert read_codex_events("") is None


CODEX_RUN = _lines(
    {"type": "thread.started", "thread_id": "th-1"},
    {"type": "turn.started"},
    {"type": "item.completed", "item": {"id": "i0", "type": "reasoning", "text": "thinking"}},
    {
        "type": "item.started",
        "item": {
            "id": "i1",
            "type": "command_execution",
            "command": "bash -lc 'cat skills/commit-message/SKILL.md'",
            "aggregated_output": "",
            "exit_code": None,
            "status": "in_progress",
        },
    },
    {
        "type": "item.completed",
        "item": {
            "id": "i1",
            "type": "command_execution",
            "command": "bash -lc 'cat skills/commit-message/SKILL.md'",
            "aggregated_output": "# Commit messages\n",
            "exit_code": 0,
            "status": "completed",
        },
    },
    {
        "type": "item.completed",
        "item": {
            "id": "i2",
            "type": "file_change",
            "changes": [{"path": "MSG.txt", "kind": "add"}, {"path": "old.txt", "kind": "delete"}],
            "status": "completed",
        },
    },
    {"type": "item.completed", "item": {"id": "i3", "type": "agent_message", "text": "Done."}},
    {"type": "turn.completed", "usage": {"input_tokens": 7500, "output_tokens": 40}},
)


def test_a_codex_run_becomes_its_steps_skills_files_and_figures() -> None:
    transcript = read_codex_events(CODEX_RUN)

    assert transcript is not None
    assert transcript.source == "codex exec --json"
    assert [(s.kind, s.tool or s.role, s.status) for s in transcript.steps] == [
        ("tool_call", "shell", "ok"),
        ("tool_call", "apply_patch", "ok"),
        ("message", "assistant", ""),
    ]
    assert transcript.steps[0].result == "# Commit messages\n"  # its last state, not its first
    assert transcript.skills_loaded == (SkillLoad("commit-message"),)
    assert transcript.files_written == ("MSG.txt",)
    assert (transcript.turns, transcript.input_tokens, transcript.output_tokens) == (1, 7500, 40)
    assert (transcript.outcome, transcript.final_text) == ("success", "Done.")


def test_a_failed_codex_turn_is_its_outcome() -> None:
    failed = _lines(
        {"type": "turn.started"},
        {"type": "turn.failed", "error": {"message": "stream disconnected"}},
    )

    transcript = read_codex_events(failed)

    assert transcript is not None
    assert transcript.outcome == "error: stream disconnected"


def test_a_long_run_keeps_its_first_and_last_steps_and_says_how_many_were_cut() -> None:
    calls = [
        {
            "type": "item.completed",
            "item": {
                "id": f"i{n}",
                "type": "command_execution",
                "command": f"echo {n}",
                "aggregated_output": "x" * (RESULT_CHARS + 50),
                "exit_code": 0,
                "status": "completed",
            },
        }
        for n in range(MAX_STEPS + 100)
    ]

    transcript = read_codex_events(_lines({"type": "turn.started"}, *calls))

    assert transcript is not None
    assert len(transcript.steps) == MAX_STEPS
    assert transcript.cut_steps == 100
    assert transcript.steps[0].arguments == "echo 0"
    assert transcript.steps[-1].arguments == f"echo {MAX_STEPS + 99}"
    assert transcript.all_tool_calls == MAX_STEPS + 100  # those left out counted too
    kept = transcript.masked(lambda text: text)  # as the run keeps it: texts bounded
    assert kept.steps[0].result.endswith("… [50 more characters cut]")


def test_a_transcript_goes_to_json_and_back_equal() -> None:
    transcript = read_claude_events(CLAUDE_RUN)
    assert transcript is not None

    data = json.loads(json.dumps(transcript.to_dict()))

    assert Transcript.from_dict(data) == transcript


def test_masking_comes_before_the_cut_so_no_part_of_a_secret_is_kept() -> None:
    secret = "sk-" + "Z" * 40
    result = "x" * (RESULT_CHARS - 10) + secret
    events = _lines(
        _assistant(
            {"type": "tool_use", "id": "t1", "name": "Skill", "input": {"skill": secret}},
        ),
        _results({"type": "tool_result", "tool_use_id": "t1", "content": result}),
    )
    transcript = read_claude_events(events)
    assert transcript is not None

    kept = transcript.masked(lambda text: text.replace(secret, "***"))

    assert "ZZZZ" not in json.dumps(kept.to_dict())
    assert kept.skills_loaded == (SkillLoad("***"),)


def test_the_final_answer_is_kept_whole_however_long() -> None:
    answer = "y" * 10_000
    codex = _lines(
        {"type": "turn.started"},
        {"type": "item.completed", "item": {"id": "i1", "type": "agent_message", "text": answer}},
    )
    claude = _lines(_assistant({"type": "text", "text": answer}))  # no result event

    for transcript in (read_codex_events(codex), read_claude_events(claude)):
        assert transcript is not None
        assert transcript.masked(lambda text: text).final_text == answer


def test_events_of_the_wrong_shape_are_read_as_absent() -> None:
    odd = _lines(
        {"type": "assistant", "message": {"content": 7}},
        {"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "Bash"}]}},
        {"type": "user", "message": {"content": [{"type": "tool_result", "content": "?"}]}},
        {"type": "result", "subtype": "success", "result": None, "total_cost_usd": True},
    )

    transcript = read_claude_events(odd)

    assert transcript is not None
    assert [s.tool for s in transcript.steps] == ["Bash"]
    assert transcript.steps[0].result == ""  # a result with no id matches no call
    assert transcript.cost_usd is None
    assert transcript.final_text == ""


def test_claude_codes_cached_input_counts_as_input() -> None:
    events = _lines(
        {
            "type": "result",
            "subtype": "success",
            "result": "ok",
            "usage": {
                "input_tokens": 10,
                "cache_read_input_tokens": 700,
                "cache_creation_input_tokens": 90,
                "output_tokens": 5,
            },
        }
    )

    transcript = read_claude_events(events)

    assert transcript is not None
    assert (transcript.input_tokens, transcript.output_tokens) == (800, 5)


def test_a_codex_error_it_recovered_from_is_not_its_outcome() -> None:
    events = _lines(
        {"type": "turn.started"},
        {"type": "error", "message": "Reconnecting... 1/5"},
        {"type": "item.completed", "item": {"id": "i1", "type": "agent_message", "text": "ok"}},
        {"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}},
    )

    transcript = read_codex_events(events)

    assert transcript is not None
    assert transcript.outcome == "success"


def test_the_skills_claude_code_found_are_kept_as_text_and_masked_with_the_rest() -> None:
    init = {
        "type": "system",
        "subtype": "init",
        "model": "m",
        "skills": ["zoo", 7, "weather", "sk-secret-skill"],
    }
    result = {"type": "result", "subtype": "success", "is_error": False, "result": "ok"}
    output = "\n".join(json.dumps(event) for event in (init, result))

    transcript = read_claude_events(output)

    assert transcript is not None
    assert transcript.extras == {"model": "m", "skills_offered": "zoo, weather, sk-secret-skill"}
    masked = transcript.masked(lambda text: text.replace("sk-secret-skill", "***"))
    assert masked.extras["skills_offered"] == "zoo, weather, ***"
    no_skills = read_claude_events(json.dumps(result))
    assert no_skills is not None
    assert "skills_offered" not in no_skills.extras


# --- ACP session updates ---------------------------------------------------------------------


def _update(**update: Any) -> dict[str, Any]:
    return {"type": "session_update", "update": update}


def _chunk(text: str) -> dict[str, Any]:
    return _update(sessionUpdate="agent_message_chunk", content={"type": "text", "text": text})


def test_acp_updates_of_a_call_merge_and_messages_between_calls_stay_apart() -> None:
    output = _lines(
        _chunk("First, "),
        _chunk("a look."),
        _update(
            sessionUpdate="tool_call",
            toolCallId="c1",
            title="Write notes",
            kind="edit",
            rawInput={"path": "notes.md"},
        ),
        _update(
            sessionUpdate="tool_call_update",
            toolCallId="c1",
            status="completed",
            content=[{"type": "diff", "path": "/w/notes.md", "newText": "# notes"}],
            locations=[{"path": "/w/notes.md"}],
        ),
        _update(sessionUpdate="tool_call", toolCallId="c2", title="Search", kind="search"),
        _update(
            sessionUpdate="tool_call_update",
            toolCallId="c2",
            status="failed",
            rawOutput={"error": "no index"},
        ),
        _update(sessionUpdate="tool_call", toolCallId="c3", title="", kind="read",
                rawInput={"filePath": "/w/skills/review/SKILL.md"}),
        _chunk("Done."),
        {"type": "result", "stopReason": "max_tokens", "usage": None, "seconds": 2.5},
    )  # fmt: skip

    transcript = read_acp_events(output)

    assert transcript is not None
    assert [(s.kind, s.tool or s.text, s.status, s.result) for s in transcript.steps] == [
        ("message", "First, a look.", "", ""),
        ("tool_call", "Write notes", "ok", "# notes"),
        ("tool_call", "Search", "error", '{"error": "no index"}'),
        ("tool_call", "read", "", ""),  # no title: its kind names it
        ("message", "Done.", "", ""),
    ]
    assert transcript.files_written == ("/w/notes.md",)  # its locations, else its input's path
    assert transcript.files_read == ("/w/skills/review/SKILL.md",)
    assert transcript.skills_loaded == (SkillLoad("review"),)
    assert transcript.outcome == "error: max_tokens"
    assert transcript.final_text == "Done."
    assert transcript.seconds == 2.5
    assert transcript.input_tokens is None  # the agent did not say


def test_acp_output_without_a_result_line_gives_no_transcript() -> None:
    assert read_acp_events(_lines(_chunk("cut short")) + "warning: not json\n") is None
