"""The CSV rows (--eval-csv): being written."""

from __future__ import annotations

from pytest_openkata.providers.reporters import RunReport


class CsvReporter:
    name = "csv"
    order = 20

    def report(self, run: RunReport) -> None:
        return None
