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

xdist hands a worker on another host (or in another folder: any spec but a plain ``popen``)
only the path arguments under an rsync root (``--rsyncdir``, copied into the worker's
``chdir``), rewritten relative to it, and stops with an internal error on any other; the
controller says so as a usage error before it starts a worker.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.infra.config import FIELDS_BY_KEY, resolve_settings
from pytest_openkata.infra.shares import ALONE, Share
from pytest_openkata.plugin import compat
from pytest_openkata.plugin.session import settings_key

SETTINGS_INPUT = "openkata_settings"
GROUP_INPUT = "openkata_group"
_SECRETS = {"http": ("api_key",), "anthropic": ("api_key",)}

_groups_key = pytest.StashKey[dict[str, int]]()
_weights_key = pytest.StashKey[tuple[int, ...]]()


def group_of(spec: Any) -> str:
    """The group of an execnet gateway spec: the host it runs on and its folder (workers
    started on this host in the controller's folder are one group). A ``popen`` worker
    ``via`` a proxy gateway (``--px``) runs on the proxy's host, in the proxy's folder unless
    it has a ``chdir``."""
    host = spec.ssh or spec.socket or getattr(spec, "vagrant_ssh", None) or ""
    via = getattr(spec, "via", None) or ""
    if not host and not via and not spec.chdir:
        return "local"
    kind = "ssh" if spec.ssh else "socket" if spec.socket else "popen"
    return f"{kind}={host}//via={via}//chdir={spec.chdir or ''}"


def _rewrites_paths(spec: Any) -> bool:
    """Whether xdist hands this worker its path arguments relative to the rsync roots."""
    return not spec.popen or bool(spec.chdir)


def _unplaceable(config: pytest.Config) -> list[str]:
    """The path arguments that xdist cannot hand a worker on another host (it rewrites only
    those under an rsync root, as absolute paths)."""
    roots = compat.xdist_rsync_roots(config)
    found = []
    for arg in map(str, config.invocation_params.args):
        path = Path(arg.split("::")[0])
        try:
            exists = path.exists()
        except OSError:
            exists = False
        if exists and not (path.is_absolute() and any(path.is_relative_to(r) for r in roots)):
            found.append(arg)
    return found


@pytest.hookimpl
def pytest_xdist_setupnodes(config: pytest.Config, specs: Sequence[Any]) -> None:
    sizes = Counter(group_of(spec) for spec in specs)
    order = {name: index for index, name in enumerate(sizes)}
    config.stash[_groups_key] = order
    config.stash[_weights_key] = tuple(sizes[name] for name in order)
    settings = config.stash[settings_key]
    cap = settings.max_in_flight
    if cap != "auto" and 0 < cap < len(order):
        raise pytest.UsageError(
            f"pytest-openkata: max_in_flight {settings.max_in_flight} cannot be shared by "
            f"the workers of {len(order)} hosts or folders (each needs at least one request "
            f"in flight): set it to {len(order)} or more"
        )
    unplaceable = _unplaceable(config) if any(map(_rewrites_paths, specs)) else []
    if unplaceable:
        raise pytest.UsageError(
            f"pytest-openkata: {unplaceable[0]}: xdist hands workers on other hosts only paths "
            "under an --rsyncdir, which it copies into their chdir; name no path (testpaths), "
            'or give it absolute and its folder as --rsyncdir (pytest "$PWD/skills" '
            '--rsyncdir "$PWD/skills"), or write --option=PATH as one argument'
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


def worker_settings(
    config: pytest.Config, own: EvalSettings | Callable[[], EvalSettings]
) -> EvalSettings:
    """In a worker, the controller's settings with this worker's own secrets; elsewhere, the
    process's own settings. ``own`` is those settings, or resolves them.

    A worker needs only the secrets of its own settings. When they do not resolve (given as
    a callable: a config file that its host lacks, a variable of its environment that the
    controller's plugin does not know), its secrets come from its environment alone: a
    worker that stopped in its configuration would only be started again by xdist, without
    end under ``--tx`` (no ``--max-worker-restart``)."""
    given = getattr(config, "workerinput", {}).get(SETTINGS_INPUT)
    if given is None:
        return own() if callable(own) else own
    received = EvalSettings.model_validate(given)
    if callable(own):
        try:
            own = own()
        except pytest.UsageError:
            own = secrets_from(os.environ)
    update = {
        section: getattr(received, section).model_copy(
            update={key: getattr(getattr(own, section), key) for key in keys}
        )
        for section, keys in _SECRETS.items()
    }
    return received.model_copy(update=update)


def secrets_from(environ: Mapping[str, str]) -> EvalSettings:
    """Default settings with the secrets that ``environ`` gives (``OPENKATA_EVAL_*_API_KEY``)."""
    names = [
        FIELDS_BY_KEY[f"{section}.{key}"].env for section, keys in _SECRETS.items() for key in keys
    ]
    chosen = {name: environ[name] for name in names if name in environ}
    return resolve_settings(ini={}, yaml_path=None, environ=chosen, cli={})


def share_of(config: pytest.Config) -> Share:
    """This process's group and every group's size (all of every cap without xdist)."""
    given = getattr(config, "workerinput", {}).get(GROUP_INPUT)
    if given is None:
        return ALONE
    index, weights = given
    return Share(int(index), tuple(int(weight) for weight in weights))
