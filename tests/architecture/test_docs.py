"""The README is a front page that leads into the manual, and the manual's site is whole:
every page of docs/ is in its navigation, and every link of the README leads somewhere."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
LINK = re.compile(r"\]\(([^()\s]+)\)")


def test_the_readme_is_a_front_page() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    # Its two quick-start commands: the main job on the local model, and the test suite.
    assert (
        "python -m pytest_openkata.localmodel run -- python -m pytest skills/commit-message" in text
    )
    assert 'pip install -e ".[test]" && python -m pytest' in text
    # The quick start ends with the viewer opened on the runs of the first command.
    quick_start = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert quick_start.rstrip().endswith("python -m pytest_openkata view\n```")


def test_every_relative_link_of_the_readme_leads_to_a_file_of_the_repository() -> None:
    targets = [t for t in LINK.findall(README.read_text()) if "://" not in t]
    assert targets  # it links into the manual
    missing = [t for t in targets if not (ROOT / t.partition("#")[0]).exists()]
    assert missing == []


def _nav_pages(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [page for item in node for page in _nav_pages(item)]
    if isinstance(node, dict):
        return [page for value in node.values() for page in _nav_pages(value)]
    return []


def test_every_page_of_the_manual_is_in_the_sites_navigation() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    pages = sorted(_nav_pages(config["nav"]))
    assert pages == sorted(p.name for p in (ROOT / "docs").glob("*.md"))
