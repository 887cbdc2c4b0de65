"""A tile's scenario in a real container: the tile's context under /workspace/skill/."""

from __future__ import annotations

import json
import os

import docker
import pytest

from pytest_openkata.providers.sandboxes.docker import MANAGED, OWNER_PID
from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, sandbox_args
from tests.support.tiles import CONTEXT_FILES, write_tile


def test_a_tiles_context_sits_under_workspace_skill_at_its_paths_in_the_tile(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    use_engine: str,
    standin_image: str,
    docker_client: docker.DockerClient,
) -> None:
    task = (
        "List the skill.\n"
        "STANDIN: shell cd /workspace/skill && find . -type f | sort\n"
        "STANDIN: shell cat /workspace/skill/rules.md\n"
    )
    tile = write_tile(pytester.path, {"checkout-flow": {"criteria": {"a": 100}, "task": task}})

    result = pytester.runpytest("tiles", *sandbox_args(endpoint.base_url, standin_image))

    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    judge = next(r for r in endpoint.requests if r.json["messages"][0]["role"] == "system")
    text = judge.json["messages"][1]["content"]
    listed = sorted(f"./{rel}" for rel in CONTEXT_FILES)
    assert "\n".join(listed) in text  # exactly the context: no README, EXAMPLES.md or evals
    assert "Always say which signal you change." in text
    assert "EXAMPLES.md" not in text
    assert "ACKNOWLEDGMENTS.md" not in text
    [report] = sorted((tile / "evals" / "results").glob("**/*.json"))
    assert json.loads(report.read_text())["skill"] == "acme/observability"
    labels = [f"{MANAGED}=true", f"{OWNER_PID}={os.getpid()}"]
    assert docker_client.containers.list(all=True, filters={"label": labels}) == []
