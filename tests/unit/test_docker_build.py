"""What the Docker provider reads of a scenario's Dockerfile before building it (the images
its ``FROM`` lines need on the engine), and what a failed build's error keeps of its log."""

from __future__ import annotations

from pytest_openkata.providers.sandboxes.docker_build import (
    LINE_CHARS,
    LOG_LINES,
    base_images,
    build_log_tail,
)


def test_the_base_images_leave_out_stages_scratch_and_build_arguments() -> None:
    dockerfile = (
        "# a comment\n"
        "FROM --platform=linux/amd64 team/base:1 AS build\n"
        "RUN make\n"
        "FROM build\n"
        "from scratch\n"
        "FROM ${BASE}\n"
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
