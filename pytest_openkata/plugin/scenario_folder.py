"""What every item of one scenario folder shares, in a run and in lint mode: its ``-k``
keywords and its conftest hooks."""

from __future__ import annotations

import functools

import pluggy
import pytest

from pytest_openkata.core.scenario import sandbox_mode


class ScenarioFolderItem(pytest.Function):
    """An item whose path is a scenario folder (``self.path``), with its skill's keyword."""

    def mark_skill(self) -> None:
        """``-k skill:<name>`` selects the item."""
        self.extra_keyword_matches.add(f"skill:{self.path.parent.parent.name}")

    def listextrakeywords(self) -> set[str]:
        # "sandbox" or "direct" is worked out when -k asks for the keywords, not for every
        # scenario at collection: it reads scenario.json.
        keywords = super().listextrakeywords()
        mode = sandbox_mode(self.path)
        if mode is not None:
            keywords.add(mode)
        return keywords

    @functools.cached_property
    def ihook(self) -> pluggy.HookRelay:
        # The item's path is a folder no Directory collector loaded; without this, conftest
        # hooks of the skill and above would not fire for the item. Worked out once: every
        # conftest.py of the skill and above is loaded before its scenarios are collected,
        # and pytest asks for the item's hooks about 14 times per item.
        assert self.parent is not None  # an item always has its evals folder as parent
        return self.parent.ihook
