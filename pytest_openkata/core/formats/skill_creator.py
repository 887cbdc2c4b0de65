"""skill-creator / agentskills.io: a skill's ``evals/evals.json``.

``{"skill_name": ..., "evals": [{"id", "prompt", "expected_output", "files", "expectations",
"assertions"}]}``. Each eval is one scenario named ``eval-<id>``: its prompt is the task,
``expected_output`` the judge's context, ``files`` (paths relative to the skill folder) the
workspace's starting files, each ``expectations`` statement a judged criterion of weight 1
(named by its own text), and ``assertions`` either statements (judged likewise) or objects
``{"name", "type": "contains" | "not_contains" | "regex", "value"}`` graded as exact checks on
the agent's output. Keys the format does not have are passed over, as skill-creator's own
scripts pass over them (repositories add ``name`` or ``expected_behavior``), and named in
:attr:`EvalScenario.ignored_keys` for lint to warn of.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_openkata.core.formats.model import (
    EvalScenario,
    FormatError,
    InputFile,
    JudgedCriterion,
    ScenarioSource,
    validated_checks,
)
from pytest_openkata.core.formats.reading import (
    check_keys,
    escaped,
    files_of,
    mapping_at,
    read_json_file,
    relative_inside,
)

__all__ = ["EVALS_FILE", "FILES_FOLDER", "SkillCreatorFormat", "assertion_check", "input_path"]

NAME = "skill-creator"
EVALS_FILE = "evals.json"
FILES_FOLDER = "evals/files"  # where the format keeps eval files, relative to the skill
TOP_KEYS = ("skill_name", "evals")
EVAL_KEYS = ("id", "prompt", "expected_output", "files", "expectations", "assertions")
ASSERTION_KEYS = ("name", "type", "value", "description")
ASSERTION_TYPES = ("contains", "not_contains", "regex")


def input_path(given: str) -> str:
    """Where an eval's file is placed in the workspace: its path below ``evals/files/`` when
    it is there (as the format keeps them), else its file name."""
    text = given.replace("\\", "/")
    while text.startswith("./"):
        text = text[2:]
    prefix = FILES_FOLDER + "/"
    return text[len(prefix) :] if text.startswith(prefix) else text.rsplit("/", 1)[-1]


def assertion_check(
    path: Path,
    field: str,
    item: Mapping[str, Any],
    default: str,
    ignored: list[str] | None = None,
) -> dict[str, Any]:
    """The ``checks.json`` object of an assertion object: an ``output_regex`` check (absent
    for ``not_contains``) of weight 1."""
    check_keys(NAME, path, item, field, known=ASSERTION_KEYS, ignored=ignored)
    kind, value = item.get("type"), item.get("value")
    if kind not in ASSERTION_TYPES:
        raise FormatError(
            NAME,
            path,
            f"assertion type {kind!r} cannot be graded here; choose one of: "
            + ", ".join(ASSERTION_TYPES),
            f"{field}.type",
        )
    if not isinstance(value, str) or not value:
        raise FormatError(NAME, path, "must be a non-empty string", f"{field}.value")
    name = item.get("name") or default
    pattern = value if kind == "regex" else escaped(value)
    check: dict[str, Any] = {"name": str(name), "type": "output_regex", "pattern": pattern}
    if kind == "not_contains":
        check["absent"] = True
    if item.get("description"):
        check["description"] = str(item["description"])
    check["max_score"] = 1
    return check


class SkillCreatorFormat:
    """The reader of ``evals/evals.json``."""

    name = NAME
    # The files whose folder collection asks this format about (EvalFormat.files).
    files = ("evals.json",)

    def detect(self, folder: Path) -> bool:
        """A skill folder with ``evals/evals.json``, or that ``evals`` folder itself."""
        return self._file(folder).is_file()

    def scenarios(self, folder: Path) -> list[ScenarioSource]:
        path = self._file(folder)
        evals = self._evals(path)
        sources = []
        for index, item in enumerate(evals):
            ident = item.get("id", index + 1)
            sources.append(ScenarioSource(NAME, f"eval-{ident}", path, f"evals[{index}]"))
        names = [s.name for s in sources]
        twice = next((n for n in names if names.count(n) > 1), None)
        if twice is not None:
            raise FormatError(
                NAME, path, f"two evals are named {twice!r}: give each its own id", "evals"
            )
        return sources

    def load(self, source: ScenarioSource) -> EvalScenario:
        path = source.path
        index = int(source.key.removeprefix("evals[").rstrip("]"))
        ignored: list[str] = []
        item = self._evals(path, ignored, index)[index]
        where = source.key
        prompt = item.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise FormatError(
                NAME, path, "every eval needs a prompt (a non-empty string)", f"{where}.prompt"
            )
        skill_dir = path.parent.parent
        inputs: list[InputFile] = []
        for number, given in enumerate(_strings(path, item.get("files"), f"{where}.files")):
            field = f"{where}.files[{number}]"
            place = relative_inside(NAME, path, input_path(given), field)
            inputs += files_of(NAME, path, skill_dir / given, place, field)
        criteria: list[JudgedCriterion] = []
        checks: list[dict[str, Any]] = []
        for text in _strings(path, item.get("expectations"), f"{where}.expectations"):
            criteria.append(JudgedCriterion(text, text, 1))
        assertions = item.get("assertions") or []
        if not isinstance(assertions, list):
            raise FormatError(NAME, path, "must be a list", f"{where}.assertions")
        for number, assertion in enumerate(assertions):
            field = f"{where}.assertions[{number}]"
            if isinstance(assertion, str) and assertion.strip():
                criteria.append(JudgedCriterion(assertion, assertion, 1))
            elif isinstance(assertion, Mapping) and "type" not in assertion:
                criteria.append(_judged_assertion(path, field, assertion, ignored))
            elif isinstance(assertion, Mapping):
                default = f"assertion {number + 1}"
                checks.append(assertion_check(path, field, assertion, default, ignored))
            else:
                raise FormatError(NAME, path, "must be a statement or an object", field)
        names = [c.name for c in criteria]
        twice = next((n for n in names if names.count(n) > 1), None)
        if twice is not None:
            raise FormatError(NAME, path, f"the statement {twice!r} is given twice", where)
        if not criteria and not checks:
            raise FormatError(NAME, path, "needs expectations or assertions to grade", where)
        expected = item.get("expected_output") or ""
        if not isinstance(expected, str):
            raise FormatError(NAME, path, "must be a string", f"{where}.expected_output")
        return EvalScenario(
            source=source,
            task=prompt,
            context=expected,
            criteria=tuple(criteria),
            checks=validated_checks(path, checks),
            inputs=tuple(inputs),
            ignored_keys=tuple(ignored),
        )

    def _file(self, folder: Path) -> Path:
        # Its files are relative to the skill folder: the one above evals/.
        evals = folder if folder.name == "evals" else folder / "evals"
        return evals / EVALS_FILE

    def _evals(
        self, path: Path, ignored: list[str] | None = None, of: int | None = None
    ) -> list[Mapping[str, Any]]:
        """The file's evals; the keys it does not know, at its top and in the eval ``of``,
        are added to ``ignored``."""
        data = mapping_at(NAME, path, read_json_file(NAME, path), "")
        passed_over: list[str] = []
        check_keys(NAME, path, data, "", known=TOP_KEYS, ignored=passed_over)
        evals = data.get("evals")
        if not isinstance(evals, list):
            raise FormatError(NAME, path, "must be a list of evals", "evals")
        for index, item in enumerate(evals):
            field = f"evals[{index}]"
            mapping_at(NAME, path, item, field)
            if index == of:
                check_keys(NAME, path, item, field, known=EVAL_KEYS, ignored=passed_over)
        if ignored is not None:
            ignored += passed_over
        return evals


def _judged_assertion(
    path: Path, field: str, item: Mapping[str, Any], ignored: list[str]
) -> JudgedCriterion:
    """An assertion object without a ``type``: a statement for the grader to judge, as
    skill-creator's grader reads it; its ``description`` is the statement (else its
    ``name``) and its ``name`` names it."""
    check_keys(NAME, path, item, field, known=ASSERTION_KEYS, ignored=ignored)
    texts = {key: item.get(key) for key in ("name", "description")}
    for key, text in texts.items():
        if text is not None and not (isinstance(text, str) and text.strip()):
            raise FormatError(NAME, path, "must be a non-empty string", f"{field}.{key}")
    statement = texts["description"] or texts["name"]
    if statement is None:
        raise FormatError(
            NAME,
            path,
            "needs a type (contains, not_contains, regex) or a description to judge",
            field,
        )
    return JudgedCriterion(texts["name"] or statement, statement, 1)


def _strings(path: Path, value: Any, field: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise FormatError(NAME, path, "must be a list of non-empty strings", field)
    return value
