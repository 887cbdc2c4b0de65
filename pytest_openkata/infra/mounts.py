"""The mount points this process sees, for code that removes or unmounts a folder of its own
and must not reach into a file system mounted inside it."""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["mount_points", "mounted_under"]

# /proc/self/mountinfo writes a space, tab, newline or backslash in a path as an octal escape.
_ESCAPE = re.compile(r"\\([0-7]{3})")


def mount_points() -> list[str]:
    """Every mount point, as the kernel lists them (Linux; none where that cannot be read).
    Read from the kernel's list: ``os.path.ismount`` cannot see a folder mounted on itself."""
    try:
        lines = Path("/proc/self/mountinfo").read_text(errors="replace").splitlines()
    except OSError:
        return []
    fields = (line.split(" ") for line in lines)
    return [_ESCAPE.sub(lambda m: chr(int(m[1], 8)), f[4]) for f in fields if len(f) > 4]


def mounted_under(folder: str, *, itself: bool = True) -> list[str]:
    """The mount points at ``folder`` (with ``itself``) or below it, deepest first. The
    kernel lists resolved paths: ``folder`` is resolved first (a temporary folder reached
    through a symlink)."""
    folder = os.path.realpath(folder)
    inside = folder.rstrip("/") + "/"
    chosen = [p for p in mount_points() if p.startswith(inside) or (itself and p == folder)]
    return sorted(chosen, reverse=True)
