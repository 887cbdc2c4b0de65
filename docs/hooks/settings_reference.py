"""MkDocs hook: the settings page's table of every built-in setting, rendered from the
settings table of the code (``FIELDS``) where the page holds the marker, so that the manual
lists every setting with every spelling and a new one cannot be left out.

Settings that installed providers declare join the table at run time only (``pytest --help``
lists them); the manual lists the built-in ones.
"""

from __future__ import annotations

from typing import Any

from mkdocs.exceptions import PluginError

from pytest_openkata.infra.config import FIELDS
from pytest_openkata.infra.settings_reference import reference_table

PAGE = "settings.md"
MARKER = "<!-- settings table: rendered from FIELDS by docs/hooks/settings_reference.py -->"


def render(markdown: str) -> str:
    """The settings page with its table in place of the marker."""
    if markdown.count(MARKER) != 1:
        raise PluginError(f"{PAGE}: expected the marker {MARKER!r} once")
    return markdown.replace(MARKER, reference_table(FIELDS))


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    return render(markdown) if page.file.src_uri == PAGE else markdown
