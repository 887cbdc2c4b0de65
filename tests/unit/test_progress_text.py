"""What the progress views are told and say: the scenarios in flight with what each waits on,
and the status line written to a log, from the counts alone."""

from __future__ import annotations

import threading

from pytest_openkata.core.activity import Activity, InFlight, Snapshot
from pytest_openkata.plugin.heartbeat import NAME_MAX, shown_name, status
from pytest_openkata.plugin.tally import ScenarioTally, Started


def test_a_call_in_a_scenario_shows_as_what_that_scenario_waits_on() -> None:
    activity = Activity()
    in_judge = threading.Event()
    release = threading.Event()

    def other() -> None:
        with activity.scenario("s::scenario-b"), activity.counting("judge"):
            in_judge.set()
            release.wait(10)

    with activity.scenario("s::scenario-a"):
        thread = threading.Thread(target=other)
        thread.start()
        assert in_judge.wait(10)
        with activity.counting("agent"):
            during = activity.snapshot()
        after = activity.snapshot()
        release.set()
        thread.join()
    done = activity.snapshot()

    assert (during.running, during.agent, during.judge) == (2, 1, 1)
    assert [(s.name, s.waiting_on) for s in during.scenarios] == [
        ("s::scenario-a", "agent"),
        ("s::scenario-b", "judge"),
    ]
    assert [(s.name, s.waiting_on) for s in after.scenarios] == [
        ("s::scenario-a", ""),
        ("s::scenario-b", "judge"),
    ]
    assert done == Snapshot()


def test_a_call_outside_any_scenario_is_counted_but_named_nowhere() -> None:
    activity = Activity()
    with activity.counting("agent"):
        now = activity.snapshot()
    assert (now.agent, now.scenarios) == (1, ())


def test_the_status_line_without_xdist_names_the_oldest_run_and_what_it_waits_on() -> None:
    tally = ScenarioTally(total=12, done=3)
    now = Snapshot(
        running=2,
        agent=1,
        judge=1,
        scenarios=(InFlight("x::scenario-y", 100.0, "agent"), InFlight("x::z", 200.0, "judge")),
    )

    line = status(tally, now, elapsed=390.0, at=350.0)

    assert line == (
        "openkata: 3/12 scenarios done, 2 running (1 on agent, 1 on judge); "
        "slowest: x::scenario-y (4m10s, on agent); 6m30s so far"
    )


def test_without_a_run_of_its_own_the_slowest_is_the_scenario_pytest_started_first() -> None:
    # As under --eval-validate, whose items grade a solution without a scenario run.
    tally = ScenarioTally(total=2)
    tally.under_way["skills/x/evals::scenario-y"] = Started("x::scenario-y", 10.0)

    line = status(tally, Snapshot(), elapsed=50.0, at=52.0)

    assert line == "openkata: 0/2 scenarios done; slowest: x::scenario-y (42s); 50s so far"


def test_the_status_line_under_xdist_says_only_what_the_controller_heard() -> None:
    tally = ScenarioTally(total=4, done=1, xdist=True)
    tally.under_way["skills/x/evals::scenario-y"] = Started("x::scenario-y", 10.0)
    tally.under_way["skills/x/evals::scenario-z"] = Started("x::scenario-z", 20.0)
    # This process runs nothing itself: what it counts is no worker's.
    now = Snapshot(running=1, agent=1)

    line = status(tally, now, elapsed=3700.0, at=70.0)

    assert line == (
        "openkata: 1/4 scenarios done, 2 under way on workers; "
        "slowest: x::scenario-y (1m00s); 1h01m so far"
    )


def test_a_scenario_name_is_shown_on_one_line_escaped_and_cut_in_the_middle() -> None:
    assert shown_name("x::scen\x1b[2Jario\nb") == "x::scen\\x1b[2Jario\\nb"
    long = "skills/" + "a" * 100 + "::scenario-end"
    shown = shown_name(long)
    assert len(shown) == NAME_MAX
    assert shown.startswith("skills/aaa")
    assert shown.endswith("::scenario-end")
    assert "…" in shown
