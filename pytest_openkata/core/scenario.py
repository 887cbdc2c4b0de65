"""Skills and scenarios on disk: discovery, loading and validation.

Loading never raises anything but :class:`ScenarioLoadError`, whose message names the file
and the field, so that one broken scenario errors on its own and the others still run.
"""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pytest_openkata.core.build_context import context_digest, dockerfile_problem
from pytest_openkata.core.checks import (
    CHECK_TYPES,
    DEFAULT_COMMAND_TIMEOUT,
    DEFAULT_PATTERN_TIMEOUT,
    Check,
    workspace_path,
)
from pytest_openkata.core.files import LEADS_OUT, SkillReader, files_under
from pytest_openkata.core.jsonfiles import (
    VALIDATION_MESSAGES,
    ScenarioLoadError,
    go_keys,
    read_file,
    read_json,
    validation_error,
)
from pytest_openkata.core.scenario_setup import (
    SETUP_KEYS,
    DirectoryFixture,
    read_fixtures,
    read_setup,
)
from pytest_openkata.core.tile import is_tile_dir, load_tile

if TYPE_CHECKING:  # imported where a pattern is compiled
    import regex

SCENARIO_PREFIX = "scenario-"
SCENARIO_NAMES = "scenario-*"  # the default of the scenario_names setting: the reference's
CHECKS_FILE = "checks.json"
# What the run and lint say of an empty task.md and of a criterion without a description: the
# reference accepts both, and an agent then answers nothing, or a judge grades nothing.
EMPTY_TASK = "is empty: write there the prompt the agent is given"
# A key of scenario.json that reads as a misspelt "sandbox" (while "sandbox" itself is not
# there) leaves the scenario sandboxed whatever the key says: which kind it is, and so whether
# `-m direct` or `-m sandbox` takes it, cannot be trusted.
KIND_UNTRUSTED = (
    "Until it is fixed the scenario does not run: whether it runs in a sandbox cannot be trusted"
)
EMPTY_DESCRIPTION = (
    "must not be empty: say what the judge should find in the agent's work to give this "
    "criterion its points"
)


@dataclass(frozen=True)
class Criterion:
    """One entry of a scenario's weighted checklist (``criteria.json``)."""

    name: str
    description: str
    max_score: int
    category: str = ""  # Tessl's criterion category (INTENT, QUALITY, ...), or ""


DEFAULT_SIMULATED_TURNS = 5  # the most replies a simulated user gives, unless it says


@dataclass(frozen=True)
class SimulatedUser:
    """A model playing the user after the agent's answers (scenario.json's
    ``simulated_user``): its ``instructions`` say who the user is and what they want, and it
    replies at most ``max_turns`` times, stopping earlier when it says it is done."""

    instructions: str
    max_turns: int = DEFAULT_SIMULATED_TURNS


@dataclass(frozen=True)
class Scenario:
    skill_dir: Path
    path: Path
    description: str
    sandbox: bool
    network: str
    context: str
    criteria: tuple[Criterion, ...]
    trials: int | None = None  # scenario.json's own trial count, overriding the setting
    checks: tuple[Check, ...] = ()  # checks.json's deterministic checks
    # scenario.json's resources for its sandbox, overriding the settings (None: theirs).
    cpus: float | None = None
    memory_mb: int | None = None
    # scenario.json's scripted prompts sent after the first answer, in the same session, and
    # its simulated user, who replies after them.
    follow_ups: tuple[str, ...] = ()
    simulated_user: SimulatedUser | None = None
    # scenario.json's (Tessl's) fixtures copied into the sandbox's workspace and setup
    # commands run there before the agent starts (the workspace diff starts after both).
    fixtures: tuple[DirectoryFixture, ...] = ()
    setup: tuple[str, ...] = ()
    # scenario.json's own sandbox image, or its Dockerfile (a path in the scenario folder;
    # its folder is the build's context); neither: the sandbox.image setting's.
    image: str = ""
    dockerfile: str = ""
    # scenario.json's bound on the build of its Dockerfile, in seconds (None: the provider's).
    build_timeout: float | None = None
    # The bytes of task.md, criteria.json and checks.json as loading read them (those it
    # read), so that the run's digests and its task text need not read them again.
    contents: Mapping[str, bytes] = field(default_factory=dict, compare=False, repr=False)

    @property
    def name(self) -> str:
        return self.path.name


def is_scenario_dir(entry: Path) -> bool:
    """A real directory (not a symlink) named ``scenario-*``, as the reference decides."""
    return entry.name.startswith(SCENARIO_PREFIX) and entry.is_dir() and not entry.is_symlink()


def holds_scenario_files(entry: Path) -> bool:
    """A real directory holding ``task.md`` and ``criteria.json``, whatever its name."""
    return (
        entry.is_dir()
        and not entry.is_symlink()
        and (entry / "task.md").is_file()
        and (entry / "criteria.json").is_file()
    )


# How many levels of group folders may sit between ``evals`` and a scenario folder
# (``evals/<group>/<scenario>``); deeper folders are a project's own files, not scenarios.
GROUP_DEPTH = 5
# Folders under ``evals`` never looked into for scenarios (besides hidden ones).
NOT_GROUPS = frozenset({"node_modules", "__pycache__", "results"})


def scenario_candidates(evals_dir: Path) -> list[Path]:
    """The folders of an ``evals`` folder that are scenarios by the reference's rule
    (``scenario-*``) or by their files (``task.md`` and ``criteria.json``), in plain string
    order of their path below ``evals``. A folder that is neither is a group: its own folders
    are looked at the same way (up to :data:`GROUP_DEPTH` levels of groups), so that
    ``evals/<group>/<scenario>`` is found; a scenario folder is never looked into."""
    found: list[tuple[tuple[str, ...], Path]] = []
    _candidates_in(evals_dir, (), found)
    found.sort(key=lambda candidate: candidate[0])
    return [entry for _parts, entry in found]


def _candidates_in(
    folder: Path, parts: tuple[str, ...], found: list[tuple[tuple[str, ...], Path]]
) -> None:
    """Add the candidates under ``folder`` to ``found``, each with its path's parts below
    ``evals`` (``parts`` are the folder's), which order them."""
    # One listing, whose entries say without a system call each whether they are real folders
    # (collection asks this of every evals folder).
    try:
        with os.scandir(folder) as listing:
            folders = [entry.name for entry in listing if entry.is_dir(follow_symlinks=False)]
    except OSError:
        return
    for name in sorted(folders):
        entry = folder / name
        if name.startswith(SCENARIO_PREFIX) or holds_scenario_files(entry):
            found.append(((*parts, name), entry))
        elif len(parts) < GROUP_DEPTH and not name.startswith(".") and name not in NOT_GROUPS:
            _candidates_in(entry, (*parts, name), found)


def group_folders(evals_dir: Path) -> list[Path]:
    """The folders of an ``evals`` folder that :func:`scenario_candidates` looks into as
    groups (neither scenarios nor hidden), in order."""
    groups: list[Path] = []
    level = [evals_dir]
    for _depth in range(GROUP_DEPTH + 1):
        following = []
        for folder in level:
            try:
                with os.scandir(folder) as listing:
                    names = sorted(e.name for e in listing if e.is_dir(follow_symlinks=False))
            except OSError:
                continue
            for name in names:
                entry = folder / name
                if name.startswith((".", SCENARIO_PREFIX)) or name in NOT_GROUPS:
                    continue
                if not holds_scenario_files(entry):
                    following.append(entry)
        groups += following
        level = following
    return groups


def skill_of(scenario_dir: Path) -> Path:
    """The skill (or tile) folder of a scenario folder: the folder holding the ``evals``
    folder it sits in, directly or in group folders (``evals/<group>/<scenario>``); for a
    folder not below an ``evals`` folder, its grandparent."""
    parent = scenario_dir.parent
    if parent.name == "evals":  # the usual ``evals/<scenario>``, without walking the parents
        return parent.parent
    for depth, ancestor in enumerate(scenario_dir.parents):
        if depth > GROUP_DEPTH:
            break
        if ancestor.name == "evals":
            return ancestor.parent
    return scenario_dir.parent.parent


def scenario_name(scenario_dir: Path) -> str:
    """A scenario's name: its folder's name, with its group folders below ``evals`` before it
    (``group/scenario-a``) when it sits in groups."""
    evals = skill_of(scenario_dir) / "evals"
    try:
        return scenario_dir.relative_to(evals).as_posix()
    except ValueError:
        return scenario_dir.name


def name_matches(name: str, names: str) -> bool:
    """Whether a scenario folder's name matches one of ``names``' comma-separated globs."""
    return any(fnmatch.fnmatchcase(name, glob.strip()) for glob in names.split(",") if glob.strip())


def discover_scenarios(
    evals_dir: Path, names: str = SCENARIO_NAMES, candidates: list[Path] | None = None
) -> list[Path]:
    """The scenario folders a run takes from an ``evals`` folder, in the reference's plain
    string order: in a tile's every candidate, in a skill's those whose name matches
    ``names`` (the ``scenario_names`` setting; by default the reference's ``scenario-*``).
    ``candidates``: the folder's :func:`scenario_candidates` when the caller has them."""
    if candidates is None:
        candidates = scenario_candidates(evals_dir)
    if is_tile_dir(evals_dir.parent):
        return candidates
    return [entry for entry in candidates if name_matches(entry.name, names)]


def unselected_scenarios(evals_dir: Path, names: str = SCENARIO_NAMES) -> list[Path]:
    """The folders that look like scenarios but that ``names`` leaves out."""
    taken = set(discover_scenarios(evals_dir, names))
    return [entry for entry in scenario_candidates(evals_dir) if entry not in taken]


class CriterionModel(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    name: str = Field(min_length=1)
    description: str = ""
    max_score: int = Field(gt=0)
    category: str = ""


class CriteriaModel(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    context: str = ""
    type: str = ""
    checklist: list[CriterionModel]


class SimulatedUserModel(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    instructions: str = Field(min_length=1)
    max_turns: int = Field(default=DEFAULT_SIMULATED_TURNS, gt=0)


class ScenarioModel(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    description: str = ""
    sandbox: bool = True
    network: str = ""
    trials: int | None = Field(default=None, gt=0)
    # What the scenario's sandbox is given (None: the sandbox.cpus / sandbox.memory settings).
    # Docker refuses less than 6 MiB.
    cpus: float | None = Field(default=None, gt=0)
    memory_mb: int | None = Field(default=None, ge=6)
    follow_ups: list[str] = Field(default_factory=list)
    simulated_user: SimulatedUserModel | None = None
    # The scenario's own sandbox image, or the Dockerfile (in the scenario folder) it is
    # built from; the image must hold the agent CLI.
    image: str = ""
    dockerfile: str = ""
    # How long the build of the Dockerfile may take; a build past it is stopped.
    build_timeout_sec: float | None = Field(default=None, gt=0)

    @property
    def conversation(self) -> tuple[tuple[str, ...], SimulatedUser | None]:
        """The follow-up prompts and the simulated user, as a scenario holds them."""
        user = self.simulated_user
        simulated = None if user is None else SimulatedUser(user.instructions, user.max_turns)
        return tuple(self.follow_ups), simulated


def load_criteria(
    path: Path, *, allow_empty: bool = False, content: bytes | None = None
) -> tuple[str, tuple[Criterion, ...]]:
    """The context and checklist of a ``criteria.json`` (``content``: its bytes, when already
    read); the checklist may be empty only when ``allow_empty`` (a scenario whose
    ``checks.json`` holds checks), and every criterion needs a description (a judge cannot
    grade a name alone)."""
    raw = read_json(path, content)
    data = go_keys(raw, CriteriaModel.model_fields)
    if isinstance(data, Mapping) and isinstance(data.get("checklist"), list):
        data = {
            **data,
            "checklist": [go_keys(c, CriterionModel.model_fields) for c in data["checklist"]],
        }
    try:
        model = CriteriaModel.model_validate(data)
    except ValidationError as exc:
        raise validation_error(path, exc, data) from None
    if not model.checklist and not allow_empty:
        raise ScenarioLoadError(
            path,
            "must hold at least one criterion (or checks.json at least one check)",
            "checklist",
        )
    seen: set[str] = set()
    for index, item in enumerate(model.checklist):
        if item.name in seen:
            raise ScenarioLoadError(
                path, f"duplicate criterion name {item.name!r}", f"checklist[{index}].name"
            )
        seen.add(item.name)
    for index, item in enumerate(model.checklist):
        if not item.description.strip():
            field = f"checklist[{index}] ({item.name!r}).description"
            raise ScenarioLoadError(path, EMPTY_DESCRIPTION, field)
    criteria = tuple(
        Criterion(c.name, c.description, c.max_score, c.category) for c in model.checklist
    )
    return model.context, criteria


def load_scenario_options(path: Path, *, kind: bool = False) -> ScenarioModel:
    """``scenario.json``, the one reader of that file (keyword selection and the run both use
    it); a missing file means the defaults (a sandboxed scenario). With ``kind``, a key that
    misspells ``sandbox`` is an error too (see :data:`KIND_UNTRUSTED`): what runs or selects
    the scenario needs its kind."""
    if not path.exists():
        return ScenarioModel()
    return _read_scenario_options(path, kind=kind)


def sandbox_mode(scenario_dir: Path) -> str | None:
    """``"sandbox"`` or ``"direct"``, as the scenario will run; None when its scenario.json
    cannot be read or its kind cannot be trusted (the scenario then errors with the reason
    when it runs)."""
    try:
        options = load_scenario_options(scenario_dir / "scenario.json", kind=True)
    except ScenarioLoadError:
        return None
    return "sandbox" if options.sandbox else "direct"


def _read_scenario_options(path: Path, *, kind: bool) -> ScenarioModel:
    data = scenario_keys(read_json(path))
    try:
        options = ScenarioModel.model_validate(data)
    except ValidationError as exc:
        raise validation_error(path, exc, data) from None
    for index, prompt in enumerate(options.follow_ups):
        if not prompt.strip():
            raise ScenarioLoadError(
                path, "must not be empty: write the prompt sent", f"follow_ups[{index}]"
            )
    user = options.simulated_user
    if user is not None and not user.instructions.strip():
        raise ScenarioLoadError(
            path,
            "must not be empty: say who the user is and what they want",
            "simulated_user.instructions",
        )
    key = misspelt_sandbox_key(data) if kind else None
    if key is not None:
        raise ScenarioLoadError(path, f'unknown key; did you mean "sandbox"? {KIND_UNTRUSTED}', key)
    resource = next((r for r in RESOURCE_KEYS if getattr(options, r) is not None), None)
    if resource is not None and not options.sandbox:
        raise ScenarioLoadError(path, DIRECT_RESOURCES, resource)
    _check_own_image(path, options)
    return options


def _check_own_image(path: Path, options: ScenarioModel) -> None:
    """``image`` and ``dockerfile``: one of them, in a sandboxed scenario, the Dockerfile a
    file inside the scenario folder."""
    given = [key for key in IMAGE_KEYS if getattr(options, key)]
    if options.build_timeout_sec is not None and not options.dockerfile:
        raise ScenarioLoadError(path, BUILD_TIMEOUT_ALONE, "build_timeout_sec")
    if not given:
        return
    if not options.sandbox:
        raise ScenarioLoadError(path, DIRECT_IMAGE, given[0])
    if len(given) > 1:
        raise ScenarioLoadError(
            path, "give the image or the Dockerfile it is built from, not both", given[1]
        )
    if options.dockerfile:
        folder = path.parent
        problem = dockerfile_problem(folder, options.dockerfile)
        if problem is not None:
            raise ScenarioLoadError(path, problem, "dockerfile")
        context = folder.joinpath(*options.dockerfile.split("/")).parent
        try:
            context_digest(context, Path(options.dockerfile).name)
        except OSError as exc:
            shown = (context / str(exc.filename)).relative_to(folder).as_posix()
            raise ScenarioLoadError(
                path, f"{shown}: cannot be read ({exc.strerror})", "dockerfile"
            ) from None


IMAGE_KEYS = ("image", "dockerfile")
BUILD_TIMEOUT_ALONE = (
    "bounds the build of the scenario's Dockerfile, and the scenario names none: give "
    '"dockerfile", or remove the key'
)
DIRECT_IMAGE = (
    'a direct scenario runs no sandbox, so it has no image: remove the key, or set "sandbox": true'
)


RESOURCE_KEYS = ("cpus", "memory_mb")
DIRECT_RESOURCES = (
    "a direct scenario runs no sandbox, so it cannot be given CPUs or memory: remove the key, "
    'or set "sandbox": true'
)


def scenario_keys(data: Any) -> Any:
    """scenario.json's keys as Go's decoder matches them (:func:`go_keys`), those of its
    ``simulated_user`` object too."""
    data = go_keys(data, ScenarioModel.model_fields)
    if isinstance(data, Mapping) and isinstance(data.get("simulated_user"), Mapping):
        user = go_keys(data["simulated_user"], SimulatedUserModel.model_fields)
        data = {**data, "simulated_user": user}
    return data


def closest_key(key: str, known: Iterable[str]) -> str | None:
    """The known key an unknown one most likely misspells, or None."""
    close = difflib.get_close_matches(key.lower(), list(known), n=1)
    return close[0] if close else None


def misspelt_sandbox_key(data: Any) -> str | None:
    """The first key of scenario.json's object (its keys as ``go_keys`` leaves them) that
    misspells ``sandbox`` when ``sandbox`` itself is not there; None when there is none."""
    if not isinstance(data, Mapping) or "sandbox" in data:
        return None
    known = ScenarioModel.model_fields
    return next(
        (key for key in data if key not in known and closest_key(str(key), known) == "sandbox"),
        None,
    )


def read_description(scenario_dir: Path) -> str:
    """The description, for error results; ``""`` when scenario.json is absent or broken
    and there is no ``capability.txt``."""
    try:
        description = load_scenario_options(scenario_dir / "scenario.json").description
    except ScenarioLoadError:
        description = ""
    return description or read_capability(scenario_dir)


CAPABILITY_FILES = ("capability.txt", "capability.text")


def read_capability(scenario_dir: Path) -> str:
    """Tessl's one line of what a scenario tests (``capability.txt``), or ``""``: the
    scenario's description when ``scenario.json`` gives none."""
    for name in CAPABILITY_FILES:
        try:
            text = (scenario_dir / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        return " ".join(text.split())
    return ""


def has_categories(scenario_dir: Path, categories: tuple[str, ...]) -> bool:
    """Whether the scenario's criteria.json has a criterion of one of ``categories``; True
    when it cannot be read (the run then errors with the reason)."""
    try:
        _context, criteria = load_criteria(scenario_dir / "criteria.json", allow_empty=True)
    except ScenarioLoadError:
        return True
    return any(_in_categories(c, categories) for c in criteria)


def _in_categories(criterion: Criterion, categories: tuple[str, ...]) -> bool:
    """Categories match without regard to case: ``intent`` selects ``INTENT``."""
    return criterion.category.casefold() in {name.casefold() for name in categories}


def only_categories(scenario: Scenario, categories: tuple[str, ...]) -> Scenario:
    """The scenario with only the criteria of ``categories`` (every criterion when there are
    none). The checks of ``checks.json`` carry no category, so they are left out."""
    if not categories:
        return scenario
    criteria = tuple(c for c in scenario.criteria if _in_categories(c, categories))
    return replace(scenario, criteria=criteria, checks=())


def _entries(folder: Path) -> dict[str, os.DirEntry[str]]:
    """The folder's entries by name (none for a folder that cannot be listed): one listing
    instead of a system call for each file asked about."""
    try:
        with os.scandir(folder) as listing:
            return {entry.name: entry for entry in listing}
    except OSError:
        return {}


def _exists(entry: os.DirEntry[str] | None) -> bool:
    """Whether an entry is there, as ``Path.exists()`` says (a broken symlink is not)."""
    if entry is None:
        return False
    return not entry.is_symlink() or os.path.exists(entry.path)


def load_scenario(scenario_dir: Path) -> Scenario:
    """Load and validate a scenario folder ``<skill>/evals/<scenario>`` (or a tile's; or
    ``<skill>/evals/<group>/<scenario>``)."""
    skill_dir = skill_of(scenario_dir)
    reader = SkillReader(skill_dir)  # resolves the skill folder once for both checks below
    if is_tile_dir(skill_dir):
        load_tile(skill_dir)
    elif not (skill_dir / "SKILL.md").is_file():
        raise ScenarioLoadError(
            skill_dir / "SKILL.md", missing_skill_md(skill_dir), shown="SKILL.md"
        )
    elif not reader.is_inside(skill_dir / "SKILL.md"):
        raise ScenarioLoadError(skill_dir / "SKILL.md", LEADS_OUT, shown="SKILL.md")
    entries = _entries(scenario_dir)
    # pytest imports these as initial conftests when the scenario folder is given as an argument.
    traps = [
        scenario_dir / name for name in ("conftest.py", "__init__.py") if _exists(entries.get(name))
    ]
    traps += sorted(
        trap
        for name, entry in entries.items()
        if name.startswith("test")
        and entry.is_dir()
        and (trap := Path(entry.path, "conftest.py")).exists()
    )
    if traps:
        raise ScenarioLoadError(
            traps[0],
            "Python files directly in a scenario folder can be imported by pytest; "
            "move scenario files under inputs/",
        )
    fixtures: tuple[DirectoryFixture, ...] = ()
    setup: tuple[str, ...] = ()
    if _exists(entries.get("scenario.json")):
        options_path = scenario_dir / "scenario.json"
        options = _read_scenario_options(options_path, kind=True)
        fixtures, setup = workspace_setup(options_path, skill_dir, options.sandbox)
    else:
        options = ScenarioModel()
    task = entries.get("task.md")
    if task is None or not task.is_file():
        raise ScenarioLoadError(
            scenario_dir / "task.md", "file not found (every scenario needs a task.md)"
        )
    if not reader.is_inside(scenario_dir / "task.md"):
        raise ScenarioLoadError(scenario_dir / "task.md", LEADS_OUT)
    contents = {"task.md": _check_task(scenario_dir / "task.md")}
    checks: tuple[Check, ...] = ()
    if _exists(entries.get(CHECKS_FILE)):
        contents[CHECKS_FILE] = read_file(scenario_dir / CHECKS_FILE)
        checks = load_checks(
            scenario_dir / CHECKS_FILE, sandboxed=options.sandbox, content=contents[CHECKS_FILE]
        )
    contents["criteria.json"] = read_file(scenario_dir / "criteria.json")
    context, criteria = load_criteria(
        scenario_dir / "criteria.json", allow_empty=bool(checks), content=contents["criteria.json"]
    )
    clash = next((c.name for c in criteria if c.name in {k.name for k in checks}), None)
    if clash is not None:
        raise ScenarioLoadError(
            scenario_dir / CHECKS_FILE, f"check name {clash!r} is also a criterion of criteria.json"
        )
    return Scenario(
        skill_dir=skill_dir,
        path=scenario_dir,
        description=options.description or read_capability(scenario_dir),
        sandbox=options.sandbox,
        network=options.network,
        trials=options.trials,
        cpus=options.cpus,
        memory_mb=options.memory_mb,
        follow_ups=options.conversation[0],
        simulated_user=options.conversation[1],
        fixtures=fixtures,
        setup=setup,
        image=options.image,
        dockerfile=options.dockerfile,
        build_timeout=options.build_timeout_sec,
        context=context,
        criteria=criteria,
        checks=checks,
        contents=contents,
    )


DIRECT_SETUP = (
    "a direct scenario runs no sandbox, so nothing can be copied into or run in its workspace: "
    'remove the key, or set "sandbox": true'
)


def workspace_setup(
    path: Path, skill_dir: Path, sandboxed: bool
) -> tuple[tuple[DirectoryFixture, ...], tuple[str, ...]]:
    """scenario.json's ``fixtures`` and ``setup`` (:mod:`~pytest_openkata.core.scenario_setup`),
    its keys matched as the other keys are (:func:`scenario_keys`); either in a direct
    scenario is an error, as only a sandbox has a workspace to give them."""
    data = go_keys(read_json(path), SETUP_KEYS)
    if not isinstance(data, Mapping):
        return (), ()
    fixtures = read_fixtures(path, path.parent, data.get("fixtures"), root=skill_dir)
    setup = read_setup(path, data.get("setup"))
    if not sandboxed:
        given = next((k for k in SETUP_KEYS if data.get(k)), None)
        if given is not None:
            raise ScenarioLoadError(path, DIRECT_SETUP, given)
    return fixtures, setup


def shown_folder(folder: Path) -> str:
    """A folder as a message names it without the machine's folders: relative to the current
    folder when it is below it, else by its name."""
    try:
        shown = folder.absolute().relative_to(Path.cwd()).as_posix()
    except ValueError:
        return folder.name or str(folder)
    return shown if shown != "." else "the current folder"


def nearest_skill_md(folder: Path) -> Path | None:
    """The SKILL.md nearest to ``folder`` that is not its own: in one of its folders (then
    two levels down), else in the folder above; None when there is none."""
    for pattern in ("*/SKILL.md", "*/*/SKILL.md"):
        found = sorted(p for p in folder.glob(pattern) if "evals" not in p.parts[-3:-1])
        if found:
            return found[0]
    above = folder.parent / "SKILL.md"
    return above if above.is_file() else None


def missing_skill_md(skill_dir: Path) -> str:
    """Why a skill has no SKILL.md, naming the folder looked in and the nearest SKILL.md."""
    message = f"file not found in {shown_folder(skill_dir)} (every skill needs one)"
    nearest = nearest_skill_md(skill_dir)
    if nearest is not None:
        try:
            where = nearest.absolute().relative_to(Path.cwd()).as_posix()
        except ValueError:
            where = os.path.relpath(nearest, skill_dir.parent)
        message += f"; found {where}"
    return message


def _check_task(path: Path) -> bytes:
    """task.md's bytes, which must hold more than whitespace read as the prompt reads them."""
    try:
        content = path.read_bytes()
    except OSError as exc:
        raise ScenarioLoadError(path, f"cannot be read: {exc.strerror or exc}") from None
    if not content.decode("utf-8", errors="replace").strip():
        raise ScenarioLoadError(path, EMPTY_TASK)
    return content


# --- checks.json -------------------------------------------------------------------------------


class _CheckModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(min_length=1)
    description: str = ""
    max_score: int = Field(gt=0)
    category: str = ""
    type: str


class _CommandCheckModel(_CheckModel):
    run: str = Field(min_length=1)
    timeout: float = Field(default=DEFAULT_COMMAND_TIMEOUT, gt=0)


class _FileCheckModel(_CheckModel):
    path: str = Field(min_length=1)
    absent: bool = False


class _FileRegexCheckModel(_FileCheckModel):
    pattern: str = Field(min_length=1)
    timeout: float = Field(default=DEFAULT_PATTERN_TIMEOUT, gt=0)


class _OutputRegexCheckModel(_CheckModel):
    pattern: str = Field(min_length=1)
    absent: bool = False
    timeout: float = Field(default=DEFAULT_PATTERN_TIMEOUT, gt=0)


class _OutputExpressionCheckModel(_CheckModel):
    expression: str = Field(min_length=1)
    timeout: float = Field(default=DEFAULT_PATTERN_TIMEOUT, gt=0)  # of each pattern search


class _JsonSchemaCheckModel(_CheckModel):
    json_schema: dict[str, Any] = Field(alias="schema")
    path: str = ""


class _DiffCheckModel(_CheckModel):
    changed: list[str] = []
    unchanged: list[str] = []


class _SkillActivatedCheckModel(_CheckModel):
    activated: bool = True


class _ToolUsedCheckModel(_CheckModel):
    tool: str = Field(min_length=1)
    pattern: str = ""  # searched in the call's arguments; "" for any
    timeout: float = Field(default=DEFAULT_PATTERN_TIMEOUT, gt=0)


class _ToolSequenceCheckModel(_CheckModel):
    tools: list[str] = Field(min_length=1)
    order: Literal["exact", "in_order", "any_order"] = "in_order"


class _FileReadCheckModel(_CheckModel):
    path: str = Field(min_length=1)


class _LimitCheckModel(_CheckModel):
    limit: int = Field(alias="max", ge=0)


_CHECK_MODELS: dict[str, type[_CheckModel]] = {
    "command": _CommandCheckModel,
    "file": _FileCheckModel,
    "file_regex": _FileRegexCheckModel,
    "output_regex": _OutputRegexCheckModel,
    "output_expression": _OutputExpressionCheckModel,
    "json_schema": _JsonSchemaCheckModel,
    "diff": _DiffCheckModel,
    "skill_activated": _SkillActivatedCheckModel,
    "tool_used": _ToolUsedCheckModel,
    "tool_not_used": _ToolUsedCheckModel,
    "tool_sequence": _ToolSequenceCheckModel,
    "file_read": _FileReadCheckModel,
    "max_tool_calls": _LimitCheckModel,
    "max_turns": _LimitCheckModel,
    "max_tokens": _LimitCheckModel,
}
assert set(_CHECK_MODELS) == set(CHECK_TYPES)


def check_field(index: int, item: Any, key: str | int | None = None) -> str:
    name = item.get("name") if isinstance(item, Mapping) else None
    where = f"[{index}]" + (f" ({name!r})" if isinstance(name, str) and name else "")
    return where if key is None else f"{where}.{key}"


def _check_error(path: Path, index: int, item: Any, exc: ValidationError) -> ScenarioLoadError:
    errors = exc.errors()
    # A typo'd key first: it is also why the key it misspells is missing.
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = first["loc"]
    key = loc[0] if loc else None
    kind = first["type"]
    if kind == "greater_than" and key == "timeout":
        message = f"must be a positive number of seconds (got {json.dumps(first.get('input'))})"
    elif kind == "extra_forbidden":
        model = _CHECK_MODELS[item["type"]]
        known = [f.alias or name for name, f in model.model_fields.items()]
        close = difflib.get_close_matches(str(key), known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(known)}"
        message = f"unknown key for a check of type {item['type']}{hint}"
    elif kind in {"too_short", "string_too_short"}:
        message = "must not be empty"
    else:
        message = VALIDATION_MESSAGES.get(kind, first["msg"])
        if kind == "float_type":
            message = "must be a number of seconds"
        if kind != "missing":
            message += f" (got {json.dumps(first.get('input'))})"
    return ScenarioLoadError(path, message, check_field(index, item, key))


def _parsed_expression(path: Path, index: int, item: Any, expression: str) -> str:
    """An output_expression check's expression, once it parses as one Python expression."""
    from pytest_openkata.core import expressions  # here: it loads simpleeval

    try:
        expressions.parse(expression)
    except expressions.ExpressionError as exc:
        raise ScenarioLoadError(path, str(exc), check_field(index, item, "expression")) from None
    return expression


def _compiled_pattern(path: Path, index: int, item: Any, pattern: str) -> regex.Pattern[str]:
    """A check's pattern, compiled multiline; one that does not compile, or whose repeats
    would write out too much to compile (:mod:`pytest_openkata.core.patterns`), is the
    file's error at the check's ``pattern``."""
    import regex  # here: a run without patterns never needs it

    from pytest_openkata.core.patterns import PatternTooLarge, refuse_large_pattern

    where = check_field(index, item, "pattern")
    try:
        refuse_large_pattern(pattern)
    except PatternTooLarge as exc:
        raise ScenarioLoadError(path, str(exc), where) from None
    try:
        return regex.compile(pattern, regex.MULTILINE, cache_pattern=False)  # the check keeps it
    except regex.error as exc:
        raise ScenarioLoadError(path, f"not a valid regular expression: {exc}", where) from None


def check_of(path: Path, index: int, item: Any) -> Check:
    if not isinstance(item, Mapping):
        raise ScenarioLoadError(path, "must be an object", f"[{index}]")
    kind = item.get("type")
    if not isinstance(kind, str) or kind not in _CHECK_MODELS:
        got = "is required" if kind is None else f"unknown check type {json.dumps(kind)}"
        choose = f"{got}; choose one of: {', '.join(CHECK_TYPES)}"
        raise ScenarioLoadError(path, choose, check_field(index, item, "type"))
    try:
        model = _CHECK_MODELS[kind].model_validate(dict(item))
    except ValidationError as exc:
        raise _check_error(path, index, item, exc) from None
    values = model.model_dump(by_alias=False)
    fields: dict[str, Any] = {
        "name": model.name,
        "description": model.description,
        "max_score": model.max_score,
        "type": kind,
    }
    if kind == "command":
        fields["run"] = values["run"]
    if "timeout" in values:
        fields["timeout"] = float(values["timeout"])
    if "path" in values:
        fields["path"] = values["path"]
    if "absent" in values:
        fields["absent"] = values["absent"]
    if values.get("pattern"):
        fields["pattern"] = _compiled_pattern(path, index, item, values["pattern"])
    if kind == "output_expression":
        fields["expression"] = _parsed_expression(path, index, item, values["expression"])
    if kind == "json_schema":
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        try:
            Draft202012Validator.check_schema(values["json_schema"])
        except SchemaError as exc:
            raise ScenarioLoadError(
                path, f"not a valid JSON schema: {exc.message}", check_field(index, item, "schema")
            ) from None
        fields["schema"] = values["json_schema"]
    if kind == "skill_activated":
        fields["activated"] = values["activated"]
    if kind in ("tool_used", "tool_not_used"):
        fields["tool"] = values["tool"]
    if kind == "tool_sequence":
        fields.update(tools=tuple(values["tools"]), order=values["order"])
    if "limit" in values:
        fields["limit"] = values["limit"]
    if kind == "diff":
        if not values["changed"] and not values["unchanged"]:
            raise ScenarioLoadError(
                path, "a diff check needs changed or unchanged globs", check_field(index, item)
            )
        fields.update(
            changed=tuple(workspace_path(glob) for glob in values["changed"]),
            unchanged=tuple(workspace_path(glob) for glob in values["unchanged"]),
        )
    return Check(**fields)


def load_checks(path: Path, *, sandboxed: bool, content: bytes | None = None) -> tuple[Check, ...]:
    """The checks of a ``checks.json`` (a list of check objects; ``content``: its bytes, when
    already read). Checks that read the workspace need a sandboxed scenario: in a direct one
    they are an error, as is any bad key, type, pattern or schema, and a name given twice."""
    data = read_json(path, content)
    if not isinstance(data, list):
        raise ScenarioLoadError(path, "must be a list of checks", "(top level)")
    checks: list[Check] = []
    for index, item in enumerate(data):
        check = check_of(path, index, item)
        if any(c.name == check.name for c in checks):
            raise ScenarioLoadError(
                path, f"duplicate check name {check.name!r}", check_field(index, item, "name")
            )
        if check.reads_workspace and not sandboxed:
            what = (
                "json_schema check with a path"
                if check.type == "json_schema"
                else f"{check.type} check"
            )
            raise ScenarioLoadError(
                path,
                f"a {what} reads the workspace, which only a sandboxed scenario has "
                '(scenario.json: "sandbox": true)',
                check_field(index, item, "path" if check.type == "json_schema" else "type"),
            )
        checks.append(check)
    return tuple(checks)


DIGESTED_FILES = {"task": "task.md", "criteria": "criteria.json", "checks": CHECKS_FILE}


def scenario_digests(
    scenario_dir: Path, prompt: str, contents: Mapping[str, bytes] | None = None
) -> dict[str, str]:
    """sha256 of what one arm of a scenario ran: its prompt, and its task, criteria, checks
    and inputs on disk (a missing file is left out), so that a comparison of two runs can
    tell a scenario whose task, criteria or inputs changed from one whose agent did.
    ``contents`` holds files by name as loading read them (:attr:`Scenario.contents`); the
    others are read here."""
    digests = {"prompt": hashlib.sha256(prompt.encode()).hexdigest()}
    for key, name in DIGESTED_FILES.items():
        content = None if contents is None else contents.get(name)
        if content is None:
            try:
                content = (scenario_dir / name).read_bytes()
            except OSError:
                continue
        digests[key] = hashlib.sha256(content).hexdigest()
    inputs = hashlib.sha256()
    for rel, path in files_under(scenario_dir / "inputs"):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        inputs.update(f"{rel}\0{hashlib.sha256(data).hexdigest()}\0".encode())
    digests["inputs"] = inputs.hexdigest()
    return digests
