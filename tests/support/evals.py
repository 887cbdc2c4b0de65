"""Helpers for plugin tests: writing skill folders and scripting agent and judge answers."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.endpoint import RecordedRequest, Reply

CRITERION_LINE = re.compile(r"^- \*\*(.+?)\*\* \(max (\d+) points\): ", re.MULTILINE)
CONTEXT_LINE = re.compile(r"^Context: (.*)$", re.MULTILINE)
DEFAULT_ANSWER = "A considered answer from the scripted agent, long enough to judge."


@dataclass
class EvalScript:
    """Routes requests of a scenario run: judge calls (they carry a system prompt) get verdicts,
    agent calls get ``agent_answer``.

    ``verdicts`` maps a criterion name to ``(passed, reason)``; criteria not listed pass with
    reason ``ok``. ``by_context`` does the same per scenario, keyed by the criteria's context.
    ``judge_replies`` (raw texts or whole replies) are used first, one per judge call, when given;
    ``agent_reply_when`` answers every agent call whose prompt contains a key with its reply.
    """

    agent_answer: str = DEFAULT_ANSWER
    verdicts: dict[str, tuple[bool, str]] = field(default_factory=dict)
    by_context: dict[str, dict[str, tuple[bool, str]]] = field(default_factory=dict)
    judge_replies: list[str | Reply] = field(default_factory=list)
    agent_replies: list[Reply] = field(default_factory=list)
    agent_reply_when: dict[str, Reply] = field(default_factory=dict)
    judge_calls: int = 0
    agent_calls: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: RecordedRequest) -> Reply:
        messages = request.json["messages"]
        with self._lock:
            if messages[0]["role"] == "system":
                self.judge_calls += 1
                if self.judge_replies:
                    reply = self.judge_replies.pop(0)
                    return reply if isinstance(reply, Reply) else Reply.chat(reply)
                return Reply.chat(json.dumps(self.answer_judge(messages[-1]["content"])))
            self.agent_calls += 1
            prompt = messages[-1]["content"]
            for marker, reply in self.agent_reply_when.items():
                if marker in prompt:
                    return reply
            if self.agent_replies:
                return self.agent_replies.pop(0)
            return Reply.chat(self.agent_answer)

    def answer_judge(self, message: str) -> list[dict[str, object]]:
        context = CONTEXT_LINE.search(message)
        table = self.by_context.get(context.group(1) if context else "", self.verdicts)
        answer = []
        for name, _points in CRITERION_LINE.findall(message):
            passed, reason = table.get(name, (True, "ok"))
            answer.append({"name": name, "pass": passed, "reason": reason})
        return answer


def criteria_json(criteria: Mapping[str, int], context: str = "") -> str:
    checklist = [
        {"name": name, "description": f"checks {name}", "max_score": points}
        for name, points in criteria.items()
    ]
    return json.dumps({"context": context, "type": "weighted_checklist", "checklist": checklist})


def write_skill(
    root: Path,
    name: str,
    scenarios: Mapping[str, Mapping[str, int]],
    *,
    sandbox: bool = False,
    changelog: str | None = "# Changelog\n\n## [Unreleased]\n\n## [2.1.0] - 2026-11-01\n",
) -> Path:
    """A skill folder ``root/skills/<name>`` with one direct scenario per entry."""
    skill = root / "skills" / name
    skill.mkdir(parents=True, exist_ok=True)
    (skill / "SKILL.md").write_text(f"# {name}\n\nFollow the rules.\n")
    if changelog is not None:
        (skill / "CHANGELOG.md").write_text(changelog)
    for scenario, criteria in scenarios.items():
        write_scenario(skill, scenario, criteria, sandbox=sandbox)
    return skill


def write_scenario(
    skill: Path,
    scenario: str,
    criteria: Mapping[str, int],
    *,
    sandbox: bool = False,
    description: str | None = None,
    inputs: Mapping[str, str] | None = None,
) -> Path:
    folder = skill / "evals" / scenario
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "task.md").write_text(f"Do the task of {scenario}.\n")
    (folder / "criteria.json").write_text(criteria_json(criteria, context=f"ctx {scenario}"))
    options = {"description": description or f"about {scenario}", "sandbox": sandbox}
    (folder / "scenario.json").write_text(json.dumps(options))
    for rel, text in (inputs or {}).items():
        path = folder / "inputs" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder


def eval_args(base_url: str, *extra: str) -> Sequence[str]:
    """Command-line options of a run against the scripted endpoint."""
    return ("--eval-backend", "http", "--eval-base-url", base_url, *extra)


def sandbox_args(base_url: str, image: str, *extra: str) -> tuple[str, ...]:
    """Options of a sandboxed run against the scripted endpoint in ``image``, with no host
    folder mounted."""
    return (
        *eval_args(base_url),
        "--eval-sandbox-image",
        image,
        "--eval-sandbox-mounts",
        "none",
        *extra,
    )


def reports_under(root: Path) -> list[Path]:
    return sorted(root.glob("skills/*/evals/results/**/*.json"))


def run_logs(root: Path) -> list[Path]:
    """The run logs of a run from ``root``, oldest first, in the plugin's own order (the
    second log of one second is ``…Z-2.jsonl``, which sorts before ``…Z.jsonl`` by name)."""
    from pytest_openkata.core.runlog import logs_newest_first

    return logs_newest_first(root / ".openkata" / "runs")[::-1]


def evaluate_skill_s(base_url: str, agent_command: str, *, before: str = "") -> str:
    """Python code (for a process of its own, run in the project's folder) that runs
    ``evaluate()`` once on ``skills/s`` with the ``command`` agent ``agent_command`` and the
    scripted judge at ``base_url``, after the lines ``before``, and prints whether it passed."""
    return "\n".join(
        [
            "from pytest_openkata import evaluate",
            *before.splitlines(),
            "(summary,) = evaluate(",
            '    "skills/s",',
            '    backend="command",',
            f"    agent_command={agent_command!r},",
            '    judge_backend="http",',
            f'    http={{"base_url": {base_url!r}}},',
            ")",
            "print(summary.passed)",
        ]
    )
