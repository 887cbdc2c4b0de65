"""A sandboxed run records the digest of the image its trials ran in, and a comparison with
a run in another image is refused: a real engine, two real images (the stand-in, and one
built from it with another label, so another digest) and a scripted command agent."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, sandbox_args, write_skill

COMMAND = ("--eval-sandbox-agent", "command", "--eval-agent-command", "echo done")


@pytest.fixture
def rebuilt_image(docker_client: docker.DockerClient, standin_image: str) -> Iterator[str]:
    """The stand-in image rebuilt with another label: the same files, another digest."""
    dockerfile = io.BytesIO(f"FROM {standin_image}\nLABEL rebuilt=manifest-test\n".encode())
    image, _logs = docker_client.images.build(fileobj=dockerfile, tag="openkata-rebuilt:1")
    yield "openkata-rebuilt:1"
    docker_client.images.remove(image.id, force=True)


def _manifest(log: Path) -> dict[str, Any]:
    return json.loads(log.read_text().splitlines()[0])["manifest"]


def test_a_run_in_a_rebuilt_image_is_not_compared_with_one_in_the_old_image(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
    rebuilt_image: str,
    docker_client: docker.DockerClient,
) -> None:
    write_skill(pytester.path, "s", {"scenario-box": {"x": 1}}, sandbox=True)
    first = pytester.runpytest(
        "skills", *sandbox_args(endpoint.base_url, standin_image), *COMMAND, "--eval-threshold", "0"
    )
    first.assert_outcomes(passed=1)
    [log] = (pytester.path / ".openkata/runs").glob("*.jsonl")
    old_id = docker_client.images.get(standin_image).id
    assert _manifest(log)["sandbox"] == {"image": standin_image, "image_ids": [old_id]}

    second = pytester.runpytest(
        "skills", *sandbox_args(endpoint.base_url, rebuilt_image), *COMMAND,
        "--eval-threshold", "0", "--eval-cache", "off", "--eval-compare", str(log),
    )  # fmt: skip

    assert second.ret == pytest.ExitCode.TESTS_FAILED
    new_id = docker_client.images.get(rebuilt_image).id
    assert new_id != old_id
    assert (
        f"Drift against {log.name} (refuses): sandbox.image_ids: ['{old_id}'] before, "
        f"['{new_id}'] now"
    ) in second.stdout.str()
    assert f"sandbox.image: '{standin_image}' before, '{rebuilt_image}' now" in second.stdout.str()
