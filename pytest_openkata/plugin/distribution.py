"""What the xdist controller hands each worker: the run's settings and the worker's share of
the run's caps, so that workers on other hosts (``--tx ssh=…``, ``--tx socket=…``) run as local
ones do.

A remote worker sees neither the controller's environment (its ``OPENKATA_EVAL_*`` variables)
nor its lock files. So the controller sends, through xdist's ``workerinput``:

- its resolved settings without secrets: every worker evaluates with the controller's model,
  threshold and sandbox settings, as the reports it writes say, and keeps its own API keys;
- the worker's group (the workers that share a host and a folder, and so lock files) and the
  size of every group, from which each worker works out its group's part of ``max_in_flight``
  and of every engine's room (:mod:`pytest_openkata.infra.shares`); the parts add up to the
  cap, so the cap holds across hosts.

These are xdist's documented hooks (``pytest_xdist_setupnodes``, ``pytest_configure_node``);
the module is registered only where xdist is active.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from pytest_openkata.infra.config import EvalSettings
from pytest_openkata.infra.shares import ALONE, Share
from pytest_openkata.plugin.session import settings_key

SETTINGS_INPUT = "openkata_settings"
GROUP_INPUT = "openkata_group"
_SECRETS = {"http": ("api_key",), "anthropic": ("api_key",)}

_groups_key = pytest.StashKey[dict[str, int]]()
_weights_key = pytest.StashKey[tuple[int, ...]]()


def group_of(spec: Any) -> str:
    """The group of an execnet gateway spec: the host it runs on and its folder (workers
    started on this host in the controller's folder are one group)."""
    host = spec.ssh or spec.socket or getattr(spec, "vagrant_ssh", None) or ""
    if not host and not spec.chdir:
        return "local"
    kind = "ssh" if spec.ssh else "socket" if spec.socket else "popen"
    return f"{kind}={host}//chdir={spec.chdir or ''}"


@pytest.hookimpl
def pytest_xdist_setupnodes(config: pytest.Config, specs: Sequence[Any]) -> None:
    sizes = Counter(group_of(spec) for spec in specs)
    order = {name: index for index, name in enumerate(sizes)}
    config.stash[_groups_key] = order
    config.stash[_weights_key] = tuple(sizes[name] for name in order)
    settings = config.stash[settings_key]
    if 0 < settings.max_in_flight < len(order):
        raise pytest.UsageError(
            f"pytest-openkata: max_in_flight {settings.max_in_flight} cannot be shared by "
            f"the workers of {len(order)} hosts or folders (each needs at least one request "
            f"in flight): set it to {len(order)} or more"
        )


@pytest.hookimpl
def pytest_configure_node(node: Any) -> None:
    config = node.config
    group = config.stash[_groups_key][group_of(node.gateway.spec)]
    node.workerinput[GROUP_INPUT] = [group, list(config.stash[_weights_key])]
    node.workerinput[SETTINGS_INPUT] = shareable(config.stash[settings_key])


def shareable(settings: EvalSettings) -> dict[str, Any]:
    """The settings as plain data for a worker, without secrets."""
    data = settings.model_dump(mode="json")
    for section, keys in _SECRETS.items():
        for key in keys:
            data[section][key] = ""
    return data


def worker_settings(config: pytest.Config, own: EvalSettings) -> EvalSettings:
    """In a worker, the controller's settings with this worker's own secrets; elsewhere, the
    process's own settings."""
    given = getattr(config, "workerinput", {}).get(SETTINGS_INPUT)
    if given is None:
        return own
    received = EvalSettings.model_validate(given)
    update = {
        section: getattr(received, section).model_copy(
            update={key: getattr(getattr(own, section), key) for key in keys}
        )
        for section, keys in _SECRETS.items()
    }
    return received.model_copy(update=update)


def share_of(config: pytest.Config) -> Share:
    """This process's group and every group's size (all of every cap without xdist)."""
    given = getattr(config, "workerinput", {}).get(GROUP_INPUT)
    if given is None:
        return ALONE
    index, weights = given
    return Share(int(index), tuple(int(weight) for weight in weights))
