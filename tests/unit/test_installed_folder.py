"""The working folder that holds an installed skill is removed when its scenario is done, and
as the interpreter exits when an interrupted run left its scenario thread in it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pytest_openkata.core.skill_delivery import installed_folder


def test_the_folder_holds_the_files_and_is_removed_with_what_the_agent_added() -> None:
    with installed_folder([(".claude/skills/s/SKILL.md", b"# s\n")]) as folder:
        assert (folder / ".claude" / "skills" / "s" / "SKILL.md").read_bytes() == b"# s\n"
        (folder / "made-by-the-agent").mkdir()
        (folder / "made-by-the-agent" / "notes.txt").write_text("x")

    assert not folder.exists()


def test_a_folder_still_in_use_on_a_daemon_thread_is_removed_as_the_interpreter_exits() -> None:
    # Ctrl-C: the run ends while a scenario thread (a daemon) still runs its agent in the
    # folder; the thread never reaches the end of its block.
    code = """
import threading
from pytest_openkata.core.skill_delivery import installed_folder

entered = threading.Event()

def scenario():
    with installed_folder([("skills/s/SKILL.md", b"# s\\n")]) as folder:
        print(folder, flush=True)
        entered.set()
        threading.Event().wait(3600)

threading.Thread(target=scenario, daemon=True).start()
assert entered.wait(60)
"""
    finished = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )

    assert finished.returncode == 0, finished.stderr
    folder = Path(finished.stdout.strip())
    assert folder.name.startswith("openkata-skills-")
    assert not folder.exists()
