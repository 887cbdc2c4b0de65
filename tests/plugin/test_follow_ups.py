"""Conversations of more than one turn, end to end against a scripted endpoint on loopback:
scenario.json's ``follow_ups`` sent to a model backend as messages, a simulated user replying
until it is done or its turn limit, a judge that reads every turn, an agent CLI whose session
is continued, and an agent that cannot continue, which is a configuration error."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_openkata.core.simulated_user import read_reply
from pytest_openkata.providers.graders.judge import fenced
from tests.support.endpoint import RecordedRequest, Reply, ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_skill

JUDGE_SYSTEM = "You are an evaluation judge"
USER_SYSTEM = "You play the user"
FIRST = "A first answer from the scripted agent, long enough to be judged on its own."
SECOND = "A second answer, shorter, after the user asked for it; still long enough."
FOLLOW_UP = "Now make it <b>shorter</b>."


class Conversations:
    """Answers a run's calls by who makes them: the judge (the verdicts of ``judge``), the
    simulated user (``user_replies`` in order) and the agent (``agent_answers`` in order,
    the last one again once they run out); every request is kept by kind."""

    def __init__(self, agent_answers: list[str], user_replies: list[str] = ()) -> None:
        self.agent_answers = list(agent_answers)
        self.user_replies = list(user_replies)
        self.calls: dict[str, list[Any]] = {"agent": [], "user": [], "judge": []}
        self.judge = EvalScript()

    def __call__(self, request: RecordedRequest) -> Reply:
        body = request.json
        messages = body["messages"]
        system = messages[0]["content"] if messages[0]["role"] == "system" else ""
        if system.startswith(JUDGE_SYSTEM):
            self.calls["judge"].append(body)
            verdicts = self.judge.answer_judge(messages[-1]["content"])
            return Reply.chat(json.dumps(verdicts))
        if system.startswith(USER_SYSTEM):
            self.calls["user"].append(body)
            return Reply.chat(self.user_replies.pop(0))
        self.calls["agent"].append(body)
        answer = self.agent_answers.pop(0) if len(self.agent_answers) > 1 else self.agent_answers[0]
        return Reply.chat(answer)


def _scenario(root: Path, options: dict[str, Any]) -> Path:
    skill = write_skill(root, "s", {"scenario-a": {"x": 1}})
    folder = skill / "evals" / "scenario-a"
    (folder / "scenario.json").write_text(json.dumps({"sandbox": False, **options}))
    return folder


def _trial(root: Path) -> dict[str, Any]:
    [log] = (root / ".openkata" / "runs").glob("*.jsonl")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    [trial] = [record for record in records if record["record"] == "trial"]
    return trial


def _run(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    responder: Callable[[RecordedRequest], Reply],
    *extra: str,
) -> pytest.RunResult:
    endpoint.respond_with(responder)
    return pytester.runpytest_subprocess("skills/s", *eval_args(endpoint.base_url, *extra))


def _conversation(*turns: tuple[str, str]) -> str:
    parts = []
    for number, (user, agent) in enumerate(turns, start=1):
        parts.append(f"### User (turn {number})\n\n{user}\n\n### Agent (turn {number})\n\n{agent}")
    return "\n\n".join(parts)


def test_follow_ups_go_to_a_model_backend_as_messages_and_the_judge_reads_every_turn(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint
) -> None:
    _scenario(pytester.path, {"follow_ups": [FOLLOW_UP]})
    calls = Conversations([FIRST, SECOND])

    result = _run(pytester, endpoint, calls, "--eval-markdown", "r.md", "--eval-html", "r.html")

    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    first, second = calls.calls["agent"]
    [prompt] = first["messages"]
    assert prompt["role"] == "user"
    assert "Do the task of scenario-a." in prompt["content"]
    assert second["messages"] == [
        prompt,
        {"role": "assistant", "content": FIRST},
        {"role": "user", "content": FOLLOW_UP},
    ]
    [judge] = calls.calls["judge"]
    conversation = _conversation(("Do the task of scenario-a.", FIRST), (FOLLOW_UP, SECOND))
    assert judge["messages"][1]["content"] == (
        f"## Conversation\n\n{fenced(conversation)}\n\n"
        "## Evaluation Criteria\n\nContext: ctx scenario-a\n\n"
        "- **x** (max 1 points): checks x\n"
    )
    trace = _trial(pytester.path)["trace"]
    assert trace["turns"] == [
        {"user": "Do the task of scenario-a.", "agent": FIRST},
        {"user": FOLLOW_UP, "agent": SECOND},
    ]
    assert trace["output"] == SECOND  # the final answer is the last turn's
    steps = [(step["role"], step["text"]) for step in trace["transcript"]["steps"]]
    assert steps == [("assistant", FIRST), ("user", FOLLOW_UP), ("assistant", SECOND)]
    assert trace["transcript"]["turns"] == 2
    markdown = (pytester.path / "r.md").read_text()
    assert f"User (turn 2):\n\n```text\n{FOLLOW_UP}\n```" in markdown
    page = (pytester.path / "r.html").read_text()
    assert "Conversation: 2 turns" in page
    assert FOLLOW_UP not in page  # the user's text is escaped on the page
    assert '<pre class="text turn-user">Now make it &lt;b&gt;shorter&lt;/b&gt;.</pre>' in page


def test_a_failed_conversation_shows_its_turns_in_pytests_output(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint
) -> None:
    _scenario(pytester.path, {"follow_ups": ["\x1b[2J" + FOLLOW_UP]})
    calls = Conversations([FIRST, SECOND])
    calls.judge.verdicts["x"] = (False, "not shorter")

    result = _run(pytester, endpoint, calls, "-rA")

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*- conversation -*",
            "[[]user, turn 1]",
            "Do the task of scenario-a.",
            "",
            "[[]agent, turn 1]",
            FIRST,
            "",
            "[[]user, turn 2]",
            "\\x1b[[]2J" + FOLLOW_UP,  # shown as an escape, never driving the terminal
            "*- agent output -*",
            SECOND,
        ]
    )
    assert "\x1b" not in result.stdout.str()


def test_a_one_turn_scenario_is_judged_as_before(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint
) -> None:
    _scenario(pytester.path, {})
    calls = Conversations([FIRST])

    result = _run(pytester, endpoint, calls)

    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    [judge] = calls.calls["judge"]
    assert judge["messages"][1]["content"].startswith(
        f"## Agent Response\n\n{fenced(FIRST)}\n\n## Evaluation Criteria"
    )
    assert _trial(pytester.path)["trace"]["turns"] == []


def test_the_simulated_user_replies_until_it_says_it_is_done(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint
) -> None:
    instructions = "You want the answer shorter, and say so once."
    _scenario(pytester.path, {"simulated_user": {"instructions": instructions, "max_turns": 4}})
    calls = Conversations(
        [FIRST, SECOND],
        [
            json.dumps({"message": FOLLOW_UP, "done": False}),
            json.dumps({"message": "Thanks, that is all.", "done": True}),
        ],
    )

    result = _run(pytester, endpoint, calls, "--eval-simulated-user-model", "user-model")

    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert len(calls.calls["agent"]) == 2  # the done reply was not sent
    assert {ask["model"] for ask in calls.calls["user"]} == {"user-model"}
    assert calls.calls["judge"][0]["model"] != "user-model"
    first_ask, second_ask = calls.calls["user"]
    task = "Do the task of scenario-a."
    assert first_ask["messages"][1]["content"] == (
        f"## Your instructions\n\n{instructions}\n\n## The conversation so far\n"
        f"\n### You (turn 1)\n\n{task}\n\n### The agent (turn 1)\n\n{FIRST}\n"
        "\nWrite your next message, or say that you are done.\n"
    )
    assert (
        f"### You (turn 2)\n\n{FOLLOW_UP}\n\n### The agent (turn 2)\n\n{SECOND}\n"
        in (second_ask["messages"][1]["content"])
    )
    assert first_ask["response_format"]["json_schema"]["name"] == "simulated_user_reply"
    assert calls.calls["agent"][1]["messages"][-1] == {"role": "user", "content": FOLLOW_UP}
    [judge] = calls.calls["judge"]
    assert _conversation((task, FIRST), (FOLLOW_UP, SECOND)) in judge["messages"][1]["content"]


def test_a_lone_surrogate_in_the_simulated_users_reply_reaches_the_agent_as_replacement(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint
) -> None:
    # The escape a hostile or cut reply holds: the turn goes on with U+FFFD, and the scenario
    # is judged and recorded like any other.
    _scenario(pytester.path, {"simulated_user": {"instructions": "Be a user.", "max_turns": 1}})
    calls = Conversations([FIRST, SECOND], [json.dumps({"message": "go on \ud800", "done": False})])

    result = _run(pytester, endpoint, calls)

    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert calls.calls["agent"][1]["messages"][-1] == {"role": "user", "content": "go on \ufffd"}
    assert len(calls.calls["judge"]) == 1
    assert _trial(pytester.path)["trace"]["turns"][1]["user"] == "go on \ufffd"


def test_the_simulated_user_stops_at_its_turn_limit(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint
) -> None:
    _scenario(
        pytester.path,
        {
            "follow_ups": [FOLLOW_UP],
            "simulated_user": {"instructions": "Ask again.", "max_turns": 1},
        },
    )
    calls = Conversations(
        [FIRST, SECOND, "A third answer, after the simulated user's only reply to it."],
        [json.dumps({"message": "And once more, please.", "done": False})],
    )

    result = _run(pytester, endpoint, calls)

    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert len(calls.calls["user"]) == 1  # after the scripted follow-up, once
    assert [m["content"] for m in calls.calls["agent"][-1]["messages"][1:]] == [
        FIRST,
        FOLLOW_UP,
        SECOND,
        "And once more, please.",
    ]
    assert len(_trial(pytester.path)["trace"]["turns"]) == 3


def test_a_simulated_user_whose_reply_cannot_be_read_errors_the_trial(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint
) -> None:
    _scenario(pytester.path, {"simulated_user": {"instructions": "Be a user."}})
    calls = Conversations([FIRST], ["I am not JSON at all"] * 4)

    result = _run(pytester, endpoint, calls)

    assert result.ret != pytest.ExitCode.OK
    trial = _trial(pytester.path)
    assert trial["criteria"] is None  # an error, never a failed criterion
    assert "simulated user: no reply object" in trial["error"]
    assert trial["error_kind"] == "infrastructure"
    assert calls.calls["judge"] == []


def test_an_agent_that_cannot_continue_is_a_configuration_error(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint
) -> None:
    _scenario(pytester.path, {"follow_ups": [FOLLOW_UP]})

    result = pytester.runpytest_subprocess(
        "skills/s",
        "--eval-backend", "command",
        "--eval-agent-command", f"cat > /dev/null; echo '{FIRST}'",
        "--eval-judge-backend", "http",
        "--eval-base-url", endpoint.base_url,
    )  # fmt: skip

    assert result.ret != pytest.ExitCode.OK
    trial = _trial(pytester.path)
    assert trial["error"] == (
        "the agent command cannot continue a session: scenario scenario-a sends follow-up "
        "turns (follow_ups or simulated_user in scenario.json); use an agent that can "
        "continue its session, or remove them"
    )
    assert trial["error_kind"] == "scenario"


CLAUDE_STAND_IN = """#!/bin/sh
# Claude Code's stream-json events: in the session --resume names, else in a new one.
log='LOG'
printf '%s|%s\n' "$*" "$CLAUDE_CONFIG_DIR" >> "$log"
cat > /dev/null
turn=$(wc -l < "$log")
session=new-$$
while [ $# -gt 0 ]; do
  if [ "$1" = --resume ]; then session=$2; fi
  shift
done
touch "$CLAUDE_CONFIG_DIR/turn-$turn"
kept=$(ls "$CLAUDE_CONFIG_DIR" | tr '\n' ' ')
printf '{"type":"system","subtype":"init","session_id":"%s"}\n' "$session"
printf '{"type":"result","subtype":"success","session_id":"%s",' "$session"
printf '"result":"Answer %s, kept: %s; long enough to be judged."}\n' "$turn" "$kept"
"""


def test_an_agent_cli_on_the_host_continues_its_session(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = tmp_path / "bin"
    folder.mkdir()
    log = tmp_path / "calls.log"
    claude = folder / "claude"
    claude.write_text(CLAUDE_STAND_IN.replace("LOG", str(log)))
    claude.chmod(claude.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    _scenario(pytester.path, {"follow_ups": [FOLLOW_UP, "And the last one."]})
    calls = Conversations([FIRST])
    endpoint.respond_with(calls)

    result = pytester.runpytest_subprocess(
        "skills/s",
        "--eval-backend", "claude",
        "--eval-judge-backend", "http",
        "--eval-base-url", endpoint.base_url,
    )  # fmt: skip

    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    lines = [line.split("|") for line in log.read_text().splitlines()]
    assert len(lines) == 3
    assert "--resume" not in lines[0][0]
    resumed = {args.split("--resume ", 1)[1].split()[0] for args, _ in lines[1:]}
    assert len(resumed) == 1
    [session] = resumed
    assert session.startswith("new-")  # the id the first call's events named
    assert len({home for _, home in lines}) == 1  # one configuration folder for every turn
    trace = _trial(pytester.path)["trace"]
    assert [turn["agent"] for turn in trace["turns"]] == [
        "Answer 1, kept: turn-1 ; long enough to be judged.",
        "Answer 2, kept: turn-1 turn-2 ; long enough to be judged.",
        "Answer 3, kept: turn-1 turn-2 turn-3 ; long enough to be judged.",
    ]
    users = [s["text"] for s in trace["transcript"]["steps"] if s["role"] == "user"]
    assert users == [FOLLOW_UP, "And the last one."]


def test_a_repeat_answers_from_the_cache_with_its_turns_and_new_follow_ups_miss(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint
) -> None:
    folder = _scenario(pytester.path, {"follow_ups": [FOLLOW_UP]})
    calls = Conversations([FIRST, SECOND])
    _run(pytester, endpoint, calls)
    first_turns = _trial(pytester.path)["trace"]["turns"]
    for log in (pytester.path / ".openkata" / "runs").glob("*.jsonl"):
        log.unlink()

    repeat = _run(pytester, endpoint, calls)

    assert repeat.ret == pytest.ExitCode.OK, repeat.stdout.str()
    assert len(calls.calls["agent"]) == 2  # no new call
    trial = _trial(pytester.path)
    assert trial["agent_cached"] is True
    assert trial["trace"]["turns"] == first_turns
    for log in (pytester.path / ".openkata" / "runs").glob("*.jsonl"):
        log.unlink()
    (folder / "scenario.json").write_text(
        json.dumps({"sandbox": False, "follow_ups": ["Another follow-up."]})
    )

    changed = _run(pytester, endpoint, calls)

    assert changed.ret == pytest.ExitCode.OK, changed.stdout.str()
    assert len(calls.calls["agent"]) == 4  # both turns asked again
    assert _trial(pytester.path)["trace"]["turns"][1]["user"] == "Another follow-up."


def test_the_simulated_users_reply_is_read_with_valid_texts() -> None:
    # A lone surrogate's escape in the reply object: the message holds U+FFFD, which every
    # prompt, request and report can carry.
    assert read_reply('Sure. {"message": "go on \\ud800", "done": false}') == (
        "go on \ufffd",
        False,
    )
