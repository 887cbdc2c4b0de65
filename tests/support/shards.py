"""Helpers of the shard tests: the results JSON files a run left, a report without its
timestamp and timings, and the merge command run as users run it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

# Every run of a comparison makes all its calls: a cached answer would change the usage counts.
NO_CACHE = ("--eval-cache", "off")


def reports(root: Path) -> dict[str, str]:
    """Every results JSON written under the project (published or held back), by its path
    with the timestamp of its name replaced."""
    found = {}
    for path in sorted(root.glob("skills/*/evals/results/**/*.json")) + sorted(
        root.glob(".openkata/runs/unpublished/**/*.json")
    ):
        name = re.sub(r"\d{4}-\d\d-\d\dT\d{6}", "TIME", path.relative_to(root).as_posix())
        found[name] = path.read_text()
    return found


def clear_reports(root: Path) -> None:
    """Remove the results JSON files a run left, published or held back."""
    for results in root.glob("skills/*/evals/results"):
        shutil.rmtree(results)
    shutil.rmtree(root / ".openkata" / "runs" / "unpublished", ignore_errors=True)


def timeless(report: str) -> str:
    """A report without its timestamp and timings."""
    text = re.sub(r'"timestamp": "[^"]*"', '"timestamp": "T"', report)
    return re.sub(r'"seconds": [0-9.e+-]+', '"seconds": 0', text)


def merge(root: Path, *folders: str) -> subprocess.CompletedProcess[str]:
    """``python -m pytest_openkata merge FOLDER...`` in ``root``."""
    return subprocess.run(
        [sys.executable, "-m", "pytest_openkata", "merge", *folders],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
