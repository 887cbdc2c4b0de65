"""Harbor tasks in their own images, in a real engine: ``environment/Dockerfile`` is built in
the run's engine (``FROM`` the local stand-in image, which holds the agent), once for every
task of the same build context; the task's verifier sees what the Dockerfile put in the image;
a Dockerfile that cannot be built, or whose image lacks the agent, is a ``sandbox_setup``
error naming it; and ``--eval-validate`` runs ``solution/solve.sh`` in that image."""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path
from typing import Any

import docker
import pytest

from pytest_openkata.providers.sandboxes.docker import MANAGED
from pytest_openkata.providers.sandboxes.docker_build import BUILT_REPOSITORY
from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, sandbox_args
from tests.support.format_layouts import SKILL_MD, write

# The verifier passes only when the image holds the Dockerfile's marker and the agent (or the
# solution) wrote the answer.
TEST_SH = (
    "#!/bin/sh\n"
    'if [ "$(cat /opt/marker.txt 2>/dev/null)" = "$(cat /tests/marker.txt)" ] && '
    '[ "$(cat answer.txt 2>/dev/null)" = 42 ]; then\n'
    "  echo 1 > /logs/verifier/reward.txt\nelse\n  echo 0 > /logs/verifier/reward.txt\nfi\n"
)
ANSWER = "Write 42 to answer.txt.\nSTANDIN: write answer.txt 42\n"


def _task(dataset: Path, name: str, dockerfile: str, marker: str, *, solve: str = "") -> None:
    task = dataset / name
    write(task / "instruction.md", ANSWER)
    write(task / "task.toml", "[verifier]\ntimeout_sec = 60.0\n")
    write(task / "environment" / "Dockerfile", dockerfile)
    write(task / "environment" / "marker.txt", marker)
    write(task / "tests" / "test.sh", TEST_SH)
    write(task / "tests" / "marker.txt", marker)
    if solve:
        write(task / "solution" / "solve.sh", solve)


def _skill(root: Path) -> Path:
    skill = root / "skills" / "harbor"
    write(skill / "SKILL.md", SKILL_MD)
    return skill / "tasks"


def _trials(root: Path) -> dict[str, dict[str, Any]]:
    (log,) = (root / ".openkata/runs").glob("*.jsonl")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    return {r["scenario"]: r for r in records if r["record"] == "trial"}


def _manifest(root: Path) -> dict[str, Any]:
    (log,) = (root / ".openkata/runs").glob("*.jsonl")
    return json.loads(log.read_text().splitlines()[0])["manifest"]


def _built_tags(client: docker.DockerClient, since: int, image_id: str) -> list[str]:
    """The tags the engine gave the image ``image_id`` in the built repository since
    ``since``, once per build (other tests' builds, in parallel, tag other images)."""
    events = client.events(
        since=since, until=int(time.time()) + 1, decode=True, filters={"type": "image"}
    )
    names = [
        e["Actor"]["Attributes"].get("name", "")
        for e in events
        if e.get("Action") == "tag"
        and e["Actor"]["Attributes"].get("name", "").startswith(BUILT_REPOSITORY)
    ]
    return [name for name in names if _image_id(client, name) == image_id]


def _image_id(client: docker.DockerClient, name: str) -> str | None:
    try:
        return client.images.get(name).id
    except docker.errors.ImageNotFound:  # another test's image, removed since
        return None


def test_harbor_tasks_run_in_the_image_their_dockerfile_builds_once_even_under_xdist(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
    docker_client: docker.DockerClient,
) -> None:
    tasks = _skill(pytester.path)
    marker = f"built-{secrets.token_hex(8)}\n"  # a context no earlier run built
    dockerfile = f"FROM {standin_image}\nCOPY marker.txt /opt/marker.txt\n"
    _task(tasks, "first", dockerfile, marker)
    _task(tasks, "second", dockerfile, marker)
    since = int(time.time()) - 1

    # Two workers, one task each, both wanting the image at once.
    result = pytester.runpytest(
        "skills", *sandbox_args(endpoint.base_url, standin_image), "-n", "2"
    )

    result.assert_outcomes(passed=2)
    trials = _trials(pytester.path)
    assert {name: t["score"] for name, t in trials.items()} == {
        "scenario-first": 1,
        "scenario-second": 1,
    }
    [built] = {t["environment"]["image_id"] for t in trials.values()}
    [tag] = _built_tags(docker_client, since, built)  # one build for the two tasks
    assert built in _manifest(pytester.path)["sandbox"]["image_ids"]
    left = {"label": f"{MANAGED}=true", "ancestor": built}  # other tests' run in parallel
    assert docker_client.containers.list(all=True, filters=left, sparse=True) == []

    again = pytester.runpytest(
        "skills", *sandbox_args(endpoint.base_url, standin_image, "--eval-cache", "off")
    )

    again.assert_outcomes(passed=2)
    # The unchanged context: not built again.
    assert _built_tags(docker_client, since, built) == [tag]


def test_a_dockerfile_that_cannot_build_or_lacks_the_agent_is_a_sandbox_setup_error(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
) -> None:
    tasks = _skill(pytester.path)
    token = secrets.token_hex(8)
    _task(tasks, "broken", f"FROM {standin_image}\nRUN echo cannot-{token} && exit 7\n", token)
    _task(tasks, "unpulled", "FROM openkata-absent-base:never\n", token)
    no_agent = f"FROM {standin_image}\nRUN rm /usr/local/bin/kiro-cli && echo {token}\n"
    _task(tasks, "no-agent", no_agent, token)

    result = pytester.runpytest("skills", *sandbox_args(endpoint.base_url, standin_image))

    result.assert_outcomes(errors=3)
    trials = _trials(pytester.path)
    assert {name: t["error_cause"] for name, t in trials.items()} == dict.fromkeys(
        ("scenario-broken", "scenario-unpulled", "scenario-no-agent"), "sandbox_setup"
    )
    broken = trials["scenario-broken"]["error"]
    assert "tasks/broken/task.toml: environment/Dockerfile: the image build failed" in broken
    assert f"cannot-{token}" in broken  # the build log's last lines
    assert "/tmp" not in broken  # no machine path
    assert ".openkata-" not in broken  # the staged folder is named by the task
    unpulled = trials["scenario-unpulled"]["error"]
    assert (
        "environment/Dockerfile: 'openkata-absent-base:never': the Docker engine has no" in unpulled
    )
    assert "without pulling" in unpulled
    lacking = trials["scenario-no-agent"]["error"]
    assert (
        "the image built from skills/harbor/tasks/no-agent/task.toml: environment/Dockerfile"
        in lacking
    )
    assert "has no agent CLI 'kiro-cli'" in lacking
    assert script.judge_calls == 0


def test_validate_runs_a_harbor_solution_in_its_image_and_names_what_has_none(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
) -> None:
    tasks = _skill(pytester.path)
    marker = f"solved-{secrets.token_hex(8)}\n"
    dockerfile = f"FROM {standin_image}\nCOPY marker.txt /opt/marker.txt\n"
    _task(tasks, "solved", dockerfile, marker, solve="#!/bin/sh\necho 42 > answer.txt\n")
    _task(tasks, "unsolved", dockerfile, marker)

    result = pytester.runpytest(
        "--eval-validate", "skills", *sandbox_args(endpoint.base_url, standin_image), "-v"
    )

    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines_random(
        [
            "*SUBPASSED[[]solution scores 100%[]]*",
            "*SUBPASSED[[]empty agent scores below 50%[]]*",
            "skills/harbor/tasks/solved/task.toml::solved: solution 100% ok; empty agent 0% ok",
            "skills/harbor/tasks/unsolved/task.toml::unsolved: nothing to validate: this harbor "
            "scenario holds no reference solution*",
        ]
    )
    assert script.agent_calls == 0


def test_a_build_past_the_tasks_build_timeout_is_stopped_and_names_the_key(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
) -> None:
    tasks = _skill(pytester.path)
    token = secrets.token_hex(8)
    _task(tasks, "slow", f"FROM {standin_image}\nRUN sleep 300 # {token}\n", token)
    write(tasks / "slow" / "task.toml", "[environment]\nbuild_timeout_sec = 1.5\n")

    result = pytester.runpytest("skills", *sandbox_args(endpoint.base_url, standin_image))

    result.assert_outcomes(errors=1)
    trial = _trials(pytester.path)["scenario-slow"]
    assert trial["error_cause"] == "sandbox_setup"
    assert trial["error"].startswith(
        "sandbox: skills/harbor/tasks/slow/task.toml: environment.build_timeout_sec: the build "
        "of skills/harbor/tasks/slow/task.toml: environment/Dockerfile did not end within 1.5 s"
    )
    assert ".openkata-" not in trial["error"]
    assert script.agent_calls == 0


def test_a_harbor_task_works_and_is_verified_in_its_images_workdir(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
) -> None:
    """As in Harbor: the agent works in the image's WORKDIR, and the verifier runs from
    /tests with that folder as its working folder; so does the reference solution."""
    tasks = _skill(pytester.path)
    marker = f"app-{secrets.token_hex(8)}\n"
    dockerfile = f"FROM {standin_image}\nWORKDIR /app\nCOPY marker.txt /opt/marker.txt\n"
    in_app = (
        "#!/bin/sh\n"
        'if [ "$(pwd)" = /app ] && [ "$(cat /app/answer.txt)" = 42 ]; then\n'
        "  echo 1 > /logs/verifier/reward.txt\nelse\n  echo 0 > /logs/verifier/reward.txt\nfi\n"
    )
    _task(tasks, "app", dockerfile, marker, solve="#!/bin/sh\necho 42 > answer.txt\n")
    write(tasks / "app" / "tests" / "test.sh", in_app)

    ran = pytester.runpytest("skills", *sandbox_args(endpoint.base_url, standin_image))
    validated = pytester.runpytest(
        "--eval-validate", "skills", *sandbox_args(endpoint.base_url, standin_image), "-v"
    )

    ran.assert_outcomes(passed=1)
    trial = _trials(pytester.path)["scenario-app"]
    assert (trial["score"], trial["environment"]["workdir"]) == (1, "/app")
    validated.stdout.fnmatch_lines(["*app/task.toml::app: solution 100% ok; empty agent 0% ok"])
