"""The settings reference is rendered from the settings table: the manual's settings page
(docs/settings.md, through the MkDocs hook docs/hooks/settings_reference.py) names every
built-in setting with its spelling in every source, and no setting that does not exist."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from pytest_openkata import ProviderSetting
from pytest_openkata.infra.config import FIELDS, Setting, provider_row
from pytest_openkata.infra.provider_settings import DeclaredSetting
from pytest_openkata.infra.settings_reference import reference_table

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ROOT / "docs" / "settings.md"
HOOK = ROOT / "docs" / "hooks" / "settings_reference.py"


def _hook() -> ModuleType:
    pytest.importorskip("mkdocs", reason="the docs extra renders the manual")
    spec = importlib.util.spec_from_file_location("settings_reference_hook", HOOK)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _spellings(field: Setting) -> list[str]:
    names = [field.key, field.ini, field.env]
    return names + ([field.option] if field.option else [])


def _rows(markdown: str) -> dict[str, str]:
    """The rows of the table by their first cell's text."""
    rows = [line for line in markdown.splitlines() if line.startswith("| `")]
    return {row.split("|")[1].strip().strip("`"): row for row in rows}


def test_the_rendered_page_has_a_row_per_setting_with_every_spelling() -> None:
    page = _hook().render(SETTINGS.read_text())

    rows = _rows(page)
    assert list(rows) == [field.key for field in FIELDS]
    missing = [
        f"{field.key}: {name}"
        for field in FIELDS
        for name in _spellings(field)
        if f"`{name}`" not in rows[field.key]
    ]
    assert missing == []
    assert "<!--" not in page  # the marker was replaced


def test_a_providers_own_setting_renders_as_a_built_in_one() -> None:
    region = ProviderSetting(name="region", type=str, default="eu", help="where sandboxes start")
    row = provider_row(DeclaredSetting("sandboxes.acme", "sandbox provider", region))

    (line,) = _rows(reference_table([row])).values()

    assert line == (
        "| `sandboxes.acme.region` | `--eval-sandboxes-acme-region` | "
        "`eval_sandboxes_acme_region` | `OPENKATA_EVAL_SANDBOXES_ACME_REGION` | `TEXT` | eu | "
        "where sandboxes start (default eu) |"
    )


def test_the_settings_page_names_no_setting_that_does_not_exist() -> None:
    page = _hook().render(SETTINGS.read_text())

    known = {field.env for field in FIELDS}
    mentioned = set(re.findall(r"OPENKATA_EVAL_[A-Z_]+[A-Z]", page))
    # OPENKATA_EVAL_DEBUG is read by the reference's judge, not a setting of the plugin; the
    # provider's setting is the page's example of one.
    assert mentioned - known - {"OPENKATA_EVAL_DEBUG", "OPENKATA_EVAL_SANDBOXES_ACME_REGION"} == (
        set()
    )


def test_the_built_sites_settings_page_lists_every_setting(tmp_path: Path) -> None:
    pytest.importorskip("material", reason="the docs extra builds the manual")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", tmp_path],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr

    html = (tmp_path / "settings" / "index.html").read_text()
    missing = [
        f"{field.key}: {name}"
        for field in FIELDS
        for name in _spellings(field)
        if f"<code>{name}</code>" not in html
    ]
    assert missing == []
