"""``python -m pytest_openkata.localmodel``: the local model's command line.

The code lives in :mod:`pytest_openkata.local`; this module is the command's name, kept short
for the README's quick start.
"""

from __future__ import annotations

if __name__ == "__main__":
    from pytest_openkata.local.model import main

    raise SystemExit(main())
