"""Deterministic checks (``checks.json``): exact verdicts on what an agent produced.

A check is graded without a model: a shell command run in the sandbox after the agent
finished, a file of the workspace, a pattern in a file or in the agent's output, a JSON
schema, which files changed, whether the agent loaded the skill (from its transcript), or a
Python expression over its output and transcript (:mod:`pytest_openkata.core.expressions`,
waza's ``code`` assertions).
This module holds the checks as loaded (:class:`Check`, read and validated in
:mod:`pytest_openkata.core.scenario`), the evidence a trial gives them (:class:`Evidence`)
and the verdict of each (:func:`evaluate_check`).

Every check refuses a false pass that peers' users ran into: a directory or an empty file is
not a file, a pattern that must be absent does not pass on a missing file or on an empty
output, a glob of ``unchanged`` that matches no file of the workspace is an error of the
check and not a pass, and no check runs for a trial whose agent errored (the trial ends
before grading). What cannot be decided (a command that cannot start or runs out of time,
a pattern that does not finish searching in its time, a file larger than the snapshot keeps)
raises :class:`CheckError`: the trial errors, it is never a failed check.

Patterns are the ``regex`` package's (the standard ``re`` syntax, with a time limit): a pattern
that backtracks without end on an agent's output is stopped after its ``timeout`` instead of
holding the run. The search runs on a thread of its own, with the interpreter lock released,
so that the thread that waits for it (pytest's, at concurrency 1) still takes signals: Ctrl-C
and SIGTERM end the run at once, whatever the pattern does.
"""

from __future__ import annotations

import fnmatch
import json
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_openkata.contracts.errors import CHECK_FAILED, OpenkataError
from pytest_openkata.contracts.results import (
    INFRASTRUCTURE_ERROR,
    SCENARIO_ERROR,
    CriterionResult,
    FileContent,
    WorkspaceDiff,
)
from pytest_openkata.contracts.transcripts import DIRECT_SOURCE, Transcript
from pytest_openkata.core import trajectory
from pytest_openkata.core.activation import LOADED, UNKNOWN, activation

if TYPE_CHECKING:  # imported where a pattern is compiled: the plugin loads in every pytest run
    import regex

__all__ = [
    "CHECK_KIND",
    "CHECK_TYPES",
    "TRAJECTORY_TYPES",
    "WORKSPACE_TYPES",
    "Check",
    "CheckError",
    "CommandOutcome",
    "Evidence",
    "evaluate_check",
    "leaves_workspace",
    "workspace_path",
]

CHECK_KIND = "check"
# Agents whose events say what they ran, not what they read (Codex reads files with commands).
SOURCES_WITHOUT_READS = frozenset({"codex exec --json"})
# The checks of how the agent worked, read from its transcript (core.trajectory).
TRAJECTORY_TYPES = (
    "tool_used",
    "tool_not_used",
    "tool_sequence",
    "file_read",
    "max_tool_calls",
    "max_turns",
    "max_tokens",
)
CHECK_TYPES = (
    "command",
    "file",
    "file_regex",
    "output_regex",
    "output_expression",
    "json_schema",
    "diff",
    "skill_activated",
    *TRAJECTORY_TYPES,
)
# The types that read the sandbox's workspace (json_schema only with a path).
WORKSPACE_TYPES = frozenset({"command", "file", "file_regex", "diff"})
DEFAULT_COMMAND_TIMEOUT = 60.0
DEFAULT_PATTERN_TIMEOUT = 10.0  # seconds a pattern may search one text
# The shell's statuses for a command that could not be started: not executable, not found.
CANNOT_START = {126: "not executable", 127: "not found"}
REASON_TAIL_LINES = 5
REASON_TAIL_CHARS = 400


NO_WORKSPACE = "no workspace: this check needs a sandboxed scenario"


class CheckError(OpenkataError):
    """The check cannot give a verdict; the trial errors (never a failed check). ``kind`` says
    whose fault it is (``contracts.results``: a check that does not fit its scenario is the
    scenario's own, a command that could not run is the run's)."""

    cause = CHECK_FAILED

    def __init__(self, message: str, *, kind: str = INFRASTRUCTURE_ERROR) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Check:
    """One entry of ``checks.json``; which fields matter depends on ``type``.

    ``pattern`` is compiled (multiline) and ``schema`` checked when the file is loaded, so that
    a bad one errors the scenario before any agent runs. ``timeout`` bounds a command's run,
    or a pattern's search of one text.
    """

    name: str
    description: str
    max_score: int
    type: str
    run: str = ""
    timeout: float = DEFAULT_COMMAND_TIMEOUT
    path: str = ""
    pattern: regex.Pattern[str] | None = None
    absent: bool = False
    schema: Mapping[str, Any] | None = None
    changed: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    activated: bool = True  # skill_activated: whether the skill must be loaded, or must not
    tool: str = ""  # tool_used, tool_not_used: the tool's name (a glob)
    tools: tuple[str, ...] = ()  # tool_sequence: the tools' names, in order
    order: str = "in_order"  # tool_sequence: exact, in_order or any_order
    limit: int = 0  # max_tool_calls, max_turns, max_tokens: the most allowed
    expression: str = ""  # output_expression: one Python expression, parsed at load

    @property
    def reads_workspace(self) -> bool:
        """Whether it needs a sandboxed scenario's workspace."""
        return self.type in WORKSPACE_TYPES or (self.type == "json_schema" and bool(self.path))


@dataclass(frozen=True)
class CommandOutcome:
    """How a check's command ended in the sandbox: its exit status (None when it timed out)
    and what it printed."""

    exit_code: int | None
    output: str
    timed_out: bool = False


@dataclass(frozen=True)
class Evidence:
    """What one trial gives its checks: the agent's final output, and for a sandboxed run the
    workspace before the agent ran (``before``: path -> bytes, tool files left out), the
    diff, and the outcome of every command check by name."""

    output: str
    before: Mapping[str, bytes] | None = None
    diff: WorkspaceDiff | None = None
    commands: Mapping[str, CommandOutcome] = field(default_factory=dict)
    # How the agent worked (None: it gave no events), the names the skill goes by, and the
    # agent's name, for what a check that needs its events says when there are none.
    transcript: Transcript | None = None
    skills: tuple[str, ...] = ()
    agent: str = ""

    def files_after(self) -> dict[str, FileContent]:
        """The workspace's regular files once the agent finished."""
        if self.before is None or self.diff is None:
            raise CheckError(NO_WORKSPACE, kind=SCENARIO_ERROR)
        files = {path: FileContent(data) for path, data in self.before.items()}
        for path in self.diff.deleted:
            files.pop(path, None)
        files.update(self.diff.added)
        files.update(self.diff.modified)
        return files

    def changed_paths(self) -> list[str]:
        if self.diff is None:
            raise CheckError(NO_WORKSPACE, kind=SCENARIO_ERROR)
        diff = self.diff
        return sorted({*(p for p, _ in diff.added), *(p for p, _ in diff.modified), *diff.deleted})


def workspace_path(path: str) -> str:
    """A check's ``path`` as snapshots name files: relative to ``/workspace``, ``/``-separated."""
    text = path.strip().replace("\\", "/")
    for prefix in ("/workspace/", "./"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    return text.strip("/")


def leaves_workspace(path: str) -> bool:
    """Whether a check's ``path`` or glob names a place outside ``/workspace``: an absolute
    path elsewhere (which :func:`workspace_path` would read as relative), or one whose ``..``
    climb out. No file there is ever in the workspace's snapshots."""
    text = path.strip().replace("\\", "/")
    if text.startswith("/") and not (text + "/").startswith("/workspace/"):
        return True
    depth = 0
    for part in workspace_path(text).split("/"):
        depth += -1 if part == ".." else 0 if part in {"", "."} else 1
        if depth < 0:
            return True
    return False


def _verdict(check: Check, passed: bool, reason: str) -> CriterionResult:
    score = check.max_score if passed else 0
    return CriterionResult(check.name, passed, score, check.max_score, reason, kind=CHECK_KIND)


def _tail(output: str) -> str:
    lines = output.strip().splitlines()[-REASON_TAIL_LINES:]
    text = " | ".join(line.strip() for line in lines if line.strip())
    return text if len(text) <= REASON_TAIL_CHARS else "…" + text[-REASON_TAIL_CHARS:]


def _command(check: Check, evidence: Evidence) -> CriterionResult:
    outcome = evidence.commands.get(check.name)
    if outcome is None:
        raise CheckError("its command did not run")
    if outcome.timed_out:
        raise CheckError(f"command timed out after {check.timeout:g} s")
    if outcome.exit_code in CANNOT_START:
        detail = _tail(outcome.output)
        raise CheckError(
            f"command cannot start ({CANNOT_START[outcome.exit_code]}, exit status "
            f"{outcome.exit_code})" + (f": {detail}" if detail else "")
        )
    tail = _tail(outcome.output) or "no output"
    if outcome.exit_code == 0:
        return _verdict(check, True, f"exit status 0: {tail}")
    return _verdict(check, False, f"exit status {outcome.exit_code}: {tail}")


def _file_state(path: str, files: Mapping[str, FileContent]) -> tuple[FileContent | None, str]:
    """The file at ``path`` (None when it is not a non-empty regular file) and why."""
    content = files.get(path)
    if content is None:
        if any(name.startswith(f"{path}/") for name in files) or path == "":
            return None, f"{path or '/workspace'} is a directory, not a file"
        return None, f"{path} does not exist"
    if content.full_size == 0:
        return None, f"{path} is empty"
    return content, f"{path} is a file of {content.full_size} bytes"


def _file(check: Check, evidence: Evidence) -> CriterionResult:
    path = workspace_path(check.path)
    content, why = _file_state(path, evidence.files_after())
    present = content is not None
    return _verdict(check, present != check.absent, why)


def _search(check: Check, text: str, where: str) -> CriterionResult:
    assert check.pattern is not None  # validated at load
    match = search_within(check.pattern, text, check.timeout, where)
    if match is None:
        found = f"{where} does not match {check.pattern.pattern!r}"
    else:
        found = f"{where} matches {check.pattern.pattern!r}: {match.group(0)[:80]!r}"
    return _verdict(check, (match is not None) != check.absent, found)


def search_within(
    pattern: regex.Pattern[str], text: str, timeout: float, where: str
) -> regex.Match[str] | None:
    """``pattern.search(text)``, stopped after ``timeout`` seconds (:class:`CheckError`, the
    scenario's: its pattern backtracks without end on this text). The search runs on a
    daemon thread with the interpreter lock released, and the caller waits for it in a way
    that signals interrupt."""
    outcome: Future[regex.Match[str] | None] = Future()

    def search() -> None:
        try:
            outcome.set_result(pattern.search(text, timeout=timeout, concurrent=True))
        except BaseException as exc:  # handed to the waiting thread
            outcome.set_exception(exc)

    threading.Thread(target=search, name="openkata-check-pattern", daemon=True).start()
    try:
        return outcome.result()
    except TimeoutError:
        raise CheckError(
            f"the pattern {pattern.pattern!r} did not finish searching {where} within "
            f"{timeout:g} s (it backtracks without end on this text; set the check's timeout "
            "for a longer search)",
            kind=SCENARIO_ERROR,
        ) from None


def _text_of(path: str, content: FileContent) -> str:
    if content.is_binary:
        raise CheckError(f"{path} is a binary file: a pattern needs text")
    if content.truncated:
        raise CheckError(
            f"{path} has {content.full_size} bytes, more than the workspace snapshot keeps"
        )
    return content.text


def _file_regex(check: Check, evidence: Evidence) -> CriterionResult:
    path = workspace_path(check.path)
    content, why = _file_state(path, evidence.files_after())
    if content is None:  # absent or not: a pattern in a missing file decides nothing
        return _verdict(check, False, why)
    return _search(check, _text_of(path, content), path)


def _nonempty_output(evidence: Evidence) -> str | None:
    return evidence.output if evidence.output.strip() else None


def _output_regex(check: Check, evidence: Evidence) -> CriterionResult:
    output = _nonempty_output(evidence)
    if output is None:
        return _verdict(check, False, "the agent's output is empty")
    return _search(check, output, "the agent's output")


def _output_expression(check: Check, evidence: Evidence) -> CriterionResult:
    """An expression over the output and the transcript, evaluated with only waza's names
    (:mod:`pytest_openkata.core.expressions`, imported here: it loads ``simpleeval``). One
    that reads the events needs an agent that gave them; one that cannot be evaluated is an
    error of the scenario, never a failed check."""
    from pytest_openkata.core import expressions

    shown = repr(check.expression) if len(check.expression) <= 200 else "its expression"
    try:
        tree = expressions.parse(check.expression)
        read = expressions.names_in(tree) & expressions.EVENT_NAMES
        transcript = evidence.transcript
        if "tool_calls" in read:
            transcript = _told(evidence, "its tool calls")
        elif read and transcript is None:
            transcript = _told(evidence, "what it did")
        if read and transcript is not None and transcript.cut_steps:
            raise _cut(transcript)
        seconds = transcript.seconds if transcript is not None else None
        inputs = expressions.ExpressionInputs(
            evidence.output,
            expressions.events_of(transcript),
            round(seconds * 1000) if seconds is not None else 0,
        )
        holds = expressions.evaluate(tree, inputs, timeout=check.timeout)
    except expressions.ExpressionError as exc:
        why = str(exc)
        why = why if len(why) <= REASON_TAIL_CHARS else why[:REASON_TAIL_CHARS] + "…"
        raise CheckError(
            f"the expression {shown} cannot be evaluated: {why}", kind=SCENARIO_ERROR
        ) from None
    said = "holds" if holds else "does not hold"
    return _verdict(check, holds, f"the expression {shown} {said}")


_FENCED_JSON = re.compile(r"```(?:json)?[ \t]*\n(.*?)\n```", re.DOTALL)


def _json_document(text: str) -> Any:
    """The JSON document of a text: all of it, or its one fenced code block."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    blocks = _FENCED_JSON.findall(text)
    if len(blocks) == 1:
        return json.loads(blocks[0])
    raise ValueError("not a JSON document")


def _json_schema(check: Check, evidence: Evidence) -> CriterionResult:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    if check.path:
        path = workspace_path(check.path)
        content, why = _file_state(path, evidence.files_after())
        if content is None:
            return _verdict(check, False, why)
        text, where = _text_of(path, content), path
    else:
        output = _nonempty_output(evidence)
        if output is None:
            return _verdict(check, False, "the agent's output is empty")
        text, where = output, "the agent's output"
    try:
        document = _json_document(text)
    except ValueError as exc:
        return _verdict(check, False, f"{where} is not JSON ({exc})")
    except RecursionError:
        return _verdict(check, False, f"{where} is JSON nested too deeply to be read")
    assert check.schema is not None  # validated at load
    try:
        error = best_match(Draft202012Validator(check.schema).iter_errors(document))
    except RecursionError:
        return _verdict(check, False, f"{where} is JSON nested too deeply to be validated")
    if error is None:
        return _verdict(check, True, f"{where} matches the schema")
    at = "/".join(str(part) for part in error.absolute_path) or "(root)"
    return _verdict(check, False, f"{where} at {at}: {error.message}"[:REASON_TAIL_CHARS])


def matches(path: str, glob: str) -> bool:
    """A path matches a glob (``*`` also crosses ``/``), or lies in the folder it names."""
    folder = glob.rstrip("/")
    return fnmatch.fnmatchcase(path, glob) or path.startswith(f"{folder}/")


def _diff(check: Check, evidence: Evidence) -> CriterionResult:
    changed = evidence.changed_paths()
    before = evidence.before or {}
    problems: list[str] = []
    for glob in check.changed:
        if not any(matches(path, glob) for path in changed):
            problems.append(f"nothing matching {glob!r} changed")
    for glob in check.unchanged:
        if not any(matches(path, glob) for path in before):
            raise CheckError(
                f"unchanged: {glob!r} matches no file of the workspace", kind=SCENARIO_ERROR
            )
        touched = [path for path in changed if matches(path, glob)]
        if touched:
            problems.append(f"{', '.join(touched[:5])} changed (unchanged: {glob!r})")
    if problems:
        return _verdict(check, False, "; ".join(problems))
    shown = ", ".join(changed[:5]) + (" …" if len(changed) > 5 else "")
    return _verdict(check, True, f"changed: {shown or 'nothing'}")


def _skill_activated(check: Check, evidence: Evidence) -> CriterionResult:
    state = activation(evidence.transcript, evidence.skills)
    if state == UNKNOWN:
        who = evidence.agent or "the agent"
        raise CheckError(
            f"{who} gave no events to tell whether it loaded the skill: skill_activated needs "
            "an agent that reports what it did (claude, codex)"
        )
    loaded = state == LOADED
    said = "the agent loaded the skill" if loaded else "the agent did not load the skill"
    return _verdict(check, loaded == check.activated, said)


def _told(evidence: Evidence, what: str) -> Transcript:
    """The agent's transcript; a check of its trajectory errors, naming the agent, when it
    gave no events (a model backend's one turn has no tool calls to check either)."""
    transcript = evidence.transcript
    if transcript is None or transcript.source == DIRECT_SOURCE:
        who = evidence.agent or "the agent"
        raise CheckError(
            f"{who} gave no events to tell {what}: trajectory checks need an agent that "
            "reports what it did (claude, codex)"
        )
    return transcript


def _arguments_match(check: Check) -> Callable[[str], bool] | None:
    pattern = check.pattern
    if pattern is None:
        return None
    return lambda arguments: (
        search_within(pattern, arguments, check.timeout, "a tool call's arguments") is not None
    )


def _cut(transcript: Transcript) -> CheckError:
    return CheckError(
        f"the transcript left out {transcript.cut_steps} steps of a long run, where the "
        "answer may lie"
    )


def _tool_used(check: Check, evidence: Evidence) -> CriterionResult:
    transcript = _told(evidence, "which tools it used")
    used, why = trajectory.tool_used(transcript, check.tool, _arguments_match(check))
    if not used and transcript.cut_steps:
        raise _cut(transcript)
    return _verdict(check, used != (check.type == "tool_not_used"), why)


def _tool_sequence(check: Check, evidence: Evidence) -> CriterionResult:
    transcript = _told(evidence, "which tools it used")
    if transcript.cut_steps:
        raise _cut(transcript)
    return _verdict(check, *trajectory.tool_sequence(transcript, check.tools, check.order))


def _file_read(check: Check, evidence: Evidence) -> CriterionResult:
    transcript = _told(evidence, "which files it read")
    if transcript.source in SOURCES_WITHOUT_READS:
        raise CheckError(
            f"{evidence.agent or 'the agent'} reports the commands it ran, not the files it "
            "read: file_read cannot tell"
        )
    return _verdict(check, *trajectory.files_read(transcript, check.path))


def _max_tool_calls(check: Check, evidence: Evidence) -> CriterionResult:
    calls = _told(evidence, "its tool calls").all_tool_calls
    return _verdict(check, *trajectory.within_limit(calls, check.limit, "tool calls"))


def _max_turns(check: Check, evidence: Evidence) -> CriterionResult:
    turns = _told(evidence, "its turns").turns
    if turns is None:
        raise CheckError(f"{evidence.agent or 'the agent'} did not report its turns")
    return _verdict(check, *trajectory.within_limit(turns, check.limit, "turns"))


def _max_tokens(check: Check, evidence: Evidence) -> CriterionResult:
    transcript = _told(evidence, "its tokens")
    if transcript.input_tokens is None and transcript.output_tokens is None:
        raise CheckError(f"{evidence.agent or 'the agent'} did not report its tokens")
    tokens = (transcript.input_tokens or 0) + (transcript.output_tokens or 0)
    return _verdict(check, *trajectory.within_limit(tokens, check.limit, "tokens"))


_EVALUATORS = {
    "command": _command,
    "file": _file,
    "file_regex": _file_regex,
    "output_regex": _output_regex,
    "output_expression": _output_expression,
    "json_schema": _json_schema,
    "diff": _diff,
    "skill_activated": _skill_activated,
    "tool_used": _tool_used,
    "tool_not_used": _tool_used,
    "tool_sequence": _tool_sequence,
    "file_read": _file_read,
    "max_tool_calls": _max_tool_calls,
    "max_turns": _max_turns,
    "max_tokens": _max_tokens,
}


def evaluate_check(check: Check, evidence: Evidence) -> CriterionResult:
    """The verdict of one check; raises :class:`CheckError` when there can be none."""
    return _EVALUATORS[check.type](check, evidence)


def command_checks(checks: Sequence[Check]) -> list[Check]:
    return [check for check in checks if check.type == "command"]
