"""What the views of a large run cost once its model calls are over.

A run of 2,000 scenarios (20 skills, 3 trials each, 8 criteria a trial, a 3,000-character
agent output a trial) is built in memory; then, interleaved round by round, the reporters'
work is timed side by side: the results JSON of every skill (what a run always writes), and
the run log written and read back, the HTML page, the Markdown and the CSV (each rendered
from the log's text, as the reporters do). Printed: the median seconds of each, their sizes,
and each view's time ÷ the results JSON's, for information: beside model calls that take
seconds each, a run of this size spends hours calling models.

    python benchmarks/reports.py                 # 2,000 scenarios, 3 rounds
    python benchmarks/reports.py --scenarios 200 --rounds 1
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import time
from collections.abc import Callable
from datetime import UTC, datetime

from benchmarks._common import machine_line, median
from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.core.results_json import render_report, skill_report
from pytest_openkata.core.runlog import RunInfo, log_lines, parse_run_log
from pytest_openkata.core.summary import summarise
from pytest_openkata.providers.reporters.csvfile import render_csv
from pytest_openkata.providers.reporters.html import render_html
from pytest_openkata.providers.reporters.markdown import render_markdown
from tests.support.results import ROOT, SETTINGS, judged, scenario


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenarios", type=int, default=2000)
    parser.add_argument("--skills", type=int, default=20)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    results = [
        scenario(
            f"scenario-{number}",
            *[
                [judged(f"c{c}", 5, (number + c + t) % 4 != 0, "because " * 12) for c in range(8)]
                for t in range(args.trials)
            ],
            skill=f"skill-{number % args.skills}",
            output="an agent's answer line\n" * 130,
        )
        for number in range(args.scenarios)
    ]
    settings = EvalSettings()
    now = datetime(2026, 12, 1, tzinfo=UTC)
    info = RunInfo("2026-12-01T00:00:00Z", settings=SETTINGS)
    summaries = summarise(results, settings.threshold, ROOT)
    text = log_lines(info, results, ROOT)

    def results_json() -> int:
        return sum(len(render_report(skill_report(s, settings, now))) for s in summaries)

    def run_log() -> int:
        written = log_lines(info, results, ROOT)
        parse_run_log(written)
        return len(written)

    views: dict[str, Callable[[], int]] = {
        "results JSON (every skill)": results_json,
        "run log (written, read back)": run_log,
        "HTML": lambda: len(render_html(parse_run_log(text))),
        "Markdown": lambda: len(render_markdown(parse_run_log(text))),
        "CSV": lambda: len(render_csv(parse_run_log(text))),
    }
    seconds: dict[str, list[float]] = {name: [] for name in views}
    sizes: dict[str, int] = {}
    for _ in range(args.rounds):
        for name, view in views.items():
            started = time.perf_counter()
            sizes[name] = view()
            seconds[name].append(time.perf_counter() - started)
    print(machine_line())
    print(
        f"{args.scenarios} scenarios x {args.trials} trials, {args.skills} skills, "
        f"{args.rounds} rounds (median)"
    )
    base = median(seconds["results JSON (every skill)"])
    for name, figures in seconds.items():
        taken = median(figures)
        print(
            f"  {name}: {taken:.2f} s, {sizes[name] / 1e6:.1f} MB; "
            f"÷ results JSON = {taken / base:.1f}"
        )


if __name__ == "__main__":
    main()
