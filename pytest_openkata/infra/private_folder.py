"""A folder of this user's own under a predictable name in a folder everyone may write to.

The temporary folder is shared by every user of the host: a folder named there in advance may
have been made by someone else (another user's, a symlink to elsewhere, open to others), who
could then swap the files the plugin reads or locks. Such a folder is refused, never used.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["private_folder"]


def private_folder(folder: Path, *, closed: int = stat.S_IWGRP | stat.S_IWOTH) -> Path:
    """``folder``, made (mode 0700) when missing; a :class:`PermissionError` when it is a
    symlink, not a folder, another user's, or has any of the ``closed`` mode bits (by default
    write by group or others: a folder of locks may be listed, never written, by others)."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    found = folder.lstat()
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid() or found.st_mode & closed:
        raise PermissionError(
            f"{folder} is not a private folder of this user (another user's, a link, or "
            "open to others)"
        )
    return folder
