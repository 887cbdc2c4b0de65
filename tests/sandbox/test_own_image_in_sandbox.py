"""A scenario's own image (scenario.json's ``dockerfile``) in a real engine: the agent works in
the image's WORKDIR when it sets one (its inputs, checks and the judged changes there, the
folder recorded in the trial), a scenario without its own image keeps ``/workspace`` and the
same prompt bytes, the result cache tells a changed base image from an unchanged one, and a
build past its bound is stopped on the engine with its lock released.

The agent is the kiro-cli stand-in (tests/support/standins/sandbox-kiro-cli), scripted by the
``STANDIN:`` lines of its task; the judge is the scripted loopback endpoint.
"""

from __future__ import annotations

import fcntl
import json
import secrets
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from pytest_openkata.contracts.errors import SandboxError
from pytest_openkata.contracts.sandboxes import ImageBuild
from pytest_openkata.core.build_context import context_digest
from pytest_openkata.core.prompt import build_prompt
from pytest_openkata.providers.sandboxes.docker_build import ImageBuilder
from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, sandbox_args, write_scenario, write_skill

# The agent says where it works, keeps the prompt it was given, and reads the input and the
# file the image put in its working folder.
TASK = (
    "STANDIN: shell pwd > where.txt\n"
    "STANDIN: shell cp /tmp/standin-prompt prompt-seen.md\n"
    "STANDIN: shell cat notes.txt from-image.txt > seen.txt 2>&1\n"
)
CHECKS = [
    {"name": "worked-here", "description": "where.txt names the working folder",
     "max_score": 1, "type": "command", "run": 'test "$(cat where.txt)" = "$(pwd)"'},
    {"name": "read-both", "description": "seen.txt holds the input and the image's file",
     "max_score": 1, "type": "file_regex", "path": "seen.txt", "pattern": "^from the image$"},
]  # fmt: skip


def _scenario(skill: Path, name: str, dockerfile: str | None) -> Path:
    folder = write_scenario(skill, name, {"x": 1}, sandbox=True, inputs={"notes.txt": "a note\n"})
    folder.joinpath("task.md").write_text(TASK)
    folder.joinpath("checks.json").write_text(json.dumps(CHECKS))
    options: dict[str, Any] = {"sandbox": True}
    if dockerfile is not None:
        environment = folder / "environment"
        environment.mkdir()
        environment.joinpath("Dockerfile").write_text(dockerfile)
        environment.joinpath("from-image.txt").write_text("from the image\n")
        options["dockerfile"] = "environment/Dockerfile"
    folder.joinpath("scenario.json").write_text(json.dumps(options))
    return folder


def _report(folder: Path) -> dict[str, dict[str, Any]]:
    [path] = sorted(folder.glob("*.json"))
    return {s["name"]: s for s in json.loads(path.read_text())["scenarios"]}


def _trials(root: Path) -> dict[str, dict[str, Any]]:
    records = [
        json.loads(line)
        for log in sorted((root / ".openkata/runs").glob("*.jsonl"))
        for line in log.read_text().splitlines()
    ]
    return {r["scenario"]: r for r in records if r["record"] == "trial"}


def _changes_judged(endpoint: ScriptedEndpoint) -> dict[str, str]:
    """The workspace changes of every judge request, by the folder the agent named."""
    found = {}
    for request in endpoint.requests:
        if not (request.json and request.json["messages"][0]["role"] == "system"):
            continue
        changes = request.json["messages"][1]["content"].split("## Workspace Changes", 1)[1]
        where = "/srv/app" if "/srv/app\n" in changes else "/workspace"
        found[where] = changes
    return found


def test_an_own_image_with_a_workdir_runs_the_agent_its_inputs_and_checks_there(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
) -> None:
    skill = write_skill(pytester.path, "s", {})
    dockerfile = (
        f"FROM {standin_image}\nWORKDIR /srv/app\nCOPY from-image.txt /srv/app/from-image.txt\n"
        f"RUN echo {secrets.token_hex(8)} > /srv/built\n"  # a context no earlier run built
    )
    own = _scenario(skill, "scenario-own", dockerfile)
    plain = _scenario(skill, "scenario-plain", None)

    args = sandbox_args(endpoint.base_url, standin_image, "--eval-html", "run.html")
    pytester.runpytest("skills", *args)

    trials = _trials(pytester.path)
    assert trials["scenario-own"]["environment"]["workdir"] == "/srv/app"
    assert trials["scenario-plain"]["environment"]["workdir"] == "/workspace"
    checks = {name: _checks(trial) for name, trial in trials.items()}
    assert checks == {
        "scenario-own": {"worked-here": True, "read-both": True},
        # Without its own image: /workspace, and no file of an image there.
        "scenario-plain": {"worked-here": True, "read-both": False},
    }
    judged = _changes_judged(endpoint)
    assert "**seen.txt**\n```\na note\nfrom the image\n\n```" in judged["/srv/app"]
    # The agent's changes only: not the image's own file, nor the input.
    assert "**from-image.txt**" not in judged["/srv/app"]
    assert "**notes.txt**" not in judged["/srv/app"]
    # Both agents got the prompt's exact bytes, wherever they worked.
    for where, folder in (("/srv/app", own), ("/workspace", plain)):
        prompt = build_prompt(skill, folder)
        assert f"**prompt-seen.md**\n```\n{prompt}\n```" in judged[where]
    assert "/srv/app" not in build_prompt(skill, own)
    # The page names the folder where it is not the usual one.
    html = (pytester.path / "run.html").read_text()
    assert html.count("; working folder /srv/app</p>") == 1
    assert "working folder /workspace" not in html


def _checks(trial: dict[str, Any]) -> dict[str, bool]:
    return {c["name"]: c["passed"] for c in trial["criteria"] if c["kind"] == "check"}


@pytest.fixture
def base_image(docker_client: docker.DockerClient, standin_image: str) -> Iterator[str]:
    """A base image of its own name, made from the stand-in image; removed afterwards."""
    name = f"openkata-test-base-{secrets.token_hex(6)}:1"
    docker_client.images.get(standin_image).tag(name)
    yield name
    docker_client.images.remove(name, force=True)


def test_a_changed_base_image_misses_the_result_cache_and_an_unchanged_one_hits(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
    docker_client: docker.DockerClient,
    base_image: str,
) -> None:
    skill = write_skill(pytester.path, "s", {})
    folder = write_scenario(skill, "scenario-own", {"x": 1}, sandbox=True)
    folder.joinpath("task.md").write_text("STANDIN: write answer.txt 42\n")
    (folder / "environment").mkdir()
    (folder / "environment" / "Dockerfile").write_text(f"FROM {base_image}\n")
    options = {"sandbox": True, "dockerfile": "environment/Dockerfile"}
    folder.joinpath("scenario.json").write_text(json.dumps(options))

    def cached(output: str) -> int:
        args = sandbox_args(endpoint.base_url, standin_image, "--eval-output", f"{output}/")
        pytester.runpytest("skills", *args)
        entry = _report(pytester.path / output)["scenario-own"]
        return int(entry["usage"]["agent"]["cached"])

    assert cached("first") == 0
    assert cached("unchanged") == 1

    # The same name, another image: the scenario's Dockerfile and context are unchanged.
    with tempfile.TemporaryDirectory() as context:
        Path(context, "Dockerfile").write_text(
            f"FROM {standin_image}\nRUN echo {secrets.token_hex(8)} > /changed\n"
        )
        docker_client.images.build(path=context, tag=base_image, rm=True)

    assert cached("changed") == 0
    assert cached("changed-again") == 1


def test_a_build_past_its_bound_is_stopped_and_its_lock_released(
    tmp_path: Path, docker_client: docker.DockerClient, standin_image: str
) -> None:
    token = secrets.token_hex(8)
    context = tmp_path / "environment"
    context.mkdir()
    (context / "Dockerfile").write_text(f"FROM {standin_image}\nRUN sleep 300 # {token}\n")
    build = ImageBuild(
        context,
        "Dockerfile",
        context_digest(context, "Dockerfile"),
        "evals/scenario-slow/environment/Dockerfile",
        timeout=1,
        timeout_named="evals/scenario-slow/scenario.json: build_timeout_sec",
    )
    locks = tmp_path / "locks"

    with pytest.raises(SandboxError) as caught:
        ImageBuilder(docker_client, locks).image_of(build)

    assert str(caught.value).startswith(
        "evals/scenario-slow/scenario.json: build_timeout_sec: the build of "
        "evals/scenario-slow/environment/Dockerfile did not end within 1 s and was stopped"
    )
    (lock_file,) = locks.iterdir()
    with lock_file.open("rb") as other:  # nobody holds it any more
        fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    assert _build_containers(docker_client, token) == []


def _build_containers(client: docker.DockerClient, token: str) -> list[str]:
    """The containers whose command holds ``token``, once the engine has had time to remove
    a cancelled build's container (waited for, up to a bound)."""
    deadline = time.monotonic() + 60
    while True:
        # The listing's own command lines: inspecting each container after it races with
        # other tests removing theirs.
        found = [
            c["Id"] for c in client.api.containers(all=True) if token in (c.get("Command") or "")
        ]
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.5)
