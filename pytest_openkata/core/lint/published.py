"""A published format's scenario (skill-creator's ``evals.json``, waza's and Skillgrade's
``eval.yaml``, a Harbor task) made readable by the scenario rules.

The scenario is read with its own format (:mod:`pytest_openkata.core.formats`), as a run reads
it, and written out by the formats' openkata writer into a private temporary folder (never
into the skill: lint writes nothing there), which is removed on every exit path. The rules
then read that folder with the skill's real folder beside it, and every finding names the
format's file. What the reader refuses is one error naming the file and the key, as the run
would say it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from pytest_openkata.contracts.errors import OpenkataError
from pytest_openkata.core.formats import EvalFormat, ScenarioSource
from pytest_openkata.core.formats.model import shown_path
from pytest_openkata.core.formats.writers import openkata_files
from pytest_openkata.core.jsonfiles import ScenarioLoadError
from pytest_openkata.core.lint.applicability import HARBOR, SKILL_CREATOR, SKILLGRADE, WAZA
from pytest_openkata.core.lint.context import FormatSource, ScenarioFiles
from pytest_openkata.core.lint.findings import Finding
from pytest_openkata.infra.tempfiles import run_folder

FORMAT_RULE = "format"
"""The rule of a published format's file that its format cannot read."""

# How each format names the task and the files the workspace starts with, for messages.
_WORDS: dict[str, tuple[str, str, str]] = {
    SKILL_CREATOR: ("the eval's `prompt`", "the eval's `files`", "its text in `expectations`"),
    WAZA: (
        "the task's prompt (`inputs.prompt` or `prompt_file`)",
        "the task's `inputs.files` (or its `context_dir`)",
        "its grader's `config.prompt`",
    ),
    SKILLGRADE: (
        "the task's `instruction`",
        "the task's `workspace`",
        "its grader's `rubric`",
    ),
    HARBOR: ("the task's instruction.md", "the environment's Dockerfile", "tests/test.sh"),
}


def source_file(source: ScenarioSource, skill_dir: Path) -> str:
    """The format's file of ``source`` relative to the skill folder (posix), as findings name
    files; a file outside it by its shown path."""
    try:
        return source.path.relative_to(skill_dir).as_posix()
    except ValueError:
        return shown_path(source.path)


def unreadable(exc: OpenkataError, source: ScenarioSource, skill_dir: Path) -> Finding:
    """The reader's error as a finding: the file it names (a task file waza's ``eval.yaml``
    lists, or the format's own), the key and the message."""
    if isinstance(exc, ScenarioLoadError):
        try:
            file = exc.path.relative_to(skill_dir).as_posix()
        except ValueError:
            file = shown_path(exc.path)
        message = f"{exc.field}: {exc.message}" if exc.field else exc.message
    else:
        file, message = source_file(source, skill_dir), str(exc)
    where = f"{source.key}: " if source.key else ""
    return Finding(FORMAT_RULE, "error", file, None, f"{where}{message}")


def _within(field: str, key: str) -> str:
    """A passed-over key's field as a finding about the scenario at ``key`` shows it (each
    finding already starts with ``key``): relative to it, or as the whole file's."""
    if key and field.startswith(key + "."):
        return f"`{field[len(key) + 1 :]}`"
    return f"`{field}` (of the whole file)" if key else f"`{field}`"


@contextlib.contextmanager
def written_out(
    fmt: EvalFormat, source: ScenarioSource, skill_dir: Path, context_budget: int
) -> Iterator[ScenarioFiles | Finding]:
    """The scenario of ``source`` as an openkata folder the rules read (removed when the
    block ends), or the finding that says why its format cannot read it."""
    try:
        scenario = fmt.load(source)
    except OpenkataError as exc:  # FormatError, and the loader's errors it raises
        yield unreadable(exc, source, skill_dir)
        return
    words = _WORDS.get(source.format, ("the task", "its input files", "its text"))
    ignored = tuple(_within(field, source.key) for field in scenario.ignored_keys)
    shown = FormatSource(source_file(source, skill_dir), *words, ignored_keys=ignored)
    with run_folder("lint") as temporary:
        folder = Path(temporary) / "scenario"
        files, _notes = openkata_files(scenario)
        for rel, content in files.items():
            path = folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
        yield ScenarioFiles(folder, None, context_budget, skill_dir=skill_dir, source=shown)
