"""``python -m pytest_openkata``: commands around a run.

- ``html LOG [-o PATH]`` renders the HTML report of a run from its run log;
- ``init skills/NAME`` and ``new-scenario skills/NAME ID [--sandbox]`` write what a new skill
  or scenario needs;
- ``effectiveness [SKILLS-ROOT]`` shows what the skill catalogue will show per skill and model;
- ``merge DIR...`` makes the shards of a CI matrix (``--eval-shard I/N``) into one run's reports.

Each command's module is imported only when it is asked for.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable

# command name -> "module:function"; the function takes the remaining arguments and returns
# the exit code.
COMMANDS = {
    "html": "pytest_openkata.providers.reporters.html:main",
    "init": "pytest_openkata.commands.scaffold:init_main",
    "new-scenario": "pytest_openkata.commands.scaffold:new_scenario_main",
    "effectiveness": "pytest_openkata.commands.effectiveness:main",
    "merge": "pytest_openkata.commands.merge:main",
}


def command(name: str) -> Callable[[list[str]], int]:
    module, _, function = COMMANDS[name].partition(":")
    found: Callable[[list[str]], int] = getattr(importlib.import_module(module), function)
    return found


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in COMMANDS:
        names = ", ".join(COMMANDS)
        print(f"usage: python -m pytest_openkata {{{names}}} ...", file=sys.stderr)
        return 2
    return command(args[0])(args[1:])


if __name__ == "__main__":
    raise SystemExit(main())
