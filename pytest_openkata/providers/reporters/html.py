"""The HTML report (--eval-html): being written."""

from __future__ import annotations

from pytest_openkata.providers.reporters import RunReport


class HtmlReporter:
    name = "html"
    order = 20

    def report(self, run: RunReport) -> None:
        return None


def main(argv: list[str]) -> int:
    raise NotImplementedError
