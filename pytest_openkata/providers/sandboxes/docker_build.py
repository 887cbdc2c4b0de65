"""Scenarios' own images, built from their Dockerfiles in the run's engine.

A scenario that names a Dockerfile (scenario.json's ``dockerfile``; a Harbor task's
``environment/Dockerfile``) runs in the image built from it, with the Docker SDK, on the
engine its containers run on. The image is tagged by the digest of its build context
(``openkata-scenario-image:<digest>``): an engine that already holds the tag is not asked to
build again, so a context is built once, and again only when a file of it changed.

Once per run and engine, even under xdist: the threads of one process wait for one build
(each context's own lock), the processes of a host for each other (an exclusive
:func:`fcntl.flock` on a lock file of the engine and the tag, in the user's folder of the
host's temporary folder; the kernel drops it when its holder dies), and whoever gets the
lock first builds while the others then find the tag. A build that fails is that context's
error for the rest of the run in that process (every scenario of the context gets it, none
builds again).

No image is pulled: a ``FROM`` image the engine lacks is an error naming the Dockerfile and
the image, said before the build starts. A build's failure is a :class:`SandboxError` (kind
``sandbox_setup``) naming the Dockerfile, with the last lines of the build's log, each
stripped of control characters and bounded.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import tempfile
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests.exceptions

from pytest_openkata.contracts.errors import RetryableError, SandboxError, SandboxLost
from pytest_openkata.contracts.sandboxes import ImageBuild
from pytest_openkata.infra.text import visible

__all__ = ["BUILT_REPOSITORY", "ImageBuilder", "base_images", "build_log_tail"]

BUILT_REPOSITORY = "openkata-scenario-image"
LOG_LINES = 12  # the last lines of a failed build's log in its error
LINE_CHARS = 300
BUILD_TIMEOUT = 3600  # seconds the engine may take to answer a build
LOCK_FOLDER = "openkata-image-builds"
_ENGINE_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException, OSError)


def base_images(dockerfile: str) -> list[str]:
    """The images a Dockerfile's ``FROM`` lines start from, leaving out ``scratch``, earlier
    stages (``FROM base AS build`` ... ``FROM build``) and names made of build arguments."""
    text = re.sub(r"\\\r?\n", " ", dockerfile)
    stages: set[str] = set()
    found: list[str] = []
    for line in text.splitlines():
        words = line.split()
        if not words or words[0].upper() != "FROM":
            continue
        names = [w for w in words[1:] if not w.startswith("--")]
        if not names:
            continue
        image = names[0]
        if len(names) >= 3 and names[1].upper() == "AS":
            stages.add(names[2].lower())
        if image.lower() in stages or image.lower() == "scratch" or "$" in image:
            continue
        if image not in found:
            found.append(image)
    return found


def build_log_tail(log: Iterable[Any], reason: str = "") -> str:
    """The last lines of a build's log (the SDK's decoded chunks), each visible and bounded,
    ending with the builder's own reason when the log does not already end with it."""
    lines: list[str] = []
    for chunk in log:
        if not isinstance(chunk, dict):
            continue
        for key in ("stream", "error"):
            text = chunk.get(key)
            if isinstance(text, str):
                lines += [line for line in text.splitlines() if line.strip()]
    if reason and (not lines or reason.strip() not in lines[-1]):
        lines.append(reason.strip())
    shown = [_bounded(visible(line.rstrip())) for line in lines[-LOG_LINES:]]
    return "\n".join(shown)


def _bounded(line: str) -> str:
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 3] + "..."


class ImageBuilder:
    """Builds scenarios' Dockerfiles on one engine; shared by the run's threads."""

    def __init__(self, client: docker.DockerClient, lock_folder: Path | None = None) -> None:
        self.client = client
        # One folder per user: another user's folder may not be writable.
        own = f"{LOCK_FOLDER}-{os.getuid()}"
        self.lock_folder = lock_folder or Path(tempfile.gettempdir(), own)
        self._lock = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}  # one per tag
        self._done: dict[str, str | SandboxError] = {}  # the tag, or why it failed

    def image_of(self, build: ImageBuild) -> str:
        """The tag of ``build``'s image, built on this engine first when it lacks it; a
        :class:`SandboxError` naming the Dockerfile when it cannot be."""
        tag = f"{BUILT_REPOSITORY}:{build.digest[:32]}"
        with self._lock:
            lock = self._locks.setdefault(tag, threading.Lock())
        with lock:
            done = self._done.get(tag)
            if done is None:
                try:
                    done = self._ensure(build, tag)
                except SandboxError as exc:
                    if isinstance(exc, SandboxLost | RetryableError):
                        raise
                    done = exc
                self._done[tag] = done
        if isinstance(done, SandboxError):
            raise SandboxError(str(done))
        return done

    def _ensure(self, build: ImageBuild, tag: str) -> str:
        with self._host_lock(tag):
            if self._has(tag):
                return tag
            self._check_bases(build)
            self._build(build, tag)
        return tag

    @contextlib.contextmanager
    def _host_lock(self, tag: str) -> Iterator[None]:
        """The lock of this engine's ``tag`` among the processes of this host."""
        engine = str(getattr(self.client.api, "base_url", ""))
        key = hashlib.sha256(f"{engine}\0{tag}".encode()).hexdigest()[:24]
        try:
            self.lock_folder.mkdir(parents=True, exist_ok=True)
            file = open(self.lock_folder / f"{key}.lock", "a+b")  # noqa: SIM115
        except OSError:
            # No lock to share: the processes may build the same context at once, which
            # costs time but gives the same image (the tag is the context's digest).
            yield
            return
        with file:
            fcntl.flock(file.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(file.fileno(), fcntl.LOCK_UN)

    def _has(self, image: str) -> bool:
        try:
            self.client.images.get(image)
        except docker.errors.ImageNotFound:
            return False
        except _ENGINE_ERRORS as exc:
            raise _failed(exc, "looking for an image") from exc
        return True

    def _check_bases(self, build: ImageBuild) -> None:
        try:
            text = (build.context / build.dockerfile).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise SandboxError(f"{build.shown}: cannot be read ({exc.strerror})") from None
        for image in base_images(text):
            if not self._has(image):
                raise SandboxError(
                    f"{build.shown}: FROM {visible(image)!r}: the Docker engine has no such "
                    "image, and a scenario's image is built without pulling any: pull or "
                    "build it into the engine first"
                )

    def _build(self, build: ImageBuild, tag: str) -> None:
        try:
            self.client.images.build(
                path=str(build.context),
                dockerfile=build.dockerfile,
                tag=tag,
                rm=True,
                forcerm=True,
                pull=False,
                timeout=BUILD_TIMEOUT,
            )
        except docker.errors.BuildError as exc:
            tail = build_log_tail(exc.build_log, str(exc.msg))
            raise SandboxError(f"{build.shown}: the image build failed:\n{tail}") from None
        except _ENGINE_ERRORS as exc:
            raise _failed(exc, f"{build.shown}: building the image") from exc


def _failed(exc: Exception, doing: str) -> SandboxError:
    """An engine's failure while building: lost when it stopped answering, retried on its
    5xx, else the build's error."""
    if isinstance(
        exc, requests.exceptions.ConnectionError | requests.exceptions.ChunkedEncodingError
    ):
        return SandboxLost(f"{doing}: the Docker engine stopped answering ({type(exc).__name__})")
    if isinstance(exc, docker.errors.APIError) and exc.is_server_error():
        return SandboxError(f"{doing}: Docker engine error: {exc.explanation or exc}")
    return SandboxError(f"{doing}: {exc}")
