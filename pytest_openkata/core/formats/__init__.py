"""Published eval formats read as they are, into one scenario model.

A format is a provider of the entry-point group ``pytest_openkata.formats``: a class, made
without arguments, implementing :class:`EvalFormat`. It says whether a folder holds evals of
its kind (:meth:`EvalFormat.detect`), lists the scenarios there, each with a stable name and
the file it comes from (:meth:`EvalFormat.scenarios`), and reads each into the neutral
:class:`EvalScenario` (:meth:`EvalFormat.load`). A key or grader the format has and this
plugin cannot honour raises :class:`FormatError` naming the file, the key and the format.

Built in, one module each: ``openkata`` (openkata/Tessl scenario folders, with Tessl's
fixtures and setup), ``skill_creator`` (``evals/evals.json``), ``waza`` and ``skillgrade``
(their ``eval.yaml``), ``harbor`` (task folders); ``writers`` writes the model back out as
openkata folders or as ``evals.json``. Collection is to read formats through this package
(and :func:`detect_formats`), never a runner's files directly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

from pytest_openkata.core.formats.model import (
    DirectoryFixture,
    EvalScenario,
    FormatError,
    InputFile,
    JudgedCriterion,
    SandboxNeeds,
    ScenarioSource,
)
from pytest_openkata.infra import registry

__all__ = [
    "DirectoryFixture",
    "EvalFormat",
    "EvalScenario",
    "FormatError",
    "InputFile",
    "JudgedCriterion",
    "SandboxNeeds",
    "ScenarioSource",
    "detect_formats",
    "load_format",
]


@runtime_checkable
class EvalFormat(Protocol):
    """One published eval format."""

    name: str
    # The names of the files that mark a folder holding this format's evals (``evals.json``,
    # ``eval.yaml``, ``task.toml``): collection asks :meth:`detect` only about the folder of
    # such a file, so that a run never asks every format about every folder. A format
    # without ``files`` is read by ``convert`` only.
    files: tuple[str, ...]
    # Optionally also ``scenario_keys``: scenario.json's keys (``build_timeout_sec``) that
    # come from a key of the format's own (``environment.build_timeout_sec``), so that an
    # error about one names the key the user wrote.

    def detect(self, folder: Path) -> bool:
        """Whether ``folder`` holds evals of this format (cheap: reads no more than it must)."""
        ...

    def scenarios(self, folder: Path) -> list[ScenarioSource]:
        """The scenarios in ``folder``, in a stable order, each with a stable name."""
        ...

    def load(self, source: ScenarioSource) -> EvalScenario:
        """One scenario in the neutral model; :class:`FormatError` for what cannot be run."""
        ...


def load_format(name: str) -> EvalFormat:
    """The format registered as ``name`` (``UnknownProviderError`` lists those that are)."""
    made: EvalFormat = registry.FORMATS.load(name)()
    return made


def detect_formats(folder: Path) -> list[EvalFormat]:
    """Every registered format that finds evals in ``folder``, in name order."""
    found = []
    for name in registry.FORMATS.names():
        fmt = load_format(name)
        if fmt.detect(folder):
            found.append(fmt)
    return found
