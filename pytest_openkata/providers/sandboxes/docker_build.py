"""Scenarios' own images, built from their Dockerfiles in the run's engine.

A scenario that names a Dockerfile (scenario.json's ``dockerfile``; a Harbor task's
``environment/Dockerfile``) runs in the image built from it, with the Docker SDK, on the
engine its containers run on. The image is tagged by the digest of its build context and of
the ids its base images have on the engine (``openkata-scenario-image:<digest>``): an engine
that already holds the tag is not asked to build again, so a context is built once, and again
only when a file of it, or a base image, changed.

Once per run and engine, even under xdist: the threads of one process wait for one build
(each context's own lock), the processes of a host for each other (an exclusive
:func:`fcntl.flock` on a lock file of the engine and the tag, in the user's private folder of
the host's temporary folder; the kernel drops it when its holder dies), and whoever gets the
lock first builds while the others then find the tag. A process waits for another's build up
to the build's own bound, then gives up with an error saying so.

A build is bounded (the scenario's ``build_timeout_sec``, a Harbor task's
``[environment] build_timeout_sec``; else :data:`BUILD_TIMEOUT`): one that takes longer is
stopped by closing its request, which makes the engine cancel the build and remove the
container of the step it was at, and is a :class:`SandboxError` naming the Dockerfile and the
setting; its locks are released as on any other failure. A build that fails is that
context's error for the rest of the run in that process (every scenario of the context gets
it, none builds again); an engine's 5xx is not: it is retried, and a later scenario builds
again.

No image is pulled: every image the Dockerfile starts from or copies from (``FROM``,
``COPY --from``, ``RUN --mount=...,from=``) that the engine lacks is an error naming the
Dockerfile and the image, said before the build starts; so is an image named by a build
argument without a default given before the first ``FROM``. A build's failure is a
:class:`SandboxError` (kind ``sandbox_setup``) naming the Dockerfile, with the last lines of
the build's log, each stripped of control characters and bounded.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import math
import os
import re
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests.exceptions
import urllib3.exceptions

from pytest_openkata.contracts.errors import (
    BackendError,
    RetryableError,
    SandboxError,
    SandboxLost,
)
from pytest_openkata.contracts.sandboxes import ImageBuild
from pytest_openkata.infra.private_folder import private_folder
from pytest_openkata.infra.text import visible

__all__ = ["BUILT_REPOSITORY", "ImageBuilder", "base_images", "build_log_tail"]

BUILT_REPOSITORY = "openkata-scenario-image"
LOG_LINES = 12  # the last lines of a failed build's log in its error
LINE_CHARS = 300
BUILD_TIMEOUT = 3600  # seconds a build may take when its scenario sets no bound
LOCK_FOLDER = "openkata-image-builds"
LOCK_POLL = 0.5  # seconds between two tries of another process's build lock
# Seconds a process waits for another's build beyond the build's bound: the time the other
# takes to stop a build past its bound and let the lock go.
LOCK_GRACE = 30.0
# What the SDK's calls raise, its streamed build raw from urllib3 included.
_ENGINE_ERRORS = (
    docker.errors.DockerException,
    requests.exceptions.RequestException,
    urllib3.exceptions.HTTPError,
    OSError,
)


def base_images(dockerfile: str) -> list[str]:
    """The images a Dockerfile needs from the engine: those its ``FROM`` lines start from,
    its ``COPY --from=`` copies from and its ``RUN --mount=...,from=`` mounts, leaving out
    ``scratch`` and its own stages (by name or number). A build argument in an image's name
    takes the default its ``ARG`` gives before the first ``FROM`` (the build is given no
    arguments); a :class:`ValueError` when one has none, since the image cannot be known."""
    text = re.sub(r"\\\r?\n", " ", dockerfile)
    defaults: dict[str, str] = {}
    stages: set[str] = set()
    found: list[str] = []
    seen_from = False

    def need(image: str) -> None:
        name = _substituted(image, defaults)
        if name.lower() in stages or name.lower() == "scratch" or name.isdigit():
            return
        if name not in found:
            found.append(name)

    for line in text.splitlines():
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        instruction = words[0].upper()
        if instruction == "ARG" and not seen_from:
            for word in words[1:]:
                name, sep, value = word.partition("=")
                if sep:
                    defaults[name] = value.strip("\"'")
        elif instruction == "FROM":
            seen_from = True
            names = [w for w in words[1:] if not w.startswith("--")]
            if not names:
                continue
            need(names[0])
            if len(names) >= 3 and names[1].upper() == "AS":
                stages.add(names[2].lower())
        elif instruction in ("COPY", "ADD"):
            for word in words[1:]:
                if word.lower().startswith("--from="):
                    need(word.split("=", 1)[1])
        elif instruction == "RUN":
            for word in words[1:]:
                if not word.startswith("--"):
                    break
                if word.lower().startswith("--mount="):
                    for option in word.split("=", 1)[1].split(","):
                        key, _, value = option.partition("=")
                        if key.lower() == "from" and value:
                            need(value)
    return found


_VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")


def _substituted(image: str, defaults: dict[str, str]) -> str:
    """``image`` with its build arguments replaced by their defaults; a :class:`ValueError`
    naming it when one has no default."""
    name = _VARIABLE.sub(lambda m: defaults.get(m.group(1) or m.group(2), m.group(0)), image)
    if "$" in name:
        raise ValueError(
            f"{visible(image)!r}: the image's name holds a build argument with no default "
            "before the first FROM, so the image it needs cannot be checked on the engine "
            "(a scenario's image is built without pulling any): give the argument a default"
        )
    return name


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

    def __init__(
        self,
        client: docker.DockerClient,
        lock_folder: Path | None = None,
        lock_wait: float = BUILD_TIMEOUT,
    ) -> None:
        self.client = client
        # One folder per user: another user's folder may not be writable.
        own = f"{LOCK_FOLDER}-{os.getuid()}"
        self.lock_folder = lock_folder or Path(tempfile.gettempdir(), own)
        self.lock_wait = lock_wait
        self._lock = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}  # one per context digest
        self._done: dict[str, str | SandboxError] = {}  # the tag, or why it failed
        # The build request a thread has open, kept so that its bound can close it.
        self._requests = threading.local()
        if self._keep_build_request not in client.api.hooks["response"]:
            client.api.hooks["response"].append(self._keep_build_request)

    def _keep_build_request(self, response: requests.Response, *args: Any, **kwargs: Any) -> None:
        """A response hook of the engine's session: the response to a build request, kept
        for the thread that made it (the session is shared by the run's threads)."""
        if response.request.path_url.split("?")[0].endswith("/build"):
            self._requests.response = response

    def image_of(self, build: ImageBuild) -> str:
        """The tag of ``build``'s image, built on this engine first when it lacks it; a
        :class:`SandboxError` naming the Dockerfile when it cannot be (a
        :class:`RetryableError` on an engine's 5xx, which is not kept)."""
        with self._lock:
            lock = self._locks.setdefault(build.digest, threading.Lock())
        with lock:
            done = self._done.get(build.digest)
            if done is None:
                try:
                    done = self._ensure(build)
                except SandboxLost:
                    raise
                except SandboxError as exc:
                    done = exc
                self._done[build.digest] = done
        if isinstance(done, SandboxError):
            raise SandboxError(str(done))
        return done

    def tag_of(self, build: ImageBuild) -> str:
        """The tag ``build``'s image has (or will have) on this engine, made from the digest
        of its context and the ids its base images have on the engine; nothing is built. A
        :class:`SandboxError` naming the Dockerfile and the first base image the engine
        lacks."""
        ids = self._base_ids(build)
        named = "\0".join([build.digest, *ids])
        return f"{BUILT_REPOSITORY}:{hashlib.sha256(named.encode()).hexdigest()[:32]}"

    def _ensure(self, build: ImageBuild) -> str:
        tag = self.tag_of(build)
        limit = _limit(build)
        with self._host_lock(tag, min(self.lock_wait, limit + LOCK_GRACE)):
            if self._id(tag) is None:
                self._build(build, tag, limit)
        return tag

    @contextlib.contextmanager
    def _host_lock(self, tag: str, wait: float) -> Iterator[None]:
        """The lock of this engine's ``tag`` among the processes of this host, in the user's
        private folder (a lock file never opened through a link); a :class:`SandboxError`
        when another process holds it longer than ``wait`` seconds."""
        engine = str(getattr(self.client.api, "base_url", ""))
        key = hashlib.sha256(f"{engine}\0{tag}".encode()).hexdigest()[:24]
        try:
            folder = private_folder(self.lock_folder)
            flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
            descriptor = os.open(folder / f"{key}.lock", flags, 0o600)
        except OSError as exc:
            raise SandboxError(
                f"the lock of a scenario's image build cannot be made: {exc}; remove "
                f"{self.lock_folder} if it is not yours"
            ) from None
        try:
            deadline = time.monotonic() + wait
            while True:
                try:
                    fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise SandboxError(
                            f"another process holds the build of {tag} and has not finished "
                            f"within {wait:g}s: wait for it, or stop it"
                        ) from None
                    time.sleep(LOCK_POLL)
            try:
                yield
            finally:
                fcntl.flock(descriptor, fcntl.LOCK_UN)
        finally:
            os.close(descriptor)

    def _id(self, image: str) -> str | None:
        """The engine's id of ``image``; None when it has no such image."""
        try:
            return str(self.client.images.get(image).id)
        except docker.errors.ImageNotFound:
            return None
        except _ENGINE_ERRORS as exc:
            raise _failed(exc, "looking for an image") from exc

    def _base_ids(self, build: ImageBuild) -> list[str]:
        """The engine's ids of the images the Dockerfile needs; an error naming the first one
        the engine lacks, since none is pulled."""
        try:
            text = (build.context / build.dockerfile).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise SandboxError(f"{build.shown}: cannot be read ({exc.strerror})") from None
        try:
            images = base_images(text)
        except ValueError as exc:
            raise SandboxError(f"{build.shown}: {exc}") from None
        ids = []
        for image in images:
            found = self._id(image)
            if found is None:
                raise SandboxError(
                    f"{build.shown}: {visible(image)!r}: the Docker engine has no such "
                    "image, and a scenario's image is built without pulling any: pull or "
                    "build it into the engine first"
                )
            ids.append(f"{image}\0{found}")
        return ids

    def _build(self, build: ImageBuild, tag: str, limit: float) -> None:
        """Build ``build`` as ``tag``, stopped after ``limit`` seconds: its request is closed
        then (the engine cancels a build whose client went away)."""
        log: list[Any] = []
        failed = ""
        timer = _Bound(limit)
        self._requests.response = None
        try:
            with timer:
                chunks = self.client.api.build(
                    path=str(build.context),
                    dockerfile=build.dockerfile,
                    tag=tag,
                    rm=True,
                    forcerm=True,
                    pull=False,
                    decode=True,
                    timeout=math.ceil(limit) + 1,  # the bound below stops it first
                )
                timer.watch(self._requests.response)
                try:
                    for chunk in chunks:
                        log.append(chunk)
                        if isinstance(chunk, dict) and "error" in chunk:
                            failed = str(chunk["error"])
                            break
                finally:
                    timer.release()
        except _ENGINE_ERRORS as exc:
            if not timer.expired:
                raise _failed(exc, f"{build.shown}: building the image") from exc
        finally:
            self._requests.response = None
        if timer.expired:
            named = f"{build.timeout_named}: " if build.timeout_named else ""
            tail = build_log_tail(log)
            detail = f"; the build's last lines:\n{tail}" if tail else ""
            raise SandboxError(
                f"{named}the build of {build.shown} did not end within {limit:g} s and was "
                f"stopped (raise the bound to let it finish){detail}"
            )
        if failed or self._id(tag) is None:
            tail = build_log_tail(log, failed or "the engine ended the build without an image")
            raise SandboxError(f"{build.shown}: the image build failed:\n{tail}")


def _limit(build: ImageBuild) -> float:
    return BUILD_TIMEOUT if build.timeout is None else build.timeout


class _Bound:
    """A build's time bound: once it expires, the build's response (given to :meth:`watch`)
    has its socket shut down, which ends the build thread's read, and the response is closed
    by :meth:`release`, which the engine takes as the client going away."""

    def __init__(self, limit: float) -> None:
        self.expired = False
        self._lock = threading.Lock()
        self._response: requests.Response | None = None
        self._timer = threading.Timer(limit, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Bound:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        self.release()

    def watch(self, response: requests.Response | None) -> None:
        with self._lock:
            self._response = response
            expired = self.expired
        if expired:
            self._shut(response)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            response = self._response
        self._shut(response)

    def release(self) -> None:
        """Close the build's response (its connection is not given back to the pool
        half-read)."""
        with self._lock:
            response, self._response = self._response, None
        if response is not None:
            with contextlib.suppress(Exception):
                response.close()

    @staticmethod
    def _shut(response: requests.Response | None) -> None:
        if response is None:
            return
        with contextlib.suppress(Exception):  # already closed, or no socket left to shut
            response.raw.shutdown()


def _failed(exc: Exception, doing: str) -> BackendError:
    """An engine's failure while building: lost when it stopped answering, retried on its
    5xx (a :class:`RetryableError`, which no build keeps), else the build's error."""
    if isinstance(
        exc,
        requests.exceptions.ConnectionError
        | requests.exceptions.ChunkedEncodingError
        | urllib3.exceptions.ProtocolError,
    ):
        return SandboxLost(f"{doing}: the Docker engine stopped answering ({type(exc).__name__})")
    if isinstance(exc, docker.errors.APIError) and exc.is_server_error():
        return RetryableError(f"{doing}: Docker engine error: {exc.explanation or exc}")
    return SandboxError(f"{doing}: {exc}")
