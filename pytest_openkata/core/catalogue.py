"""What the skill catalogue shows per skill and model, from the skills' results JSON reports:
by the catalogue's own rule, and by this plugin's, which fixes the catalogue's bugs.

The catalogue is the reference's ``generate-versions --local`` (spec section 11). Its rule,
:attr:`Rule.CATALOGUE`, is taken as its program applies it:

- a skill is a real folder (not a symbolic link) directly under the skills root whose
  ``SKILL.md`` can be read;
- its current version is the last ``skills/<name>/v*`` git tag in git's version order (the text
  after the last ``/``, one leading ``v`` removed), else ``0.0.0``;
- a model is a real folder directly under ``evals/results/``, its name the model's id; the
  folders the Go runner nests for a model name with ``/`` are never found (``org/`` holds no
  report, ``org/model/`` is not looked at);
- the model's report is, among the entries of its folder that are not folders and whose names
  end in ``.json``, the one with the greatest name in byte order (so a ``results-….json`` beats
  every ``2026-….json``); no other file is read;
- when that report cannot be read or decoded the model is dropped. The spec's "a file that
  fails to decode is skipped" is the program moving on to the next *model folder*: the file was
  chosen by its name before it was read, so nothing stands in for it;
- when its ``skill_version`` is not the current version the model is dropped too (no fall back
  to an older report);
- ``effectiveness = int(overall_percentage + 0.5)``.

The plugin's rule, :attr:`Rule.PLUGIN`, differs where the catalogue's is a bug: a skill may be
a tile or a symbolic link; the current version falls back to the CHANGELOG's first released
version (a tile's ``version``) before ``0.0.0``; a model is every folder path under
``evals/results/`` that holds reports (``org/model``); its newest report is the one with the
greatest ``timestamp``; a report that cannot be decoded is skipped with a note and the next
newest stands in. The rest is as in the catalogue.

Both rules decode the same keys as Go's decoder reads them (see :func:`read_report`), the
plugin's rule also the ``timestamp``. :func:`rule_differences` says where the two rules would
show a skill or model differently, and why. :func:`splice_versions` writes the outcome into an
existing ``versions.json`` by replacing only the text of each skill's ``models`` value, so that
every other byte of the file stays.
"""

from __future__ import annotations

import enum
import json
import os
import re
import stat
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pytest_openkata.contracts.errors import OpenkataError
from pytest_openkata.core.report_paths import report_name_order
from pytest_openkata.core.tile import TILE_FILE, has_context, is_tile_dir
from pytest_openkata.core.versions import read_skill_version
from pytest_openkata.infra import gojson

__all__ = [
    "DEFAULT_VERSION",
    "Catalogue",
    "ModelReport",
    "ReportDecodeError",
    "ReportFacts",
    "Rule",
    "RuleDifference",
    "ScenarioOutcome",
    "SkillEntry",
    "SkillVersion",
    "SkippedReport",
    "VersionsFileError",
    "VersionsUpdate",
    "catalogue_document",
    "catalogue_report_files",
    "catalogue_skill_names",
    "current_version",
    "effectiveness",
    "latest_tag",
    "model_entry",
    "model_report_files",
    "models_value",
    "newest_report",
    "read_catalogue",
    "read_report",
    "read_skill",
    "rule_differences",
    "splice_versions",
    "stale_models",
]

DEFAULT_VERSION = "0.0.0"
_GIT_TIMEOUT = 60.0
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")  # a byte "surrogateescape" could not decode
_SKILL_FILE = "SKILL.md"
_GO_FOLDS = {"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"}


class Rule(enum.Enum):
    """Whose rule picks the skills, their versions and each model's report."""

    CATALOGUE = "the catalogue's rule"
    PLUGIN = "the plugin's rule"

    @property
    def other(self) -> Rule:
        return Rule.PLUGIN if self is Rule.CATALOGUE else Rule.CATALOGUE


# --- what the catalogue holds ----------------------------------------------------------------


@dataclass(frozen=True)
class SkillVersion:
    """A skill's current version and where it came from: ``git tag skills/x/v1.2.0``,
    ``CHANGELOG.md``, ``tile.json`` or ``default``."""

    version: str
    source: str


@dataclass(frozen=True)
class ScenarioOutcome:
    name: str
    description: str
    passed: bool


@dataclass(frozen=True)
class ReportFacts:
    """The keys of a results JSON that the catalogue reads; the rest of a report is ignored.
    The timestamp is read by the plugin's rule only."""

    path: Path
    skill_version: str
    timestamp: datetime | None
    overall_percentage: float
    label: str  # config.model_label, "" when missing
    scenarios: tuple[ScenarioOutcome, ...]

    @property
    def effectiveness(self) -> int:
        return effectiveness(self.overall_percentage)


@dataclass(frozen=True)
class SkippedReport:
    """A report file (or a model folder) that could not be read, and why."""

    path: Path
    reason: str


@dataclass(frozen=True)
class ModelReport:
    """The report a rule takes for a model; the model counts only when the report could be
    decoded and is for the current version."""

    model: str  # the folder's name (the catalogue) or path (the plugin) under evals/results/
    path: Path
    facts: ReportFacts | None  # None when the report cannot be read or decoded
    current_version: str
    problem: str = ""  # why there are no facts

    @property
    def counted(self) -> bool:
        return self.facts is not None and self.facts.skill_version == self.current_version

    @property
    def why_dropped(self) -> str | None:
        """Why the model is left out of the catalogue, or None when it counts."""
        if self.facts is None:
            return f"its report cannot be decoded: {self.problem}"
        if self.counted:
            return None
        found = self.facts.skill_version
        what = f"is for {found}" if found else "has no skill_version"
        return f"newest report {what}, current version is {self.current_version}"


@dataclass(frozen=True)
class SkillEntry:
    name: str
    version: SkillVersion
    models: tuple[ModelReport, ...]  # every model the rule finds a report for, sorted by id
    skipped: tuple[SkippedReport, ...]

    @property
    def counted(self) -> tuple[ModelReport, ...]:
        return tuple(model for model in self.models if model.counted)

    @property
    def dropped(self) -> tuple[ModelReport, ...]:
        return tuple(model for model in self.models if not model.counted)

    def model(self, model: str) -> ModelReport | None:
        return next((m for m in self.models if m.model == model), None)


@dataclass(frozen=True)
class Catalogue:
    root: Path
    rule: Rule
    skills: tuple[SkillEntry, ...]  # sorted by name

    @property
    def skipped(self) -> tuple[SkippedReport, ...]:
        return tuple(item for skill in self.skills for item in skill.skipped)

    def skill(self, name: str) -> SkillEntry | None:
        return next((s for s in self.skills if s.name == name), None)


class ReportDecodeError(OpenkataError):
    """A report file is not JSON, has a key of the wrong type or (for the plugin's rule) has no
    valid timestamp."""


# --- reading ---------------------------------------------------------------------------------


def effectiveness(overall_percentage: float) -> int:
    """The reference's rounding, halves up (62.5 -> 63), unlike the terminal's half-to-even."""
    return int(overall_percentage + 0.5)


def read_catalogue(root: Path, rule: Rule = Rule.CATALOGUE) -> Catalogue:
    """The skills under ``root`` as ``rule`` finds them, sorted by name: by the catalogue's,
    :func:`catalogue_skill_names`; by the plugin's, every folder holding SKILL.md or a tile's
    ``tile.json``."""
    root = Path(root)
    if rule is Rule.CATALOGUE:
        names = catalogue_skill_names(root)
    else:
        names = sorted(p.name for p in root.iterdir() if has_context(p))
    return Catalogue(root, rule, tuple(read_skill(root, name, rule) for name in names))


def catalogue_skill_names(root: Path) -> list[str]:
    """The real folders (not symbolic links) directly under ``root`` whose ``SKILL.md`` can be
    read, sorted: the skills the catalogue lists."""
    with os.scandir(root) as entries:
        folders = [e for e in entries if _is_real_folder(e)]
    return sorted(e.name for e in folders if _readable_file(Path(e.path) / _SKILL_FILE))


def read_skill(root: Path, name: str, rule: Rule = Rule.CATALOGUE) -> SkillEntry:
    version = current_version(root, name, rule)
    results = Path(root) / name / "evals" / "results"
    models: list[ModelReport] = []
    skipped: list[SkippedReport] = []
    if rule is Rule.CATALOGUE:
        files, skipped = catalogue_report_files(results)
        for model, path in files.items():
            try:
                models.append(ModelReport(model, path, read_report(path), version.version))
            except ReportDecodeError as exc:
                # The model is dropped, not given its next file: see the module's docstring.
                models.append(ModelReport(model, path, None, version.version, str(exc)))
                skipped.append(SkippedReport(path, str(exc)))
    else:
        for model, paths in model_report_files(results).items():
            newest, broken = newest_report(paths)
            skipped.extend(broken)
            if newest is not None:
                models.append(ModelReport(model, newest.path, newest, version.version))
    return SkillEntry(name, version, tuple(models), tuple(skipped))


def current_version(root: Path, name: str, rule: Rule = Rule.CATALOGUE) -> SkillVersion:
    """The highest ``skills/<name>/v*`` tag, else ``0.0.0``; by the plugin's rule, a tag that
    names no version is passed over, and CHANGELOG.md's first released version (a tile's
    ``version``) comes before ``0.0.0``."""
    tagged = latest_tag(root, name)
    if tagged is not None and (rule is Rule.CATALOGUE or tagged[1]):
        tag, version = tagged
        return SkillVersion(version, f"git tag {tag}")
    if rule is Rule.PLUGIN:
        released = read_skill_version(Path(root) / name)
        if released:
            return SkillVersion(
                released, TILE_FILE if is_tile_dir(Path(root) / name) else "CHANGELOG.md"
            )
    return SkillVersion(DEFAULT_VERSION, "default")


def latest_tag(root: Path, name: str) -> tuple[str, str] | None:
    """The last of ``git -C root tag -l 'skills/<name>/v*' --sort=version:refname`` and its
    version (after the last ``/``, one leading ``v`` removed, ``""`` for a tag ending in
    ``/v``), as the reference reads it; None without git, outside a repository or without such
    a tag."""
    command = ["git", "-C", str(root), "tag", "-l", f"skills/{name}/v*", "--sort=version:refname"]
    try:
        done = subprocess.run(
            command,
            check=False,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=_GIT_TIMEOUT,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.splitlines() if done.returncode == 0 else []
    if not lines or not lines[-1].strip():
        return None
    tag = lines[-1].strip()
    return tag, tag.rpartition("/")[2].removeprefix("v")


def catalogue_report_files(results: Path) -> tuple[dict[str, Path], list[SkippedReport]]:
    """Per real folder directly under ``results``, keyed by its name, the one report the
    catalogue reads: among the folder's entries that are not folders (a symbolic link is not
    one) and whose names end in ``.json``, the greatest name in byte order, as Go compares
    strings. A folder without such an entry is no model; one that cannot be listed is left out
    too (the catalogue does so silently, here it comes back as skipped)."""
    found: dict[str, Path] = {}
    skipped: list[SkippedReport] = []
    try:
        with os.scandir(results) as entries:
            folders = sorted((e for e in entries if _is_real_folder(e)), key=lambda e: e.name)
    except OSError:
        return found, skipped  # no results folder: no models
    for folder in folders:
        try:
            with os.scandir(folder.path) as entries:
                names = [
                    e.name
                    for e in entries
                    if e.name.endswith(".json") and not e.is_dir(follow_symlinks=False)
                ]
        except OSError as exc:
            skipped.append(SkippedReport(Path(folder.path), f"cannot list: {exc.strerror or exc}"))
            continue
        if names:
            found[folder.name] = Path(folder.path) / max(names, key=os.fsencode)
    return found, skipped


def model_report_files(results: Path) -> dict[str, list[Path]]:
    """The plugin's rule: the ``.json`` files of every folder under ``results``, keyed by the
    folder's path relative to it (posix), sorted; files directly in ``results`` belong to no
    model."""
    found: dict[str, list[Path]] = {}
    for folder, subfolders, files in os.walk(results):
        subfolders.sort()
        reports = sorted(f for f in files if f.endswith(".json"))
        model = Path(folder).relative_to(results).as_posix()
        if reports and model != ".":
            found[model] = [Path(folder) / f for f in reports]
    return dict(sorted(found.items()))


def newest_report(files: Iterable[Path]) -> tuple[ReportFacts | None, list[SkippedReport]]:
    """The plugin's rule: the report with the greatest ``timestamp`` (ties: the newest by its
    file name, as :func:`~pytest_openkata.core.report_paths.report_name_order` orders
    names, the rule of every other search for the newest report), and the files that could
    not be decoded."""
    decoded: list[ReportFacts] = []
    skipped: list[SkippedReport] = []
    for path in files:
        try:
            decoded.append(read_report(path, Rule.PLUGIN))
        except ReportDecodeError as exc:
            skipped.append(SkippedReport(path, str(exc)))
    newest = max(decoded, key=lambda r: (r.timestamp, _name_order(r.path)), default=None)
    return newest, skipped


def _name_order(path: Path) -> tuple[tuple[str, int], str]:
    """A report's place by its name: written as reports are named first, then any other."""
    return report_name_order(path.name) or ("", 0), path.name


def _is_real_folder(entry: os.DirEntry[str]) -> bool:
    """A folder as Go's ``DirEntry.IsDir`` sees it: a symbolic link to one is not."""
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _readable_file(path: Path) -> bool:
    """Whether ``path`` (a link followed) is a regular file that can be opened for reading."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return False
        with path.open("rb"):
            return True
    except OSError:
        return False


class _Fields(BaseModel):
    # Strict, as Go's decoder: a number in a string field is an error, not a conversion.
    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)

    @model_validator(mode="before")
    @classmethod
    def _as_gos_decoder_reads_it(cls, data: Any) -> Any:
        """Go's decoder leaves a field as it was for a JSON ``null``: here, its default (for a
        whole object too). A key without a field of its exact name goes to the field whose name
        it matches regardless of case (``Skill_Version``), as in Go; of several keys for one
        field, the last counts (exact or not)."""
        if data is None:
            return {}
        if not isinstance(data, dict):
            return data
        names = [field.alias or name for name, field in cls.model_fields.items()]
        fields: dict[str, Any] = {}
        for key, value in data.items():
            name = key if key in names else _folded_match(key, names)
            if name is not None and value is not None:
                fields[name] = value
        return fields


def _folded_match(key: str, names: Sequence[str]) -> str | None:
    """The field name (lower-case ASCII) that ``key`` matches regardless of case as Go's
    decoder folds names (``unicode.ToUpper(unicode.ToLower(r))``): ASCII letters, and the four
    letters outside ASCII that fold onto one (dotted and dotless i, the long s, the Kelvin sign);
    a sharp s is not ``ss``."""
    folded = "".join(_GO_FOLDS.get(c, c.lower() if c.isascii() else c) for c in key)
    return folded if folded in names else None


class _ScenarioFields(_Fields):
    name: str = ""
    description: str = ""
    passed: bool = Field(default=False, alias="pass")


class _ConfigFields(_Fields):
    model_label: str = ""


class _ReportFields(_Fields):
    """The keys the catalogue decodes; a missing key is its zero value, as in Go."""

    skill_version: str = ""
    # Go's decoder refuses NaN and infinities, so the reference skips such a report.
    overall_percentage: float = Field(default=0.0, allow_inf_nan=False)
    config: _ConfigFields = _ConfigFields()
    scenarios: list[_ScenarioFields] | None = None


class _TimedReportFields(_ReportFields):
    """The plugin's rule also needs the timestamp the newest report is told by."""

    timestamp: str


def read_report(path: Path, rule: Rule = Rule.CATALOGUE) -> ReportFacts:
    """Decode the keys the catalogue needs from any results JSON, ours or the Go runner's (and
    the timestamp, by the plugin's rule); raises :class:`ReportDecodeError` naming the field.

    As Go's decoder, each byte of the file that is not UTF-8 becomes U+FFFD rather than an
    error. Only a regular file is read: the catalogue would wait forever on a named pipe."""
    fields_type = _TimedReportFields if rule is Rule.PLUGIN else _ReportFields
    try:
        if not stat.S_ISREG(Path(path).stat().st_mode):
            raise ReportDecodeError("cannot read: not a regular file")
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ReportDecodeError(f"cannot read: {exc.strerror or exc}") from exc
    text = _ESCAPED_BYTE.sub("\ufffd", raw.decode("utf-8", errors="surrogateescape"))
    try:
        fields = fields_type.model_validate_json(text)
    except ValidationError as exc:
        raise ReportDecodeError(_first_error(exc)) from exc
    timestamp = fields.timestamp if isinstance(fields, _TimedReportFields) else None
    return ReportFacts(
        path=Path(path),
        skill_version=fields.skill_version,
        timestamp=_timestamp(timestamp) if timestamp is not None else None,
        overall_percentage=fields.overall_percentage,
        label=fields.config.model_label,
        scenarios=tuple(
            ScenarioOutcome(s.name, s.description, s.passed) for s in fields.scenarios or ()
        ),
    )


def _timestamp(text: str) -> datetime:
    """An RFC 3339 time with its offset (Go writes UTC, ``…Z``), comparable with any other."""
    try:
        if _RFC3339.fullmatch(text):
            return datetime.fromisoformat(text)
    except ValueError:
        pass
    raise ReportDecodeError(f"timestamp: not an RFC 3339 time: {text!r}")


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    return f"{where}: {error['msg']}" if where else str(error["msg"])


# --- what is shown ---------------------------------------------------------------------------


def model_entry(model: ModelReport | None) -> dict[str, object] | None:
    """A model's value in versions.json's ``models``, as generate-versions builds it; None when
    the model is not shown."""
    if model is None or model.facts is None or not model.counted:
        return None
    facts = model.facts
    scenarios = [
        {"name": s.name, "description": s.description, "pass": s.passed} for s in facts.scenarios
    ]
    return {
        "label": facts.label,
        "effectiveness": facts.effectiveness,
        "scenarios": scenarios or None,
    }


def models_value(skill: SkillEntry) -> dict[str, object] | None:
    """The skill's ``models`` value in versions.json; None when no model counts (the key is
    then left out)."""
    models = {model.model: model_entry(model) for model in skill.counted}  # sorted by id
    return dict(models) or None


def catalogue_document(catalogue: Catalogue) -> dict[str, object]:
    """``{"skills": {<name>: {"version", "models"?}}}``, keys in Go's order."""
    skills: dict[str, object] = {}
    for skill in catalogue.skills:
        entry: dict[str, object] = {"version": skill.version.version}
        models = models_value(skill)
        if models is not None:
            entry["models"] = models
        skills[skill.name] = entry
    return {"skills": dict(sorted(skills.items()))}


def stale_models(catalogue: Catalogue) -> list[tuple[SkillEntry, ModelReport]]:
    """Every model with reports that the catalogue drops: its report is not for its skill's
    current version (it comes back when the evals run again after the version bump), or
    cannot be decoded."""
    return [(skill, model) for skill in catalogue.skills for model in skill.dropped]


# --- where the two rules differ --------------------------------------------------------------


@dataclass(frozen=True)
class RuleDifference:
    """What the other rule would show for a skill (``model`` None: the skill's listing or
    version) or for one of its models, and why; ``text`` reads after "by <the other rule>: "."""

    skill: str
    model: str | None
    text: str


def rule_differences(shown: Catalogue, other: Catalogue) -> list[RuleDifference]:
    """Where ``other``, the same root read by the other rule, would show something else than
    ``shown``: a skill only one of them lists or at another version, and a model whose
    versions.json entry differs or that only one of them shows. A model neither shows is alike
    in both, whatever their reasons."""
    differences: list[RuleDifference] = []
    for name in sorted({s.name for s in shown.skills} | {s.name for s in other.skills}):
        shown_skill, other_skill = shown.skill(name), other.skill(name)
        if other_skill is None:
            why = _why_not_listed(other.root / name, other.rule)
            differences.append(RuleDifference(name, None, f"not listed ({why})"))
            continue
        version = f"version {other_skill.version.version} ({other_skill.version.source})"
        if shown_skill is None:
            why = _why_not_listed(shown.root / name, shown.rule)
            text = f"listed at {version}; {shown.rule.value} does not list it ({why})"
            differences.append(RuleDifference(name, None, text))
        elif shown_skill.version.version != other_skill.version.version:
            differences.append(RuleDifference(name, None, version))
        shown_models = shown_skill.models if shown_skill is not None else ()
        for model in sorted(
            {m.model for m in shown_models} | {m.model for m in other_skill.models}
        ):
            shown_model = shown_skill.model(model) if shown_skill is not None else None
            other_model = other_skill.model(model)
            if model_entry(shown_model) != model_entry(other_model):
                text = _model_difference(model, shown_model, other_model, other.rule)
                differences.append(RuleDifference(name, model, text))
    return differences


def _model_difference(
    model: str, shown: ModelReport | None, other: ModelReport | None, rule: Rule
) -> str:
    """What ``rule`` shows for the model (``other``) and why that is not what the other rule
    shows (``shown``)."""
    reasons: list[str] = []
    if shown is None or other is None:
        if "/" in model:
            reasons.append("a nested folder, which the catalogue does not read")
        else:
            blind = rule if other is None else rule.other
            reasons.append(f"{blind.value} can decode none of its reports")
    elif shown.path != other.path:
        picked = (
            "the newest report by timestamp"
            if rule is Rule.PLUGIN
            else "the report with the greatest file name"
        )
        reasons.append(f"{picked} is {other.path.name}, not {shown.path.name}")
    if other is None:
        outcome = f"{model}: not shown"
    elif other.facts is None or not other.counted:
        outcome = f"{model}: not counted: {other.why_dropped}"  # which names the version
    else:
        label = f' "{other.facts.label}"' if other.facts.label else ""
        outcome = f"{model}{label}: {other.facts.effectiveness}%"
        if shown is not None and shown.current_version != other.current_version:
            reasons.append(f"for version {other.current_version}")
    return f"{outcome} ({'; '.join(reasons)})" if reasons else outcome


def _why_not_listed(folder: Path, rule: Rule) -> str:
    """Why ``rule`` does not list the skill folder ``folder``."""
    if rule is Rule.PLUGIN:
        return f"no {_SKILL_FILE} or {TILE_FILE}"
    if folder.is_symlink():
        return "a symbolic link, and the catalogue lists only real folders"
    if not (folder / _SKILL_FILE).is_file():
        return f"no {_SKILL_FILE}"
    return f"its {_SKILL_FILE} cannot be read"


# --- versions.json ---------------------------------------------------------------------------


class VersionsFileError(OpenkataError):
    """The versions file is not JSON of the catalogue's shape; the message names the field."""


@dataclass(frozen=True)
class VersionsUpdate:
    """The new text of a versions file and what changed; skills only on one side are listed,
    never added or removed."""

    text: str
    added: tuple[str, ...]  # skills that had no models key
    replaced: tuple[str, ...]  # skills whose models changed
    removed: tuple[str, ...]  # skills whose models key went
    not_in_file: tuple[str, ...]
    not_under_root: tuple[str, ...]

    @property
    def changed(self) -> bool:
        return bool(self.added or self.replaced or self.removed)


class _ShapeSkill(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    version: str
    description: str = ""
    tags: list[str] | None = None
    models: dict[str, Any] | None = None


class _Shape(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    skills: dict[str, _ShapeSkill]


@dataclass(frozen=True)
class _Member:
    """Where one ``"key": value`` of an object is in the text."""

    key: str
    key_start: int
    value_start: int
    value_end: int


_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


def splice_versions(text: str, catalogue: Catalogue, source: str) -> VersionsUpdate:
    """Replace the ``models`` value of every skill both in the versions file ``text`` and in
    ``catalogue``: remove the key when no model counts, add it as the skill's last key when
    missing. Only those spans change, new lines ending as the file's do; ``source`` names the
    file in errors."""
    _check_shape(text, source)
    newline = "\r\n" if "\r\n" in text else "\n"
    members = {m.key: m for m in _members(text, _skip_space(text, 0))}
    skills = {m.key: m for m in _members(text, members["skills"].value_start)}
    by_name = {skill.name: skill for skill in catalogue.skills}
    edits: list[tuple[int, int, str]] = []
    added: list[str] = []
    replaced: list[str] = []
    removed: list[str] = []
    for name in sorted(skills.keys() & by_name.keys()):
        value = models_value(by_name[name])
        own = _members(text, skills[name].value_start)
        old = next((m for m in own if m.key == "models"), None)
        if old is None and value is not None:
            edits.append(_add_member(text, own[-1], "models", value, newline))
            added.append(name)
        elif old is not None and value is None:
            edits.append(_remove_member(own, own.index(old)))
            removed.append(name)
        elif old is not None and value is not None:
            new = _render(value, newline + _indent_of(text, old.key_start))
            if new != text[old.value_start : old.value_end]:
                edits.append((old.value_start, old.value_end, new))
                replaced.append(name)
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return VersionsUpdate(
        text=text,
        added=tuple(added),
        replaced=tuple(replaced),
        removed=tuple(removed),
        not_in_file=tuple(sorted(by_name.keys() - skills.keys())),
        not_under_root=tuple(sorted(skills.keys() - by_name.keys())),
    )


def _check_shape(text: str, source: str) -> None:
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys)
    except ValueError as exc:
        raise VersionsFileError(f"{source}: not JSON: {exc}") from exc
    try:
        _Shape.model_validate(data)
    except ValidationError as exc:
        raise VersionsFileError(f"{source}: not a versions file: {_first_error(exc)}") from exc


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A duplicate key would make "the" models value ambiguous; Go never writes one."""
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"duplicate key {key!r}")
        seen[key] = value
    return seen


def _skip_space(text: str, pos: int) -> int:
    match = _SPACE.match(text, pos)
    return match.end() if match else pos


def _members(text: str, start: int) -> list[_Member]:
    """The members of the object whose ``{`` is at ``start``, in the text's order. The text
    is known to be valid JSON, so each key and value is one ``raw_decode`` away."""
    if text[start] != "{":
        raise ValueError(f"no object at offset {start}")
    members: list[_Member] = []
    pos = _skip_space(text, start + 1)
    while text[pos] != "}":
        key, after_key = _DECODER.raw_decode(text, pos)
        value_start = _skip_space(text, _skip_space(text, after_key) + 1)  # past the ":"
        _, value_end = _DECODER.raw_decode(text, value_start)
        members.append(_Member(key, pos, value_start, value_end))
        pos = _skip_space(text, value_end)
        if text[pos] == ",":
            pos = _skip_space(text, pos + 1)
    return members


def _indent_of(text: str, pos: int) -> str:
    """The white space that starts the line of ``pos``; Go's depth-3 indent when something
    else is before it on its line (a compact file)."""
    line_start = text.rfind("\n", 0, pos) + 1
    prefix = text[line_start:pos]
    return prefix if not prefix.strip() else "      "


def _render(value: object, line_start: str) -> str:
    """``value`` as MarshalIndent writes it at a key whose line starts with ``line_start`` (the
    line end before it and the indent); its strings hold no raw line end to confuse this."""
    return gojson.dumps(value).rstrip("\n").replace("\n", line_start)


def _add_member(
    text: str, last: _Member, key: str, value: object, newline: str
) -> tuple[int, int, str]:
    line_start = newline + _indent_of(text, last.key_start)
    member = f",{line_start}{gojson.encode_string(key)}: {_render(value, line_start)}"
    return last.value_end, last.value_end, member


def _remove_member(members: Sequence[_Member], index: int) -> tuple[int, int, str]:
    """Cut the member with the separator that goes with it: the one before it, or after it
    when it is first."""
    member = members[index]
    if index > 0:
        return members[index - 1].value_end, member.value_end, ""
    # A skill object always keeps its "version", so the member has a next one.
    return member.key_start, members[index + 1].key_start, ""
