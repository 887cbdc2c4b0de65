"""What the Docker provider reads of a scenario's Dockerfile before building it (the images
it needs on the engine), what a failed build's error keeps of its log, how the builder
names, locks and keeps its builds (against a scripted engine API on loopback), and which
working folder an own image's WORKDIR gives the agent."""

from __future__ import annotations

import fcntl
import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import docker
import pytest

from pytest_openkata.contracts.errors import RetryableError, SandboxError
from pytest_openkata.contracts.sandboxes import ImageBuild
from pytest_openkata.core.sandboxed import run_agent_argv
from pytest_openkata.providers.sandboxes.docker import own_workdir
from pytest_openkata.providers.sandboxes.docker_build import (
    BUILT_REPOSITORY,
    LINE_CHARS,
    LOG_LINES,
    ImageBuilder,
    base_images,
    build_log_tail,
)


def test_the_base_images_leave_out_stages_and_scratch() -> None:
    dockerfile = (
        "# a comment\n"
        "FROM --platform=linux/amd64 team/base:1 AS build\n"
        "RUN make\n"
        "FROM build\n"
        "from scratch\n"
        "FROM \\\n  team/runtime:2\n"
        "FROM team/base:1\n"
    )

    assert base_images(dockerfile) == ["team/base:1", "team/runtime:2"]


def test_a_build_log_tail_is_visible_bounded_and_ends_with_the_reason() -> None:
    log = [{"stream": f"Step {n}\n"} for n in range(40)]
    log += [{"stream": "\x1b[2Jwiped " + "x" * 1000 + "\n"}, {"aux": {"ID": "sha256:1"}}, "junk"]

    tail = build_log_tail(log, "returned a non-zero code: 7")

    lines = tail.splitlines()
    assert len(lines) == LOG_LINES
    assert lines[-1] == "returned a non-zero code: 7"
    assert "\x1b" not in tail
    assert all(len(line) <= LINE_CHARS for line in lines)
    assert lines[0] == "Step 30"


def test_the_base_images_take_build_argument_defaults_and_copied_from_images() -> None:
    dockerfile = (
        "ARG BASE=team/base:1\n"
        'ARG TAG="2"\n'
        "FROM $BASE AS build\n"
        "FROM team/runtime:${TAG}\n"
        "COPY --from=build /out /out\n"
        "COPY --from=0 /out /again\n"
        "COPY --chown=1:1 --from=team/tools:3 /bin/tool /bin/tool\n"
        "RUN --mount=type=cache,target=/c --mount=type=bind,from=team/data:4,target=/d make\n"
    )

    assert base_images(dockerfile) == [
        "team/base:1",
        "team/runtime:2",
        "team/tools:3",
        "team/data:4",
    ]


@pytest.mark.parametrize(
    "dockerfile",
    [
        "FROM ${BASE}\n",
        "FROM box\nARG LATER=team/x:1\nFROM $LATER\n",  # an ARG after a FROM is a stage's own
        "FROM box\nCOPY --from=$SOURCE /a /a\n",
    ],
)
def test_an_image_named_by_a_build_argument_without_default_is_refused(dockerfile: str) -> None:
    with pytest.raises(ValueError, match="build argument with no default"):
        base_images(dockerfile)


# --- the builder against a scripted engine on loopback -------------------------------------


class ScriptedEngine:
    """The image-inspect endpoint of the Docker engine's API on loopback: each image's
    scripted replies (status and body), the last one repeated; every built image's tag is
    present (and recorded in ``tags``); 404 for any other image.
    The engine itself cannot be made to answer 5xx or to change a base image's id between
    two lookups, which is what these tests need."""

    def __init__(self) -> None:
        self.replies: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        self.lookups: list[str] = []
        self.tags: list[str] = []
        engine = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                match = re.fullmatch(r"/v[\d.]+/images/(.+)/json", self.path)
                name = unquote(match.group(1)) if match else ""
                engine.lookups.append(name)
                if name.startswith(BUILT_REPOSITORY):
                    engine.tags.append(name)
                    engine.replies.setdefault(name, [built(name)])
                queue = engine.replies.get(name) or [(404, {"message": f"No such image: {name}"})]
                status, body = queue.pop(0) if len(queue) > 1 else queue[0]
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.client = docker.DockerClient(
            base_url=f"tcp://127.0.0.1:{self.server.server_port}", version="1.41"
        )

    def close(self) -> None:
        self.client.close()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def engine() -> Iterator[ScriptedEngine]:
    scripted = ScriptedEngine()
    yield scripted
    scripted.close()


def a_build(tmp_path: Path, dockerfile: str = "FROM team/base:1\n") -> ImageBuild:
    context = tmp_path / "environment"
    context.mkdir(exist_ok=True)
    (context / "Dockerfile").write_text(dockerfile)
    return ImageBuild(context, "Dockerfile", "d" * 64, "evals/s/environment/Dockerfile")


def built(tag: str) -> tuple[int, dict[str, Any]]:
    return 200, {"Id": f"sha256:{tag}"}


def test_an_engine_5xx_is_retried_and_not_kept_for_the_rest_of_the_run(
    tmp_path: Path, engine: ScriptedEngine
) -> None:
    builder = ImageBuilder(engine.client, tmp_path / "locks")
    engine.replies["team/base:1"] = [(500, {"message": "engine busy"}), built("base")]
    build = a_build(tmp_path)

    with pytest.raises(RetryableError, match="engine busy"):
        builder.image_of(build)
    assert engine.tags == []

    tag = builder.image_of(build)  # the same builder asks the engine again

    assert engine.tags == [tag]
    assert tag.startswith(f"{BUILT_REPOSITORY}:")


def builder_tag(engine: ScriptedEngine, builder: ImageBuilder, build: ImageBuild) -> str:
    """The tag a builder gives ``build`` (the engine holds every tag, so none is built)."""
    engine.tags.clear()
    tag = builder.image_of(build)
    assert engine.tags == [tag]
    return tag


def test_a_changed_base_image_gives_another_tag(tmp_path: Path, engine: ScriptedEngine) -> None:
    build = a_build(tmp_path)
    engine.replies["team/base:1"] = [built("old")]
    before = builder_tag(engine, ImageBuilder(engine.client, tmp_path / "locks"), build)
    again = builder_tag(engine, ImageBuilder(engine.client, tmp_path / "locks"), build)
    engine.replies["team/base:1"] = [built("new")]
    after = builder_tag(engine, ImageBuilder(engine.client, tmp_path / "locks"), build)

    assert before == again
    assert after != before


def test_a_base_image_the_engine_lacks_is_refused_before_any_build(
    tmp_path: Path, engine: ScriptedEngine
) -> None:
    build = a_build(tmp_path, "FROM team/base:1\nCOPY --from=team/absent:9 /a /a\n")
    engine.replies["team/base:1"] = [built("base")]

    with pytest.raises(SandboxError, match="'team/absent:9': the Docker engine has no such"):
        ImageBuilder(engine.client, tmp_path / "locks").image_of(build)


@pytest.mark.parametrize("kind", ["open to others", "a link"])
def test_a_lock_folder_that_is_not_private_is_refused(
    tmp_path: Path, engine: ScriptedEngine, kind: str
) -> None:
    folder = tmp_path / "locks"
    if kind == "a link":
        (tmp_path / "elsewhere").mkdir(mode=0o700)
        folder.symlink_to(tmp_path / "elsewhere")
    else:
        folder.mkdir()
        folder.chmod(0o777)
    engine.replies["team/base:1"] = [built("base")]

    with pytest.raises(SandboxError, match="not a private folder of this user"):
        ImageBuilder(engine.client, folder).image_of(a_build(tmp_path))
    assert list((tmp_path / "elsewhere").iterdir() if kind == "a link" else []) == []


def test_a_build_lock_held_elsewhere_is_waited_on_up_to_a_bound(
    tmp_path: Path, engine: ScriptedEngine
) -> None:
    engine.replies["team/base:1"] = [built("base")]
    build = a_build(tmp_path)
    folder = tmp_path / "locks"
    builder = ImageBuilder(engine.client, folder, lock_wait=0)
    tag = builder_tag(engine, ImageBuilder(engine.client, folder), build)
    (lock_file,) = folder.iterdir()
    with lock_file.open("rb") as holder:
        fcntl.flock(holder.fileno(), fcntl.LOCK_EX)  # another open file: another holder

        with pytest.raises(SandboxError, match="another process holds the build of"):
            builder.image_of(build)
    assert tag.startswith(BUILT_REPOSITORY)


def test_a_lock_file_that_is_a_link_is_not_followed(tmp_path: Path, engine: ScriptedEngine) -> None:
    engine.replies["team/base:1"] = [built("base")]
    build = a_build(tmp_path)
    folder = tmp_path / "locks"
    builder_tag(engine, ImageBuilder(engine.client, folder), build)
    (lock_file,) = folder.iterdir()
    lock_file.unlink()
    target = tmp_path / "victim"
    lock_file.symlink_to(target)

    with pytest.raises(SandboxError, match="cannot be made"):
        ImageBuilder(engine.client, folder).image_of(build)
    assert not target.exists()


@pytest.mark.parametrize(
    ("workdir", "expected"), [("", "/workspace"), ("/", "/workspace"), ("/app", "/app")]
)
def test_an_own_images_workdir_is_the_working_folder_unless_it_sets_none(
    workdir: str, expected: str
) -> None:
    assert own_workdir(workdir, "team/box:1") == expected


@pytest.mark.parametrize("workdir", ["app", "/app/../etc", "/proc/1", "/dev", "/a\x1b[2Jb"])
def test_an_own_images_workdir_that_cannot_hold_the_workspace_is_an_error(workdir: str) -> None:
    with pytest.raises(SandboxError) as caught:
        own_workdir(workdir, "team/box:1")
    assert "the image 'team/box:1' sets WORKDIR" in str(caught.value)
    assert "\x1b" not in str(caught.value)


def test_the_agent_reads_its_prompt_relative_to_its_working_folder() -> None:
    # /workspace: the command every sandboxed run used before a working folder could differ.
    assert run_agent_argv() == ("sh", "-c", 'exec "$@" < ../openkata/prompt.md', "sh")
    assert run_agent_argv("/srv/app")[2] == 'exec "$@" < ../../openkata/prompt.md'
