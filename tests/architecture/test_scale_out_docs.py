"""The GitHub Actions workflow of docs/scale-out.md fits together and works: its matrix job and
merge job agree on the shards, the artifacts and the folders, and its commands, run as the
jobs would run them (each matrix job, the artifacts laid out as ``download-artifact`` lays
them out, then the merge), write the report the unsharded run writes."""

from __future__ import annotations

import fnmatch
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, write_scenario, write_skill

DOC = Path(__file__).resolve().parents[2] / "docs" / "scale-out.md"
MATRIX = "${{ matrix.shard }}"
SHARD = "MATRIX_SHARD"  # the expression, as one word for shlex (Actions replaces it first)


def _workflow() -> dict[str, Any]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("### Shards in GitHub Actions", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.DOTALL)
    assert block is not None, "no workflow under 'Shards in GitHub Actions'"
    loaded = yaml.safe_load(block.group(1))
    assert isinstance(loaded, dict)
    return loaded


def _step(job: dict[str, Any], *, uses: str = "", runs: str = "") -> dict[str, Any]:
    found = [
        step
        for step in job["steps"]
        if (uses and str(step.get("uses", "")).startswith(uses))
        or (runs and str(step.get("run", "")).startswith(runs))
    ]
    assert len(found) == 1, (uses or runs, found)
    return found[0]


def _option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def _parts() -> dict[str, Any]:
    """What the two jobs say: the shards, the commands, the folders and artifact names."""
    jobs = _workflow()["jobs"]
    evaluate, merge = jobs["eval"], jobs["merge"]
    shards = evaluate["strategy"]["matrix"]["shard"]
    command = shlex.split(_step(evaluate, runs="pytest ")["run"].replace(MATRIX, SHARD))
    upload = _step(evaluate, uses="actions/upload-artifact")
    download = _step(merge, uses="actions/download-artifact")
    merging = shlex.split(_step(merge, runs="python -m pytest_openkata merge")["run"])
    return {
        "eval": evaluate,
        "merge": merge,
        "shards": shards,
        "command": command,
        "upload": upload,
        "download": download,
        "merging": merging,
    }


def test_the_matrix_job_and_the_merge_job_agree() -> None:
    parts = _parts()
    shards, command = parts["shards"], parts["command"]
    assert shards == list(range(1, len(shards) + 1))
    assert parts["eval"]["strategy"]["fail-fast"] is False  # every shard runs to its end
    assert _option(command, "--eval-shard") == f"{SHARD}/{len(shards)}"
    folder = _option(command, "--eval-shard-dir")
    upload = parts["upload"]["with"]
    assert upload["path"].rstrip("/") == folder
    assert MATRIX in upload["name"]
    assert "!cancelled()" in parts["upload"]["if"]  # a failed shard's file is uploaded too
    merge = parts["merge"]
    assert merge["needs"] == "eval"
    assert "!cancelled()" in merge["if"]  # the merge runs after a failed shard
    download = parts["download"]["with"]
    names = [upload["name"].replace(MATRIX, str(shard)) for shard in shards]
    assert all(fnmatch.fnmatch(name, download["pattern"]) for name in names)
    assert parts["merging"] == ["python", "-m", "pytest_openkata", "merge", download["path"]]


def _reports(root: Path) -> list[str]:
    texts = [p.read_text() for p in sorted(root.glob("skills/*/evals/results/**/*.json"))]
    return [re.sub(r'"(timestamp|seconds)": [^,\n]*', r'"\1": _', text) for text in texts]


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """A step's command; ``pytest`` and ``python`` are this interpreter's."""
    program = [sys.executable, "-m", "pytest"] if argv[0] == "pytest" else [sys.executable]
    return subprocess.run(
        [*program, *argv[1:]], cwd=cwd, capture_output=True, text=True, check=False, timeout=300
    )


def test_the_workflows_commands_merge_into_the_unsharded_runs_report(
    tmp_path: Path, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    parts = _parts()
    skill = write_skill(tmp_path, "commit-message", {})
    for index in range(6):
        write_scenario(skill, f"scenario-{index}", {"a": 3, "b": 2})
    script.by_context["ctx scenario-4"] = {"b": (False, "no body")}
    (tmp_path / ".openkata-eval.yaml").write_text(
        f"backend: http\ncache: 'off'\nhttp:\n  base_url: {endpoint.base_url}\n"
    )
    command, shards = parts["command"], parts["shards"]
    folder = _option(command, "--eval-shard-dir")
    unsharded = [arg for arg in command if arg != folder]
    unsharded = [a for a in unsharded if not a.startswith(("--eval-shard", SHARD))]
    whole = _run(unsharded, tmp_path)
    expected = _reports(tmp_path)
    assert len(expected) == 1, whole.stdout + whole.stderr
    shutil.rmtree(tmp_path / "skills/commit-message/evals/results")

    download = parts["download"]["with"]
    for shard in shards:  # each matrix job, then its artifact as the merge job downloads it
        job = _run([arg.replace(SHARD, str(shard)) for arg in command], tmp_path)
        assert job.returncode == 0, job.stdout + job.stderr
        name = parts["upload"]["with"]["name"].replace(MATRIX, str(shard))
        shutil.move(tmp_path / folder, tmp_path / download["path"] / name)
    merged = _run(parts["merging"], tmp_path)

    assert whole.returncode == 1  # scenario-4 fails a criterion: 93% < 95%
    assert merged.returncode == whole.returncode, merged.stdout + merged.stderr
    assert _reports(tmp_path) == expected
    assert merged.stdout.splitlines()[-1] == "commit-message 93% < 95%: exit 1"
    assert '"overall_percentage": 93.33333333333333,' in expected[0]
