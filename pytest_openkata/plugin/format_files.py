"""Which files mark a published eval format's folder: the registered formats by the names of
their ``files`` (``evals.json``, ``eval.yaml``, ``task.toml``), worked out once per run, so
that collection asks a format only about folders holding one of them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_openkata.core.formats import EvalFormat

__all__ = ["formats_by_file", "marker_files"]

_FORMATS = pytest.StashKey[dict[str, list["EvalFormat"]]]()


def formats_by_file(config: pytest.Config) -> dict[str, list[EvalFormat]]:
    """The registered formats by the names of the files that mark them, made once per run."""
    if _FORMATS not in config.stash:
        # Here: a run that collects no folder never loads the formats.
        from pytest_openkata.core.formats import load_format
        from pytest_openkata.infra import registry

        by_file: dict[str, list[EvalFormat]] = {}
        for name in registry.FORMATS.names():
            fmt = load_format(name)
            for file_name in getattr(fmt, "files", ()):
                by_file.setdefault(file_name, []).append(fmt)
        config.stash[_FORMATS] = by_file
    return config.stash[_FORMATS]


def marker_files(config: pytest.Config) -> frozenset[str]:
    """The names of every format's marking files."""
    return frozenset(formats_by_file(config))
