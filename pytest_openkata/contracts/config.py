"""The run's settings model: what every layer reads of a run's configuration, resolved.

How the values are found (defaults, ini keys, ``.openkata-eval.yaml``, environment variables,
options, keywords) and checked is :mod:`pytest_openkata.infra.config`; this is only the frozen
result. It is a pydantic model because settings come from outside; a provider reads it as it
reads any frozen object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pytest_openkata.contracts.backends import DEFAULT_ANSWER_MAX_BYTES
from pytest_openkata.contracts.settings import SettingValue

__all__ = [
    "DEFAULT_CONTEXT_BUDGET",
    "DEFAULT_THRESHOLD",
    "AnthropicSettings",
    "BudgetSettings",
    "EvalSettings",
    "HttpSettings",
    "PriceSettings",
    "RetrySettings",
    "SandboxSettings",
]

# A skill passes when its overall percentage is at least this (the reference's default).
DEFAULT_THRESHOLD = 95
DEFAULT_CONTEXT_BUDGET = 100_000
"""Estimated tokens a scenario's prompt may hold (``context_budget``): most of a 128k-token
window, leaving room for the agent's own system prompt, its tool calls and its answer."""


class HttpSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    base_url: str = ""
    api_key: str = Field(default="", repr=False)
    endpoint_id: str = ""


class AnthropicSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    base_url: str = "https://api.anthropic.com"
    api_key: str = Field(default="", repr=False)
    max_tokens: int = 4096


class SandboxSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    provider: str = "docker"
    image: str = "openkata-eval:latest"
    timeout: int = 300
    network: str = "host"
    agent: str = "kiro"
    cpus: float = 2.0
    memory: str = "2g"
    pids: int = 512
    # Host folders for every agent; an agent adds the ones it needs (kiro: ~/.aws, ~/.kiro).
    mounts: tuple[tuple[str, str], ...] = ()
    # A pool of engines, each (name, URL); none: the one engine of DOCKER_HOST.
    hosts: tuple[tuple[str, str], ...] = ()
    # Sandboxes at once per engine of the pool; 0: the engine's CPUs divided by ``cpus``.
    per_host: int = 0
    # The client certificates of tcp:// engines (ca.pem, cert.pem, key.pem), as DOCKER_CERT_PATH.
    tls_cert_path: str = ""
    # The agent CLI's npm version the local model's sandbox image installs ("": the pinned one).
    agent_version: str = ""


class RetrySettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    attempts: int = 3
    budget: float = 120.0
    # Times a trial that errored for the infrastructure runs again (core.run).
    infrastructure: int = 0


class PriceSettings(BaseModel):
    """US dollars per million tokens; 0 means not configured (no cost is shown)."""

    model_config = ConfigDict(frozen=True)

    agent_input: float = 0.0
    agent_output: float = 0.0
    judge_input: float = 0.0
    judge_output: float = 0.0


class BudgetSettings(BaseModel):
    """The most a whole run may spend: live tokens (input and output) and US dollars; 0 means
    no limit."""

    model_config = ConfigDict(frozen=True)

    tokens: int = 0
    usd: float = 0.0

    @property
    def limited(self) -> bool:
        return self.tokens > 0 or self.usd > 0


class EvalSettings(BaseModel):
    """The resolved settings of one run. ``sources`` maps each key to where its value came from."""

    model_config = ConfigDict(frozen=True)

    backend: str = "kiro"
    judge_backend: str = ""
    model: str = "claude-sonnet-4.6"
    judge_model: str = ""
    threshold: int = DEFAULT_THRESHOLD
    concurrency: int = 2
    direct_timeout: int = 120
    answer_max_bytes: int = DEFAULT_ANSWER_MAX_BYTES
    context_budget: int = DEFAULT_CONTEXT_BUDGET  # estimated tokens; 0: no budget
    output: str = ""
    model_label: str = ""
    agent_command: str = ""
    # A count, or "auto": run trials until the gate's verdict is settled (see
    # core/auto_trials.py), at most ``trials_max``, at the confidence ``trials_confidence``.
    trials: int | Literal["auto"] = 1
    trials_max: int = 10
    trials_confidence: float = 0.95
    judge_votes: int = 1
    judge_fence: bool = True
    judge_reason_max_chars: int = 0
    simulated_user_model: str = ""
    cache: str = "on"
    max_in_flight: int | Literal["auto"] = 0
    baseline: str = ""
    # Tessl's variants (arms) file, and the label of the variant of the run's own arm
    # (core.variants).
    variants: str = ""
    variant: str = ""
    require_uplift: bool = False
    # Pairwise judging of the two arms of a baseline run (core.pairwise_judge).
    judge_pairwise: bool = False
    # The uplift difference, in points, whose needed number of scenarios the report states.
    uplift_target: float = 10.0
    log_dir: str = ".openkata/runs"
    log_keep: int = 20
    # A live log beside the run logs while the run runs (core.live_log).
    live_log: bool = True
    html: str = ""
    markdown: str = ""
    csv: str = ""
    compare: str = ""
    # A run log whose agent answers this run grades again instead of running the agent.
    rejudge: str = ""
    regression_tolerance: float = 0.0
    fail_on_regression: bool = False
    # Judge agreement: a run log or labels file to measure the judge against, and the gate.
    agreement_with: str = ""
    min_kappa: float | None = None
    allow_drift: bool = False
    publish_errors: bool = False
    scenario_names: str = "scenario-*"
    category: str = ""
    # How the skill reaches the agent: pasted into the prompt, or installed where it looks.
    skill_delivery: Literal["prompt", "installed"] = "prompt"
    # Trigger evals: runs per query, the loads a should-trigger query needs and a
    # should-not-trigger one may have, and the other skills installed beside the skill.
    trigger_runs: int = 3
    trigger_loads_needed: int = 2
    trigger_loads_allowed: int = 1
    trigger_skills: tuple[str, ...] = ()
    http: HttpSettings = HttpSettings()
    anthropic: AnthropicSettings = AnthropicSettings()
    sandbox: SandboxSettings = SandboxSettings()
    retry: RetrySettings = RetrySettings()
    price: PriceSettings = PriceSettings()
    # The price table: (model, US dollars per million input tokens, per million output tokens).
    prices: tuple[tuple[str, float, float], ...] = ()
    budget: BudgetSettings = BudgetSettings()
    # Output tokens a dry run (--eval-estimate) assumes for each agent answer and judge verdict.
    estimate_output_tokens: int = 1000
    # The settings that installed providers declare, by key (``sandboxes.acme.region``), each
    # with its resolved value or its default; a provider reads its own with
    # ``ProviderSetting.value_in``.
    provider_settings: Mapping[str, SettingValue] = {}
    sources: dict[str, str] = {}

    def provider_values(self, provider: str) -> dict[str, SettingValue]:
        """The values of one provider's own settings by name (``provider``: its entry point's
        group and name, ``sandboxes.acme``); ``{}`` for a provider that declares none."""
        prefix = f"{provider}."
        return {
            key.removeprefix(prefix): value
            for key, value in self.provider_settings.items()
            if key.startswith(prefix)
        }

    @property
    def categories(self) -> tuple[str, ...]:
        """The criterion categories the ``category`` setting keeps (none: every criterion)."""
        return tuple(name for name in self.category.split(",") if name)

    @property
    def secrets(self) -> tuple[str, ...]:
        return tuple(s for s in (self.http.api_key, self.anthropic.api_key) if s)
