"""The settings reference: one Markdown row per setting of the settings table, with its
spelling in every source, the value it takes, its default and its help.

The manual's settings page is rendered from it when the site is built
(``docs/hooks/settings_reference.py``), from :data:`~pytest_openkata.infra.config.FIELDS`,
so that a new setting can never be missing from the page; the help is the one ``pytest
--help`` shows.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.infra.config import Setting, setting_help, shown_value

__all__ = ["COLUMNS", "default_of", "reference_table"]

COLUMNS = ("key (YAML)", "option", "ini key", "environment", "value", "default", "what it does")

# Defaults that the model's value does not tell: worked out from other settings, or meaning
# more than the value says.
_SHOWN_DEFAULTS = {
    "judge_backend": "the agent backend",
    "judge_model": "the agent model",
    "simulated_user_model": "the judge model",
    "output": "an automatic path",
    "model_label": "the model",
    "answer_max_bytes": "4m (4 MiB)",
    "judge_reason_max_chars": "0 (none; `localmodel run` sets 160)",
    "max_in_flight": "0 (no cap)",
    "log_dir": ".openkata/runs",
    "category": "all",
    "http.endpoint_id": "none (the base URL)",
    "sandbox.mounts": "none (the agent adds its own: kiro ~/.aws, ~/.kiro)",
    "sandbox.hosts": "none (the engine of DOCKER_HOST)",
    "sandbox.per_host": "0 (the engine's CPUs / sandbox.cpus, at least 1)",
    "sandbox.tls_cert_path": "DOCKER_CERT_PATH, else plain TCP",
    "price.agent_input": "0 (no cost shown)",
    "price.agent_output": "0 (no cost shown)",
    "price.judge_input": "0 (no cost shown)",
    "price.judge_output": "0 (no cost shown)",
}


def default_of(field: Setting) -> str:
    """A setting's default as the reference shows it."""
    if field.key in _SHOWN_DEFAULTS:
        return _SHOWN_DEFAULTS[field.key]
    if field.declared is not None:
        return shown_value(field.declared.setting.default)
    value: object = EvalSettings()
    for part in field.key.split("."):
        assert isinstance(value, BaseModel)
        value = getattr(value, part)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return shown_value("" if value == () else value)


def _code(text: str) -> str:
    # Python-Markdown's tables keep a pipe inside backticks in its cell.
    return f"`{text}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _row(field: Setting) -> str:
    if field.option is None:
        option = "none (a secret)"
    else:
        option = _code(field.option) + (" (a flag)" if field.flag else "")
    value = "true\\|false" if field.flag else _code(field.shown_metavar)
    cells = [
        _code(field.key),
        option,
        _code(field.ini),
        _code(field.env),
        value,
        _cell(default_of(field)),
        _cell(setting_help(field)),
    ]
    return "| " + " | ".join(cells) + " |"


def reference_table(fields: Sequence[Setting]) -> str:
    """The Markdown table of ``fields``, in their order."""
    head = "| " + " | ".join(COLUMNS) + " |"
    rule = "|" + "---|" * len(COLUMNS)
    return "\n".join([head, rule, *map(_row, fields)]) + "\n"
