"""Nothing is lost when the disk is full or when runs overlap.

A full disk: every report the run cannot write is named with the reason, the run fails with
the count on its last line and no traceback, no partial or temporary file is left where the
reports go, and once there is room again a second run writes them all from the cache without
asking any model again. The disk is a small tmpfs, mounted in a mount namespace of the run's
own (``unshare``), which disappears with it.

Overlapping runs: two runs of the same skills in the same checkout at once each finish, each
leaves its own run log and results JSON, and neither overwrites the other's.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_skill

GUARD_SECONDS = 300
REPORTS_ON_THE_FULL_DISK = (
    "--eval-log-dir", "full/runs",
    "--eval-output", "full/results/",
    "--eval-html", "full/report.html",
    "--eval-markdown", "full/report.md",
    "--eval-csv", "full/report.csv",
)  # fmt: skip


def _in_a_full_disk(root: Path, command: list[str]) -> None:
    """Run ``command`` twice in ``root``: first with ``full/`` a tmpfs with no room left, then
    once the file that filled it is removed; the outputs, statuses and listings of ``full/``
    go to ``first.*`` and ``second.*``."""
    if shutil.which("unshare") is None:
        pytest.fail("unshare (util-linux) is needed to give the run a disk of its own")
    (root / "full").mkdir()
    run = shlex.join(command)
    script = f"""
        set -u
        mount -t tmpfs -o size=256k tmpfs full || exit 97
        head -c 400000 /dev/zero > full/fill 2>/dev/null
        {run} > first.out 2>&1; echo $? > first.rc; find full -type f > first.ls
        rm full/fill
        {run} > second.out 2>&1; echo $? > second.rc; find full -type f > second.ls
    """
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script],
        cwd=root,
        capture_output=True,
        timeout=GUARD_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()


def test_a_full_disk_loses_nothing(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    root = pytester.path
    write_skill(root, "s", {"scenario-a": {"x": 1, "y": 1}})
    script.verdicts["y"] = (False, "not quite")
    command = [sys.executable, "-m", "pytest", "skills/s", *eval_args(endpoint.base_url)]

    _in_a_full_disk(root, [*command, *REPORTS_ON_THE_FULL_DISK])

    first = (root / "first.out").read_text()
    assert (root / "first.rc").read_text().strip() == "1", first[-3000:]
    assert "Traceback" not in first
    unwritten = [line for line in first.splitlines() if "No space left on device" in line]
    for what in (
        "could not write full/results/results-",
        "could not write the run log under full/runs:",  # no machine path
        "could not write the CSV rows full/report.csv:",
        "could not write the HTML report full/report.html",
        "could not write the Markdown report full/report.md:",
    ):
        assert sum(what in line for line in unwritten) == 1, (what, first[-3000:])
    assert first.rstrip().splitlines()[-1] == "s 50% < 95%; 5 reports not written: exit 1"
    assert (root / "first.ls").read_text().split() == ["full/fill"]  # no partial or temp file
    calls = len(endpoint.requests)

    second = (root / "second.out").read_text()
    assert (root / "second.rc").read_text().strip() == "1", second[-3000:]
    assert second.rstrip().splitlines()[-1] == "s 50% < 95%: exit 1"
    assert len(endpoint.requests) == calls  # every answer and verdict came from the cache
    written = sorted((root / "second.ls").read_text().split())
    assert written[:3] == ["full/report.csv", "full/report.html", "full/report.md"], written
    assert [Path(name).parent.name for name in written[3:]] == ["results", "runs"], written


def test_two_runs_at_once_in_one_checkout_keep_both_runs(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    root = pytester.path
    write_skill(root, "s", {"scenario-a": {"x": 1}, "scenario-b": {"y": 1}})
    command = [
        sys.executable, "-m", "pytest", "skills/s", *eval_args(endpoint.base_url),
        "--eval-cache", "off",
    ]  # fmt: skip

    runs = [
        subprocess.Popen(command, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for _ in range(2)
    ]
    outputs = [run.communicate(timeout=GUARD_SECONDS)[0].decode() for run in runs]

    assert [run.returncode for run in runs] == [0, 0], outputs
    logs = sorted((root / ".openkata" / "runs").glob("*.jsonl"))
    assert len(logs) == 2
    reports = sorted(root.glob("skills/s/evals/results/**/*.json"))
    assert len(reports) == 2
    for report in reports:
        assert [s["name"] for s in json.loads(report.read_text())["scenarios"]] == [
            "scenario-a",
            "scenario-b",
        ]
    assert len(endpoint.requests) == 8  # each run asked for its own answers and verdicts
