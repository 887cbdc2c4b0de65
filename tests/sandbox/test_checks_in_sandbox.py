"""Deterministic checks (``checks.json``) of sandboxed scenarios, in real containers.

The stand-in agent (tests/support/standins/sandbox-kiro-cli) acts on the ``STANDIN:`` lines of
its task; the judge is the scripted loopback endpoint. What happened inside the engine is read
from the engine's own event log: every container the run created (by the labels of this
process) and every command executed in it, so that a test can tell an agent run from a replay
of the checks on a cached workspace.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import pytest

from pytest_openkata.contracts.results import AgentResult
from pytest_openkata.contracts.sandboxes import AgentCommand
from pytest_openkata.core.checks import CommandOutcome
from pytest_openkata.core.errors import ScenarioFailure
from pytest_openkata.core.sandboxed import (
    CHECKS_DIR,
    SandboxSetup,
    check_scripts,
    replay_commands,
    run_agent_in_sandbox,
)
from pytest_openkata.core.scenario import Scenario, load_scenario
from pytest_openkata.infra.retry import NO_RETRY
from pytest_openkata.providers.sandboxes.docker import (
    MANAGED,
    OOM_KILLS,
    OWNER_PID,
    DockerLimits,
    DockerProvider,
)
from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, sandbox_args, write_scenario, write_skill

# --- helpers -----------------------------------------------------------------------------------


def _managed(client: docker.DockerClient) -> list:
    """Sandbox containers of this test process (in-process pytester runs included)."""
    labels = [f"{MANAGED}=true", f"{OWNER_PID}={os.getpid()}"]
    return client.containers.list(all=True, filters={"label": labels})


def _scenario(
    root: Path,
    task: str,
    checks: list[dict[str, Any]],
    *,
    criteria: dict[str, int] | None = None,  # judged; {"x": 1} by default, {} for none
    inputs: dict[str, str] | None = None,
    scripts: dict[str, str] | None = None,
    name: str = "scenario-0",
) -> Path:
    """Skill ``s`` with one sandboxed scenario: ``task`` as task.md, ``checks`` as checks.json,
    ``criteria`` judged (``{}``: an empty checklist), ``scripts`` in its checks/ folder."""
    skill = write_skill(root, "s", {})
    judged = {"x": 1} if criteria is None else criteria
    folder = write_scenario(skill, name, judged, sandbox=True, inputs=inputs)
    folder.joinpath("task.md").write_text(task)
    _write_checks(folder, checks)
    for rel, text in (scripts or {}).items():
        path = folder / "checks" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder


def _write_checks(folder: Path, checks: list[dict[str, Any]]) -> None:
    folder.joinpath("checks.json").write_text(json.dumps(checks, indent=2))


def _command(name: str, run: str, points: int = 1, **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": f"runs {run}", "max_score": points,
            "type": "command", "run": run, **extra}  # fmt: skip


def _report(folder: Path) -> dict[str, Any]:
    """The one report written under ``folder`` (a run's ``--eval-output``)."""
    [path] = sorted(folder.glob("*.json"))
    return json.loads(path.read_text())


def _only_scenario(folder: Path) -> dict[str, Any]:
    [scenario] = _report(folder)["scenarios"]
    return scenario


def _criteria(entry: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in entry.get("criteria") or []}


def _judge_messages(endpoint: ScriptedEndpoint) -> list[str]:
    """The user message of every judge request."""
    return [
        r.json["messages"][1]["content"]
        for r in endpoint.requests
        if r.json and r.json["messages"][0]["role"] == "system"
    ]


def _between(text: str, start: str, end: str) -> str:
    assert start in text, text
    assert end in text, text
    return text.split(start, 1)[1].split(end, 1)[0]


MARKER = "openkata-test.marker"


@dataclass
class EngineLog:
    """What the engine did for this process's sandboxes while a block ran: the containers it
    created and, per container, the commands executed in it (``exec_create`` events)."""

    containers: list[str] = field(default_factory=list)
    commands: dict[str, list[str]] = field(default_factory=dict)

    def record(self, event: dict[str, Any]) -> None:
        action, container = event.get("Action", ""), event.get("id", "")
        if action == "create":
            self.containers.append(container)
            self.commands.setdefault(container, [])
        elif action.startswith("exec_create: "):
            self.commands.setdefault(container, []).append(action.removeprefix("exec_create: "))

    @property
    def agent_runs(self) -> int:
        return sum("kiro-cli chat" in command for command in self.executed())

    def executed(self) -> list[str]:
        """The scenario's commands run: not the run's own questions to the sandbox, the agent
        CLI's version (asked once per process and image, so whether a block sees it depends on
        what ran before) and its look at the memory after a non-zero exit (whether that was
        an out-of-memory kill)."""
        own = {" ".join(OOM_KILLS), "kiro-cli --version"}
        return [c for commands in self.commands.values() for c in commands if c not in own]


@contextmanager
def _engine_log(client: docker.DockerClient, image: str) -> Iterator[EngineLog]:
    """Follow the engine's events about this process's containers during the block.

    A marker container (created and removed, never started) before and after the block tells
    when the stream is live and when it has delivered everything of the block: the engine
    sends each subscriber its events in order."""
    log = EngineLog()
    owner = str(os.getpid())
    stream = client.events(
        decode=True, filters={"type": "container", "label": [f"{OWNER_PID}={owner}"]}
    )
    markers: queue.Queue[str] = queue.Queue()

    def read() -> None:
        try:
            for event in stream:
                marker = event.get("Actor", {}).get("Attributes", {}).get(MARKER)
                if marker is None:
                    log.record(event)
                elif event.get("Action") == "destroy":
                    markers.put(marker)
        except Exception:  # the stream was closed
            return

    def mark(name: str) -> None:
        labels = {OWNER_PID: owner, MARKER: name}
        client.containers.create(image, ["true"], labels=labels).remove()
        assert markers.get(timeout=60) == name

    threading.Thread(target=read, daemon=True).start()
    try:
        mark("start")
        yield log
        mark("end")
    finally:
        stream.close()


# The workspace the agent leaves: notes.md (multi-line), docs/guide.md (so docs is a folder),
# an empty file, src/app.py modified and nothing else.
NOTES = "# Notes\n\n## Summary\nall good\n"
AGENT_WORK = (
    "Write the notes.\n"
    "STANDIN: shell printf '# Notes\\n\\n## Summary\\nall good\\n' > notes.md\n"
    "STANDIN: write docs/guide.md a guide\n"
    "STANDIN: shell : > empty.txt\n"
)
INPUTS = {"src/app.py": "print('hi')\n", "src/util.py": "X = 1\n"}


def _file(name: str, path: str, points: int = 1, **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": f"{path} is a file", "max_score": points,
            "type": "file", "path": path, **extra}  # fmt: skip


WORKSPACE_CHECKS = [
    _file("notes-file", "notes.md"),
    _file("docs-file", "docs"),
    _file("empty-file", "empty.txt"),
    {"name": "summary-heading", "description": "a Summary heading", "max_score": 2,
     "type": "file_regex", "path": "/workspace/notes.md", "pattern": "^## Summary$"},
    {"name": "no-todo", "description": "no TODO left", "max_score": 1,
     "type": "file_regex", "path": "./notes.md", "pattern": "TODO", "absent": True},
    {"name": "only-notes", "description": "notes changed, sources not", "max_score": 1,
     "type": "diff", "changed": ["notes.md"], "unchanged": ["src/*"]},
    {"name": "sources-changed", "description": "the sources changed", "max_score": 1,
     "type": "diff", "changed": ["src"]},
    _command("notes-not-empty", "test -s notes.md"),
    _command("notes-say-nope", "grep -q nope notes.md"),
]  # fmt: skip


# --- through pytest, as users run it -----------------------------------------------------------


def test_checks_grade_the_workspace_beside_the_judged_criteria(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
    docker_client: docker.DockerClient,
) -> None:
    _scenario(
        pytester.path, AGENT_WORK, WORKSPACE_CHECKS, criteria={"clear": 4, "short": 2},
        inputs=INPUTS,
    )  # fmt: skip
    script.verdicts["short"] = (False, "too long")

    result = pytester.runpytest(
        "skills",
        *sandbox_args(endpoint.base_url, standin_image, "--eval-output", "out/"),
        "--junitxml=junit.xml",
        "-v",
    )

    entry = _only_scenario(pytester.path / "out")
    criteria = _criteria(entry)
    assert list(criteria) == ["clear", "short", *(c["name"] for c in WORKSPACE_CHECKS)]
    assert "kind" not in criteria["clear"]
    checks = {name: c for name, c in criteria.items() if c.get("kind") == "check"}
    assert list(checks) == [c["name"] for c in WORKSPACE_CHECKS]
    verdicts = {name: (c["pass"], c["score"], c["max_score"]) for name, c in checks.items()}
    assert verdicts == {
        "notes-file": (True, 1, 1),
        "docs-file": (False, 0, 1),
        "empty-file": (False, 0, 1),
        "summary-heading": (True, 2, 2),
        "no-todo": (True, 1, 1),
        "only-notes": (True, 1, 1),
        "sources-changed": (False, 0, 1),
        "notes-not-empty": (True, 1, 1),
        "notes-say-nope": (False, 0, 1),
    }
    reasons = {name: c["reason"] for name, c in checks.items()}
    assert reasons["notes-file"] == f"notes.md is a file of {len(NOTES)} bytes"
    assert reasons["docs-file"] == "docs is a directory, not a file"
    assert reasons["empty-file"] == "empty.txt is empty"
    assert reasons["summary-heading"] == "notes.md matches '^## Summary$': '## Summary'"
    assert reasons["no-todo"] == "notes.md does not match 'TODO'"
    assert reasons["only-notes"] == "changed: docs/guide.md, empty.txt, notes.md"
    assert reasons["sources-changed"] == "nothing matching 'src' changed"
    assert reasons["notes-not-empty"] == "exit status 0: no output"
    assert reasons["notes-say-nope"] == "exit status 1: no output"
    # 4 judged and 6 checked points, of 6 judged and 10 checked.
    assert (entry["score"], entry["max_score"]) == (4 + 6, 6 + 10)
    assert entry["percentage"] == pytest.approx(10 / 16 * 100)
    assert entry["pass"] is False
    # The judge saw its own criteria only, once.
    [judged] = _judge_messages(endpoint)
    assert "**clear**" in judged
    assert "**short**" in judged
    assert "notes-file" not in judged
    assert "grep -q" not in judged
    assert script.judge_calls == 1

    result.stdout.fnmatch_lines_random(
        [
            "*SUBPASSED[[]notes-file (1/1)[]]*",
            "*SUBPASSED[[]summary-heading (2/2)[]]*",
            "*SUBPASSED[[]notes-not-empty (1/1)[]]*",
            "*SUBFAILED[[]docs-file (0/1)[]]*",
            "*SUBFAILED[[]notes-say-nope (0/1)[]]*",
            "criterion 'docs-file' not met (0/1): docs is a directory, not a file",
            "criterion 'notes-say-nope' not met (0/1): exit status 1: no output",
        ]
    )

    cases = {
        case.get("name"): case
        for case in ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
    }
    for check in WORKSPACE_CHECKS:
        case = cases[check["name"]]
        properties = {p.get("name"): p.get("value") for p in case.iter("property")}
        passed, score, max_score = verdicts[check["name"]]
        assert properties["kind"] == "check"
        assert properties["points"] == str(score)
        assert properties["max_points"] == str(max_score)
        assert properties["reason"] == reasons[check["name"]]
        assert (case.find("failure") is None) is passed
    judged_case = {p.get("name"): p.get("value") for p in cases["clear"].iter("property")}
    assert judged_case["kind"] == "judge"
    _assert_why_is_shown(pytester.path, cases)
    assert _managed(docker_client) == []


def _assert_why_is_shown(root: Path, cases: dict[str | None, ET.Element]) -> None:
    """What the judge judged is where authors look for it: in the failed scenario's JUnit
    testcase, and in the run log."""
    # The scenario failed: its testcase shows the workspace diff the judge saw.
    scenario_out = cases["scenario-0"].findtext("system-out") or ""
    assert "----- workspace changes -----" in scenario_out
    assert "+++ b/notes.md" in scenario_out
    # The run log holds the workspace diff per file, each command check's outcome, and
    # what the judge read (the output, then the changes).
    [log] = (root / ".openkata" / "runs").glob("*.jsonl")
    trace = json.loads(log.read_text().splitlines()[1])["trace"]
    changes = {c["path"]: (c["status"], c["diff"]) for c in trace["changes"]}
    assert set(changes) == {"docs/guide.md", "empty.txt", "notes.md"}
    assert changes["notes.md"][0] == "added"
    assert changes["notes.md"][1].splitlines()[:2] == ["--- /dev/null", "+++ b/notes.md"]
    assert "+## Summary" in changes["notes.md"][1].splitlines()
    commands = {a["check"]: a["exit_code"] for a in trace["answers"]["checks"]}
    assert commands == {"notes-not-empty": 0, "notes-say-nope": 1}
    assert trace["judged"].startswith("## Agent Output")
    assert "## Workspace Changes" in trace["judged"]


def test_the_agent_never_sees_the_check_scripts_which_run_after_it(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
    docker_client: docker.DockerClient,
) -> None:
    task = (
        "STANDIN: write notes.md ready\n"
        "STANDIN: shell echo LIST-START; ls -aR /openkata /workspace; echo LIST-END\n"
        "STANDIN: shell ls /openkata/checks 2>&1 || echo no-checks-folder\n"
        "STANDIN: shell find / -path /proc -prune -o -path /sys -prune -o -name 'verify*' -print"
        " | grep . || echo no-script-found\n"
    )
    verify = (
        "#!/bin/sh\n"
        'echo "verify in $(pwd) with OPENKATA_CHECKS=$OPENKATA_CHECKS"\n'
        'grep -q ready notes.md && echo "notes ready"\n'
    )
    _scenario(
        pytester.path,
        task,
        [
            _command("verify", "sh /openkata/checks/verify.sh"),
            _command("verify-again", '"$OPENKATA_CHECKS/lib/verify-more.sh"'),
        ],
        scripts={"verify.sh": verify, "lib/verify-more.sh": "#!/bin/sh\necho more\n"},
    )

    result = pytester.runpytest(
        "skills", *sandbox_args(endpoint.base_url, standin_image, "--eval-output", "out/")
    )

    assert result.ret == pytest.ExitCode.OK
    [judged] = _judge_messages(endpoint)
    listing = _between(judged, "LIST-START", "LIST-END")
    assert "prompt.md" in listing  # /openkata was listed
    assert "task.md" in listing  # and so was /workspace
    assert "notes.md" in listing
    assert "checks" not in listing
    assert "verify" not in listing
    assert "no-checks-folder" in judged
    assert "no-script-found" in judged
    assert "verify" not in judged.split("## Evaluation Criteria")[0]
    criteria = _criteria(_only_scenario(pytester.path / "out"))
    assert criteria["verify"]["pass"] is True
    assert criteria["verify"]["reason"] == (
        f"exit status 0: verify in /workspace with OPENKATA_CHECKS={CHECKS_DIR} | notes ready"
    )
    assert criteria["verify-again"]["reason"] == "exit status 0: more"  # executable as copied
    assert _managed(docker_client) == []


def test_a_command_that_times_out_or_cannot_start_errors_the_scenario(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
    docker_client: docker.DockerClient,
) -> None:
    skill = write_skill(pytester.path, "s", {})
    for name, checks in {
        "scenario-slow": [_command("slow", "sleep 30", timeout=1)],
        "scenario-missing": [_command("missing", "no-such-program --flag")],
        "scenario-ok": [_command("fine", "test -s notes.md")],
    }.items():
        folder = write_scenario(skill, name, {"x": 1}, sandbox=True)
        folder.joinpath("task.md").write_text("STANDIN: write notes.md ready\n")
        _write_checks(folder, checks)

    result = pytester.runpytest(
        "skills", *sandbox_args(endpoint.base_url, standin_image, "--eval-output", "out/")
    )

    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines_random(
        [
            "*ERROR at setup of s::scenario-slow*",
            "scenario error: checks.json: [[]0[]] ('slow'): command timed out after 1 s",
            "*ERROR at setup of s::scenario-missing*",
            "scenario error: checks.json: [[]0[]] ('missing'): command cannot start (not found, "
            "exit status 127): *no-such-program*",
        ]
    )
    result.stdout.no_fnmatch_line("*SUBFAIL*")
    scenarios = {s["name"]: s for s in _report(pytester.path / "out")["scenarios"]}
    slow, missing = scenarios["scenario-slow"], scenarios["scenario-missing"]
    assert slow["error"] == "checks.json: [0] ('slow'): command timed out after 1 s"
    assert missing["error"].startswith(
        "checks.json: [0] ('missing'): command cannot start (not found, exit status 127)"
    )
    for errored in (slow, missing):  # errored, not failed criteria
        assert not errored.get("criteria")
        assert errored["score"] == 0
    assert _criteria(scenarios["scenario-ok"])["fine"]["pass"] is True
    assert _managed(docker_client) == []


def test_a_timed_out_command_errors_the_scenario_even_with_commands_after_it(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
    docker_client: docker.DockerClient,
) -> None:
    _scenario(
        pytester.path,
        "STANDIN: write notes.md ready\n",
        [_command("slow", "sleep 30", timeout=1), _command("after", "test -s notes.md")],
    )

    result = pytester.runpytest(
        "skills", *sandbox_args(endpoint.base_url, standin_image, "--eval-output", "out/")
    )

    result.assert_outcomes(errors=1)
    error = _only_scenario(pytester.path / "out")["error"]
    assert error == "checks.json: [0] ('slow'): command timed out after 1 s"
    assert _managed(docker_client) == []


def test_a_timed_out_command_is_not_cached_and_runs_again_next_time(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
    docker_client: docker.DockerClient,
) -> None:
    _scenario(
        pytester.path,
        "STANDIN: write notes.md ready\n",
        [_command("slow", "sleep 30", timeout=1)],
    )
    args = sandbox_args(endpoint.base_url, standin_image)
    pytester.runpytest("skills", *args).assert_outcomes(errors=1)

    with _engine_log(docker_client, standin_image) as log:
        again = pytester.runpytest("skills", *args)

    again.assert_outcomes(errors=1)
    assert log.executed() == ["sh -c sleep 30"]  # the agent's result is cached, not the error
    assert _managed(docker_client) == []


def test_no_check_runs_when_the_agent_exits_non_zero(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
    docker_client: docker.DockerClient,
) -> None:
    _scenario(
        pytester.path,
        "STANDIN: write notes.md half done\nSTANDIN: exit 3\n",
        [_command("marker", "touch check-ran && test -s notes.md"), _file("notes", "notes.md")],
    )

    with _engine_log(docker_client, standin_image) as log:
        result = pytester.runpytest(
            "skills", *sandbox_args(endpoint.base_url, standin_image, "--eval-output", "out/")
        )

    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["scenario error: sandbox: kiro-cli: exit status 3*"])
    entry = _only_scenario(pytester.path / "out")
    assert entry["error"].startswith("sandbox: kiro-cli: exit status 3")
    assert not entry.get("criteria")
    assert script.judge_calls == 0
    assert len(log.containers) == 1
    [agent_run] = log.executed()  # the agent's, and no check's
    assert "kiro-cli chat" in agent_run
    assert _managed(docker_client) == []


def test_changing_only_the_checks_replays_them_on_the_cached_workspace(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
    docker_client: docker.DockerClient,
) -> None:
    task = (
        "STANDIN: write notes.md first draft\n"
        "STANDIN: write src/app.py print('changed')\n"
        "STANDIN: delete old.txt\n"
    )
    checks = [
        _command("draft", "grep -q first notes.md"),
        _command("old-gone", "test ! -e old.txt && grep -q changed src/app.py"),
        _file("notes", "notes.md"),
    ]
    scenario = _scenario(
        pytester.path, task, checks,
        inputs={"src/app.py": "print('hi')\n", "old.txt": "old\n"},
    )  # fmt: skip

    def run(output: str) -> tuple[pytest.RunResult, EngineLog, dict[str, Any]]:
        args = sandbox_args(endpoint.base_url, standin_image, "--eval-output", f"{output}/")
        with _engine_log(docker_client, standin_image) as log:
            result = pytester.runpytest("skills", *args)
        return result, log, _only_scenario(pytester.path / output)

    first, first_log, first_entry = run("first")
    # One sandbox: the agent, then the commands in the workspace it left.
    assert len(first_log.containers) == 1
    agent_run, *commands = first_log.executed()
    assert "kiro-cli chat" in agent_run
    assert commands == [
        "sh -c grep -q first notes.md",
        "sh -c test ! -e old.txt && grep -q changed src/app.py",
    ]
    assert _criteria(first_entry)["draft"]["pass"] is True
    assert _criteria(first_entry)["old-gone"]["pass"] is True
    assert script.judge_calls == 1

    _write_checks(scenario, [_command("draft", "grep -q second notes.md"), *checks[1:]])
    second, second_log, second_entry = run("second")

    # The agent's result comes from the cache; the commands run again on a fresh sandbox that
    # holds the workspace the agent left; the judge's verdict comes from the cache.
    assert second_log.agent_runs == 0
    assert len(second_log.containers) == 1
    assert second_log.executed() == [
        "rm -f -- old.txt",
        "sh -c grep -q second notes.md",
        "sh -c test ! -e old.txt && grep -q changed src/app.py",
    ]
    criteria = _criteria(second_entry)
    assert (criteria["draft"]["pass"], criteria["draft"]["reason"]) == (
        False,
        "exit status 1: no output",
    )
    assert criteria["old-gone"]["pass"] is True
    assert criteria["notes"]["pass"] is True
    assert criteria["x"]["pass"] is True
    assert second_entry["usage"]["agent"]["calls"] == 0
    assert second_entry["usage"]["agent"]["cached"] == 1
    assert second_entry["usage"]["judge"]["cached"] == 1
    assert script.judge_calls == 1
    second.stdout.fnmatch_lines(["*From the cache: 1 agent answer, 1 judge verdict*"])

    third, third_log, third_entry = run("third")

    assert third_log.containers == []  # everything from the cache: no sandbox at all
    assert _criteria(third_entry) == criteria
    third.stdout.fnmatch_lines(["*From the cache: 1 agent answer, 1 judge verdict*"])

    # A check that reads the cached workspace, not a command: no sandbox either.
    _write_checks(scenario, [_command("draft", "grep -q second notes.md"), checks[1],
                             _file("notes", "missing.md")])  # fmt: skip
    fourth, fourth_log, fourth_entry = run("fourth")

    assert fourth_log.containers == []
    notes = _criteria(fourth_entry)["notes"]
    assert (notes["pass"], notes["reason"]) == (False, "missing.md does not exist")
    assert (script.agent_calls, script.judge_calls) == (0, 1)
    assert first.ret == pytest.ExitCode.OK
    for result in (second, third, fourth):
        assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert _managed(docker_client) == []


def test_changing_only_a_check_script_runs_the_commands_again(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
    docker_client: docker.DockerClient,
) -> None:
    scenario = _scenario(
        pytester.path,
        "STANDIN: write notes.md ready\n",
        [_command("verify", 'sh "$OPENKATA_CHECKS/verify.sh"')],
        scripts={"verify.sh": "grep -q ready notes.md\n"},
    )
    args = sandbox_args(endpoint.base_url, standin_image)
    assert pytester.runpytest("skills", *args).ret == pytest.ExitCode.OK

    scenario.joinpath("checks", "verify.sh").write_text("grep -q finished notes.md\n")
    with _engine_log(docker_client, standin_image) as log:
        again = pytester.runpytest("skills", *args, "--eval-output", "out/")

    assert log.agent_runs == 0
    assert log.executed() == ['sh -c sh "$OPENKATA_CHECKS/verify.sh"']
    verify = _criteria(_only_scenario(pytester.path / "out"))["verify"]
    assert (verify["pass"], verify["reason"]) == (False, "exit status 1: no output")
    assert again.ret == pytest.ExitCode.TESTS_FAILED
    assert (script.agent_calls, script.judge_calls) == (0, 1)
    assert _managed(docker_client) == []


def test_a_scenario_of_checks_only_makes_no_judge_call(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
    docker_client: docker.DockerClient,
) -> None:
    _scenario(
        pytester.path,
        "STANDIN: write notes.md ready\n",
        [_file("notes", "notes.md", 3), _command("ready", "grep -q ready notes.md", 2)],
        criteria={},
    )

    result = pytester.runpytest(
        "skills", *sandbox_args(endpoint.base_url, standin_image, "--eval-output", "out/")
    )

    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=1)
    assert script.judge_calls == 0
    assert _judge_messages(endpoint) == []
    entry = _only_scenario(pytester.path / "out")
    assert [(c["name"], c["kind"], c["pass"]) for c in entry["criteria"]] == [
        ("notes", "check", True),
        ("ready", "check", True),
    ]
    assert (entry["score"], entry["max_score"], entry["percentage"]) == (5, 5, 100)
    assert _managed(docker_client) == []


# --- the core's flow, directly -----------------------------------------------------------------

KIRO = AgentCommand(
    "kiro-cli",
    ["kiro-cli", "chat", "--agent", "eval-agent", "--trust-all-tools", "--no-interactive"],
    files=((".kiro/agents/eval-agent.json", b'{"name":"eval-agent"}'),),
)


def _setup(client: docker.DockerClient, image: str) -> SandboxSetup:
    provider = DockerProvider(client, DockerLimits(image, cpus=1.0, memory="256m", pids=64))
    return SandboxSetup(provider, KIRO, "none", 60.0)


def _loaded(root: Path, task: str, checks: list[dict[str, Any]], **options: Any) -> Scenario:
    return load_scenario(_scenario(root, task, checks, **options))


def _run(scenario: Scenario, setup: SandboxSetup) -> tuple[AgentResult, dict[str, CommandOutcome]]:
    commands = [check for check in scenario.checks if check.type == "command"]
    prompt = scenario.path.joinpath("task.md").read_text()
    return run_agent_in_sandbox(scenario, prompt, setup, NO_RETRY, commands=commands)


def test_command_checks_run_in_order_in_the_agents_workspace(
    use_engine: str, docker_client: docker.DockerClient, standin_image: str, tmp_path: Path
) -> None:
    scenario = _loaded(
        tmp_path,
        "STANDIN: write notes.md ready\nSTANDIN: shell ls /openkata > seen-by-agent.txt\n",
        [
            _command("where", 'pwd; echo "checks at $OPENKATA_CHECKS"; ls "$OPENKATA_CHECKS"'),
            _command("marks", "echo one > mark.txt"),
            _command("reads", "cat mark.txt; exit 4"),
            _command("seen", "cat seen-by-agent.txt"),
        ],
        scripts={"verify.sh": "#!/bin/sh\nexit 0\n"},
    )
    assert [name for name, _ in check_scripts(scenario)] == ["openkata/checks/verify.sh"]

    agent, outcomes = _run(scenario, _setup(docker_client, standin_image))

    assert list(outcomes) == ["where", "marks", "reads", "seen"]
    assert outcomes["where"] == CommandOutcome(
        0, f"/workspace\nchecks at {CHECKS_DIR}\nverify.sh\n"
    )
    assert outcomes["marks"] == CommandOutcome(0, "")
    assert outcomes["reads"] == CommandOutcome(4, "one\n")  # the commands share the workspace
    assert outcomes["seen"] == CommandOutcome(0, "prompt.md\n")
    # What a command wrote is not part of the agent's changes.
    assert agent.changes is not None
    assert [path for path, _ in agent.changes.added] == ["notes.md", "seen-by-agent.txt"]
    assert _managed(docker_client) == []


def test_a_command_that_prints_past_the_bound_keeps_its_status_and_says_it_was_cut(
    use_engine: str, docker_client: docker.DockerClient, standin_image: str, tmp_path: Path
) -> None:
    scenario = _loaded(
        tmp_path,
        "STANDIN: write notes.md ready\n",
        [_command("chatty", "head -c 1000000 /dev/zero | tr '\\0' a; exit 5")],
    )
    limits = DockerLimits(standin_image, cpus=1.0, memory="256m", pids=64, output_max_bytes=65536)
    setup = SandboxSetup(DockerProvider(docker_client, limits), KIRO, "none", 60.0)

    _agent, outcomes = _run(scenario, setup)

    assert outcomes["chatty"] == CommandOutcome(
        5, "a" * 65536 + "\n... (output cut at 64 KiB, the bound of answer_max_bytes)"
    )
    assert _managed(docker_client) == []


def test_no_command_runs_after_a_failed_agent(
    use_engine: str, docker_client: docker.DockerClient, standin_image: str, tmp_path: Path
) -> None:
    scenario = _loaded(
        tmp_path, "STANDIN: write notes.md x\nSTANDIN: exit 5\n", [_command("c", "touch ran")]
    )

    with (
        _engine_log(docker_client, standin_image) as log,
        pytest.raises(ScenarioFailure) as failure,
    ):
        _run(scenario, _setup(docker_client, standin_image))

    assert str(failure.value).startswith("sandbox: kiro-cli: exit status 5")
    [agent_run] = log.executed()  # the agent's, and no check's
    assert "kiro-cli chat" in agent_run
    assert _managed(docker_client) == []


def test_replayed_commands_see_the_workspace_the_agent_left(
    use_engine: str, docker_client: docker.DockerClient, standin_image: str, tmp_path: Path
) -> None:
    scenario = _loaded(
        tmp_path,
        "STANDIN: write notes.md ready\nSTANDIN: write a.txt changed\nSTANDIN: delete b.txt\n",
        [_command("state", "cat notes.md a.txt; test -e b.txt || echo b gone; ls")],
        inputs={"a.txt": "a\n", "b.txt": "b\n"},
    )
    setup = _setup(docker_client, standin_image)
    agent, live = _run(scenario, setup)
    assert agent.changes is not None

    replayed = replay_commands(scenario, setup, agent.changes, list(scenario.checks))

    assert replayed == live
    assert live["state"].output.startswith("ready\nchanged\nb gone\n")
    assert _managed(docker_client) == []


def test_a_replayed_command_runs_an_executable_the_agent_made(
    use_engine: str, docker_client: docker.DockerClient, standin_image: str, tmp_path: Path
) -> None:
    scenario = _loaded(
        tmp_path,
        "STANDIN: shell printf '#!/bin/sh\\necho built\\n' > build.sh && chmod +x build.sh\n",
        [_command("builds", "./build.sh")],
    )
    setup = _setup(docker_client, standin_image)
    agent, live = _run(scenario, setup)
    assert live["builds"] == CommandOutcome(0, "built\n")
    assert agent.changes is not None

    replayed = replay_commands(scenario, setup, agent.changes, list(scenario.checks))

    assert replayed == live
    assert _managed(docker_client) == []
