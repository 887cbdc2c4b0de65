"""What ``pytest --eval-lint`` costs on a large skills tree, beside collecting the same tree.

A tree of 1,000 scenarios (10 skills of 100, each scenario with a task, criteria summing to
100 and a scenario.json) is written once; then, interleaved round by round, two pytest
children run on it side by side: ``--collect-only -q`` (what any run of the tree pays before
its first model call) and ``--eval-lint -q`` (collection plus every rule of every scenario and
skill, each rule a subtest). Printed: the median wall time of each, from spawning the
interpreter to its exit, the lint's time per scenario, and lint ÷ collection, for
information: lint replaces model calls that take seconds each.

    python benchmarks/lint.py                  # 10 x 100, 3 rounds
    python benchmarks/lint.py --skills 2 --scenarios-per-skill 50 --rounds 1
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import json

from benchmarks._common import (
    add_plugin_option,
    machine_line,
    median,
    prepare_children,
    pytest_command,
    run_child,
    scratch_folder,
)

CRITERIA = {
    "names-the-change": 50,
    "keeps-the-subject-under-72-characters": 30,
    "no-invented-issue-number": 20,
}
FRONT_MATTER = "---\nname: {name}\ndescription: Writes notes. Use when asked for notes.\n---\n"
TASK = "Write a short note on the change in `inputs/change.diff`; say what changed and why.\n"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--skills", type=int, default=10, help="skills (10)")
    parser.add_argument(
        "--scenarios-per-skill", type=int, default=100, help="scenarios per skill (100)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="measurements of each (3)")
    add_plugin_option(parser)
    return parser.parse_args()


def write_tree(root: Path, skills: int, per_skill: int) -> int:
    """Skills that lint clean: front matter, a released CHANGELOG, complete scenarios."""
    checklist = [
        {"name": name, "description": f"The note {name.replace('-', ' ')}.", "max_score": points}
        for name, points in CRITERIA.items()
    ]
    criteria = json.dumps(
        {"context": "notes", "type": "weighted_checklist", "checklist": checklist}
    )
    for index in range(skills):
        name = f"skill-{index:03d}"
        skill = root / "skills" / name
        skill.mkdir(parents=True)
        (skill / "SKILL.md").write_text(FRONT_MATTER.format(name=name) + "\n# Notes\n")
        (skill / "CHANGELOG.md").write_text("# Changelog\n\n## [1.0.0] - 2026-11-01\n")
        for number in range(per_skill):
            folder = skill / "evals" / f"scenario-{number:04d}"
            (folder / "inputs").mkdir(parents=True)
            (folder / "task.md").write_text(TASK)
            (folder / "criteria.json").write_text(criteria)
            (folder / "scenario.json").write_text('{"description": "a note", "sandbox": false}')
            (folder / "inputs" / "change.diff").write_text("-old\n+new\n")
    return skills * per_skill


def main() -> None:
    args = parse_args()
    print(f"pytest children run in {prepare_children(args)}", flush=True)
    total = args.skills * args.scenarios_per_skill
    runs = {
        "collect only": ("--collect-only", "-q", "skills"),
        "lint": ("--eval-lint", "-q", "skills"),
    }
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    with scratch_folder("lint") as root:
        write_tree(root, args.skills, args.scenarios_per_skill)
        for _ in range(args.rounds):  # interleaved, so that drifts in load hit both alike
            for name, options in runs.items():
                child = run_child(
                    pytest_command(*options), root, all_plugins=args.all_plugins, record=False
                )
                if child.returncode != 0:
                    sys.exit(f"{name}: exit {child.returncode}\n{child.tail()}")
                seconds[name].append(child.wall_seconds)

    print(f"machine: {machine_line()}")
    print(f"{total} scenarios in {args.skills} skills; median of {args.rounds} round(s)")
    for name, values in seconds.items():
        rounds = ", ".join(f"{value:.2f}" for value in values)
        print(f"{name:<14} {median(values):>8.2f} s   (each round: {rounds})")
    lint, collect = median(seconds["lint"]), median(seconds["collect only"])
    print(f"lint per scenario: {lint / total * 1000:.1f} ms")
    print(f"lint / collect only = {lint / collect:.2f} (for information)")


if __name__ == "__main__":
    main()
