"""``python -m pytest_openkata``'s own help and misuse, run as a user runs it."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from pytest_openkata.__main__ import COMMANDS

NAMES = [
    "init",
    "new-scenario",
    "html",
    "merge",
    "convert",
    "effectiveness",
    "agreement",
    "rejudge",
    "view",
]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_openkata", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("args", [["--help"], ["-h"], []], ids=["--help", "-h", "nothing"])
def test_help_lists_every_command_with_what_it_does(args: list[str]) -> None:
    result = _run(*args)

    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    listed = re.findall(r"^  (\S+) +(\S.*)$", result.stdout, re.MULTILINE)
    assert [name for name, _ in listed] == NAMES
    assert all(len(summary.split()) >= 5 for _, summary in listed), listed
    assert "python -m pytest_openkata.localmodel --help" in result.stdout
    assert max(map(len, result.stdout.splitlines())) <= 80


@pytest.mark.parametrize("name", NAMES)
def test_every_listed_command_runs_and_has_its_own_help(name: str) -> None:
    result = _run(name, "--help")

    assert result.returncode == 0, result.stderr
    assert f"usage: python -m pytest_openkata {name}" in result.stdout


def test_an_unknown_command_is_named_with_the_list_and_exits_2() -> None:
    result = _run("mrege", "shards")

    assert result.returncode == 2
    assert result.stdout == ""
    assert "unknown command 'mrege' (did you mean 'merge'?)" in result.stderr
    assert all(f"  {name} " in result.stderr for name in COMMANDS)


def test_an_unknown_option_in_place_of_a_command_is_misuse() -> None:
    result = _run("--verbose")

    assert result.returncode == 2
    assert "unknown command '--verbose'" in result.stderr
