"""The reproducibility manifest of a run, and what drifted between two of them.

A score depends on more than the skill: on the agent CLI and its version, the model that
really answered (an endpoint may serve another model than the one asked for, or a newer
snapshot under the same alias), the judge and how it votes, the sandbox image, the
scenario's files and the settings that change what a trial does. A run records all of that
in its :class:`Manifest` (the run log's run record; each skill's part in its results JSON),
so that a comparison of two runs can say exactly what differed between them.

:func:`compare_manifests` lists every field that differs (:class:`Drift`) and says of each
whether it makes the comparison meaningless (it *refuses*) or is only reported. Which fields
refuse depends on the comparison (:data:`COMPARISONS`):

- ``compare`` (a run and an earlier one, ``--eval-compare``): the agent (backend, model, the
  models its endpoint reported, the CLI's version), the judge (backend, model, reported
  models, votes, fence, reason bound), the sandbox image's digest and the settings of
  :data:`REFUSING_SETTINGS` refuse; the plugin's version, the skill's content (what a
  comparison of two runs of a skill is about), the image's tag, a scenario's files (the
  comparison already calls such a scenario ``not-comparable`` on its own) and the settings of
  :data:`REPORTED_SETTINGS` are reported;
- ``baseline`` (the arms of one run): the agent's and the judge's reported models, the agent
  CLI's versions and the image digests each arm ran with refuse;
- ``merge`` (the shards of one run): every difference refuses but the settings of
  :data:`REPORTED_SETTINGS`; each shard is compared with the shards before it together
  (:func:`merged_manifest`), so that a difference between any two shards is found;
- ``rejudge`` (a recorded run graded again): what the reports would name as the agent of the
  recorded answers refuses: the agent's backend and model (the answers are another model's),
  and what the trials recorded of it (reported models, CLI versions, image digests; they come
  from the log, so they are normally the same). Everything else is reported: the judge and a
  scenario's criteria and checks are what a re-judge may change; the settings that shaped
  the agent's run (timeouts, skill delivery, the sandbox's) do not apply, since no agent runs;
  the answers are graded as answers to the task they were given (the judge reads the recorded
  task, and a re-judged result carries the recorded task's and inputs' digests).

A list of ids (reported models, CLI versions, image digests) that one side does not have is
unknown there, not different: a run whose answers all came from the cache reports no model.
A manifest that is missing (a run log or results JSON written before manifests, or by the
reference runner) refuses nothing: the drift says that it could not be checked.

Model ids are an endpoint's text: they were made safe to show where they were read
(:func:`~pytest_openkata.infra.usage.reported_models`), and every text here is shown through
:func:`~pytest_openkata.infra.text.visible` again, since a manifest may come from a file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_openkata.contracts.errors import OpenkataError
from pytest_openkata.infra.text import visible

__all__ = [
    "BASELINE",
    "COMPARE",
    "COMPARISONS",
    "DIGESTED_SETTINGS",
    "MERGE",
    "REFUSING_SETTINGS",
    "REJUDGE",
    "REPORTED_SETTINGS",
    "Drift",
    "DriftError",
    "DriftItem",
    "Manifest",
    "ManifestError",
    "check_drift",
    "command_digest",
    "compare_manifests",
    "id_list",
    "merged_manifest",
]

COMPARE = "compare"
BASELINE = "baseline"
MERGE = "merge"
REJUDGE = "rejudge"
COMPARISONS = (COMPARE, BASELINE, MERGE, REJUDGE)

REFUSING_SETTINGS = (
    "skill_delivery",
    "category",
    "direct_timeout",
    "answer_max_bytes",
    "context_budget",
    "agent_command",
    "simulated_user_model",
    "anthropic.max_tokens",
    "sandbox.agent",
    "sandbox.timeout",
    "sandbox.network",
    "sandbox.cpus",
    "sandbox.memory",
    "sandbox.pids",
)
"""The settings that change what a trial does or how it is scored (besides the agent's and
the judge's, which the manifest records on their own): a difference refuses a comparison, a
merge, but not a re-judge (no agent runs in it: they are reported)."""

REPORTED_SETTINGS = ("trials", "threshold")
"""Settings recorded and reported when they differ, without refusing: more trials make a
figure more precise, not different; the threshold moves the gate, not the scores. How many
trials ran at once (``concurrency``, ``max_in_flight``), the cache and where sandboxes ran
change no result and are free to differ between the shards of one run: they are not
recorded."""

DIGESTED_SETTINGS = frozenset({"agent_command"})
"""Settings a manifest records as a digest (:func:`command_digest`): an agent command line may
hold a secret (``KEY=... run.sh``) and a machine path, and run logs and results JSON files are
shared. The digest still tells two commands apart. The other recorded settings are names,
numbers and flags (a manifest holds no mount, engine address, TLS file or log folder)."""

_DIGEST_PREFIX = "sha256:"
_VALUE_MAX_CHARS = 200


def command_digest(command: str) -> str:
    """``sha256:<hex>`` of a command line as given (empty for none): what a manifest records of
    it, so that a changed command is drift without the command being written anywhere. A
    value that is a digest already is kept."""
    if not command or command.startswith(_DIGEST_PREFIX):
        return command
    return _DIGEST_PREFIX + hashlib.sha256(command.encode()).hexdigest()


class ManifestError(OpenkataError):
    """A manifest that cannot be read; the message names the file and the field."""


class DriftError(OpenkataError):
    """A comparison refused because the two sides drifted; the message names every field
    that refuses with both values, and the setting that compares anyway."""


@dataclass(frozen=True)
class Manifest:
    """What a run ran with, as it recorded it (see the module docstring).

    ``agent`` and ``judge`` hold the backend, the model asked for and the models the
    endpoints reported (``reported_models``); ``agent`` also the agent CLI's versions
    (``cli_versions``, as the sandboxed trials recorded them), ``judge`` its votes, fence and
    reason bound. ``sandbox`` holds the image asked for and the digests of the images the
    trials ran in (``image_ids``). ``skills`` maps a skill folder (relative to the run's root
    folder) to a digest of its files (without ``evals/``); ``scenarios`` maps
    ``<skill folder>::<scenario>`` to the digests of its task, criteria, checks and inputs.
    ``settings`` holds the values of :data:`REFUSING_SETTINGS` and :data:`REPORTED_SETTINGS`
    (``agent_command`` as a ``sha256:`` digest: a command line may hold a secret or a path).
    """

    plugin_version: str
    agent: Mapping[str, Any] = field(default_factory=dict)
    judge: Mapping[str, Any] = field(default_factory=dict)
    sandbox: Mapping[str, Any] = field(default_factory=dict)
    skills: Mapping[str, str] = field(default_factory=dict)
    scenarios: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    settings: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "plugin_version": self.plugin_version,
            "agent": _plain(self.agent),
            "judge": _plain(self.judge),
            "sandbox": _plain(self.sandbox),
            "skills": dict(self.skills),
            "scenarios": {name: dict(parts) for name, parts in self.scenarios.items()},
            "settings": _plain(self.settings),
        }

    @classmethod
    def from_dict(cls, data: object, *, source: str) -> Manifest:
        """A manifest as a file holds it; :class:`ManifestError` naming ``source`` and the
        field that is not as it should be."""
        if not isinstance(data, Mapping):
            raise ManifestError(f"{source}: manifest: must be an object, not {_shown(data)}")
        version = data.get("plugin_version")
        if not isinstance(version, str):
            raise ManifestError(f"{source}: manifest.plugin_version: must be a string")
        sections = {}
        for name in ("agent", "judge", "sandbox", "skills", "scenarios", "settings"):
            value = data.get(name, {})
            if not isinstance(value, Mapping):
                raise ManifestError(f"{source}: manifest.{name}: must be an object")
            sections[name] = value
        for dotted in sorted(_LISTS):
            section, key = dotted.split(".")
            ids = sections[section].get(key, [])
            if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
                raise ManifestError(f"{source}: manifest.{dotted}: must be a list of texts")
        for name, value in sections["skills"].items():
            if not isinstance(value, str):
                raise ManifestError(f"{source}: manifest.skills.{name}: must be a digest")
        for name, parts in sections["scenarios"].items():
            if not isinstance(parts, Mapping) or not all(
                isinstance(v, str) for v in parts.values()
            ):
                raise ManifestError(
                    f"{source}: manifest.scenarios.{name}: must map parts to digests"
                )
        return cls(
            plugin_version=version,
            agent=dict(sections["agent"]),
            judge=dict(sections["judge"]),
            sandbox=dict(sections["sandbox"]),
            skills={str(k): str(v) for k, v in sections["skills"].items()},
            scenarios={str(k): dict(v) for k, v in sections["scenarios"].items()},
            # A log written before commands were digested holds the command line itself.
            settings={
                key: command_digest(str(value)) if key in DIGESTED_SETTINGS else value
                for key, value in sections["settings"].items()
            },
        )

    def rows(self) -> list[tuple[str, str]]:
        """What the reports show of it, as (label, value) pairs, each value safe to show: the
        ids that tell runs apart (the content digests are in the run log)."""
        values = [
            ("plugin version", self.plugin_version),
            ("agent models reported", ", ".join(self.agent.get("reported_models", ()))),
            ("agent CLI versions", ", ".join(self.agent.get("cli_versions", ()))),
            ("judge models reported", ", ".join(self.judge.get("reported_models", ()))),
            ("sandbox image digests", ", ".join(self.sandbox.get("image_ids", ()))),
        ]
        return [(label, visible(str(value))) for label, value in values if value]

    def for_skill(self, skill_dir: str) -> Manifest:
        """This manifest with only the skill ``skill_dir`` (relative) and its scenarios: what
        that skill's results JSON records and what a comparison of that skill checks."""
        prefix = f"{skill_dir}::"
        return Manifest(
            plugin_version=self.plugin_version,
            agent=self.agent,
            judge=self.judge,
            sandbox=self.sandbox,
            skills={k: v for k, v in self.skills.items() if k == skill_dir},
            scenarios={k: v for k, v in self.scenarios.items() if k.startswith(prefix)},
            settings=self.settings,
        )


def _plain(data: Mapping[str, Any]) -> dict[str, Any]:
    return {key: list(value) if isinstance(value, tuple) else value for key, value in data.items()}


def id_list(values: Iterable[str]) -> list[str]:
    """Ids (models, versions, digests) as a manifest lists them: sorted, each once, no blank."""
    return sorted({value for value in values if value})


# --- comparing two manifests -----------------------------------------------------------------

_LISTS = frozenset(
    {
        "agent.reported_models",
        "agent.cli_versions",
        "judge.reported_models",
        "sandbox.image_ids",
    }
)

_AGENT_FIELDS = (
    "agent.backend",
    "agent.model",
    "agent.reported_models",
    "agent.cli_versions",
    "sandbox.image_ids",
)
_JUDGE_FIELDS = (
    "judge.backend",
    "judge.model",
    "judge.reported_models",
    "judge.votes",
    "judge.fence",
    "judge.reason_max_chars",
)


@dataclass(frozen=True)
class DriftItem:
    """One field that differs: its name (``judge.model``, ``scenario skills/x::s task``,
    ``settings.trials``), its value on each side as text, and whether it refuses."""

    field: str
    before: str
    after: str
    refuses: bool

    def describe(self) -> str:
        """``judge.model: 'a' before, 'b' now``, safe to show."""
        return visible(f"{self.field}: {self.before} before, {self.after} now")


@dataclass(frozen=True)
class Drift:
    """What differs between two manifests for one ``comparison`` (one of
    :data:`COMPARISONS`), against what (``against``, a file name or an arm); ``missing``
    says why there was nothing to compare with (a side without a manifest), ``allowed`` that
    the run was told to go on despite a refusing difference (``allow_drift``)."""

    comparison: str
    against: str
    items: tuple[DriftItem, ...] = ()
    missing: str = ""
    allowed: bool = False

    @property
    def refusing(self) -> tuple[DriftItem, ...]:
        return tuple(item for item in self.items if item.refuses)

    @property
    def empty(self) -> bool:
        return not self.items and not self.missing

    def to_dict(self) -> dict[str, Any]:
        return {
            "comparison": self.comparison,
            "against": self.against,
            "items": [
                {"field": i.field, "before": i.before, "after": i.after, "refuses": i.refuses}
                for i in self.items
            ],
            "missing": self.missing,
            "allowed": self.allowed,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Drift:
        return cls(
            comparison=str(data["comparison"]),
            against=str(data["against"]),
            items=tuple(
                DriftItem(str(i["field"]), str(i["before"]), str(i["after"]), bool(i["refuses"]))
                for i in data.get("items", ())
            ),
            missing=str(data.get("missing", "")),
            allowed=bool(data.get("allowed", False)),
        )

    def refusal(self) -> str | None:
        """Why the comparison is refused (its refusing fields, each with both values), or
        None when it is not: nothing refuses, or ``allow_drift`` allowed it."""
        if self.allowed or not self.refusing:
            return None
        fields = "; ".join(item.describe() for item in self.refusing)
        return visible(
            f"refused to compare with {self.against} ({self.comparison}): it drifted: "
            f"{fields}. Set allow_drift (--eval-allow-drift) to compare anyway"
        )

    def lines(self) -> list[str]:
        """The drift as lines of text, each safe to show: the refusing fields first."""
        shown = visible(self.against)
        lines = []
        if self.missing:
            lines.append(visible(f"Drift against {shown} not checked: {self.missing}"))
        ordered = sorted(self.items, key=lambda item: not item.refuses)
        for item in ordered:
            kind = "refuses" if item.refuses else "reported"
            lines.append(f"Drift against {shown} ({kind}): {item.describe()}")
        if self.allowed and self.refusing:
            lines.append(
                f"Compared with {shown} despite the drift: allow_drift (--eval-allow-drift) is on"
            )
        return lines


def _flat(manifest: Manifest) -> dict[str, Any]:
    flat: dict[str, Any] = {"plugin_version": manifest.plugin_version}
    for section in ("agent", "judge", "sandbox"):
        for key, value in getattr(manifest, section).items():
            flat[f"{section}.{key}"] = value
    for name, digest in manifest.skills.items():
        flat[f"skill {name}"] = digest
    for name, parts in manifest.scenarios.items():
        for part, digest in parts.items():
            flat[f"scenario {name} {part}"] = digest
    for key, value in manifest.settings.items():
        flat[f"settings.{key}"] = value
    return flat


def _refuses(name: str, comparison: str) -> bool:
    """Whether a difference in field ``name`` refuses ``comparison`` (module docstring)."""
    setting = name.removeprefix("settings.") if name.startswith("settings.") else None
    if comparison == BASELINE:
        return True  # the arms' manifests hold only what must be the same
    if comparison == MERGE:
        return setting not in REPORTED_SETTINGS
    if comparison == REJUDGE:
        return name in _AGENT_FIELDS  # no agent runs: its settings are only reported
    if name in _AGENT_FIELDS or name in _JUDGE_FIELDS:
        return True
    return setting in REFUSING_SETTINGS


def _text(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_shown(item) for item in value) + "]"
    return _shown(value)


def _shown(value: object) -> str:
    """A value as a drift names it: a text in quotes, as it is (it is made visible below,
    so that an id's escapes are not escaped twice), anything else as Python writes it."""
    text = f"'{value}'" if isinstance(value, str) else repr(value)
    if len(text) > _VALUE_MAX_CHARS:
        text = text[: _VALUE_MAX_CHARS - 1] + "…"
    return visible(text)


def compare_manifests(
    before: Manifest | None,
    after: Manifest | None,
    *,
    comparison: str,
    against: str,
    allowed: bool = False,
) -> Drift:
    """What drifted from ``before`` (the earlier run, the baseline arm, the first shard, the
    recorded run) to ``after`` for ``comparison`` (one of :data:`COMPARISONS`); ``against``
    names ``before`` in the texts, ``allowed`` records that ``allow_drift`` is on.

    Every field on either side is compared, but a field one side lacks (a newer field, a
    skill or scenario only one side ran) and an id list one side has empty are unknown there,
    not different. A side without a manifest gives a :class:`Drift` whose ``missing`` says so,
    refusing nothing (a run log or results JSON written before manifests)."""
    if comparison not in COMPARISONS:
        raise ValueError(f"comparison must be one of {', '.join(COMPARISONS)}: {comparison!r}")
    if before is None or after is None:
        side = against if before is None else "this run"
        return Drift(comparison, against, missing=f"{side} records no manifest", allowed=allowed)
    old, new = _flat(before), _flat(after)
    items = []
    for name in sorted(old.keys() & new.keys()):
        left, right = old[name], new[name]
        if name in _LISTS:
            left, right = id_list(left or ()), id_list(right or ())
            if not left or not right:
                continue
        if left == right:
            continue
        items.append(DriftItem(name, _text(left), _text(right), _refuses(name, comparison)))
    return Drift(comparison, against, tuple(items), allowed=allowed)


def merged_manifest(seen: Manifest, other: Manifest) -> Manifest:
    """What the manifests ``seen`` (those compared so far, together) and ``other`` say
    together: each field's first value (``seen``'s where it has one), and each id list the
    union of both. The shards of one run are each compared with what the shards before them
    said together, so that a shard whose answers all came from the cache (no models) does not
    hide a difference between the shards after it."""

    def section(name: str, first: Mapping[str, Any], then: Mapping[str, Any]) -> dict[str, Any]:
        joined = {**then, **first}
        for key in first.keys() & then.keys():
            if f"{name}.{key}" in _LISTS:
                joined[key] = id_list([*(first[key] or ()), *(then[key] or ())])
        return joined

    scenarios = {
        name: {**other.scenarios.get(name, {}), **seen.scenarios.get(name, {})}
        for name in (*seen.scenarios, *other.scenarios)
    }
    return Manifest(
        plugin_version=seen.plugin_version,
        agent=section("agent", seen.agent, other.agent),
        judge=section("judge", seen.judge, other.judge),
        sandbox=section("sandbox", seen.sandbox, other.sandbox),
        skills={**other.skills, **seen.skills},
        scenarios=scenarios,
        settings={**other.settings, **seen.settings},
    )


def check_drift(drift: Drift, *, allow: bool) -> Drift:
    """``drift`` when it refuses nothing, or when ``allow`` (the ``allow_drift`` setting):
    then marked as allowed, for the reports to say so. Otherwise :class:`DriftError` naming
    every refusing field with both values. Re-judging a recorded run calls this with the
    drift of :func:`compare_manifests` (``comparison=REJUDGE``)."""
    if not drift.refusing:
        return drift
    if allow:
        return replace(drift, allowed=True)
    raise DriftError(replace(drift, allowed=False).refusal() or "")
