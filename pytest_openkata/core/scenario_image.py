"""A scenario's own sandbox image: the image scenario.json names, or the Dockerfile it is
built from.

The Dockerfile's folder is the build's context. Its digest (every file's path, executable
bit and content) names the build: a provider tags the built image by it, so that an
unchanged context is built once and a changed one again, and the result cache keys a run by
it, so that a changed environment is never answered from the cache.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from pytest_openkata.contracts.sandboxes import ImageBuild
from pytest_openkata.core.files import files_under
from pytest_openkata.core.scenario import Scenario

__all__ = ["context_digest", "image_build", "own_image_identity"]


def context_digest(context: Path, dockerfile: str) -> str:
    """The SHA-256 of a build context: the Dockerfile's path in it, then each file's
    relative path, executable bit and content, in path order (symlinked folders are not
    entered, as the builder does not follow them either)."""
    digest = hashlib.sha256(f"dockerfile\0{dockerfile}\0".encode())
    for rel, path in files_under(context):
        executable = os.access(path, os.X_OK)
        content = hashlib.sha256(path.read_bytes()).hexdigest()
        digest.update(f"{rel}\0{int(executable)}\0{content}\0".encode())
    return digest.hexdigest()


def image_build(scenario: Scenario) -> ImageBuild | None:
    """The build of the scenario's Dockerfile (scenario.json's ``dockerfile``); None when it
    names none."""
    if not scenario.dockerfile:
        return None
    dockerfile = scenario.path.joinpath(*scenario.dockerfile.split("/"))
    context = dockerfile.parent
    shown = dockerfile.relative_to(scenario.skill_dir).as_posix()
    return ImageBuild(context, dockerfile.name, context_digest(context, dockerfile.name), shown)


def own_image_identity(scenario: Scenario) -> dict[str, str]:
    """What of the scenario's own image decides a run, for the result cache's key: the image's
    name, or the digest of the Dockerfile's context; empty when it has neither."""
    if scenario.image:
        return {"image": scenario.image}
    build = image_build(scenario)
    return {} if build is None else {"dockerfile": build.digest}
