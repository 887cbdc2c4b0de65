"""The version of the agent CLI a sandbox image holds, asked once per run for each image.

Each sandboxed trial records which agent CLI ran it, as the CLI itself tells
(``<cli> --version``), beside the image's id: two runs that differ only in the CLI's version
can then be told apart in their reports and run logs. The question is asked in the first
environment made from an image and the answer kept for the rest of the run (every
environment of one image holds the same CLI). What a CLI prints is not trusted: only its
first line is kept, stripped of control characters and bounded.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from pytest_openkata.contracts.errors import BackendError
from pytest_openkata.contracts.sandboxes import SandboxEnvironment
from pytest_openkata.infra.text import visible

__all__ = ["VERSION_MAX_CHARS", "VERSION_TIMEOUT", "AgentVersions"]

VERSION_TIMEOUT = 60.0  # seconds: a CLI that starts slowly (node) still answers in time
VERSION_MAX_CHARS = 200


class AgentVersions:
    """The agent CLIs' versions asked so far in one run, by image and executable; shared by
    the run's threads (two asking at once both ask: the answers are the same)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[tuple[str, ...], str] = {}

    def of(self, environment: SandboxEnvironment, argv: Sequence[str], workdir: str) -> str:
        """The version ``argv`` prints in ``environment`` (its first line), ``argv`` being
        the agent's executable and its version flag; "" when it cannot tell (no ``argv``, it
        failed or printed nothing). An environment that knows no image id to remember the
        answer by is asked every time."""
        if not argv:
            return ""
        image = str(getattr(environment, "image_id", ""))
        key = (image, *argv)
        with self._lock:
            if image and key in self._known:
                return self._known[key]
        version = _asked(environment, argv, workdir)
        if image:
            with self._lock:
                self._known.setdefault(key, version)
        return version


def _asked(environment: SandboxEnvironment, argv: Sequence[str], workdir: str) -> str:
    try:
        result = environment.exec(list(argv), env={}, workdir=workdir, timeout=VERSION_TIMEOUT)
    except BackendError:
        return ""  # the agent's own run reports what is wrong with the environment
    if result.timed_out or result.exit_code != 0:
        return ""
    lines = [line.strip() for line in result.output.splitlines() if line.strip()]
    return visible(lines[0])[:VERSION_MAX_CHARS] if lines else ""
