"""Where a skill's results JSON goes, and whether it is published where the catalogue reads it.

The reference's automatic path (``<skill>/evals/results/<model>/<UTC time>.json``), the
``--eval-output`` path, the names of several skills' reports side by side, and the two cases
where a report is kept out of ``evals/results/``: a skill whose scenarios errored for reasons
outside it (held back, written beside the run logs) and a broken skill (none written). The run
decides this before any reporter runs (:func:`with_report_decisions`), so every reporter shows
the same decision.
"""

from __future__ import annotations

import itertools
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.core.summary import SkillSummary
from pytest_openkata.core.tile import TILE_FILE, is_tile_dir
from pytest_openkata.infra.text import plural

__all__ = [
    "PATH_SEPARATOR",
    "REPORT_NAME",
    "UNPUBLISHED_FOLDER",
    "as_utc",
    "auto_report_path",
    "held_back",
    "later_names",
    "output_report_path",
    "report_name_order",
    "report_namer",
    "report_path",
    "report_prefixes",
    "skill_broken",
    "unpublished_report_path",
    "with_report_decisions",
]

_FILE_TIMESTAMP = "%Y-%m-%dT%H%M%S"

REPORT_NAME = re.compile(r"(?P<stamp>[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{6})(?:-(?P<n>[0-9]+))?\.json")
"""The name of a report written to a skill's results folder: its UTC time, then ``-N`` for the
Nth report of the same second (``write_new_report``)."""


def report_name_order(name: str) -> tuple[str, int] | None:
    """Where a report's file name places it among a results folder's reports, the newest
    greatest: its UTC time, then ``N`` of ``-N`` (the unnumbered name is the first of its
    second); None for a name not written as a report (``results-*.json``). The catalogue
    takes the greatest name by plain string comparison, which sorts ``-2`` before its
    unnumbered name: this is the one rule the plugin uses wherever it looks for the newest."""
    match = REPORT_NAME.fullmatch(name)
    if match is None:
        return None
    return match["stamp"], int(match["n"] or 1)


def report_path(
    summary: SkillSummary,
    settings: EvalSettings,
    now: datetime,
    several_skills: bool,
    prefix: str | None = None,
) -> Path | None:
    """Where a skill's report goes: under ``--eval-output`` when given (prefixed, when several
    skills ran, with ``prefix``, by default the skill's name: see :func:`report_prefixes`),
    else, for a complete skill only, the reference's automatic path; None for a partial run
    without ``--eval-output``, as in the reference."""
    if settings.output:
        path = output_report_path(settings.output, now)
        if not several_skills:
            return path
        name = prefix or summary.name.replace("/", PATH_SEPARATOR)
        return path.with_name(f"{name}-{path.name}")
    if summary.complete:
        return auto_report_path(summary.skill_dir, settings.model, now)
    return None


PATH_SEPARATOR = "__"


def report_prefixes(summaries: Sequence[SkillSummary], rootdir: Path) -> list[str]:
    """Each skill's name in the names of files of several skills' reports (``--eval-output``
    with several skills, the held-back reports): the skill's name, or, where two skills of the
    run have the same name, its folder relative to the rootdir with ``__`` for ``/``
    (``skills__a__commit-message``); a folder outside the rootdir is named by as many of its
    last folders as tell it from the others of its name, never by its absolute path. A name
    still shared (folders named with ``__``) gets ``-2``, ``-3``... in the summaries' order."""
    names = Counter(summary.name for summary in summaries)
    groups: dict[str, list[Path]] = {}
    for summary in summaries:
        groups.setdefault(summary.name, []).append(Path(summary.skill_dir))
    prefixes = []
    for summary in summaries:
        if names[summary.name] == 1:
            # A tile's name is ``owner/name``: one file name, not a folder.
            prefixes.append(summary.name.replace("/", PATH_SEPARATOR))
            continue
        parts = _relative_parts(Path(summary.skill_dir), rootdir)
        if parts is None:
            parts = _distinct_suffix(Path(summary.skill_dir), groups[summary.name])
        prefixes.append(PATH_SEPARATOR.join(parts))
    seen: Counter[str] = Counter()
    distinct = []
    for prefix in prefixes:
        seen[prefix] += 1
        distinct.append(prefix if seen[prefix] == 1 else f"{prefix}-{seen[prefix]}")
    return distinct


def _relative_parts(path: Path, rootdir: Path) -> tuple[str, ...] | None:
    """The folders of ``path`` under the rootdir (None: it is not under it)."""
    try:
        parts = path.relative_to(rootdir).parts
    except ValueError:
        return None
    return parts or None


def _distinct_suffix(path: Path, others: Sequence[Path]) -> tuple[str, ...]:
    """The fewest last folders of ``path`` that no other of ``others`` ends with."""
    parts = path.parts[1:] if path.anchor else path.parts
    for count in range(1, len(parts)):
        suffix = parts[-count:]
        if sum(1 for other in others if other.parts[-count:] == suffix) == 1:
            return suffix
    return parts


UNPUBLISHED_FOLDER = "unpublished"


def held_back(summary: SkillSummary, settings: EvalSettings) -> int:
    """How many of the skill's scenarios errored because something the run depends on failed
    (an endpoint, the judge, an agent CLI, the sandbox engine) when that keeps its report out
    of ``evals/results/``; 0 when it is published there.

    The catalogue counts the newest report of a model, so such a run would publish 0 % for
    those scenarios over a good score. ``--eval-output`` (the user names the place) and
    ``--eval-publish-errors`` publish it anyway."""
    if settings.output or settings.publish_errors:
        return 0
    return sum(1 for result in summary.results if result.infrastructure_errors)


def skill_broken(summary: SkillSummary) -> bool:
    """Whether the skill itself is broken (its SKILL.md, or a tile's tile.json, is missing or
    cannot be read): then no report of it is written at all, not even at ``--eval-output``.
    Every scenario of such a skill errors before its agent runs, so a report would publish 0 %
    for a skill that did not run; the reference writes none either (it stops first)."""
    return any(result.skill_errors for result in summary.results)


def unpublished_report_path(
    summary: SkillSummary,
    settings: EvalSettings,
    now: datetime,
    rootdir: Path,
    prefix: str | None = None,
) -> Path:
    """Where a held-back report goes: beside the run logs, laid out as ``evals/results/``
    (``<log folder>/unpublished/<skill>/<model>/<UTC time>.json``, ``<skill>`` being
    ``prefix`` when given: see :func:`report_prefixes`), so that it can be moved there by hand
    once its errors are understood. With the run log off, the default log folder is used."""
    logs = rootdir / Path(settings.log_dir or EvalSettings().log_dir).expanduser()
    published = auto_report_path(summary.skill_dir, settings.model, now)
    folder = prefix or summary.name.replace("/", PATH_SEPARATOR)
    return logs / UNPUBLISHED_FOLDER / folder / published.parent.name / published.name


def later_names(path_at: Callable[[datetime], Path | None], now: datetime) -> Iterator[Path]:
    """The names a report of ``now`` takes when its own is taken: the same name format at the
    next free second. The catalogue takes the greatest name as the newest, and
    ``<time>-2.json`` would sort before ``<time>.json``."""
    for seconds in itertools.count(1):
        path = path_at(now + timedelta(seconds=seconds))
        if path is not None:
            yield path


def auto_report_path(skill_dir: Path, model: str, now: datetime) -> Path:
    """Return ``<skill_dir>/evals/results/<model>/<UTC timestamp>.json``.

    Unlike the reference, path separators in ``model`` become ``_`` so that a model such
    as ``openai/gpt-4o`` is one folder that ``generate-versions`` can see (spec 13.30).
    """
    folder = model.replace("/", "_").replace("\\", "_")
    return Path(skill_dir) / "evals" / "results" / folder / f"{_file_timestamp(now)}.json"


def output_report_path(output: Path | str, now: datetime) -> Path:
    """Resolve ``--output`` into a timestamped report path (spec section 10).

    Pass the option as a ``str`` to keep a trailing separator: ``out/`` that does not exist
    yet is taken as a folder (``out/results-<ts>.json``), where the reference produced
    ``out/-<ts>.json``.
    """
    text = os.fspath(output)
    stamp = _file_timestamp(now)
    if os.path.isdir(text) or _has_trailing_separator(text):
        return Path(text) / f"results-{stamp}.json"
    ext = _go_ext(text)
    base = text[: len(text) - len(ext)]
    return Path(f"{base}-{stamp}{ext or '.json'}")


def as_utc(moment: datetime) -> datetime:
    """``moment`` in UTC; a naive time is taken as UTC."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def _file_timestamp(now: datetime) -> str:
    return as_utc(now).strftime(_FILE_TIMESTAMP)


def _has_trailing_separator(text: str) -> bool:
    separators = tuple(sep for sep in ("/", os.sep, os.altsep) if sep)
    return text.endswith(separators)


def _go_ext(text: str) -> str:
    """Go's ``filepath.Ext``: the suffix from the last ``.`` of the final path element."""
    for index in range(len(text) - 1, -1, -1):
        char = text[index]
        if char in (os.sep, os.altsep):
            return ""
        if char == ".":
            return text[index:]
    return ""


def _held_reason(
    summary: SkillSummary, settings: EvalSettings, now: datetime, several: bool
) -> str | None:
    """Why the skill's report is not where the catalogue reads it (None: it is)."""
    if skill_broken(summary):
        own_file = TILE_FILE if is_tile_dir(Path(summary.skill_dir)) else "SKILL.md"
        return (
            f"the skill's {own_file} is missing or broken, so no report of it is written "
            "(the catalogue would show 0 % for a skill that did not run)"
        )
    errored = held_back(summary, settings)
    if not errored or report_path(summary, settings, now, several) is None:
        return None
    return (
        f"{plural(errored, 'scenario')} errored for reasons outside the skill (an "
        "endpoint, the judge, an agent CLI or the sandbox engine), so this report is not "
        "in evals/results/, where the catalogue would count it; --eval-publish-errors "
        "publishes it anyway"
    )


def with_report_decisions(
    summaries: Sequence[SkillSummary], settings: EvalSettings, now: datetime, rootdir: Path
) -> list[SkillSummary]:
    """The summaries, each with why its report is held back or not written
    (``report_held``), as decided for a run finished at ``now``."""
    several = len(summaries) > 1
    return [
        replace(summary, report_held=_held_reason(summary, settings, now, several))
        for summary in summaries
    ]


def report_namer(
    summary: SkillSummary,
    settings: EvalSettings,
    rootdir: Path,
    *,
    several: bool,
    prefix: str,
) -> Callable[[datetime], Path | None]:
    """The skill's report path for a time (None: no report is written), held back beside the
    run logs where :func:`with_report_decisions` decided so (``report_held``)."""
    if skill_broken(summary):
        return lambda moment: None
    if summary.report_held is None:
        return lambda moment: report_path(summary, settings, moment, several, prefix)
    return lambda moment: unpublished_report_path(summary, settings, moment, rootdir, prefix)
