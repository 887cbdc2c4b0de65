"""The trigger report: a run with trigger queries leaves one JSON file of their outcomes.

It goes into the run log's folder (the ``log_dir`` setting), named as the run's log with
``-triggers.json`` for ``.jsonl`` (``20260101T120000Z-triggers.json``), written atomically and
never over another file. It holds the run's agent, model and trigger settings, each skill's
precision, recall and F1 with their intervals (``skills``) and each query's runs
(``queries``), the records the run log holds as its ``trigger_skill`` and ``trigger_query``
extras. A run without trigger queries writes none. The results JSON is not touched: its
fields stay those of the reference runner.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pytest_openkata.core.reporting import ReportOutcome, Run
from pytest_openkata.core.runlog import log_folder, log_name, relative_skill_dir
from pytest_openkata.infra.atomic import write_new_report

__all__ = ["TRIGGER_REPORT_SCHEMA", "TriggerReporter", "trigger_report"]

TRIGGER_REPORT_SCHEMA = 1


def trigger_report(run: Run) -> dict[str, Any] | None:
    """The trigger report's content, or None for a run without trigger queries."""
    queries = run.log_extras.get("trigger_query") or []
    if not queries:
        return None
    settings = run.settings
    return {
        "schema": TRIGGER_REPORT_SCHEMA,
        "finished_at": run.finished_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "agent": settings.backend,
        "model": settings.model,
        "skill_delivery": "installed",
        "trigger_runs": settings.trigger_runs,
        "trigger_loads_needed": settings.trigger_loads_needed,
        "trigger_loads_allowed": settings.trigger_loads_allowed,
        "trigger_skills": list(settings.trigger_skills),
        "skills": list(run.log_extras.get("trigger_skill") or []),
        "queries": list(queries),
    }


class TriggerReporter:
    """Writes the trigger report (see the module docstring) and says where."""

    name = "triggers"

    def report(self, run: Run) -> ReportOutcome | None:
        content = trigger_report(run)
        folder = log_folder(run.settings, run.rootdir)
        if content is None or folder is None:
            return None
        text = json.dumps(content, ensure_ascii=False, indent=2, sort_keys=True) + "\n"
        removed: list[Any] = []
        try:
            name = log_name(run.finished_at).removesuffix(".jsonl") + "-triggers.json"
            path = write_new_report(folder / name, text, removed=removed)
        except OSError as exc:
            shown = relative_skill_dir(folder, run.rootdir)
            problem = f"could not write the trigger report under {shown}: {exc.strerror or exc}"
            return ReportOutcome(errors=(problem,), removed=tuple(removed))
        return ReportOutcome(written={"trigger report": path}, removed=tuple(removed))


if TYPE_CHECKING:  # the protocol this provider implements, checked by mypy
    from pytest_openkata.core.reporting import Reporter

    _implements: type[Reporter] = TriggerReporter
