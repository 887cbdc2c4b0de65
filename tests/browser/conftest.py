"""The browser tests drive Debian's chromium (``/usr/bin/chromium``, or ``OPENKATA_CHROMIUM``)
through playwright; no browser is ever downloaded.

Without chromium (or playwright) the tests of this folder are deselected and the summary says
so in one line, as the corpus tests are; on CI (``CI`` set) they run all the same and fail,
so that a CI machine without the browser never passes by skipping them.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser

HERE = Path(__file__).resolve().parent
CHROMIUM = Path(os.environ.get("OPENKATA_CHROMIUM", "/usr/bin/chromium"))
# No sandbox (tests run as root in containers), no GPU, and nothing of chromium's own that
# goes to the network.
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)

_note = pytest.StashKey[str]()


def missing_browser() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    if not os.access(CHROMIUM, os.X_OK) or CHROMIUM.is_dir():
        return f"chromium not found at {CHROMIUM} (apt-get install chromium)"
    if importlib.util.find_spec("playwright") is None:
        return "the playwright package is not installed (pip install -e '.[test]')"
    return None


def _here(item: pytest.Item) -> bool:
    return item.path.is_relative_to(HERE)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = missing_browser()
    if reason is None or "CI" in os.environ:
        return
    needing = [item for item in items if _here(item)]
    if not needing:
        return
    items[:] = [item for item in items if not _here(item)]
    config.hook.pytest_deselected(items=needing)
    noun = "browser test" if len(needing) == 1 else "browser tests"
    config.stash[_note] = f"deselected {len(needing)} {noun}: {reason}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    note = terminalreporter.config.stash.get(_note, None)
    if note is not None:
        terminalreporter.write_line(note, yellow=True)


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """A headless chromium for the session (on CI without one: an error saying so)."""
    reason = missing_browser()
    if reason is not None:
        pytest.fail(f"{reason}; CI is set, so the browser tests fail rather than being skipped")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=list(CHROMIUM_ARGS), headless=True
        )
        try:
            yield launched
        finally:
            launched.close()
