"""The settings reference (docs/settings.md) names every setting, with its spelling in every
source, and no setting that does not exist."""

from __future__ import annotations

import re
from pathlib import Path

from pytest_openkata.infra.config import FIELDS

SETTINGS = Path(__file__).resolve().parents[2] / "docs" / "settings.md"


def test_every_setting_is_documented_with_its_option_ini_key_and_variable() -> None:
    rows = [line for line in SETTINGS.read_text().splitlines() if line.startswith("| ")]
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


def test_the_settings_page_names_no_setting_that_does_not_exist() -> None:
    known = {f"OPENKATA_EVAL_{f.key.replace('.', '_').upper()}" for f in FIELDS}
    mentioned = set(re.findall(r"OPENKATA_EVAL_[A-Z_]+[A-Z]", SETTINGS.read_text()))
    # OPENKATA_EVAL_DEBUG is read by the reference's judge, not a setting of the plugin.
    assert mentioned - known - {"OPENKATA_EVAL_DEBUG", "OPENKATA_EVAL_PRICE_"} == set()
