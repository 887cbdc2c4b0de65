"""The heap that collection built is frozen while scenarios run and pytest shuts down, and
only then; and frozen again as the interpreter exits after such a run."""

from __future__ import annotations

import pytest

from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_skill

# Each hook writes what the collector sees at that moment to its own line of ``gc.txt``.
RECORDING_CONFTEST = """\
import atexit
import gc

import pytest


def _note(what):
    with open("gc.txt", "a") as out:
        out.write(f"{what} {gc.get_freeze_count()}\\n")


def pytest_openkata_scenario_result(result, item):
    _note("scenario")


def pytest_runtest_call(item):
    _note("call")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session):
    try:
        return (yield)
    finally:
        _note("finished")


def pytest_configure(config):
    # Run after every plugin's pytest_unconfigure, before pytest's own cleanup collects the
    # garbage a last time.
    config.add_cleanup(lambda: _note("unconfigured"))


# Registered before the plugin's handler, so run after it, as the interpreter exits.
atexit.register(lambda: _note("exit"))
"""


def noted(pytester: pytest.Pytester) -> list[tuple[str, int]]:
    lines = (pytester.path / "gc.txt").read_text().splitlines()
    return [(what, int(count)) for what, count in (line.split() for line in lines)]


def test_the_collected_heap_is_frozen_while_scenarios_run_and_given_back_at_unconfigure(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"a": 1}, "scenario-1": {"a": 1}})
    pytester.makeconftest(RECORDING_CONFTEST)

    result = pytester.runpytest_subprocess("skills", *eval_args(endpoint.base_url))

    assert result.ret == pytest.ExitCode.OK
    seen = noted(pytester)
    assert [what for what, _ in seen] == [
        *("scenario", "call", "scenario", "call"),
        *("finished", "unconfigured", "exit"),
    ]
    assert all(count > 0 for what, count in seen if what != "unconfigured")
    assert seen[-2] == ("unconfigured", 0)
    # Frozen again as the interpreter exits: its last collection does not walk the heap.
    assert seen[-1][1] > 0


def test_a_run_without_scenarios_leaves_the_collector_alone(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(RECORDING_CONFTEST)
    pytester.makepyfile(test_plain="def test_one():\n    pass\n")

    result = pytester.runpytest_subprocess()

    assert result.ret == pytest.ExitCode.OK
    assert noted(pytester) == [("call", 0), ("finished", 0), ("unconfigured", 0), ("exit", 0)]
