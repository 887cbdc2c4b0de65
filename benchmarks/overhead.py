"""Plugin overhead per scenario against a zero-latency endpoint.

Runs N direct scenarios (2 criteria each) at ``--eval-concurrency 1`` in a pytest child and
records each item's setup + call + teardown time. A scenario makes two model calls (agent,
judge), so the plugin's own cost per scenario is the item time minus two endpoint round trips.
The round trip is measured side by side, interleaved with the scenarios: after every few items
(outside their durations) the pytest child itself POSTs, through a ModelClient of its own (the
plugin's HTTP client, without the rest of the plugin), the very request bodies the plugin
sends (recorded from a one-scenario pilot run) to the same server, so that both see the same
process, moment and machine load. The median of the items' own timing of their two calls (the
plugin's ``usage`` seconds) is printed too: item minus that is the overhead outside the model
calls, the figure least disturbed by other load on the machine.
Target: median overhead <= 5 ms.

Side by side, in the same way, a baseline of what pytest itself costs for the same work: as
many plain test functions, each POSTing the same two bodies the same way from a fixture and
then checking two subtests, with the plugin not loaded. Its "overhead" is pytest's own share.

    python benchmarks/overhead.py                   # 500 scenarios, 200 round trips
    python benchmarks/overhead.py --profile o.prof  # the same run under cProfile
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import json

from benchmarks._common import (
    RECORDER_CONFTEST,
    ChildRun,
    add_plugin_option,
    check_child,
    eval_options,
    machine_line,
    median,
    percentile,
    prepare_children,
    pytest_command,
    ratio_line,
    run_child,
    scratch_folder,
    write_corpus,
)
from tests.support.endpoint import RecordedRequest, ScriptedEndpoint
from tests.support.evals import EvalScript

TARGET_MS = 5.0
WARM_UP = 20  # round trips not counted: the client's first connections and imports
PHASES = ("setup", "call", "teardown")
CRITERIA = {"names-the-change": 50, "keeps-it-short": 50}
PLAIN_TESTS = """\
import json
import os

import pytest

URL, BODIES = os.environ["OPENKATA_BENCH_URL"], os.environ["OPENKATA_BENCH_BODIES"]


@pytest.fixture(scope="session")
def bodies():
    with open(BODIES) as file:
        return json.load(file)


@pytest.fixture
def answers(bench_post, bodies):  # bench_post: the recording conftest's, as its probe POSTs
    return [bench_post(URL, body.encode()) for body in bodies]


@pytest.mark.parametrize("number", range(int(os.environ["OPENKATA_BENCH_TESTS"])))
def test_two_calls_two_subtests(answers, subtests, number):
    for name in ("names-the-change", "keeps-it-short"):
        with subtests.test(msg=name):
            assert answers
"""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenarios", type=int, default=500, help="direct scenarios (500)")
    parser.add_argument("--per-skill", type=int, default=100, help="scenarios per skill (100)")
    parser.add_argument("--round-trips", type=int, default=200, help="direct POSTs (200)")
    parser.add_argument("--profile", metavar="FILE", help="run the pytest child under cProfile")
    add_plugin_option(parser)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    return parser.parse_args()


def plugin_bodies(requests: list[RecordedRequest]) -> list[str]:
    """The last agent request and the last judge request (it has a system message)."""
    agent = next(r for r in reversed(requests) if r.json["messages"][0]["role"] != "system")
    judge = next(r for r in reversed(requests) if r.json["messages"][0]["role"] == "system")
    return [agent.body.decode(), judge.body.decode()]


def ms(values: list[float]) -> str:
    return f"median {median(values) * 1e3:.3f} ms, p90 {percentile(values, 90) * 1e3:.3f} ms"


def item_times(run: ChildRun) -> list[float]:
    return [sum(entry[phase] for phase in PHASES) for entry in run.record["items"].values()]


def print_plugin_run(run: ChildRun, calls: int, args: argparse.Namespace) -> float:
    """Print the plugin run's figures; returns its median overhead in seconds."""
    items = run.record["items"]
    trips = run.record["probe_seconds"]
    per_item = item_times(run)
    trip = median(trips)
    overhead_median = median(per_item) - 2 * trip
    overhead_p90 = percentile(per_item, 90) - 2 * trip
    session = run.record["session_seconds"] - run.record["probe_spent"]
    print(f"machine: {machine_line()}")
    plugins = "every installed plugin" if args.all_plugins else "openkata only (no autoload)"
    print(f"third-party pytest plugins: {plugins}")
    print(
        f"scenarios: {len(items)} direct, 2 criteria each, concurrency 1; model calls by the "
        f"plugin: {calls - len(trips) - 2}"
    )
    print(
        f"endpoint round trip (ModelClient POST of the plugin's own bodies, from the pytest "
        f"child between items, n={len(trips)}): {ms(trips)}"
    )
    print(f"item time (setup+call+teardown): {ms(per_item)}")
    for phase in PHASES:
        print(f"  {phase:<8}  {ms([entry[phase] for entry in items.values()])}")
    timed = [entry["model_calls"] for entry in items.values() if "model_calls" in entry]
    if timed:
        print(f"  the plugin's own timing of its 2 model calls (inside setup): {ms(timed)}")
        outside = [
            sum(entry[phase] for phase in PHASES) - entry["model_calls"]
            for entry in items.values()
            if "model_calls" in entry
        ]
        print(f"  item - its own 2 model calls (overhead outside the calls): {ms(outside)}")
    print(
        f"overhead = item - 2 x round trip: median {overhead_median * 1e3:.3f} ms, "
        f"p90 {overhead_p90 * 1e3:.3f} ms"
    )
    print(
        f"whole run: pytest session {session:.2f} s without the probes = "
        f"{session / len(items) * 1e3:.2f} ms per scenario (collection, reporting, results JSON "
        f"included); child wall {run.wall_seconds:.2f} s"
    )
    return overhead_median


def print_baseline(plain: ChildRun) -> float:
    """Print the plain-pytest baseline; returns its median item time - 2 round trips."""
    per_item = item_times(plain)
    trip = median(plain.record["probe_seconds"])
    overhead = median(per_item) - 2 * trip
    print(
        f"baseline, plain pytest doing the same 2 POSTs and 2 subtests per test, no plugin "
        f"(n={len(per_item)}): item {ms(per_item)}; round trip median {trip * 1e3:.3f} ms; "
        f"item - 2 x round trip: median {overhead * 1e3:.3f} ms"
    )
    return overhead


def main() -> None:
    args = parse_args()
    print(f"pytest children run in {prepare_children(args)}", flush=True)
    with scratch_folder("overhead", keep=args.keep) as root, ScriptedEndpoint() as endpoint:
        endpoint.respond_with(EvalScript())
        url = endpoint.base_url + "/chat/completions"
        write_corpus(root, args.scenarios, args.per_skill, CRITERIA)
        (root / "conftest.py").write_text(RECORDER_CONFTEST)
        options = eval_options(endpoint.base_url, "--eval-concurrency", "1")

        # A pilot run of one scenario gives the exact bodies the plugin sends.
        pilot_path = root / "skills" / "skill-000" / "evals" / "scenario-00000"
        pilot = run_child(
            pytest_command("-q", str(pilot_path), *options), root, all_plugins=args.all_plugins
        )
        check_child(pilot, "pilot run", allowed=(0,))
        bodies_file = root / "bodies.json"
        bodies_file.write_text(json.dumps(plugin_bodies(endpoint.requests)))

        # Each probe POSTs both bodies: every `every` items gives about --round-trips of them.
        every = max(1, args.scenarios * 2 // max(args.round_trips, 1))
        probe = f"{every} {url} {bodies_file}"
        command = pytest_command("-q", "skills", *options)
        if args.profile:
            profile = str(Path(args.profile).resolve())
            command = [sys.executable, "-m", "cProfile", "-o", profile, *command[1:]]
        requests_before = len(endpoint.requests)
        run = run_child(command, root, all_plugins=args.all_plugins, probe=probe)
        calls = len(endpoint.requests) - requests_before
        check_child(run, "pytest", allowed=(0,))

        (root / "plain").mkdir()
        (root / "plain" / "test_plain.py").write_text(PLAIN_TESTS)
        plain = run_child(
            pytest_command("-q", "plain", plugins=()),
            root,
            all_plugins=args.all_plugins,
            probe=probe,
            OPENKATA_BENCH_URL=url,
            OPENKATA_BENCH_BODIES=str(bodies_file),
            OPENKATA_BENCH_TESTS=str(args.scenarios),
        )
        check_child(plain, "plain pytest baseline", allowed=(0,))

    overhead = print_plugin_run(run, calls, args)
    baseline = print_baseline(plain)
    print(
        f"the plugin's own share (overhead - baseline): {(overhead - baseline) * 1e3:.3f} ms "
        "per scenario"
    )
    print(ratio_line("median overhead", overhead * 1e3, TARGET_MS, "ms"))
    if args.profile:
        print(f"profile written to {args.profile}")


if __name__ == "__main__":
    main()
