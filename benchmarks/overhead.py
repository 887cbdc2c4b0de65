"""Per-scenario cost at zero latency against pytest's own cost for plain tests.

Runs N direct scenarios (2 criteria each) at ``--eval-concurrency 1`` against a zero-latency
endpoint in a pytest child and records, for every item, its whole run protocol
(``pytest_runtest_protocol``, outermost: setup, call, teardown, their reports and every hook
around them) and its setup + call + teardown durations. At zero latency nothing of a
scenario's time is the model's: it is the plugin's and pytest's cost plus two HTTP round trips.

The baseline, in a second child with only pytest loaded: N plain test functions, each making
the same two POSTs (the very bodies the plugin sends, recorded from a one-scenario pilot run)
through an ``httpx.Client`` to the same endpoint. Target: the median scenario costs at most
2 x the median plain test (whole run protocol of each). For information the same child also
runs N tests of a scenario's shape (both POSTs in a function-scoped fixture, so at setup as
the plugin makes them, then two subtests, as a scenario reports its two criteria).

Round trips are measured side by side, interleaved with the items: after every few items
(outside the items' figures) each child POSTs both bodies itself and records the round trips,
the plugin child along the plugin's own HTTP path (``make_client`` + ``post_json``, without the
rest of the plugin), the baseline child with a plain ``httpx.Client.post``. "Item - 2 x round
trip" is then the cost outside the HTTP calls, printed for both. The median of the plugin's
own timing of its two calls (``usage`` seconds) is printed too: item minus that is the
overhead outside the model calls, the figure least disturbed by other load on the machine.

    python benchmarks/overhead.py                   # 500 scenarios, 200 round trips
    python benchmarks/overhead.py --scenarios 50 --round-trips 20   # quick look
    python benchmarks/overhead.py --profile o.prof  # the same run under cProfile
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass

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
    run_child,
    scratch_folder,
    write_corpus,
)
from tests.support.endpoint import RecordedRequest, ScriptedEndpoint
from tests.support.evals import EvalScript

TARGET_RATIO = 2.0  # a scenario costs <= 2 x a plain test making the same two POSTs
PHASES = ("setup", "call", "teardown")
CRITERIA = {"names-the-change": 50, "keeps-it-short": 50}
PLAIN_TESTS = """\
import json
import os

import httpx
import pytest

URL, BODIES = os.environ["OPENKATA_BENCH_URL"], os.environ["OPENKATA_BENCH_BODIES"]
HEADERS = {"Content-Type": "application/json"}
TESTS = range(int(os.environ["OPENKATA_BENCH_TESTS"]))


@pytest.fixture(scope="session")
def client():
    with httpx.Client(timeout=30) as client:
        yield client


@pytest.fixture(scope="session")
def bodies():
    with open(BODIES, encoding="utf-8") as file:
        return [body.encode() for body in json.load(file)]


def post_both(client, bodies):
    answers = []
    for body in bodies:
        response = client.post(URL, content=body, headers=HEADERS)
        assert response.status_code == 200
        answers.append(json.loads(response.content))
    return answers


@pytest.fixture
def answers(client, bodies):
    return post_both(client, bodies)


@pytest.mark.parametrize("number", TESTS)
def test_two_posts(client, bodies, number):
    assert post_both(client, bodies)


@pytest.mark.parametrize("number", TESTS)
def test_posts_in_setup_two_subtests(answers, subtests, number):
    for name in ("names-the-change", "keeps-it-short"):
        with subtests.test(msg=name):
            assert answers
"""
PLAINEST = "::test_two_posts["  # in the node ids of the baseline tests proper


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


def entries(run: ChildRun, select: Callable[[str], bool] | None = None) -> list[dict]:
    items = run.record["items"]
    return [entry for nodeid, entry in items.items() if select is None or select(nodeid)]


def durations(entry: dict) -> float:
    return sum(entry[phase] for phase in PHASES)


@dataclass(frozen=True)
class Figures:
    protocol: float  # median whole run protocol of an item
    outside_http: float  # median item durations - 2 x the median round trip


def print_items(label: str, items: list[dict], trip: float) -> Figures:
    protocol = [entry["protocol"] for entry in items]
    per_item = [durations(entry) for entry in items]
    print(f"  {label} (n={len(items)})")
    print(f"    whole item (run protocol, reports and hooks included): {ms(protocol)}")
    print(f"    setup+call+teardown: {ms(per_item)}")
    outside = median(per_item) - 2 * trip
    print(f"    setup+call+teardown - 2 x round trip: median {outside * 1e3:.3f} ms")
    return Figures(median(protocol), outside)


def print_plugin_run(run: ChildRun, calls: int) -> Figures:
    items = entries(run)
    trips = run.record["probe_seconds"]
    print(
        f"plugin: direct scenarios, 2 criteria each, concurrency 1; model calls by the plugin: "
        f"{calls - len(trips) - 2}; round trip (the plugin's path, make_client + post_json, "
        f"from the child between items, n={len(trips)}): {ms(trips)}"
    )
    figures = print_items("scenarios", items, median(trips))
    for phase in PHASES:
        print(f"      {phase:<8}  {ms([entry[phase] for entry in items])}")
    timed = [entry for entry in items if "model_calls" in entry]
    if timed:
        print(
            "    the plugin's own timing of its 2 model calls (inside setup): "
            f"{ms([entry['model_calls'] for entry in timed])}"
        )
        outside = [durations(entry) - entry["model_calls"] for entry in timed]
        print(f"    setup+call+teardown - its own 2 model calls: {ms(outside)}")
    session = run.record["session_seconds"] - run.record["probe_spent"]
    print(
        f"    whole run: pytest session {session:.2f} s without the probes = "
        f"{session / len(items) * 1e3:.2f} ms per scenario (collection, reporting, results "
        f"JSON included); child wall {run.wall_seconds:.2f} s"
    )
    return figures


def print_baseline(plain: ChildRun) -> tuple[Figures, Figures]:
    trips = plain.record["probe_seconds"]
    print(
        "baseline: plain pytest, no plugin, the same 2 POSTs of the same bodies through an "
        f"httpx.Client; round trip (httpx.Client.post, from the child between items, "
        f"n={len(trips)}): {ms(trips)}"
    )
    trip = median(trips)
    proper = print_items(
        "test functions making the 2 POSTs", entries(plain, lambda id: PLAINEST in id), trip
    )
    shaped = print_items(
        "for information: a scenario's shape, the 2 POSTs in a fixture + 2 subtests",
        entries(plain, lambda id: PLAINEST not in id),
        trip,
    )
    return proper, shaped


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

        # Each probe POSTs both bodies: one every `every` items gives about --round-trips.
        def probe(kind: str, items: int) -> str:
            every = max(1, items * 2 // max(args.round_trips, 1))
            return f"{every} {kind} {url} {bodies_file}"

        command = pytest_command("-q", "skills", *options)
        if args.profile:
            profile = str(Path(args.profile).resolve())
            command = [sys.executable, "-m", "cProfile", "-o", profile, *command[1:]]
        requests_before = len(endpoint.requests)
        run = run_child(
            command, root, all_plugins=args.all_plugins, probe=probe("plugin", args.scenarios)
        )
        calls = len(endpoint.requests) - requests_before
        check_child(run, "pytest", allowed=(0,))

        (root / "plain").mkdir()
        (root / "plain" / "test_plain.py").write_text(PLAIN_TESTS)
        plain = run_child(
            pytest_command("-q", "plain", plugins=()),
            root,
            all_plugins=args.all_plugins,
            probe=probe("httpx", 2 * args.scenarios),
            OPENKATA_BENCH_URL=url,
            OPENKATA_BENCH_BODIES=str(bodies_file),
            OPENKATA_BENCH_TESTS=str(args.scenarios),
        )
        check_child(plain, "plain pytest baseline", allowed=(0,))

    print(f"machine: {machine_line()}")
    plugins = "every installed plugin" if args.all_plugins else "only those named (no autoload)"
    print(f"third-party pytest plugins: {plugins}")
    scenario = print_plugin_run(run, calls)
    proper, shaped = print_baseline(plain)
    print(
        "outside the HTTP calls (setup+call+teardown - 2 x round trip), for information: "
        f"scenario {scenario.outside_http * 1e3:.3f} ms, plain test "
        f"{proper.outside_http * 1e3:.3f} ms, scenario's shape {shaped.outside_http * 1e3:.3f} ms"
    )
    print(
        f"scenario / scenario's shape (whole items), for information: "
        f"{scenario.protocol / shaped.protocol:.2f}"
    )
    ratio = scenario.protocol / proper.protocol
    verdict = "meets target" if ratio <= TARGET_RATIO else "MISSES target"
    print(
        f"scenario {scenario.protocol * 1e3:.3f} ms / plain test making the same 2 POSTs "
        f"{proper.protocol * 1e3:.3f} ms (median whole items) = {ratio:.2f} "
        f"(target <= {TARGET_RATIO:g}) -> ratio to target = {ratio / TARGET_RATIO:.2f} "
        f"({verdict})"
    )
    if args.profile:
        print(f"profile written to {args.profile}")


if __name__ == "__main__":
    main()
