"""Collection time and peak memory of a large skills tree.

``pytest --collect-only -q`` of 10,000 scenarios (100 skills x 100 scenarios): the child's
wall time, from spawning the interpreter to its exit, and its peak RSS. Each measured pytest
runs as the only child of a small intermediate Python process, which reads
``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss`` (KiB on Linux) once it has exited, so
that no earlier child can raise the figure. Side by side in the same run, interleaved round
by round: plain pytest collecting as many trivial test functions (a file per skill, as many
functions to a file as scenarios to a skill: 100 files of 100), what pytest itself costs, and
those trivial tests with the plugin loaded (its fixed start-up cost). Target: the scenarios'
median wall time <= the plain test functions' (ratio <= 1); the peak RSS and its ratio are
printed for information.

    python benchmarks/collection.py                  # 100 x 100, 3 rounds
    python benchmarks/collection.py --skills 10 --scenarios-per-skill 100 --rounds 1
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import json
import re
import resource
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks._common import (
    add_plugin_option,
    child_environment,
    machine_line,
    median,
    prepare_children,
    pytest_command,
    scratch_folder,
)
from tests.support.evals import write_skill

TARGET_RATIO = 1.0  # scenarios' collection time / plain test functions' collection time
CRITERIA = {"names-the-change": 50, "keeps-it-short": 50}
COLLECTED = re.compile(r"(\d+) tests? collected")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--skills", type=int, default=100, help="skills (100)")
    parser.add_argument(
        "--scenarios-per-skill", type=int, default=100, help="scenarios per skill (100)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="measurements of each (3)")
    parser.add_argument("--profile", metavar="FILE", help="also profile one scenario collection")
    add_plugin_option(parser)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folders")
    parser.add_argument("--measure", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser.parse_args()


@dataclass(frozen=True)
class Measurement:
    seconds: float
    max_rss_kib: int
    returncode: int
    collected: int | None
    tail: str

    @property
    def megabytes(self) -> float:
        return self.max_rss_kib * 1024 / 1e6


def measure_here(command: Sequence[str]) -> dict[str, object]:
    """Run ``command`` as this process's only child; its wall time and peak RSS."""
    started = time.perf_counter()
    done = subprocess.run(list(command), check=False, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    found = COLLECTED.findall(done.stdout)
    return {
        "seconds": seconds,
        "max_rss_kib": usage.ru_maxrss,
        "returncode": done.returncode,
        "collected": int(found[-1]) if found else None,
        "tail": "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:]),
    }


def measure(command: Sequence[str], cwd: Path, all_plugins: bool) -> Measurement:
    """:func:`measure_here` in a fresh intermediate process (so the child is its only one)."""
    wrapper = [sys.executable, __file__, "--measure", *command]
    env = child_environment(all_plugins=all_plugins)
    done = subprocess.run(wrapper, check=True, cwd=cwd, env=env, capture_output=True, text=True)
    return Measurement(**json.loads(done.stdout))


def write_scenarios(root: Path, skills: int, per_skill: int) -> int:
    names = [f"scenario-{n:04d}" for n in range(per_skill)]
    for skill in range(skills):
        write_skill(root, f"skill-{skill:03d}", dict.fromkeys(names, CRITERIA))
    return skills * per_skill


def write_plain_tests(root: Path, files: int, per_file: int) -> int:
    tests = root / "tests"
    tests.mkdir()
    body = "".join(f"def test_{n:04d}():\n    pass\n\n\n" for n in range(per_file))
    for index in range(files):
        (tests / f"test_module_{index:03d}.py").write_text(body)
    return files * per_file


def main() -> None:
    args = parse_args()
    if args.measure is not None:  # the intermediate process
        print(json.dumps(measure_here(args.measure)))
        return
    print(f"pytest children run in {prepare_children(args)}", flush=True)

    total = args.skills * args.scenarios_per_skill
    baseline_plugins: tuple[str, ...] = ("no:openkata",) if args.all_plugins else ()
    runs = {
        "openkata: scenarios": ("skills", ("openkata",)),
        "plain pytest: test functions": ("tests", baseline_plugins),
        "plain tests + openkata loaded": ("tests", ("openkata",)),
    }
    results: dict[str, list[Measurement]] = {name: [] for name in runs}
    with scratch_folder("collection", keep=args.keep) as root:
        started = time.perf_counter()
        write_scenarios(root, args.skills, args.scenarios_per_skill)
        write_plain_tests(root, args.skills, args.scenarios_per_skill)
        elapsed = time.perf_counter() - started
        print(f"wrote {total} scenarios and {total} test functions in {elapsed:.1f} s")
        for _ in range(args.rounds):  # interleaved, so that drifts in load hit all alike
            for name, (target, plugins) in runs.items():
                command = pytest_command("--collect-only", "-q", target, plugins=plugins)
                outcome = measure(command, root, args.all_plugins)
                if outcome.returncode != 0 or outcome.collected != total:
                    sys.exit(
                        f"{name}: exit {outcome.returncode}, collected "
                        f"{outcome.collected} of {total}\n{outcome.tail}"
                    )
                results[name].append(outcome)
        if args.profile:
            command = pytest_command("--collect-only", "-q", "skills")
            profile = str(Path(args.profile).resolve())
            command = [sys.executable, "-m", "cProfile", "-o", profile, *command[1:]]
            env = child_environment(all_plugins=args.all_plugins)
            subprocess.run(command, check=True, cwd=root, env=env, capture_output=True)

    print(f"machine: {machine_line()}")
    plugins = "every installed plugin" if args.all_plugins else "only those named (no autoload)"
    print(f"third-party pytest plugins: {plugins}")
    print(f"{total} items each; median of {args.rounds} round(s), interleaved")
    print(f"{'run':<32} {'wall s':>8} {'peak RSS MB':>12}   (each round: s / MB)")
    for name, outcomes in results.items():
        seconds = median([o.seconds for o in outcomes])
        megabytes = median([o.megabytes for o in outcomes])
        rounds = ", ".join(f"{o.seconds:.2f}/{o.megabytes:.0f}" for o in outcomes)
        print(f"{name:<32} {seconds:>8.2f} {megabytes:>12.1f}   ({rounds})")
    scenarios = results["openkata: scenarios"]
    baseline = results["plain pytest: test functions"]
    seconds = median([o.seconds for o in scenarios])
    megabytes = median([o.megabytes for o in scenarios])
    base_seconds = median([o.seconds for o in baseline])
    base_megabytes = median([o.megabytes for o in baseline])
    print(
        f"peak RSS, for information: scenarios {megabytes:.1f} MB / plain test functions "
        f"{base_megabytes:.1f} MB = {megabytes / base_megabytes:.2f}"
    )
    ratio = seconds / base_seconds
    verdict = "meets target" if ratio <= TARGET_RATIO else "MISSES target"
    print(
        f"collection wall time: {total} scenarios {seconds:.3f} s / {total} plain test "
        f"functions {base_seconds:.3f} s = {ratio:.2f} (target <= {TARGET_RATIO:g}, "
        f"{verdict})"
    )
    if args.profile:
        print(f"profile written to {args.profile}")


if __name__ == "__main__":
    main()
