"""A Dockerfile's build context: where it may lie, and the digest that names it.

A scenario's Dockerfile and the folder it is built in are the scenario's own files: the
context is sent to the Docker engine whole, so a context reached through a symbolic link could
send the machine's other files (keys, say) into an image. :func:`dockerfile_problem` refuses
any link along the Dockerfile's path and any path that resolves out of the scenario folder.

The digest (every file's path, executable bit and content) names the build: a provider tags
the built image by it and the result cache keys a run by it. It is read without following
links (a link counts by its target's text, as the builder sends it) and without opening
anything but regular files (a FIFO or device would block or never end).
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path

from pytest_openkata.core.files import files_under

__all__ = ["context_digest", "dockerfile_problem"]

CHUNK = 1 << 20


def dockerfile_problem(folder: Path, rel: str) -> str | None:
    """Why the Dockerfile at ``rel`` (``/``-separated) cannot be built from the scenario
    ``folder``; None when it can: a regular file inside the resolved folder, reached through
    no symbolic link."""
    parts = rel.split("/")
    if rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        return "must be a relative path inside the scenario folder"
    current = folder
    for index, part in enumerate(parts):
        current = current / part
        if current.is_symlink():
            link = "/".join(parts[: index + 1])
            return (
                f"{rel}: {link} is a symbolic link: a Dockerfile and its build context are "
                "read from the scenario folder itself, never through a link"
            )
    try:
        inside = current.resolve().is_relative_to(folder.resolve())
    except OSError:
        inside = False
    if not inside:
        return f"{rel}: leads out of the scenario folder"
    if not current.is_file():
        return f"{rel}: file not found in the scenario folder"
    return None


def context_digest(context: Path, dockerfile: str) -> str:
    """The SHA-256 of a build context: the Dockerfile's path in it, then each entry's
    relative path, then a link's target or a regular file's executable bit and content, in
    path order; other special files are left out. An :class:`OSError` whose ``filename`` is
    the entry's path relative to ``context`` when one cannot be read."""
    digest = hashlib.sha256(f"dockerfile\0{dockerfile}\0".encode())
    for rel, path in files_under(context):
        try:
            found = path.lstat()
            if stat.S_ISLNK(found.st_mode):
                entry = f"link\0{os.readlink(path)}"
            elif stat.S_ISREG(found.st_mode):
                executable = bool(found.st_mode & stat.S_IXUSR)
                entry = f"{int(executable)}\0{_content_digest(path)}"
            else:
                continue
        except OSError as exc:
            raise OSError(exc.errno or errno.EIO, exc.strerror or str(exc), rel) from None
        digest.update(f"{rel}\0{entry}\0".encode())
    return digest.hexdigest()


def _content_digest(path: Path) -> str:
    """The SHA-256 of a regular file's content, opened without following a link or blocking
    (a file swapped for a FIFO after its lstat is refused, not waited on)."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(descriptor, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        digest = hashlib.sha256()
        while block := file.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()
