"""Settings: one model, resolved from layers, with errors that name their source and key.

Layers, later winning: defaults -> ``[tool.pytest.ini_options]`` (``eval_*`` keys) ->
``.openkata-eval.yaml`` -> ``OPENKATA_EVAL_*`` environment variables -> command line.
Unlike the reference runner, a value that does not parse is an error, never ignored.

The settings table is :data:`FIELDS`, the built-in settings, followed by the settings that
installed providers declare (:func:`settings_table`): theirs are spelled, parsed and checked
as the built-in ones are, and their values are kept in ``EvalSettings.provider_settings``.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pytest_openkata.contracts.config import (
    DEFAULT_THRESHOLD,
    EvalSettings,
)
from pytest_openkata.contracts.errors import (
    ConfigError,
)
from pytest_openkata.infra import registry
from pytest_openkata.infra.provider_settings import DeclaredSetting, declarations

ENV_PREFIX = "OPENKATA_EVAL_"
CONFIG_FILE_NAME = ".openkata-eval.yaml"
# Read by the reference's judge for debug output; not a setting, so not an unknown key.
ENV_NOT_SETTINGS = frozenset({"OPENKATA_EVAL_DEBUG"})


def _text(value: str) -> str:
    return value


def _one_of(names: Callable[[], tuple[str, ...]], kind: str) -> Callable[[str], str]:
    """A registered provider name (the registry is read when a value is parsed)."""

    def parse(value: str) -> str:
        choices = names()
        if value not in choices:
            raise ValueError(f"unknown {kind} {value!r}; choose one of: {', '.join(choices)}")
        return value

    return parse


_backend = _one_of(registry.backend_names, "backend")
_sandbox_agent = _one_of(registry.AGENTS.names, "agent")
_sandbox_provider = _one_of(registry.SANDBOXES.names, "sandbox provider")


def _baseline(value: str) -> str:
    """``without-skill``, ``same``, ``none`` (no baseline) or a git ref."""
    text = value.strip()
    if text.lower() in {"none", "off"}:
        return ""
    if text.startswith("-") or any(char.isspace() for char in text):
        raise ValueError(f"{value!r} is not without-skill, same, none or a git ref")
    return text


def _variant_label(value: str) -> str:
    """A variant's label in the variants file (checked against the file when the run starts)."""
    text = value.strip()
    if text.startswith("-") or any(char.isspace() for char in text) or not text.isprintable():
        raise ValueError(f"{value!r} is not a variant's label")
    return text


def _log_dir(value: str) -> str:
    """A folder for run logs, or ``off`` (``none``) for no run log."""
    text = value.strip()
    return "" if text.lower() in {"off", "none"} else text


_WHOLE_NUMBER = re.compile(r"[+-]?[0-9]+")


def _number(*, zero_allowed: bool) -> Callable[[str], float]:
    """A finite number above zero, or from zero on when ``zero_allowed``."""
    bounds = "zero or a positive number" if zero_allowed else "a positive number"

    def parse(value: str) -> float:
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"{value!r} is not a number") from None
        in_range = number >= 0 if zero_allowed else number > 0
        if not in_range or number == float("inf"):
            raise ValueError(f"{value} is out of range: must be {bounds}")
        return number

    return parse


_positive_number = _number(zero_allowed=False)
_non_negative_number = _number(zero_allowed=True)


_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})


def _boolean(value: str) -> bool:
    text = value.strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"{value!r} is not a boolean; use true or false")


CACHE_MODES = ("on", "off", "refresh")


def _cache_mode(value: str) -> str:
    if value.strip().lower() not in CACHE_MODES:
        raise ValueError(f"unknown cache mode {value!r}; choose one of: {', '.join(CACHE_MODES)}")
    return value.strip().lower()


_MEMORY = re.compile(r"[0-9]+[bkmg]?", re.IGNORECASE)


def _memory(value: str) -> str:
    if not _MEMORY.fullmatch(value.strip()):
        raise ValueError(f"{value!r} is not a memory size such as 512m or 2g")
    return value.strip().lower()


def _mounts(value: str) -> tuple[tuple[str, str], ...]:
    """``host:container`` pairs separated by commas; ``none`` mounts nothing."""
    if value.strip().lower() == "none":
        return ()
    pairs = []
    for item in value.split(","):
        host, sep, target = item.strip().partition(":")
        if not sep or not host or not target.startswith("/"):
            raise ValueError(f"{item.strip()!r} is not HOST_PATH:/CONTAINER_PATH (or none)")
        pairs.append((host, target))
    return tuple(pairs)


_ENGINE_SCHEMES = ("unix://", "tcp://", "ssh://")
_ENGINE_NAME = re.compile(r"[A-Za-z0-9\[][A-Za-z0-9._:\[\]-]*")


def _engine_name(url: str) -> str:
    """The name an engine is shown by when none is given: ``host:port`` of a tcp:// engine,
    the host of an ssh:// one, ``local`` for a unix socket (reports name engines, and a socket's
    path is a machine path)."""
    scheme, _, rest = url.partition("://")
    if scheme == "unix":
        return "local"
    netloc = rest.split("/", 1)[0]
    return netloc.rpartition("@")[2] if scheme == "ssh" else netloc


def _hosts(value: str) -> tuple[tuple[str, str], ...]:
    """Docker engines, ``[NAME=]URL`` separated by commas (``unix://``, ``tcp://``,
    ``ssh://user@host``); ``none`` for the one engine of DOCKER_HOST. Names are unique."""
    if value.strip().lower() == "none":
        return ()
    engines: list[tuple[str, str]] = []
    for item in value.split(","):
        text = item.strip()
        if not text:
            continue
        name, sep, url = text.partition("=")
        if not sep or "://" in name:
            name, url = "", text
        url = url.strip()
        if not url.startswith(_ENGINE_SCHEMES) or url.endswith("://"):
            raise ValueError(
                f"{text!r} is not an engine URL; use unix:///PATH, tcp://HOST:PORT or "
                "ssh://USER@HOST, each optionally after NAME="
            )
        name = name.strip() or _engine_name(url)
        if not _ENGINE_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not an engine name: use letters, digits, . _ - : [ ]")
        engines.append((name, url))
    if not engines:
        raise ValueError(f"{value!r} names no engine")
    names = [name for name, _url in engines]
    taken = {name for name in names if names.count(name) > 1}
    if taken:
        raise ValueError(f"two engines are named {sorted(taken)[0]!r}: name them, as NAME=URL")
    return tuple(engines)


def _price_table(value: str) -> tuple[tuple[str, float, float], ...]:
    """``MODEL=IN,OUT`` entries (US dollars per million input and output tokens) separated
    by ``;`` or new lines; ``none`` for an empty table. A model named twice is an error."""
    if value.strip().lower() == "none":
        return ()
    table: dict[str, tuple[float, float]] = {}
    for item in re.split(r"[;\n]", value):
        text = item.strip()
        if not text:
            continue
        model, sep, prices = text.rpartition("=")
        model = model.strip()
        numbers = [number.strip() for number in prices.split(",")]
        if not sep or not model or len(numbers) != 2:
            raise ValueError(f"{text!r} is not MODEL=INPUT,OUTPUT (US dollars per million tokens)")
        if model in table:
            raise ValueError(f"the model {model!r} is priced twice")
        try:
            parsed = tuple(_non_negative_number(number) for number in numbers)
        except ValueError as exc:
            raise ValueError(f"{text!r}: {exc}") from None
        table[model] = (parsed[0], parsed[1])
    return tuple((model, i, o) for model, (i, o) in table.items())


def _keyed_text(raw: Mapping[str, Any]) -> str:
    """A YAML mapping of a keyed setting (``prices: {MODEL: "IN,OUT"}``, or ``[IN, OUT]``, or
    ``{input: IN, output: OUT}``) as the ``KEY=VALUE;...`` text the setting parses."""
    entries = []
    for key, given in raw.items():
        value = given
        if isinstance(value, Mapping):
            value = [value.get("input", ""), value.get("output", "")]
        if isinstance(value, list | tuple):
            value = ",".join(str(item) for item in value)
        entries.append(f"{key}={value}")
    return ";".join(entries) or "none"


def _int_between(low: int, high: int | None) -> Callable[[str], int]:
    def parse(value: str) -> int:
        # Plain ASCII digits only, as Go's Atoi: Python's int() would also take "9_5" or "٩٥".
        if not _WHOLE_NUMBER.fullmatch(value.strip()):
            raise ValueError(f"{value!r} is not a whole number")
        number = int(value.strip())
        if number < low or (high is not None and number > high):
            bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise ValueError(f"{number} is out of range: must be {bounds}")
        return number

    return parse


def _in_flight_cap(value: str) -> int | Literal["auto"]:
    """A whole number from 0 (no cap), or ``auto``: as many as the endpoint says it serves at
    once (llama-server's slots), asked on the first call; no cap when it does not say."""
    if value.strip().lower() == "auto":
        return "auto"
    return _int_between(0, None)(value)


def _trials(value: str) -> int | Literal["auto"]:
    """A whole number of trials from 1, or ``auto``: trials until the gate is settled."""
    if value.strip().lower() == "auto":
        return "auto"
    if not _WHOLE_NUMBER.fullmatch(value.strip()):
        raise ValueError(f"{value!r} is neither a whole number of trials nor auto")
    return _int_between(1, None)(value)


def _confidence(value: str) -> float:
    """A confidence level strictly between 0 and 1 (0.95 for 95 %)."""
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a number") from None
    if not 0.0 < number < 1.0:
        raise ValueError(f"{value} is out of range: must lie strictly between 0 and 1, e.g. 0.95")
    return number


_BYTES = re.compile(r"([0-9]+)\s*(?:([kmg])(?:i?b)?|b)?", re.IGNORECASE)
_BYTE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def _byte_count(value: str) -> int:
    """A number of bytes of at least 1, with an optional unit: ``k``, ``m``, ``g`` (KiB, MiB,
    GiB; ``4m``, ``4MiB`` and ``4MB`` alike)."""
    match = _BYTES.fullmatch(value.strip())
    if match is None:
        raise ValueError(f"{value!r} is not a size in bytes such as 4194304, 512k or 4m")
    count = int(match.group(1)) * _BYTE_UNITS[(match.group(2) or "").lower()]
    if count < 1:
        raise ValueError(f"{value} is out of range: must be at least 1 byte")
    return count


def _globs(value: str) -> str:
    """Comma-separated folder-name globs (``scenario-*``, ``*``)."""
    globs = [glob.strip() for glob in value.split(",") if glob.strip()]
    if not globs:
        raise ValueError(f"{value!r} names no glob; the reference's is scenario-*, * takes all")
    if any("/" in glob for glob in globs):
        raise ValueError(f"{value!r}: a glob matches a folder's name, without /")
    return ",".join(globs)


SKILL_DELIVERIES = ("prompt", "installed")


def _skill_delivery(value: str) -> str:
    """``prompt`` (the skill pasted into the prompt) or ``installed`` (where the agent
    discovers skills)."""
    text = value.strip().lower()
    if text not in SKILL_DELIVERIES:
        raise ValueError(
            f"unknown skill delivery {value!r}; choose one of: {', '.join(SKILL_DELIVERIES)}"
        )
    return text


def _folders(value: str) -> tuple[str, ...]:
    """Comma-separated folders, or ``none`` for none."""
    if value.strip().lower() == "none":
        return ()
    return tuple(item.strip() for item in value.split(",") if item.strip())


def _categories(value: str) -> str:
    """Comma-separated criterion categories (``INTENT,QUALITY``), or ``all`` (``""``)."""
    names = [name.strip() for name in value.split(",") if name.strip()]
    return "" if names in ([], ["all"]) else ",".join(names)


@dataclass(frozen=True)
class Setting:
    """One setting and its spelling in every source."""

    key: str  # dotted path in the YAML file and in the model
    parse: Callable[[str], Any]
    secret: bool = False
    cli: str | None = None
    metavar: str = "TEXT"
    # Registered names the value must be one of, for the option's metavar and help.
    choices: Callable[[], tuple[str, ...]] | None = None
    # A boolean given on the command line as a bare flag (``--eval-require-uplift``).
    flag: bool = False
    # A list: a YAML list (or a list argument of ``evaluate()``) is its comma-separated text.
    listed: bool = False
    # The provider's declaration this row comes from; None for a built-in setting.
    declared: DeclaredSetting | None = None
    # Entries by key: the option may be given again (``--eval-price A=1,2 --eval-price B=3,4``),
    # YAML takes a mapping, and the text joins entries with ``;``.
    keyed: bool = False

    @property
    def shown_metavar(self) -> str:
        return "|".join(self.choices()) if self.choices is not None else self.metavar

    @property
    def env(self) -> str:
        return ENV_PREFIX + self._underscored.upper()

    @property
    def ini(self) -> str:
        return "eval_" + self._underscored

    @property
    def option(self) -> str | None:
        spelled = self._underscored.replace("_", "-")
        return None if self.secret else (self.cli or f"--eval-{spelled}")

    @property
    def dest(self) -> str:
        return "eval_" + self._underscored

    @property
    def _underscored(self) -> str:
        # A provider's name may hold "-" (``lint_rules.no-ticket``); no variable name may.
        return self.key.replace(".", "_").replace("-", "_")


MAX_INFRASTRUCTURE_RETRIES = 5
# An npm version or dist-tag: what may follow ``pkg@`` on npm's command line, nothing a shell
# or a Docker tag would read otherwise.
_AGENT_VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}")


def _kappa_bound(value: str) -> float:
    """A bound of Cohen's kappa: a number from -1 to 1."""
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a number") from None
    if not -1.0 <= number <= 1.0:
        raise ValueError(f"{value} is out of range: kappa is between -1 and 1")
    return number


def _agent_version(value: str) -> str:
    text = value.strip()
    if not _AGENT_VERSION.fullmatch(text):
        raise ValueError(f"{value!r} is not an npm version such as 0.63.0 or a tag such as latest")
    return text


FIELDS: tuple[Setting, ...] = (
    Setting("backend", _backend, choices=registry.backend_names),
    Setting("judge_backend", _backend, choices=registry.backend_names),
    Setting("model", _text, metavar="MODEL"),
    Setting("judge_model", _text, metavar="MODEL"),
    Setting("threshold", _int_between(0, 100), metavar="PERCENT"),
    Setting("concurrency", _int_between(1, None), metavar="N"),
    Setting("direct_timeout", _int_between(1, None), metavar="SECONDS"),
    Setting("answer_max_bytes", _byte_count, metavar="BYTES"),
    Setting("context_budget", _int_between(0, None), metavar="TOKENS"),
    Setting("output", _text, metavar="PATH"),
    Setting("model_label", _text, metavar="LABEL"),
    Setting("agent_command", _text, metavar="COMMAND"),
    Setting("trials", _trials, metavar="N|auto"),
    Setting("trials_max", _int_between(2, None), metavar="N"),
    Setting("trials_confidence", _confidence, metavar="LEVEL"),
    Setting("judge_votes", _int_between(1, None), metavar="K"),
    Setting("judge_fence", _boolean, metavar="true|false"),
    Setting("judge_reason_max_chars", _int_between(0, None), metavar="N"),
    Setting("simulated_user_model", _text, metavar="MODEL"),
    Setting("cache", _cache_mode, metavar="on|off|refresh"),
    Setting("max_in_flight", _in_flight_cap, metavar="N|auto"),
    Setting("baseline", _baseline, metavar="without-skill|same|REF|LABEL"),
    Setting("variants", _text, metavar="PATH"),
    Setting("variant", _variant_label, metavar="LABEL"),
    Setting("require_uplift", _boolean, flag=True),
    Setting("judge_pairwise", _boolean, flag=True),
    Setting("uplift_target", _positive_number, metavar="POINTS"),
    Setting("log_dir", _log_dir, metavar="PATH|off"),
    Setting("log_keep", _int_between(1, None), metavar="N"),
    Setting("live_log", _boolean, metavar="true|false"),
    Setting("html", _text, metavar="PATH"),
    Setting("markdown", _text, metavar="PATH"),
    Setting("csv", _text, metavar="PATH"),
    Setting("compare", _text, metavar="auto|PATH"),
    Setting("rejudge", _text, metavar="LOG"),
    Setting("regression_tolerance", _non_negative_number, metavar="POINTS"),
    Setting("fail_on_regression", _boolean, flag=True),
    Setting("agreement_with", _text, metavar="LOG|LABELS"),
    Setting("min_kappa", _kappa_bound, metavar="KAPPA"),
    Setting("allow_drift", _boolean, flag=True),
    Setting("publish_errors", _boolean, flag=True),
    Setting("scenario_names", _globs, metavar="GLOB,..."),
    Setting("category", _categories, metavar="CATEGORY,..."),
    Setting("skill_delivery", _skill_delivery, metavar="prompt|installed"),
    Setting("trigger_runs", _int_between(1, None), metavar="N"),
    Setting("trigger_loads_needed", _int_between(0, None), metavar="N"),
    Setting("trigger_loads_allowed", _int_between(0, None), metavar="N"),
    Setting("trigger_skills", _folders, metavar="FOLDER,...", listed=True),
    Setting("http.base_url", _text, cli="--eval-base-url", metavar="URL"),
    Setting("http.api_key", _text, secret=True),
    Setting("http.endpoint_id", _text, metavar="ID"),
    Setting("anthropic.base_url", _text, cli="--eval-anthropic-base-url", metavar="URL"),
    Setting("anthropic.api_key", _text, secret=True),
    Setting("anthropic.max_tokens", _int_between(1, None), metavar="N"),
    Setting("sandbox.provider", _sandbox_provider, choices=registry.SANDBOXES.names),
    Setting("sandbox.image", _text, metavar="IMAGE"),
    Setting("sandbox.timeout", _int_between(1, None), metavar="SECONDS"),
    Setting("sandbox.network", _text, metavar="NETWORK"),
    Setting("sandbox.agent", _sandbox_agent, choices=registry.AGENTS.names),
    Setting("sandbox.cpus", _positive_number, metavar="CPUS"),
    Setting("sandbox.memory", _memory, metavar="SIZE"),
    Setting("sandbox.pids", _int_between(1, None), metavar="N"),
    Setting("sandbox.mounts", _mounts, metavar="HOST:PATH,...", listed=True),
    Setting("sandbox.hosts", _hosts, metavar="[NAME=]URL,...", listed=True),
    Setting("sandbox.per_host", _int_between(0, None), metavar="N"),
    Setting("sandbox.tls_cert_path", _text, metavar="PATH"),
    Setting("sandbox.agent_version", _agent_version, metavar="VERSION"),
    Setting("retry.attempts", _int_between(1, None), metavar="N"),
    Setting("retry.budget", _non_negative_number, metavar="SECONDS"),
    Setting("retry.infrastructure", _int_between(0, MAX_INFRASTRUCTURE_RETRIES), metavar="N"),
    Setting("price.agent_input", _non_negative_number, metavar="USD"),
    Setting("price.agent_output", _non_negative_number, metavar="USD"),
    Setting("price.judge_input", _non_negative_number, metavar="USD"),
    Setting("price.judge_output", _non_negative_number, metavar="USD"),
    Setting("prices", _price_table, cli="--eval-price", metavar="MODEL=IN,OUT", keyed=True),
    Setting("budget.tokens", _int_between(0, None), metavar="TOKENS"),
    Setting("budget.usd", _non_negative_number, metavar="USD"),
    Setting("estimate_output_tokens", _int_between(0, None), metavar="TOKENS"),
)
FIELDS_BY_KEY = {f.key: f for f in FIELDS}


def _whole_number(value: str) -> int:
    if not _WHOLE_NUMBER.fullmatch(value.strip()):
        raise ValueError(f"{value!r} is not a whole number")
    return int(value.strip())


def _finite_number(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a number") from None
    if not math.isfinite(number):
        raise ValueError(f"{value!r} is not a finite number")
    return number


# How the text of a provider's setting is parsed, and shown in its option, by its type.
_DECLARED_PARSE: dict[type, tuple[Callable[[str], Any], str]] = {
    str: (_text, "TEXT"),
    int: (_whole_number, "N"),
    float: (_finite_number, "NUMBER"),
    bool: (_boolean, "true|false"),
}


def provider_row(declared: DeclaredSetting) -> Setting:
    """The row of the settings table of a provider's own setting, parsed by its type."""
    parse, metavar = _DECLARED_PARSE[declared.setting.type]
    return Setting(declared.key, parse, metavar=metavar, declared=declared)


def _spellings(field: Setting) -> Iterator[str]:
    yield field.env
    yield field.dest
    if field.option:
        yield field.option


@functools.cache
def _provider_rows() -> tuple[tuple[Setting, ...], tuple[str, ...]]:
    """The rows of the settings that installed providers declare, and the problems of those
    that cannot join the table (an unreadable declaration, a spelling already taken)."""
    found = declarations()
    taken = {spelled: field.key for field in FIELDS for spelled in _spellings(field)}
    rows: list[Setting] = []
    problems = list(found.problems)
    for declared in found.settings:
        row = provider_row(declared)
        clash = next((taken[s] for s in _spellings(row) if s in taken), None)
        if clash is not None:
            problems.append(
                f"the {declared.kind} setting {row.key} is spelled as {clash} is; "
                "it is left out of the settings"
            )
            continue
        taken.update(dict.fromkeys(_spellings(row), row.key))
        rows.append(row)
    return tuple(rows), tuple(problems)


def settings_table() -> tuple[Setting, ...]:
    """Every setting of this process: the built-in ones (:data:`FIELDS`), then those that
    installed providers declare."""
    return FIELDS + _provider_rows()[0]


def provider_problems() -> tuple[str, ...]:
    """Why a provider's declared settings could not join the table, one sentence each."""
    return _provider_rows()[1]


def _listed(names: tuple[str, ...]) -> str:
    return ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else "".join(names)


def shown_value(value: object) -> str:
    """A setting's value as it is written in every source (``true``, ``2``, ``eu``), or
    ``none`` for empty text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if value != "" else "none"


def setting_help(field: Setting) -> str:
    """The help of a row of the settings table: a provider's own setting's from its
    declaration, with its default."""
    declared = field.declared
    if declared is None:
        return help_text(field.key)
    return f"{declared.setting.help} (default {shown_value(declared.setting.default)})"


def help_text(key: str) -> str:
    """The help of a built-in setting; lists of providers come from the registries."""
    if key == "backend":
        return f"agent backend: {_listed(registry.backend_names())} (default kiro)"
    if key == "judge_backend":
        return f"judge backend: {_listed(registry.backend_names())} (default: the agent backend)"
    if key == "sandbox.agent":
        return f"agent CLI run in the sandbox: {_listed(registry.AGENTS.names())} (default kiro)"
    if key == "sandbox.provider":
        return f"sandbox provider: {_listed(registry.SANDBOXES.names())} (default docker)"
    return HELP[key]


HELP = {
    "model": "model for agent calls",
    "judge_model": "model for judge calls (defaults to the agent model)",
    "threshold": (
        f"pass threshold percentage of a skill's overall score (default {DEFAULT_THRESHOLD})"
    ),
    "concurrency": "agent runs and judge calls at once per process (default 2)",
    "direct_timeout": "seconds allowed for one model call, from connecting to the answer's "
    "last byte (default 120)",
    "answer_max_bytes": "largest answer taken from a model, an agent CLI or a sandboxed "
    "command, in bytes or with k, m, g (KiB, MiB, GiB); a larger answer errors the trial "
    "(default 4m)",
    "context_budget": "estimated tokens a scenario's prompt may hold (four characters a "
    "token); a larger prompt is named, with its largest parts, by lint and before its scenario "
    "runs (default 100000; 0: no budget)",
    "output": "results JSON file or directory path",
    "model_label": "human-readable label for the model in the report",
    "agent_command": "shell command of the 'command' agent (it gets the prompt on stdin), or "
    "the command line of the ACP agent the 'acp' agent starts",
    "trials": "runs of every scenario, scored as their mean (default 1; scenario.json: trials); "
    "auto: run trials one after another until the confidence interval of the scenario's mean "
    "lies wholly above or below the threshold, at least 2 and at most trials_max",
    "trials_max": "most trials of a scenario with trials auto (default 10)",
    "trials_confidence": "confidence level of the interval that stops trials auto (default 0.95)",
    "judge_votes": "judge calls per trial; each criterion takes the majority (default 1)",
    "judge_fence": "fence the agent's output in the judge prompt (default true; false: the "
    "reference's exact layout)",
    "judge_reason_max_chars": "cap a judge reason's length in its structured-output schema, for "
    "grammar-constrained local servers only (default 0: no cap; OpenAI's strict mode refuses it)",
    "simulated_user_model": "model of the simulated user of scenarios that have one, on the "
    "judge's backend (default: the judge model)",
    "cache": "reuse cached agent answers and verdicts: on, off or refresh (default on; "
    "--cache-clear empties it)",
    "max_in_flight": "model requests in flight per endpoint across all workers; auto: as many "
    "as the endpoint serves at once, when it says (llama-server) (default 0: no cap)",
    "baseline": "also run every scenario in a baseline arm and report the uplift: without-skill, "
    "same (an A/A run), a git ref of the skill's files, or a variant's label of the variants "
    "file (default none; with a variants file, its first variant without the context that runs "
    "with the own variant's agent and model; none switches that off too)",
    "variants": "Tessl's variants (arms) file, a JSON array of variants, relative to the rootdir: "
    "two of its variants are the run's arms, the variant setting's and the baseline (default "
    "none)",
    "variant": "the label of the variant of the variants file that is the run's own arm "
    "(default: its first variant that includes the context)",
    "judge_pairwise": "with a baseline arm, also let the judge compare both arms' answers of "
    "every trial side by side, blind to the arms and in both orders, and report wins, losses, "
    "ties and the judge's order noise (default false)",
    "uplift_target": "uplift difference, in points, for which the report states how many "
    "scenarios a run needs to detect it (paired t-test, alpha 0.05, power 0.8) (default 10)",
    "require_uplift": "exit 1 when the uplift verdict against the baseline is 'regresses' "
    "(never with --eval-baseline same)",
    "log_dir": "folder of the run logs, one JSON Lines file per run, relative to the rootdir "
    "(default .openkata/runs; off: none)",
    "log_keep": "run logs kept in the log folder, the newest (default 20)",
    "live_log": "while the run runs, append each finished scenario's trials to a live log in "
    "the log folder (<start>.<host>-<pid>.live.jsonl), removed when the run ends, for the "
    "viewer to follow (default true; nothing without log_dir)",
    "html": "also write the run as one self-contained HTML file at PATH",
    "markdown": "also write the run as Markdown at PATH",
    "csv": "also write one CSV row per skill, scenario, trial, arm and criterion at PATH",
    "compare": "compare with an earlier run: a results JSON, a run log, or auto (each skill's "
    "newest earlier run of the same model and selection, from its reports and the run logs)",
    "rejudge": "grade the agent answers of a run log again (another judge model, more votes, "
    "edited criteria) instead of running the agent; the run is a new run that says it was "
    "re-judged (default none)",
    "regression_tolerance": "points a scenario may fall before the comparison calls it a "
    "regression (default 0)",
    "fail_on_regression": "exit 1 when the comparison finds a regression or a missing scenario",
    "agreement_with": "measure the run's judge against another judge's run log of the same "
    "answers, or a labels file of human verdicts (JSON Lines): Cohen's kappa per criterion, "
    "shown after the run and kept in its run log (default none)",
    "min_kappa": "with agreement_with, exit 1 when kappa is below this on any criterion; a "
    "criterion whose kappa is undefined (one verdict throughout) is not gated (default none)",
    "allow_drift": "compare anyway when the runs compared (an earlier run, the baseline arm, "
    "the shards) drifted in a way that refuses the comparison (another judge, agent model, "
    "agent CLI version, image...); the reports say that it was allowed (see Reproducibility)",
    "publish_errors": "write the report under evals/results/ even when scenarios errored for "
    "reasons outside the skill (default: beside the run logs, where the catalogue does not "
    "count it)",
    "scenario_names": "comma-separated globs of the scenario folder names collected under "
    "skills/<name>/evals/ (default scenario-*, as the reference; * takes every folder holding "
    "task.md and criteria.json; a tile's evals/ takes them all)",
    "category": "run and score only the criteria of these categories (criteria.json's "
    '"category", e.g. INTENT); the checks of checks.json are left out; no automatic report',
    "skill_delivery": "how the skill reaches the agent: prompt (pasted into the prompt, as the "
    "reference) or installed (put where the agent CLI discovers skills, e.g. .claude/skills/, "
    "the prompt being the task alone) (default prompt)",
    "trigger_runs": "runs of every trigger query (evals/trigger_queries.json or "
    "evals/trigger_tests.yaml) (default 3)",
    "trigger_loads_needed": "runs out of trigger_runs in which a should-trigger query must "
    "load the skill to pass (default 2)",
    "trigger_loads_allowed": "runs out of trigger_runs in which a should-not-trigger query may "
    "load the skill and still pass (default 1)",
    "trigger_skills": "other skill folders installed beside the skill in trigger queries, "
    "FOLDER,... relative to the rootdir, or none (default none)",
    "http.base_url": "base URL of the OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1",
    "http.api_key": "API key of the endpoint (never printed)",
    "http.endpoint_id": "what answers at the base URL, for cache keys instead of the URL "
    "(e.g. a model and its weights' digest when the port changes every run)",
    "anthropic.base_url": "base URL of the Anthropic Messages API (default https://api.anthropic.com)",
    "anthropic.api_key": "API key of the Anthropic Messages API (never printed)",
    "anthropic.max_tokens": "max_tokens of each Anthropic Messages API call (default 4096)",
    "sandbox.image": "Docker image for sandboxed scenarios",
    "sandbox.timeout": "seconds allowed for one sandboxed agent run (default 300)",
    "sandbox.network": "Docker network for sandboxed scenarios (default host)",
    "sandbox.cpus": "CPUs a sandbox may use (default 2)",
    "sandbox.memory": "memory a sandbox may use, e.g. 512m or 2g (default 2g)",
    "sandbox.pids": "processes a sandbox may run at once (default 512)",
    "sandbox.mounts": "read-only host folders for every sandbox, HOST:PATH,... or none (default "
    "none; the agent adds its own, kiro ~/.aws and ~/.kiro; mounted only when present)",
    "sandbox.hosts": "a pool of Docker engines for sandboxed scenarios, [NAME=]URL,... with "
    "unix://, tcp:// (TLS with sandbox.tls_cert_path) or ssh://user@host URLs (default none: "
    "the engine of DOCKER_HOST)",
    "sandbox.per_host": "sandboxes at once on each engine of sandbox.hosts (default 0: the "
    "engine's CPUs divided by sandbox.cpus, at least 1)",
    "sandbox.tls_cert_path": "folder of ca.pem, cert.pem and key.pem for the tcp:// engines of "
    "sandbox.hosts, or of a subfolder per engine name (default: DOCKER_CERT_PATH when set; "
    "without either, plain TCP)",
    "retry.attempts": "attempts per model call or sandbox run on 429, 503 and 5xx (default 3)",
    "retry.budget": "seconds of back-off allowed per call across its retries (default 120)",
    "retry.infrastructure": "times a trial that errored for the infrastructure (model_endpoint, "
    f"sandbox_setup, engine_lost) runs again, at most {MAX_INFRASTRUCTURE_RETRIES}; a crash, "
    "a timeout or an out-of-memory kill never does (default 0)",
    "sandbox.agent_version": "version of the agent CLI the local model's sandbox image installs "
    "from npm (npm's pkg@VERSION, e.g. 0.63.0; default: the version this release pins)",
    "price.agent_input": "US dollars per million input tokens of the agent model",
    "price.agent_output": "US dollars per million output tokens of the agent model",
    "price.judge_input": "US dollars per million input tokens of the judge model",
    "price.judge_output": "US dollars per million output tokens of the judge model",
    "prices": "the price table: MODEL=IN,OUT, US dollars per million input and output tokens "
    "of a model (give the option again for each model; YAML: a mapping of models); a model "
    "in the table takes its prices from it, before price.agent_* and price.judge_* (default "
    "none: no price is guessed, and an unpriced model's cost is unknown)",
    "budget.tokens": "the most live tokens (input and output, agent and judge) the whole run "
    "may spend, across xdist workers; once reached no trial starts, the run is partial "
    "(default 0: no limit)",
    "budget.usd": "the most US dollars the whole run may spend at the prices, across xdist "
    "workers; needs a price for the agent and judge models (default 0: no limit)",
    "estimate_output_tokens": "output tokens --eval-estimate assumes for each agent answer and "
    "each judge verdict (default 1000)",
}


def _apply(
    values: dict[str, Any],
    sources: dict[str, str],
    field: Setting,
    raw: object,
    source: str,
) -> None:
    if raw is None:
        return
    if field.listed and isinstance(raw, list | tuple) and all(isinstance(i, str) for i in raw):
        raw = ",".join(raw) or "none"
    if field.keyed and isinstance(raw, Mapping):
        raw = _keyed_text(raw)
    if field.keyed and isinstance(raw, list | tuple) and all(isinstance(i, str) for i in raw):
        raw = ";".join(raw) or "none"  # the option given again
    if not isinstance(raw, str):
        raise ConfigError(f"{source}: expected a single value, got {type(raw).__name__}")
    text = raw
    if text == "":
        return  # as in the reference: an empty value keeps the earlier layer's value
    try:
        values[field.key] = field.parse(text)
    except ValueError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    sources[field.key] = source


def _flatten(data: Mapping[str, Any], where: str) -> dict[str, object]:
    """Sections (``http:``, ``sandbox:``, a provider's ``sandboxes: acme:``) as dotted keys;
    ``where`` names the source in errors."""
    table = settings_table()
    keys = {f.key for f in table}
    sections = {key.rsplit(".", depth)[0] for key in keys for depth in range(1, key.count(".") + 1)}
    flat: dict[str, object] = {}

    def walk(mapping: Mapping[str, Any], prefix: str) -> None:
        for name, value in mapping.items():
            key = f"{prefix}{name}"
            if key in sections and value == "":
                continue  # an empty section, e.g. every key under "http:" commented out
            if key in sections and not isinstance(value, Mapping):
                raise ConfigError(f"{where}: key {key}: expected a mapping of keys")
            if key in sections:
                walk(value, f"{key}.")
            else:
                flat[key] = value

    walk(data, "")
    for key in flat:
        if key not in keys:
            known = ", ".join(f.key for f in table)
            raise ConfigError(f"{where}: unknown key {key!r}; known keys: {known}{_unreadable()}")
    return flat


def _unreadable() -> str:
    """What an unknown-key error adds when a provider's settings could not be read."""
    problems = provider_problems()
    return f" (and {'; '.join(problems)})" if problems else ""


def _flatten_yaml(data: Mapping[str, Any], path: Path) -> dict[str, object]:
    return _flatten(data, str(path))


def _argument_text(key: str, value: object) -> str | None:
    """A keyword argument's value as the text a setting parses (None: not given)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if key == "trigger_skills" and isinstance(value, list | tuple):
        return ",".join(str(item) for item in value) or "none"
    if key == "sandbox.mounts" and isinstance(value, list | tuple):
        pairs = [item if isinstance(item, str) else ":".join(map(str, item)) for item in value]
        return ",".join(pairs) or "none"
    if key == "prices" and isinstance(value, Mapping):
        return _keyed_text(value)
    if key == "sandbox.hosts" and isinstance(value, list | tuple):
        engines = [item if isinstance(item, str) else "=".join(map(str, item)) for item in value]
        return ",".join(engines) or "none"
    raise ConfigError(
        f"argument {key}: expected a string, number or boolean, got {type(value).__name__}"
    )


def read_yaml_file(path: Path) -> dict[str, object]:
    """The flattened keys of a ``.openkata-eval.yaml`` file (``{}`` when it is empty)."""
    import yaml  # only a run with such a file needs it: every pytest run loads the plugin

    try:
        # BaseLoader keeps every scalar as the text written, as Go's yaml.v3 does for string
        # fields: "model: 4.10" stays "4.10", and numbers are parsed by each setting.
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=yaml.BaseLoader)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read: {exc.strerror}") from None
    if data is None or data == "":
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: expected a mapping of keys at the top level")
    return _flatten_yaml(data, path)


def resolve_settings(
    *,
    ini: Mapping[str, str | None],
    yaml_path: Path | None,
    environ: Mapping[str, str],
    cli: Mapping[str, str | None],
    arguments: Mapping[str, object] | None = None,
) -> EvalSettings:
    """Resolve every layer into one :class:`EvalSettings`.

    ``ini`` and ``cli`` are keyed by :attr:`Field.dest`; ``yaml_path`` is the config file
    to read, if any; ``arguments`` are keyword arguments of the Python API, named as the YAML
    keys (sections as dicts), the last layer.
    """
    table = settings_table()
    by_key = {f.key: f for f in table}
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for field in table:
        _apply(values, sources, field, ini.get(field.dest), f"ini option {field.ini}")
    if yaml_path is not None:
        for key, raw in read_yaml_file(yaml_path).items():
            field = by_key[key]
            _apply(values, sources, field, raw, f"{yaml_path}: key {key}")
    unknown_env = sorted(
        name
        for name in environ
        if name.startswith(ENV_PREFIX)
        and name not in ENV_NOT_SETTINGS
        and name not in {f.env for f in table}
    )
    if unknown_env:
        known = ", ".join(f.env for f in table)
        raise ConfigError(
            f"unknown environment variable {unknown_env[0]}; known: {known}{_unreadable()}"
        )
    for field in table:
        _apply(values, sources, field, environ.get(field.env), f"environment {field.env}")
    for field in table:
        if field.option:
            _apply(values, sources, field, cli.get(field.dest), f"option {field.option}")
    for key, raw in _flatten(arguments or {}, "arguments").items():
        text = _argument_text(key, raw)
        _apply(values, sources, by_key[key], text, f"argument {key}")
    provided = {f.key: values.pop(f.key, f.declared.setting.default) for f in table if f.declared}

    if values.get("judge_pairwise") and not values.get("baseline") and not values.get("variants"):
        raise ConfigError(
            f"{sources['judge_pairwise']}: judge_pairwise compares a baseline arm with the "
            "skill's, and no baseline is set (--eval-baseline without-skill, same or a git ref)"
        )
    if values.get("variant") and not values.get("variants"):
        raise ConfigError(
            f"{sources['variant']}: variant names a variant of a variants file, and no "
            "variants file is set (--eval-variants PATH)"
        )
    if not values.get("judge_backend"):
        values["judge_backend"] = values.get("backend", EvalSettings().backend)
        sources["judge_backend"] = sources.get("backend", "default") + " (agent backend)"
    if not values.get("judge_model"):
        values["judge_model"] = values.get("model", EvalSettings().model)
        sources["judge_model"] = sources.get("model", "default") + " (agent model)"
    nested: dict[str, Any] = {key.partition(".")[0]: {} for key in FIELDS_BY_KEY if "." in key}
    for key, value in values.items():
        head, _, tail = key.partition(".")
        if tail:
            nested[head][tail] = value
        else:
            nested[key] = value
    return EvalSettings(**nested, provider_settings=provided, sources=sources)


def find_yaml_file(explicit: str | None, search_dirs: list[Path]) -> Path | None:
    """The config file to read: the explicit one (which must exist), or the first found."""
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigError(f"option --eval-config: {path} does not exist")
        return path
    for directory in search_dirs:
        candidate = directory / CONFIG_FILE_NAME
        if candidate.is_file():
            return candidate
    return None
