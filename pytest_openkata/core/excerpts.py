"""What the judge judged, as pytest users look for it: the turns of a conversation before the
final answer, the end of the agent's output, the workspace changes and the agent's last tool
calls of a scenario that failed or errored, as report sections.

pytest shows an item's report sections under a failure's traceback and with ``-rA``, as it
shows captured output; the JUnit reporter writes the same text to the scenario testcase's
``system-out``. An output is cut at its start (its end says how the agent finished) and the
changes at their end, each with a note saying how much was left out. Their text is
:func:`~pytest_openkata.infra.text.visible`: pytest prints sections as they are, and an agent's
output must not drive the terminal it is shown on.
"""

from __future__ import annotations

from pytest_openkata.contracts.results import ScenarioResult, TrialResult, TrialTrace
from pytest_openkata.contracts.transcripts import Step
from pytest_openkata.infra.text import visible

__all__ = ["LAST_TOOL_CALLS", "MAX_SECTION_CHARS", "scenario_sections"]

MAX_SECTION_CHARS = 6000
LAST_TOOL_CALLS = 5  # the tool calls of a failed trial its report names, the last ones
_CALL_LINE_CHARS = 160


def _tail(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    left_out = len(text) - limit
    return f"[… the first {left_out} of {len(text)} characters left out …]\n" + text[-limit:]


def _head(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    left_out = len(text) - limit
    return text[:limit] + f"\n[… the last {left_out} of {len(text)} characters left out …]\n"


def _trial_sections(trial: TrialResult, suffix: str, limit: int) -> list[tuple[str, str]]:
    trace = trial.trace
    output = trace.output if trace is not None and trace.output else trial.agent_output
    sections = []
    if trace is not None and trace.turns:
        sections.append((f"conversation{suffix}", visible(_tail(_conversation(trace), limit))))
    if output:
        sections.append((f"agent output{suffix}", visible(_tail(output, limit))))
    if trace is not None and trace.changes:
        diff = "".join(change.diff for change in trace.changes)
        sections.append((f"workspace changes{suffix}", visible(_head(diff, limit))))
    if trace is not None and trace.transcript is not None:
        calls = trace.transcript.last_tool_calls(LAST_TOOL_CALLS)
        if calls:
            lines = [_call_line(call) for call in calls]
            sections.append((f"last tool calls{suffix}", visible("\n".join(lines) + "\n")))
    return sections


def _conversation(trace: TrialTrace) -> str:
    """Each turn of a conversation up to the last user message: its final answer is the
    agent output shown next."""
    lines = []
    for number, turn in enumerate(trace.turns, start=1):
        lines += [f"[user, turn {number}]", turn.user, ""]
        if number < len(trace.turns):
            lines += [f"[agent, turn {number}]", turn.agent, ""]
    return "\n".join(lines)


def _call_line(call: Step) -> str:
    """One tool call on one line: its name, its arguments and how it ended."""
    arguments = " ".join(call.arguments.split())
    if len(arguments) > _CALL_LINE_CHARS:
        arguments = arguments[:_CALL_LINE_CHARS] + "…"
    status = f" -> {call.status}" if call.status else ""
    by = f" (subagent {call.subagent})" if call.subagent else ""
    return f"{call.tool} {arguments}{status}{by}"


def scenario_sections(
    result: ScenarioResult, limit: int = MAX_SECTION_CHARS
) -> list[tuple[str, str]]:
    """``(title, text)`` sections of a scenario that failed or errored (none for one that
    passed): per trial that did not pass, its agent output's end and its workspace diff; with
    several trials the titles name the trial."""
    if result.passed and result.error is None:
        return []
    several = len(result.trials) > 1
    sections = []
    for trial in result.trials:
        if trial.passed:
            continue
        suffix = f" (trial {trial.index})" if several else ""
        sections.extend(_trial_sections(trial, suffix, limit))
    return sections
