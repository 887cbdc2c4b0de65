"""What lint finds: a :class:`Finding`, its severity, and the warning class pytest shows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning"]


CRITERIA_FILE = "criteria.json"


OPTIONS_FILE = "scenario.json"


TASK_FILE = "task.md"


SKILL_FILE = "SKILL.md"


CHANGELOG_FILE = "CHANGELOG.md"


WEIGHTS_TOTAL = 100


class EvalLintWarning(UserWarning):
    """A lint rule's warning, or an unknown key in a scenario's files seen during a run, as
    pytest shows it (``-W error::pytest_openkata.EvalLintWarning`` makes them errors)."""


@dataclass(frozen=True)
class Finding:
    """One problem: the rule that found it, the file relative to the skill folder (posix),
    the 1-based line where it applies (None for the whole file) and what to do."""

    rule: str
    severity: Severity
    file: str
    line: int | None
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.message}"
