"""The README's settings table names every setting, with its spelling in every source."""

from __future__ import annotations

import re
from pathlib import Path

from pytest_openkata.infra.config import FIELDS

README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_setting_is_in_the_readme_with_its_option_ini_key_and_variable() -> None:
    rows = [line for line in README.read_text().splitlines() if line.startswith("| ")]
    cells = {cell.strip() for row in rows for cell in row.split("|")}
    spelled = " ".join(cells)
    missing = []
    for field in FIELDS:
        names = [f"`{field.key}`", f"`{field.env}`"]
        if field.option:
            names.append(f"`{field.option}`")
        if not field.key.startswith("price."):  # the prices share one row of eval_price_*
            names.append(f"`{field.ini}`")
        missing += [f"{field.key}: {name}" for name in names if name not in spelled]
    assert missing == []


def test_the_readme_names_no_setting_that_does_not_exist() -> None:
    known = {f"OPENKATA_EVAL_{f.key.replace('.', '_').upper()}" for f in FIELDS}
    mentioned = set(re.findall(r"OPENKATA_EVAL_[A-Z_]+[A-Z]", README.read_text()))
    # OPENKATA_EVAL_DEBUG is read by the reference's judge, not a setting of the plugin.
    assert mentioned - known - {"OPENKATA_EVAL_DEBUG", "OPENKATA_EVAL_PRICE_"} == set()
