"""The criteria's own rules: ``empty-descriptions``, ``weights``, ``vague-criteria`` and
``mechanical-criteria``."""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pytest_openkata.core.lint.context import ScenarioFiles
from pytest_openkata.core.lint.findings import CRITERIA_FILE, WEIGHTS_TOTAL, Finding
from pytest_openkata.core.lint.jsonlines import JsonNode
from pytest_openkata.core.lint.markdown import code_spans, in_inputs, input_path, is_path_token
from pytest_openkata.core.scenario import (
    CHECKS_FILE,
    EMPTY_DESCRIPTION,
)


def descriptions_rule(scenario: ScenarioFiles) -> list[Finding]:
    """Every criterion says what the judge looks for: an empty description (or none) is an
    error, as in a run."""
    findings = []
    for index, item in enumerate(scenario.checklist):
        if item.members is None:
            continue
        member = item.member("description")
        text = None if member is None else member.node.value
        if member is not None and not isinstance(text, str):
            continue  # the criteria rule reports its type
        if text is None or not text.strip():
            findings.append(
                Finding(
                    "empty-descriptions",
                    "error",
                    scenario.file(CRITERIA_FILE),
                    item.line if member is None else member.line,
                    f"{criterion_field(index, item)}.description: {EMPTY_DESCRIPTION}",
                )
            )
    return findings


def criterion_field(index: int, item: JsonNode) -> str:
    name = item.scalar("name")
    return f"checklist[{index}]" + (f" ({name!r})" if isinstance(name, str) and name else "")


def weights_rule(scenario: ScenarioFiles) -> list[Finding]:
    """The scores of criteria.json sum to 100, as ``scripts/check-eval-weights.sh`` of the
    reference requires (its runner does not). A scenario graded by checks only (an empty
    checklist) needs its checks.json scores to sum to 100 instead. The points of checks beside
    a checklist come on top, so that a repository's existing weights script still passes.
    The message is the script's, then the key to change. Run on openkata scenarios only
    (:mod:`~pytest_openkata.core.lint.applicability`): Tessl's tiles and the other formats
    take any points (a score is the points got of the points there are)."""
    if scenario.criteria is None:
        return []  # missing or not JSON: other rules report it
    if scenario.checklist or not scenario.check_items:
        items, file = list(scenario.checklist), CRITERIA_FILE
        total = sum(_number(item.scalar("max_score")) for item in items)
        whose = "the checklist's"
    else:
        file = CHECKS_FILE
        total = sum(_number(exact_value(item, "max_score")) for item in scenario.check_items)
        whose = "the checks'"
    if total == WEIGHTS_TOTAL:
        return []
    shown = _shown(scenario.path, scenario.shown_root)
    message = (
        f"FAIL: {shown} — sum={_text(total)} (expected {WEIGHTS_TOTAL}): make {whose} "
        f"max_score values sum to {WEIGHTS_TOTAL}"
    )
    return [Finding("weights", "error", scenario.file(file), None, message)]


def exact_value(item: JsonNode, key: str) -> Any:
    """A check's member by its exact key (checks.json keys are not matched by case)."""
    return next((m.node.value for m in reversed(item.members or ()) if m.key == key), None)


def _number(value: Any) -> float:
    """A score as the reference script's awk adds it: numbers count, anything else is 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return value if math.isfinite(value) else 0


def _text(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else repr(float(number))


def _shown(path: Path, root: Path | None) -> str:
    try:
        return Path(os.path.relpath(path, root if root is not None else Path.cwd())).as_posix()
    except ValueError:  # another drive
        return path.as_posix()


VAGUE_WORDS: tuple[str, ...] = (
    "good",
    "nice",
    "clean",
    "clear",
    "clearly",
    "proper",
    "properly",
    "appropriate",
    "appropriately",
    "reasonable",
    "sensible",
    "adequate",
    "correct",
    "correctly",
    "well-written",
    "well written",
    "well-structured",
    "well structured",
    "high quality",
    "high-quality",
    "quality",
)
"""Verdict words that say a judge should like the work without saying what to look for."""


STOP_WORDS: frozenset[str] = frozenset(
    """a an the and or but of in on to for with by as at from is are be been being was were
    it its it's this that these those there has have had does do very really overall
    generally looks look seems seem should must will would is's all any some enough
    response output answer result results code work solution agent content text""".split()  # noqa: SIM905
)
"""Words that name nothing to observe: articles, linking words, and the generic nouns for the
agent's work as a whole ("the output is good")."""


_CONCRETE = re.compile(
    r"`|\"[^\"]+\"|“[^”]+”|‘[^’]+’|(?<!\w)'[^']+'(?!\w)|\d|[\w-]/|/[\w-]|[\w-]\.[A-Za-z]"
)


_VAGUE = re.compile(
    r"(?<![\w-])(" + "|".join(re.escape(w) for w in VAGUE_WORDS) + r")(?![\w-])", re.I
)


_MAX_OBJECT_WORDS = 2


def vague_criteria_rule(scenario: ScenarioFiles) -> list[Finding]:
    """Criteria a judge cannot check. A description is vague when it uses a word of
    :data:`VAGUE_WORDS`, shows nothing concrete (no code span, quoted text, number, path or
    file name) and, without its vague and :data:`STOP_WORDS`, keeps at most two words: "The
    code is clean and well-written" is vague, "Response presents a clear counterargument
    against the user's stated position" is not. Conservative on purpose: a false warning on
    a good criterion costs more than a missed vague one."""
    findings = []
    for index, item in enumerate(scenario.checklist):
        text = item.scalar("description") if item.members is not None else None
        if isinstance(text, str) and _is_vague(text):
            member = item.member("description")
            message = (
                f"{scenario.criterion_label(index, item)}: vague criterion {text.strip()!r}: "
                f"rewrite {scenario.criterion_words} to say what the judge should see in the "
                "work (a file, a section, a command, a value)"
            )
            line = item.line if member is None else member.line
            findings.append(
                Finding("vague-criteria", "warning", scenario.file(CRITERIA_FILE), line, message)
            )
    return findings


def _is_vague(text: str) -> bool:
    if _VAGUE.search(text) is None or _CONCRETE.search(text) is not None:
        return False
    rest = re.findall(r"[a-z][a-z'-]*", _VAGUE.sub(" ", text.lower()))
    return len([w for w in rest if w not in STOP_WORDS]) <= _MAX_OBJECT_WORDS


@dataclass(frozen=True)
class _Mechanical:
    """A criterion a check can grade: the text it expects (``contains``) or the pattern it
    names (``regex``), whether case is ignored, and the words before its verb (which may
    name a file)."""

    kind: Literal["contains", "regex"]
    value: str
    ignore_case: bool
    subject: str

    @property
    def pattern(self) -> str:
        pattern = re.escape(self.value) if self.kind == "contains" else self.value
        if self.ignore_case and not pattern.startswith("(?i)"):
            return "(?i)" + pattern
        return pattern


_SUBJECT = r"(?P<subject>(?:\S+\s+){0,5}?)"


_CASE_NOTE = r"\((?P<{}>case-(?:in)?sensitive)\)"


_CONTAINS = re.compile(
    rf"^\s*{_SUBJECT}(?:contains|includes)\s+(?:{_CASE_NOTE.format('before')}\s+)?"
    r"(?:the\s+(?:text|string|word|phrase|line|substring)\s+)?"
    r"(?P<q>[\"'`])(?P<value>(?:(?!(?P=q)).)+)(?P=q)"
    rf"(?:\s*{_CASE_NOTE.format('after')})?\s*\.?\s*$",
    re.I,
)


_MATCHES = re.compile(
    rf"^\s*{_SUBJECT}matches\s+(?:/(?P<slashed>(?:\\.|[^/\\])+)/(?P<flags>[a-z]*)\.?"
    r"|(?:the\s+)?(?:pattern|regexp?|regular\s+expression)\s*(?P<colon>:)?\s*(?P<bare>.+?))"
    rf"(?:\s*{_CASE_NOTE.format('after')})?\s*$",
    re.I,
)


NEGATION = re.compile(r"\b(?:not|never|no|without)\b|n't\b", re.I)


def _mechanical(text: str) -> _Mechanical | None:
    """What a criterion's text asks when it is a check in words: ``<subject> contains "X"``
    (or 'X', `X`, with an optional ``(case-sensitive)`` or ``(case-insensitive)``), or
    ``<subject> matches the pattern: R``, ``matches the regex R`` (R quoted, or one word
    when no colon comes before it), ``matches /R/``. The subject is a few words that deny
    nothing ("The output never contains" is no such criterion); a pattern Python cannot
    compile makes none either."""
    found = _contains(text) or _matches(text)
    if found is None or NEGATION.search(found.subject):
        return None
    try:
        re.compile(found.pattern, re.MULTILINE)
    except re.error:
        return None
    return found


def _contains(text: str) -> _Mechanical | None:
    match = _CONTAINS.match(text)
    if match is None:
        return None
    case = (match.group("before") or match.group("after") or "").lower()
    return _Mechanical(
        "contains", match.group("value"), case == "case-insensitive", match.group("subject")
    )


def _matches(text: str) -> _Mechanical | None:
    match = _MATCHES.match(text)
    if match is None:
        return None
    ignore_case = (match.group("after") or "").lower() == "case-insensitive"
    if match.group("slashed") is not None:
        pattern = match.group("slashed")
        ignore_case = ignore_case or "i" in match.group("flags").lower()
    else:
        pattern = match.group("bare").strip()
        quoted = re.fullmatch(r"([`\"'])((?:(?!\1).)+)\1\.?", pattern)
        if quoted is not None:
            pattern = quoted.group(2)
        elif match.group("colon") is None and re.search(r"\s", pattern):
            return None  # "matches the pattern of the examples": words, not a pattern
        elif pattern.endswith(".") and not pattern.endswith("\\."):
            pattern = pattern[:-1]  # the sentence's full stop
    if not pattern:
        return None
    return _Mechanical("regex", pattern, ignore_case, match.group("subject"))


def _subject_path(subject: str, scenario_dir: Path) -> str | None:
    """The workspace file a criterion's subject names: one in backticks ("The file
    `CHANGELOG.md`"), or a bare word with a ``/`` or that ``inputs/`` holds ("notes/out.txt",
    "app.py"), not a dotted name such as "Node.js". A leading ``inputs/`` is left out: the
    files of inputs/ sit at the workspace's root."""
    candidates = [content for _, _, content in code_spans(subject)]
    for word in subject.split():
        token = word.strip("`\"'()[]<>{},;:!?*")
        if "/" in token or (is_path_token(token) and in_inputs(scenario_dir, token)):
            candidates.append(token)
    for candidate in candidates:
        path = input_path(candidate)
        if path is not None:
            return path.removeprefix("inputs/") or None
    return None


def criterion_check(scenario: ScenarioFiles, item: JsonNode) -> tuple[dict[str, Any], str] | None:
    """The checks.json entry that grades a mechanical criterion exactly, and the expected
    text of a ``contains`` one (else ""); None when the criterion is not mechanical or has
    no usable name or score. A sandboxed scenario's criterion that names a file gets a
    ``file_regex`` check on it; any other an ``output_regex`` check on the agent's output."""
    if item.members is None:
        return None
    name, score = item.scalar("name"), item.scalar("max_score")
    if isinstance(score, float) and score.is_integer():
        score = int(score)
    if not isinstance(name, str) or not name or isinstance(score, bool):
        return None
    if not isinstance(score, int) or score <= 0:
        return None
    texts = [t for t in (item.scalar("description"), name) if isinstance(t, str)]
    found = next((m for m in map(_mechanical, texts) if m is not None), None)
    if found is None:
        return None
    path = _subject_path(found.subject, scenario.path) if scenario.sandboxed else None
    entry: dict[str, Any] = {"name": name, "type": "file_regex" if path else "output_regex"}
    if path:
        entry["path"] = path
    entry.update(pattern=found.pattern, max_score=score)
    return entry, found.value if found.kind == "contains" else ""


def mechanical_criteria_rule(scenario: ScenarioFiles) -> list[Finding]:
    """Criteria that are checks in words (see :func:`_mechanical`): a judge grades them by
    reading, and may miss or forgive what a regular expression decides exactly and for
    free. The warning gives the checks.json entry to use instead."""
    findings = []
    for index, item in enumerate(scenario.checklist):
        check = criterion_check(scenario, item)
        if check is None:
            continue
        entry = json.dumps(check[0], ensure_ascii=False)
        message = (
            f"{criterion_field(index, item)}: mechanical criterion: a check grades it "
            f"exactly; replace it with this checks.json entry, and give its points to the "
            f"other criteria (criteria.json's scores still sum to 100, as the reference's "
            f"weights script checks; the check's come on top): {entry}"
        )
        findings.append(
            Finding(
                "mechanical-criteria", "warning", scenario.file(CRITERIA_FILE), item.line, message
            )
        )
    return findings
