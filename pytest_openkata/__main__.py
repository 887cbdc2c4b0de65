"""``python -m pytest_openkata``: commands around a run.

``html LOG [-o PATH]`` renders the HTML report of a run from its run log.
"""

from __future__ import annotations

import sys

from pytest_openkata.providers.reporters import html

COMMANDS = {"html": html.main}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in COMMANDS:
        names = ", ".join(COMMANDS)
        print(f"usage: python -m pytest_openkata {{{names}}} ...", file=sys.stderr)
        return 2
    return COMMANDS[args[0]](args[1:])


if __name__ == "__main__":
    raise SystemExit(main())
