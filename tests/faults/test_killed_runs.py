"""A run killed outright (SIGKILL) leaves no agent behind for good: the kernel ends the agent CLI
it ran on the host (its parent-death signal), and the next run stops what the CLI had started
and says so; the agents of a run still going are left alone.

The runs of each test live in a pid namespace of their own (``unshare``), as on a host of their
own: the other tests' runs, which sweep too, neither see nor touch them
(``killed_run_driver.py`` runs them there and says what it saw).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_openkata.infra.processes import host_tag
from tests.architecture.test_core_without_pytest import run_without_pytest
from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, evaluate_skill_s, write_skill

DRIVER = Path(__file__).with_name("killed_run_driver.py")
REPO = Path(__file__).resolve().parents[2]
GUARD_SECONDS = 300


def _in_a_pid_namespace(root: Path, endpoint: ScriptedEndpoint, case: str) -> dict[str, Any]:
    if shutil.which("unshare") is None:
        pytest.fail("unshare (util-linux) is needed to give the runs a pid namespace")
    done = subprocess.run(
        [
            "unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc",
            sys.executable, str(DRIVER), str(root), endpoint.base_url, case,
        ],
        cwd=root,
        capture_output=True,
        timeout=GUARD_SECONDS,
        check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    seen: dict[str, Any] = json.loads(done.stdout)
    return seen


def test_the_next_run_stops_what_a_killed_runs_agent_started_and_says_so(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})

    seen = _in_a_pid_namespace(pytester.path, endpoint, "killed")

    # The parent-death signal ended the CLI (sh); what it started (sleep) is out of its reach.
    [[pid, name]] = seen["left"]
    assert name == "sleep"
    assert (
        f"openkata: stopped 1 agent process left by a run that is over: pid {pid} (sleep 600)"
        in seen["output"]
    ), seen["output"][-3000:]
    assert seen["still_running"] == []
    # Its agent's events folder, left in the temporary folder, is removed too, and said.
    assert [name.split("-")[:3] for name in seen["left_folders"]] == [
        ["openkata", "command", "events"]
    ]
    assert seen["folders_after"] == []
    assert (
        f"openkata: removed 1 temporary folder left by a killed run in {pytester.path / 'tmp'}"
        in seen["output"]
    ), seen["output"][-3000:]


def test_a_run_leaves_the_agents_of_a_run_still_going_alone(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})

    seen = _in_a_pid_namespace(pytester.path, endpoint, "alive")

    assert seen["agents"] == 2
    assert "left by a run that is over" not in seen["output"]
    assert len(seen["still_running"]) == 2
    assert seen["folders"] != []
    assert seen["folders_after"] == seen["folders"]
    assert "temporary folder" not in seen["output"]


def test_evaluate_removes_the_folders_a_killed_run_left_in_the_temporary_folder(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-a": {"x": 1}})
    temporary = pytester.path / "tmp"
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)  # fmt: skip
    left = temporary / f"openkata-codex-{host_tag()}-{int(ended.stdout)}-k1ll3d_x"
    (left / "sessions").mkdir(parents=True)
    code = evaluate_skill_s(
        endpoint.base_url,
        "cat > /dev/null; echo an answer long enough to be judged",
        before=f"import tempfile\ntempfile.tempdir = {str(temporary)!r}",
    )

    result = run_without_pytest(code, cwd=pytester.path)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"
    assert not left.exists()
    assert list(temporary.iterdir()) == []  # nor did the run leave one of its own
    assert (
        f"openkata: removed 1 temporary folder left by a killed run in {temporary}"
    ) in result.stderr
