"""The trigger queries' rule: ``trigger-queries``, the skill's trigger query files read as a
run reads them, and a set that can measure what it is for."""

from __future__ import annotations

from pathlib import Path

from pytest_openkata.core.jsonfiles import ScenarioLoadError
from pytest_openkata.core.lint.findings import Finding
from pytest_openkata.core.triggers import TRIGGER_FILES, has_trigger_queries, load_trigger_queries


def trigger_queries_rule(skill_dir: Path) -> list[Finding]:
    """The skill's trigger query files (``evals/trigger_queries.json``,
    ``evals/trigger_tests.yaml``) load as a run loads them (an error names the file and the
    entry, as the run's does); a set with queries of one kind only is a warning: without
    should-trigger queries there is no recall, without should-not-trigger ones no
    precision."""
    if not has_trigger_queries(skill_dir / "evals"):
        return []
    try:
        queries = load_trigger_queries(skill_dir)
    except ScenarioLoadError as exc:
        file = next((f"evals/{name}" for name in TRIGGER_FILES if exc.path.name == name), "evals")
        message = f"{exc.field}: {exc.message}" if exc.field else exc.message
        return [Finding("trigger-queries", "error", file, None, message)]
    kinds = {query.should_trigger for query in queries}
    if len(kinds) != 1:  # both kinds (a file without any query is the loader's error)
        return []
    file = queries[0].source
    if True in kinds:
        message = (
            "every query should trigger the skill: add queries that should not, or the "
            "trigger evals cannot tell a skill that loads for everything (no precision)"
        )
    else:
        message = (
            "no query should trigger the skill: add queries that should, or the trigger "
            "evals cannot tell a skill that never loads (no recall)"
        )
    return [Finding("trigger-queries", "warning", file, None, message)]
