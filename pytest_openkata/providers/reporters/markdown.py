"""The Markdown report (--eval-markdown) and the CI step summary: being written."""

from __future__ import annotations

from pytest_openkata.providers.reporters import RunReport


class MarkdownReporter:
    name = "markdown"
    order = 20

    def report(self, run: RunReport) -> None:
        return None
