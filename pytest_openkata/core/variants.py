"""Tessl's variants ("arms") file: the arms of a run, each with or without the skill.

Tessl's ``tessl eval run --arms-json FILE`` takes a JSON array of arms; each arm is an
object with a ``label`` and, all optional, the ``agent`` and ``model`` it runs with,
``includeContext`` (whether the skill is there at all), ``forceContextActivation`` (a fixed
line telling the agent to use the skills it has; on by default where the context is) and
``fixtures``: by name, ``{"localPath": "./a/copy"}``, the folders the context is installed
from (a copy of the skill or of the plugin holding it, such as a rewrite being tried).

A run of this plugin has two arms (:mod:`pytest_openkata.core.arms`), so the ``variants``
setting names the file and two of its variants become the arms:

- the run's own arm is the variant ``variant`` names (a label the file lacks is a bad
  setting), else the first whose context is included and that can run here;
- the baseline arm is the variant ``baseline`` names by its label, else (without a
  ``baseline``) the first variant without the context that runs with the own variant's
  agent and model, the run's where a variant names none; ``baseline`` none switches it off.
  An arm's name is its label, so the reports show the labels. ``baseline`` ``same`` runs
  the own variant twice (an A/A run); ``without-skill`` and a git ref keep their meaning,
  and no variant may be labelled with a name that means an arm.

A variant's skill is the skill folder itself, nowhere (``includeContext: false``, which
``"fixtures": {}`` means by default, as in Tessl's demos) or the copy one of its fixtures
holds: the fixture folder itself, or its ``skills/<name>`` or ``<name>``, named as the skill
by its folder or its SKILL.md front matter, of the skill's kind; the only fixture of a run of
one skill whatever its name. A fixture from Tessl's registry (``definition``) cannot be
installed here: only its variant cannot be an arm. A run has one agent and one agent model,
so a variant's ``agent`` and ``model`` must be the run's: a variant of another agent or
model is a run of its own. What cannot be honoured is an error naming the file, the
variant's label and the key, with paths relative to the rootdir; a key this plugin does not
know is a warning. Paths are relative to the folder the run starts in (the rootdir), as
Tessl's are to the folder its command runs in.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.contracts.errors import ConfigError
from pytest_openkata.core.arms import RESERVED_NAMES, SAME, Arm, ArmError
from pytest_openkata.core.tile import TILE_FILE, has_context, is_tile_dir
from pytest_openkata.core.versions import skill_front_matter

__all__ = [
    "ACTIVATION_LINE",
    "Variant",
    "VariantPlan",
    "VariantsError",
    "VariantsFile",
    "plan_variants",
    "read_variants",
    "run_variants",
    "shown_path",
]

ACTIVATION_LINE = (
    "Skills are installed where you look for them. Before you start, check which of them "
    "apply to this task and use those that do."
)
"""What ``forceContextActivation`` adds before the task when the skill is installed where the
agent discovers it (with the skill pasted into the prompt, the skill is there already)."""

_VARIANT_KEYS = frozenset(
    {"label", "agent", "model", "includeContext", "forceContextActivation", "fixtures"}
)
_FIXTURE_KEYS = frozenset({"localPath"})
# Tessl's fixture from its registry (``{"definition": {"type": "plugin", "name": ...}}``):
# known, and not installable here.
_REGISTRY_FIXTURE = "definition"
_MAX_LABEL = 100


class VariantsError(ArmError):
    """A variants file that cannot be read, or a variant that cannot be run as it is."""


@dataclass(frozen=True)
class Variant:
    """One arm of a variants file: ``fixtures`` holds each fixture's name and its
    ``localPath`` as written."""

    label: str
    agent: str = ""
    model: str = ""
    include_context: bool = True
    force_activation: bool = True
    fixtures: tuple[tuple[str, str], ...] = ()
    # Why this variant cannot be an arm here (a fixture from Tessl's registry), or "": the
    # rest of the file still runs.
    unsupported: str = ""


@dataclass(frozen=True)
class VariantsFile:
    """A read variants file: ``shown`` is how messages name it (as the setting gives it),
    ``warnings`` what it holds that this plugin does not know."""

    shown: str
    variants: tuple[Variant, ...]
    warnings: tuple[str, ...] = ()

    def labelled(self, label: str) -> Variant | None:
        return next((v for v in self.variants if v.label == label), None)


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    if value is None:
        return "null"
    return "a number"


def _text(raw: Mapping[str, Any], key: str, where: str, shown: str) -> str:
    """A string value, printable (every message and report may show it)."""
    value = raw.get(key, "")
    if not isinstance(value, str):
        raise VariantsError(f"{shown}: {where}.{key}: must be a string, not {_kind(value)}")
    if not value.isprintable():
        raise VariantsError(f"{shown}: {where}.{key}: must hold printable characters only")
    return value.strip()


def _flag(raw: Mapping[str, Any], key: str, where: str, shown: str, default: bool) -> bool:
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise VariantsError(f"{shown}: {where}.{key}: must be true or false, not {_kind(value)}")
    return value


def _label(raw: Mapping[str, Any], where: str, shown: str) -> str:
    if "label" not in raw:
        raise VariantsError(f"{shown}: {where}.label: missing (every variant needs a label)")
    label = _text(raw, "label", where, shown)
    if not label:
        raise VariantsError(f"{shown}: {where}.label: must not be empty")
    if len(label) > _MAX_LABEL or label.startswith("-") or not label.isprintable():
        raise VariantsError(
            f"{shown}: {where}.label: must be printable, at most {_MAX_LABEL} characters and "
            "not start with '-'"
        )
    if any(char.isspace() for char in label):
        raise VariantsError(f"{shown}: {where}.label: must not hold white space")
    if label.casefold() in RESERVED_NAMES:
        reserved = ", ".join(sorted(RESERVED_NAMES))
        raise VariantsError(
            f"{shown}: {where}.label: {label!r} is reserved: it names an arm, or no baseline, "
            f"wherever arms are named ({reserved})"
        )
    return label


def _fixtures(
    raw: Mapping[str, Any], where: str, shown: str, warnings: list[str]
) -> tuple[tuple[tuple[str, str], ...], str]:
    """The variant's local fixtures, and why it cannot run here (a registry fixture) or ""."""
    value = raw.get("fixtures", {})
    if not isinstance(value, dict):
        raise VariantsError(f"{shown}: {where}.fixtures: must be an object, not {_kind(value)}")
    found = []
    unsupported = ""
    for name, fixture in value.items():
        if not name.isprintable() or len(name) > _MAX_LABEL:
            raise VariantsError(
                f"{shown}: {where}.fixtures: a fixture's name must be printable and at most "
                f"{_MAX_LABEL} characters"
            )
        at = f"{where}.fixtures.{name}"
        if not isinstance(fixture, dict):
            raise VariantsError(f"{shown}: {at}: must be an object, not {_kind(fixture)}")
        if "localPath" not in fixture and _REGISTRY_FIXTURE in fixture:
            unsupported = unsupported or (
                f"fixtures.{name}.{_REGISTRY_FIXTURE}: a fixture from Tessl's registry cannot be "
                "installed here (only a local folder, localPath)"
            )
            continue
        if "localPath" not in fixture:
            raise VariantsError(
                f"{shown}: {at}.localPath: missing (a fixture is a local folder to install)"
            )
        path = _text(fixture, "localPath", at, shown)
        if not path:
            raise VariantsError(f"{shown}: {at}.localPath: must not be empty")
        warnings.extend(
            f"{shown}: {at}.{key}: unknown key, ignored"
            for key in fixture
            if key not in _FIXTURE_KEYS
        )
        found.append((str(name), path))
    return tuple(found), unsupported


def _variant(raw: object, index: int, shown: str, warnings: list[str]) -> Variant:
    where = f"[{index}]"
    if not isinstance(raw, dict):
        raise VariantsError(f"{shown}: {where}: a variant must be an object, not {_kind(raw)}")
    label = _label(raw, where, shown)
    where = f"[{index}] ({label})"
    # Tessl's demos write an arm without the context as ``"fixtures": {}``: no fixture to
    # install is no context, unless includeContext says otherwise.
    include = _flag(raw, "includeContext", where, shown, raw.get("fixtures") != {})
    fixtures, unsupported = _fixtures(raw, where, shown, warnings)
    variant = Variant(
        label=label,
        agent=_text(raw, "agent", where, shown),
        model=_text(raw, "model", where, shown),
        include_context=include,
        force_activation=_flag(raw, "forceContextActivation", where, shown, include),
        fixtures=fixtures,
        unsupported=unsupported if include else "",
    )
    warnings.extend(
        f"{shown}: {where}.{key}: unknown key, ignored" for key in raw if key not in _VARIANT_KEYS
    )
    if variant.unsupported:
        warnings.append(f"{shown}: {where}.{variant.unsupported}; this variant cannot be an arm")
    if not include and (variant.fixtures or unsupported):
        warnings.append(f"{shown}: {where}.fixtures: not installed, as includeContext is false")
    elif len(variant.fixtures) > 1:
        warnings.append(
            f"{shown}: {where}.fixtures: only the one that holds the skill evaluated is "
            f"installed, not the other {len(variant.fixtures) - 1}"
        )
    return variant


def read_variants(path: Path, shown: str) -> VariantsFile:
    """The variants of the file at ``path`` (``shown``: how messages name it). Raises
    :class:`VariantsError` naming the file and the key of the first problem."""
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise VariantsError(f"{shown}: no such file (the variants setting names it)") from None
    except OSError as exc:
        raise VariantsError(f"{shown}: cannot be read: {exc.strerror or exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise VariantsError(f"{shown}: not valid JSON: {exc}") from None
    except RecursionError:
        raise VariantsError(f"{shown}: nested too deeply to be a variants file") from None
    if not isinstance(data, list):
        raise VariantsError(f"{shown}: must be an array of variants, not {_kind(data)}")
    if not data:
        raise VariantsError(f"{shown}: holds no variant")
    warnings: list[str] = []
    variants = tuple(_variant(raw, index, shown, warnings) for index, raw in enumerate(data))
    seen: set[str] = set()
    for index, variant in enumerate(variants):
        if variant.label in seen:
            raise VariantsError(
                f"{shown}: [{index}].label: {variant.label!r} is the label of an earlier variant"
            )
        seen.add(variant.label)
    return VariantsFile(shown, variants, tuple(warnings))


def _expanded(text: str) -> Path:
    """``text`` as a path, ``~`` expanded where it names a known home (as written else)."""
    try:
        return Path(text).expanduser()
    except RuntimeError:  # ~someone: no such user
        return Path(text)


def _is_folder(path: Path) -> bool:
    try:
        return path.is_dir()
    except (OSError, ValueError):  # a name too long, a NUL
        return False


def shown_path(text: str, root: Path) -> str:
    """How a message names a path a setting or the file gives: as written when relative,
    else relative to ``root`` (the rootdir); never a machine path outside it."""
    path = _expanded(text)
    if not path.is_absolute():
        return text
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except (OSError, RuntimeError, ValueError):
        return f"<outside the rootdir>/{path.name}"


def _front_matter_name(folder: Path) -> str:
    """The ``name`` of the YAML front matter of ``folder``'s SKILL.md, or ``""``."""
    name = skill_front_matter(folder).get("name")
    return name.strip() if isinstance(name, str) else ""


def _context_kind(folder: Path) -> str:
    """``tile`` or ``skill``: what a copy of the context of ``folder`` must be."""
    return "tile" if is_tile_dir(folder) else "skill"


def _holds(kind: str, folder: Path) -> bool:
    if kind == "tile":
        return (folder / TILE_FILE).is_file() or is_tile_dir(folder)
    return (folder / "SKILL.md").is_file()


_KIND_FILE = {"tile": TILE_FILE, "skill": "SKILL.md"}


@dataclass(frozen=True)
class VariantPlan:
    """The two variants that are a run's arms, and what each scenario's arms are checked
    against: the run's agent model, its agent backend and its sandboxed agent CLI, and the
    folder the fixtures' paths are relative to. ``skill_count`` is how many skills the run
    evaluates, once known (0: not known): only in a run of one skill may a variant's only
    fixture stand for a skill of another name."""

    file: VariantsFile
    own: Variant
    baseline: Variant | None
    root: Path
    model: str
    backend: str
    sandbox_agent: str
    prompt_delivery: bool
    # The baseline arm's name: its variant's label, or ``same`` for an A/A run of the own
    # variant.
    baseline_name: str = ""
    skill_count: int = 0

    def arms(self, skill_dir: Path, *, sandboxed: bool) -> tuple[Arm, Arm | None]:
        """The own arm and the baseline arm (None: the run has none from the file) of the
        skill of ``skill_dir``. Raises :class:`VariantsError`."""
        own = self._arm("", self.own, skill_dir, sandboxed)
        baseline = self.baseline
        if baseline is None:
            return own, None
        return own, self._arm(self.baseline_name, baseline, skill_dir, sandboxed)

    def _arm(self, name: str, variant: Variant, skill_dir: Path, sandboxed: bool) -> Arm:
        where = f"{self.file.shown}: variant {variant.label!r}"
        agent = self.sandbox_agent if sandboxed else self.backend
        if variant.agent and variant.agent != agent:
            raise VariantsError(
                f"{where}: agent: {variant.agent} is not this run's agent ({agent}); a run has "
                f"one agent: run this variant as a run of its own with --eval-variant "
                f"{variant.label} and {'--eval-sandbox-agent' if sandboxed else '--eval-backend'} "
                f"{variant.agent}"
            )
        if variant.model and variant.model != self.model:
            raise VariantsError(
                f"{where}: model: {variant.model} is not this run's agent model ({self.model}); "
                f"a run has one agent model: run this variant as a run of its own with "
                f"--eval-variant {variant.label} and --eval-model {variant.model}"
            )
        if not variant.include_context:
            return Arm(name, False, label=variant.label)
        if variant.unsupported:
            raise VariantsError(f"{where}: {variant.unsupported}")
        if not variant.force_activation and self.prompt_delivery:
            raise VariantsError(
                f"{where}: forceContextActivation: false needs the skill installed where the "
                "agent discovers it (--eval-skill-delivery installed): pasted into the prompt, "
                "the skill is always in use"
            )
        skill: Path | bool = True
        if variant.fixtures:
            skill = self._fixture_skill(where, variant, skill_dir)
        return Arm(
            name,
            skill,
            label=variant.label,
            activation=variant.force_activation and not self.prompt_delivery,
        )

    def _fixture_skill(self, where: str, variant: Variant, skill_dir: Path) -> Path:
        """The copy of the skill one of the variant's fixtures holds: of the skill's kind (a
        skill's SKILL.md, a tile's tile.json), in a folder of the skill's name or with the
        skill's name in its SKILL.md; the only fixture of a run of one skill, whatever its
        name."""
        name = skill_dir.name
        kind = _context_kind(skill_dir)
        names = {name, _front_matter_name(skill_dir)} - {""}
        looked = []
        wrong = ""
        for fixture, local in variant.fixtures:
            shown = shown_path(local, self.root)
            folder = self.root / _expanded(local)
            if not _is_folder(folder):
                raise VariantsError(
                    f"{where}: fixtures.{fixture}.localPath: {shown} is not a folder (paths "
                    "are relative to the rootdir)"
                )
            for candidate in (folder, folder / "skills" / name, folder / name):
                named = candidate.name == name or _front_matter_name(candidate) in names
                if named and _holds(kind, candidate):
                    return candidate
                if named and has_context(candidate) and not wrong:
                    other = "tile" if kind == "skill" else "skill"
                    inside = candidate.relative_to(folder).as_posix()
                    at = shown if inside == "." else f"{shown.rstrip('/')}/{inside}"
                    wrong = (
                        f"{where}: fixtures.{fixture}: {at} holds a {other} "
                        f"({_KIND_FILE[other]}) where the {kind} {name} needs a {kind} "
                        f"({_KIND_FILE[kind]})"
                    )
            looked.append(f"fixtures.{fixture} ({shown})")
        if wrong:
            raise VariantsError(wrong)
        if len(variant.fixtures) == 1:
            fixture, local = variant.fixtures[0]
            only = self.root / _expanded(local)
            if _holds(kind, only):
                if self.skill_count == 1:  # one copy of the run's only skill
                    return only
                called = _front_matter_name(only) or only.name
                raise VariantsError(
                    f"{where}: fixtures.{fixture}: {shown_path(local, self.root)} holds the "
                    f"{kind} {called}, not {name}: a fixture of another name stands for a "
                    f"skill only in a run of one skill (name the copy's folder, or its SKILL.md "
                    f"name, {name})"
                )
            if has_context(only):
                other = "tile" if kind == "skill" else "skill"
                raise VariantsError(
                    f"{where}: fixtures.{fixture}: {shown_path(local, self.root)} holds a "
                    f"{other} ({_KIND_FILE[other]}) where the {kind} {name} needs a {kind} "
                    f"({_KIND_FILE[kind]})"
                )
        raise VariantsError(
            f"{where}: fixtures: none holds the skill {name} (looked in "
            f"{', '.join(looked)}, their skills/{name} and {name} folders)"
        )


def _same_run(one: Variant, other: Variant, *, model: str, agents: tuple[str, ...]) -> bool:
    """Whether two variants can be arms of one run of agent model ``model`` and agents
    ``agents`` (the backend, the sandboxed agent CLI): each runs with the run's model, and
    agent, where it names none."""
    if (one.model or model) != (other.model or model):
        return False
    if one.agent and other.agent:
        return one.agent == other.agent
    return all(agent in agents for agent in (one.agent, other.agent) if agent)


def plan_variants(
    file: VariantsFile,
    *,
    variant: str,
    baseline: str,
    root: Path,
    model: str,
    backend: str,
    sandbox_agent: str,
    prompt_delivery: bool,
    no_baseline: bool = False,
) -> VariantPlan:
    """The run's arms from ``file``: the own arm is the variant ``variant`` labels (else the
    first with the context that can run here); the baseline the variant ``baseline`` labels,
    else, when no baseline is set (``no_baseline``: set to none), the first other variant
    without the context that runs with the own variant's agent and model (the run's, where a
    variant names none). Raises :class:`~pytest_openkata.contracts.errors.ConfigError` for a
    ``variant`` the file does not have, :class:`VariantsError` for a file that gives no own
    arm."""
    labels = ", ".join(v.label for v in file.variants)
    if variant:
        own = file.labelled(variant)
        if own is None:
            raise ConfigError(
                f"{file.shown}: no variant is labelled {variant!r} (the variant setting); "
                f"its labels: {labels}"
            )
    else:
        own = next((v for v in file.variants if v.include_context and not v.unsupported), None)
        if own is None:
            raise VariantsError(
                f"{file.shown}: no variant that can run here includes the context "
                f"(includeContext); name the run's own arm with --eval-variant, one of: {labels}"
            )
    other: Variant | None
    if baseline:
        other = file.labelled(baseline)  # None: without-skill or a git ref
        if other is None and baseline == SAME:  # an A/A run of the own variant
            other = own
    elif no_baseline:
        other = None
    else:
        agents = (backend, sandbox_agent)
        other = next(
            (
                v
                for v in file.variants
                if not v.include_context
                and v.label != own.label
                and _same_run(v, own, model=model, agents=agents)
            ),
            None,
        )
    if other is not None and other.label == own.label and baseline != SAME:
        raise VariantsError(
            f"{file.shown}: the variant {own.label!r} cannot be both arms of the run (the "
            "variant and baseline settings name it)"
        )
    return VariantPlan(
        file=file,
        own=own,
        baseline=other,
        root=root,
        model=model,
        backend=backend,
        sandbox_agent=sandbox_agent,
        prompt_delivery=prompt_delivery,
        baseline_name="" if other is None else baseline if other is own else other.label,
    )


def run_variants(
    settings: EvalSettings, root: Path
) -> tuple[EvalSettings, VariantPlan | VariantsError | None]:
    """The arms of a run from its ``variants`` file (paths relative to ``root``), and its
    settings with the baseline variant's label as its ``baseline``, so that every report
    names the arm by its label. A file that cannot be run is returned as its error (every
    scenario then errors with it: the rest of the run goes on). None without a file.

    Raises :class:`~pytest_openkata.contracts.errors.ConfigError`, before any model call, for
    settings the file contradicts: a ``variant`` label it does not have, and
    ``judge_pairwise`` in a run the file and the settings give no baseline arm."""
    if not settings.variants:
        return settings, None
    shown = shown_path(settings.variants, root)
    # --eval-baseline none: no baseline arm, not even the one the file would give.
    no_baseline = not settings.baseline and "baseline" in settings.sources
    try:
        file = read_variants(root / _expanded(settings.variants), shown)
        plan = plan_variants(
            file,
            variant=settings.variant,
            baseline=settings.baseline,
            root=root,
            model=settings.model,
            backend=settings.backend,
            sandbox_agent=settings.sandbox.agent,
            prompt_delivery=settings.skill_delivery == "prompt",
            no_baseline=no_baseline,
        )
    except VariantsError as exc:
        return settings, exc
    if settings.judge_pairwise and plan.baseline is None and not settings.baseline:
        source = settings.sources.get("judge_pairwise", "judge_pairwise")
        why = (
            f"{settings.sources['baseline']} sets none"
            if no_baseline
            else f"{shown} has no variant without the context of the own variant's agent and model"
        )
        raise ConfigError(
            f"{source}: judge_pairwise compares a baseline arm with the skill's, and the run "
            f"has none ({why}); name one with --eval-baseline LABEL, without-skill, same or "
            "a git ref"
        )
    update: dict[str, object] = {"variant": plan.own.label}
    sources = dict(settings.sources)
    if not settings.variant:
        sources["variant"] = f"{shown} (its first variant with the context)"
    if plan.baseline is not None and plan.baseline_name != settings.baseline:
        update["baseline"] = plan.baseline_name
        sources["baseline"] = f"{shown} (its first variant without the context)"
    return settings.model_copy(update={**update, "sources": sources}), plan
