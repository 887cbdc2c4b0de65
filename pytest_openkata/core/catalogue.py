"""What the skill catalogue shows per skill and model, from the skills' results JSON reports.

The reference's ``generate-versions --local`` (spec section 11) turns each skill's newest
report per model into the site's ``versions.json``. These are its rules, with three of its
bugs fixed:

- a model is the folder path under ``evals/results/`` that holds reports, so the nested
  folders the Go runner makes for a model name with ``/`` are found (``org/model``);
- the newest report is the one with the greatest ``timestamp`` field, not the greatest file
  name (a ``results-….json`` name would always win);
- a report that cannot be decoded is skipped with a note rather than silently.

Kept as in the reference: only the newest report of a model counts, and only when it is for
the skill's current version (no fall back to an older matching report);
``effectiveness = int(overall_percentage + 0.5)``. The current version is the highest
``skills/<name>/v*`` git tag, then (a fallback the reference lacks) the CHANGELOG's first
released version, then ``0.0.0``.

:func:`splice_versions` writes the outcome into an existing ``versions.json`` by replacing
only the text of each skill's ``models`` value, so that every other byte of the file stays.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pytest_openkata.core.scenario import read_skill_version
from pytest_openkata.core.tile import TILE_FILE, has_context, is_tile_dir
from pytest_openkata.providers.reporters import gojson

__all__ = [
    "DEFAULT_VERSION",
    "Catalogue",
    "ModelReport",
    "ReportDecodeError",
    "ReportFacts",
    "ScenarioOutcome",
    "SkillEntry",
    "SkillVersion",
    "SkippedReport",
    "VersionsFileError",
    "VersionsUpdate",
    "catalogue_document",
    "current_version",
    "effectiveness",
    "latest_tag",
    "model_report_files",
    "models_value",
    "newest_report",
    "read_catalogue",
    "read_report",
    "read_skill",
    "splice_versions",
    "stale_models",
]

DEFAULT_VERSION = "0.0.0"
_GIT_TIMEOUT = 60.0
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")


# --- what the catalogue holds ----------------------------------------------------------------


@dataclass(frozen=True)
class SkillVersion:
    """A skill's current version and where it came from: ``git tag skills/x/v1.2.0``,
    ``CHANGELOG.md`` or ``default``."""

    version: str
    source: str


@dataclass(frozen=True)
class ScenarioOutcome:
    name: str
    description: str
    passed: bool


@dataclass(frozen=True)
class ReportFacts:
    """The keys of a results JSON that the catalogue reads; the rest of a report is ignored."""

    path: Path
    skill_version: str
    timestamp: datetime
    overall_percentage: float
    label: str  # config.model_label, "" when missing
    scenarios: tuple[ScenarioOutcome, ...]

    @property
    def effectiveness(self) -> int:
        return effectiveness(self.overall_percentage)


@dataclass(frozen=True)
class SkippedReport:
    """A report file that could not be decoded, and why."""

    path: Path
    reason: str


@dataclass(frozen=True)
class ModelReport:
    """A model's newest report for a skill; it counts only when it is for the current
    version."""

    model: str  # the folder path under evals/results/, posix
    newest: ReportFacts
    current_version: str

    @property
    def counted(self) -> bool:
        return self.newest.skill_version == self.current_version

    @property
    def why_dropped(self) -> str | None:
        """Why the model is left out of the catalogue, or None when it counts."""
        if self.counted:
            return None
        found = self.newest.skill_version
        what = f"is for {found}" if found else "has no skill_version"
        return f"newest report {what}, current version is {self.current_version}"


@dataclass(frozen=True)
class SkillEntry:
    name: str
    version: SkillVersion
    models: tuple[ModelReport, ...]  # every model with a decodable report, sorted by id
    skipped: tuple[SkippedReport, ...]

    @property
    def counted(self) -> tuple[ModelReport, ...]:
        return tuple(model for model in self.models if model.counted)

    @property
    def dropped(self) -> tuple[ModelReport, ...]:
        return tuple(model for model in self.models if not model.counted)


@dataclass(frozen=True)
class Catalogue:
    root: Path
    skills: tuple[SkillEntry, ...]  # sorted by name

    @property
    def skipped(self) -> tuple[SkippedReport, ...]:
        return tuple(item for skill in self.skills for item in skill.skipped)


class ReportDecodeError(Exception):
    """A report file is not JSON, has a key of the wrong type or has no valid timestamp."""


# --- reading ---------------------------------------------------------------------------------


def effectiveness(overall_percentage: float) -> int:
    """The reference's rounding, halves up (62.5 -> 63), unlike the terminal's half-to-even."""
    return int(overall_percentage + 0.5)


def read_catalogue(root: Path) -> Catalogue:
    """Every folder ``<root>/<name>/`` holding SKILL.md or a tile's ``tile.json``, sorted by
    name."""
    root = Path(root)
    names = sorted(p.name for p in root.iterdir() if has_context(p))
    return Catalogue(root, tuple(read_skill(root, name) for name in names))


def read_skill(root: Path, name: str) -> SkillEntry:
    version = current_version(root, name)
    models: list[ModelReport] = []
    skipped: list[SkippedReport] = []
    results = Path(root) / name / "evals" / "results"
    for model, files in model_report_files(results).items():
        newest, broken = newest_report(files)
        skipped.extend(broken)
        if newest is not None:
            models.append(ModelReport(model, newest, version.version))
    return SkillEntry(name, version, tuple(models), tuple(skipped))


def current_version(root: Path, name: str) -> SkillVersion:
    """The highest ``skills/<name>/v*`` tag, else CHANGELOG.md's first released version (a
    tile's ``version``), else ``0.0.0``."""
    tagged = latest_tag(root, name)
    if tagged is not None:
        tag, version = tagged
        return SkillVersion(version, f"git tag {tag}")
    released = read_skill_version(Path(root) / name)
    if released:
        return SkillVersion(
            released, TILE_FILE if is_tile_dir(Path(root) / name) else "CHANGELOG.md"
        )
    return SkillVersion(DEFAULT_VERSION, "default")


def latest_tag(root: Path, name: str) -> tuple[str, str] | None:
    """The last of ``git -C root tag -l 'skills/<name>/v*' --sort=version:refname`` and its
    version (after the last ``/``, one leading ``v`` removed), as the reference reads it; None
    without git, outside a repository or without such a tag."""
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
    version = tag.rpartition("/")[2].removeprefix("v")
    return (tag, version) if version else None


def model_report_files(results: Path) -> dict[str, list[Path]]:
    """The ``.json`` files of every folder under ``results``, keyed by the folder's path
    relative to it (posix), sorted; files directly in ``results`` belong to no model."""
    found: dict[str, list[Path]] = {}
    for folder, subfolders, files in os.walk(results):
        subfolders.sort()
        reports = sorted(f for f in files if f.endswith(".json"))
        model = Path(folder).relative_to(results).as_posix()
        if reports and model != ".":
            found[model] = [Path(folder) / f for f in reports]
    return dict(sorted(found.items()))


def newest_report(files: Iterable[Path]) -> tuple[ReportFacts | None, list[SkippedReport]]:
    """The report with the greatest ``timestamp`` (ties: the greatest file name), and the files
    that could not be decoded."""
    decoded: list[ReportFacts] = []
    skipped: list[SkippedReport] = []
    for path in files:
        try:
            decoded.append(read_report(path))
        except ReportDecodeError as exc:
            skipped.append(SkippedReport(path, str(exc)))
    newest = max(decoded, key=lambda r: (r.timestamp, r.path.name), default=None)
    return newest, skipped


class _Fields(BaseModel):
    # Strict, as Go's decoder: a number in a string field is an error, not a conversion.
    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)

    @model_validator(mode="before")
    @classmethod
    def _null_is_the_zero_value(cls, data: Any) -> Any:
        """Go's decoder leaves a field as it was for a JSON ``null``: here, its default."""
        if isinstance(data, dict):
            return {key: value for key, value in data.items() if value is not None}
        return data


class _ScenarioFields(_Fields):
    name: str = ""
    description: str = ""
    passed: bool = Field(default=False, alias="pass")


class _ConfigFields(_Fields):
    model_label: str = ""


class _ReportFields(_Fields):
    """A missing key is its zero value as in Go, except the timestamp the newest is told by."""

    skill_version: str = ""
    timestamp: str
    # Go's decoder refuses NaN and infinities, so the reference skips such a report.
    overall_percentage: float = Field(default=0.0, allow_inf_nan=False)
    config: _ConfigFields = _ConfigFields()
    scenarios: list[_ScenarioFields] | None = None


def read_report(path: Path) -> ReportFacts:
    """Decode the keys the catalogue needs from any results JSON, ours or the Go runner's;
    raises :class:`ReportDecodeError` naming the field."""
    try:
        fields = _ReportFields.model_validate_json(Path(path).read_bytes())
    except OSError as exc:
        raise ReportDecodeError(f"cannot read: {exc.strerror or exc}") from exc
    except ValidationError as exc:
        raise ReportDecodeError(_first_error(exc)) from exc
    return ReportFacts(
        path=Path(path),
        skill_version=fields.skill_version,
        timestamp=_timestamp(fields.timestamp),
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


def models_value(skill: SkillEntry) -> dict[str, object] | None:
    """The skill's ``models`` value in versions.json, as generate-versions builds it; None when
    no model counts (the key is then left out)."""
    models: dict[str, object] = {}
    for model in skill.counted:  # sorted by id, as Go writes a map
        newest = model.newest
        scenarios = [
            {"name": s.name, "description": s.description, "pass": s.passed}
            for s in newest.scenarios
        ]
        models[model.model] = {
            "label": newest.label,
            "effectiveness": newest.effectiveness,
            "scenarios": scenarios or None,
        }
    return models or None


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
    """Every model with reports whose newest is not for its skill's current version: the
    catalogue drops it until the evals run again after the version bump."""
    return [(skill, model) for skill in catalogue.skills for model in skill.dropped]


# --- versions.json ---------------------------------------------------------------------------


class VersionsFileError(Exception):
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
