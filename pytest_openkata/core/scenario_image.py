"""A scenario's own sandbox image: the image scenario.json names, or the Dockerfile it is
built from.

The Dockerfile's folder is the build's context. Its digest (see
:mod:`pytest_openkata.core.build_context`) names the build: a provider tags the built image
by it, so that an unchanged context is built once and a changed one again, and the result
cache keys a run by it, so that a changed environment is never answered from the cache.
"""

from __future__ import annotations

from pytest_openkata.contracts.sandboxes import ImageBuild
from pytest_openkata.core.build_context import context_digest
from pytest_openkata.core.scenario import Scenario

OPTIONS_FILE = "scenario.json"
BUILD_TIMEOUT_KEY = "build_timeout_sec"

__all__ = ["image_build", "own_image_identity"]


def image_build(scenario: Scenario) -> ImageBuild | None:
    """The build of the scenario's Dockerfile (scenario.json's ``dockerfile``); None when it
    names none."""
    if not scenario.dockerfile:
        return None
    dockerfile = scenario.path.joinpath(*scenario.dockerfile.split("/"))
    shown = dockerfile.relative_to(scenario.skill_dir).as_posix()
    # Loading refused any link along the path; the build reads the resolved folder anyway.
    context = dockerfile.resolve().parent
    options = (scenario.path / OPTIONS_FILE).relative_to(scenario.skill_dir).as_posix()
    return ImageBuild(
        context,
        dockerfile.name,
        context_digest(context, dockerfile.name),
        shown,
        timeout=scenario.build_timeout,
        timeout_named=f"{options}: {BUILD_TIMEOUT_KEY}",
    )


def own_image_identity(scenario: Scenario) -> dict[str, str]:
    """What of the scenario's own image decides a run, for the result cache's key: the image's
    name, or the digest of the Dockerfile's context; empty when it has neither."""
    if scenario.image:
        return {"image": scenario.image}
    build = image_build(scenario)
    return {} if build is None else {"dockerfile": build.digest}
