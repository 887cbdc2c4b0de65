"""``python -m pytest_openkata``: commands around a run.

- ``init skills/NAME`` and ``new-scenario skills/NAME ID [--sandbox]`` write what a new skill
  or scenario needs;
- ``html LOG [-o PATH]`` renders the HTML report of a run from its run log;
- ``merge DIR...`` makes the shards of a CI matrix (``--eval-shard I/N``) into one run's reports;
- ``convert SRC --to DEST`` writes evals of another published format (skill-creator, waza,
  Skillgrade, Harbor) as openkata scenario folders, or back as skill-creator's evals.json;
- ``effectiveness [SKILLS-ROOT]`` shows what the skill catalogue will show per skill and model;
- ``agreement LOG_A (LOG_B | --labels FILE)`` measures how far two judges, or a judge and human
  verdicts, agree on the same answers (Cohen's κ per criterion, with a ``--min-kappa`` gate);
- ``rejudge LOG [OPTIONS]`` grades a recorded run's agent answers again (another judge, more
  votes, edited criteria) without running the agent, as a new run;
- ``view [FOLDER]`` serves a local web viewer of the run logs under FOLDER.

``--help`` (``-h``, or no arguments) lists them, each with what it does; ``COMMAND --help``
says more. Each command's module is imported only when it is asked for.
"""

from __future__ import annotations

import difflib
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass

PROG = "python -m pytest_openkata"
HELP = ("-h", "--help")
USAGE_ERROR = 2  # as argparse and pytest exit on a command line they cannot take


@dataclass(frozen=True)
class Command:
    target: str
    """``module:function``; the function takes the remaining arguments and returns the exit
    code."""
    summary: str


COMMANDS = {
    "init": Command(
        "pytest_openkata.commands.scaffold:init_main",
        "write a new skill folder: SKILL.md, CHANGELOG.md, a scenario",
    ),
    "new-scenario": Command(
        "pytest_openkata.commands.scaffold:new_scenario_main",
        "add evals/scenario-ID to a skill: task.md, criteria.json",
    ),
    "html": Command(
        "pytest_openkata.providers.reporters.html:main",
        "render a run's HTML report from its run log (.openkata/runs)",
    ),
    "merge": Command(
        "pytest_openkata.commands.merge:main",
        "merge the shards of a run (--eval-shard I/N) into its reports",
    ),
    "convert": Command(
        "pytest_openkata.commands.convert:main",
        "write evals of other formats as openkata folders or evals.json",
    ),
    "effectiveness": Command(
        "pytest_openkata.commands.effectiveness:main",
        "show what the skill catalogue will show per skill and model",
    ),
    "agreement": Command(
        "pytest_openkata.commands.agreement:main",
        "measure two judges' agreement, or a judge's with human labels",
    ),
    "rejudge": Command(
        "pytest_openkata.commands.rejudge:main",
        "grade a run log's agent answers again, with no agent run",
    ),
    "view": Command(
        "pytest_openkata.viewer.command:main",
        "browse the run logs under a folder in a local web viewer",
    ),
}


def command(name: str) -> Callable[[list[str]], int]:
    module, _, function = COMMANDS[name].target.partition(":")
    found: Callable[[list[str]], int] = getattr(importlib.import_module(module), function)
    return found


def usage() -> str:
    """The commands, one line each: its name and what it does."""
    width = max(map(len, COMMANDS))
    return "\n".join(
        [
            f"usage: {PROG} COMMAND [ARGUMENTS]",
            "",
            "Commands around a run of skill evals (the run itself: python -m pytest).",
            "",
            "commands:",
            *(f"  {name:<{width}}  {c.summary}" for name, c in COMMANDS.items()),
            "",
            f"'{PROG} COMMAND --help' says more of a command.",
            "The local model has its own: python -m pytest_openkata.localmodel --help",
            "",
        ]
    )


def _unknown(name: str) -> str:
    close = difflib.get_close_matches(name, COMMANDS, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"{PROG}: unknown command {name!r}{hint}\n\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in HELP:
        sys.stdout.write(usage())
        return 0
    if args[0] not in COMMANDS:
        sys.stderr.write(_unknown(args[0]) + usage())
        return USAGE_ERROR
    return command(args[0])(args[1:])


if __name__ == "__main__":
    raise SystemExit(main())
