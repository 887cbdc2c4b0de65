"""A scenario of any format made runnable by the existing pipeline: written by the formats' own
openkata writer into a private folder of the run, so that prompts, judging, checks, the
sandbox and every report treat it as any openkata scenario folder.

The folder is ``<skill>/evals/.openkata-<host>-<pid>-<random>.tmp/scenario-<name>/`` (a
temporary folder of :mod:`pytest_openkata.infra.tempfiles`): below the skill's ``evals``
folder, so that the scenario belongs to the real skill (its SKILL.md and files) without
copying it. It is hidden, never collected, and removed by :meth:`Staging.close`, which the
plugin calls at the end of the run on every exit path; one left by a run killed outright
(SIGKILL) is removed by the next run that stages a scenario of that skill. Texts that name
it (an error) are rewritten by :meth:`Staging.shown` to name the original file instead
(``evals/evals.json: evals[2]``), so that no report holds the temporary folder or a machine
path.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pytest_openkata.contracts.errors import OpenkataError
from pytest_openkata.core.formats import EvalFormat, ScenarioSource
from pytest_openkata.core.formats.model import shown_path
from pytest_openkata.core.formats.writers import folder_name, write_openkata
from pytest_openkata.infra.tempfiles import new_temp_folder, remove_stale

__all__ = ["Staged", "Staging", "StagingError", "shown_source"]


def shown_source(source: ScenarioSource) -> str:
    """How messages name a format's scenario: its file (without the machine's folders) and
    where in it (``evals/evals.json: evals[2]``)."""
    shown = shown_path(source.path)
    return f"{shown}: {source.key}" if source.key else shown


class StagingError(OpenkataError):
    """A scenario could not be written out to run (its skill's folder cannot be written)."""


@dataclass(frozen=True)
class Staged:
    """A scenario written out: its folder, and the texts that name it and the source instead."""

    folder: Path
    skill_dir: Path
    source: ScenarioSource
    # scenario.json's keys by the format's own name of them (EvalFormat's optional
    # ``scenario_keys``): an error about one names the format's key instead.
    keys: Mapping[str, str] = field(default_factory=dict)

    def shown(self, text: str) -> str:
        """``text`` with every naming of the staged folder (absolute, or relative to the
        skill as errors name files) replaced by the scenario's source, and scenario.json's
        keys by the format's own."""
        label = shown_source(self.source)
        relative = self.folder.relative_to(self.skill_dir).as_posix()
        for spelling in (str(self.folder), relative):
            for key, theirs in self.keys.items():
                text = text.replace(f"{spelling}/scenario.json: {key}", f"{label}: {theirs}")
            text = text.replace(spelling + "/", label + ": ").replace(spelling, label)
        return text


class Staging:
    """The run's staged scenarios; thread-safe (scenarios run ahead on threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._roots: dict[Path, Path] = {}  # the skill's evals folder -> its staging folder
        self._made_evals: set[Path] = set()
        self._staged: dict[tuple[str, Path, str, str], Staged] = {}

    def stage(self, fmt: EvalFormat, source: ScenarioSource, skill_dir: Path) -> Staged:
        """Read ``source`` with its format and write it out once per run (a
        ``FormatError`` of the reader propagates, naming the original file)."""
        key = (source.format, source.path, source.key, source.name)
        with self._lock:
            if key in self._staged:
                return self._staged[key]
            scenario = fmt.load(source)
            try:
                root = self._root(skill_dir)
                folder = root / folder_name(scenario.name)
                if folder.exists():  # two sources of one name in one skill: a folder each
                    root = new_temp_folder(root.parent)
                    self._roots[root] = root
                    folder = root / folder_name(scenario.name)
                write_openkata([scenario], root)
            except OSError as exc:
                raise StagingError(
                    f"{shown_source(source)}: cannot be written out to run in the skill's "
                    f"evals folder: {exc.strerror or 'error'}"
                ) from None
            keys = dict(getattr(fmt, "scenario_keys", None) or {})
            staged = Staged(folder, skill_dir, source, keys)
            self._staged[key] = staged
            return staged

    def _root(self, skill_dir: Path) -> Path:
        evals = skill_dir / "evals"
        if evals in self._roots:
            return self._roots[evals]
        try:
            evals.mkdir()
        except FileExistsError:
            pass  # the skill's own, or made a moment ago by another worker of the run
        else:
            self._made_evals.add(evals)
        remove_stale(evals)  # what a run killed outright left here
        root = new_temp_folder(evals)
        self._roots[evals] = root
        return root

    def close(self) -> None:
        """Remove every staged folder (and an ``evals`` folder made only to hold them)."""
        with self._lock:
            for root in self._roots.values():
                shutil.rmtree(root, ignore_errors=True)
            for evals in self._made_evals:
                with contextlib.suppress(OSError):
                    os.rmdir(evals)  # only when empty: nothing else was put there
            self._roots.clear()
            self._made_evals.clear()
            self._staged.clear()
