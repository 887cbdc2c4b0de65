"""A Tessl tile as public repositories publish one: evals at its root under free names, two
skills in subfolders, docs and steering rules, a ``tile.json`` listing them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

TILE_JSON: dict[str, Any] = {
    "name": "acme/observability",
    "version": "1.17.0",
    "summary": "Tracing and metrics conventions.",
    "private": True,
    "docs": "docs/index.md",
    "skills": {
        "tracing": {"path": "skills/otel/tracing/SKILL.md"},
        "metrics": {"path": "metrics/SKILL.md"},
    },
    "steering": {"house-style": {"rules": "rules.md"}},
}

# Every file of the tile's context, in the order its prompt holds them, with its text.
CONTEXT_FILES: dict[str, str] = {
    "skills/otel/tracing/SKILL.md": "# Tracing\n\nName spans after the operation.\n",
    "skills/otel/tracing/references/spans.md": "Span names are verbs.\n",
    "skills/otel/tracing/scripts/lint.sh": "#!/bin/sh\necho lint\n",
    "metrics/SKILL.md": "# Metrics\n\nUse base units.\n",
    "metrics/assets/units.txt": "seconds\nbytes\n",
    "docs/index.md": "# Observability docs\n",
    "docs/setup.md": "Install the collector.\n",
    "rules.md": "Always say which signal you change.\n",
}
# In the tile but never in the context.
OTHER_FILES: dict[str, str] = {
    "skills/otel/tracing/references/ACKNOWLEDGMENTS.md": "thanks\n",
    "skills/otel/tracing/EXAMPLES.md": "an example the prompt does not hold\n",
    "README.md": "# The tile\n",
}


def write_tile(
    root: Path,
    scenarios: Mapping[str, Mapping[str, Any]],
    *,
    tile_json: Mapping[str, Any] | None = None,
) -> Path:
    """The tile at ``root/tiles/observability``; each scenario maps ``criteria`` (name to
    points, or to ``(points, category)``) and optionally ``options`` (scenario.json),
    ``capability`` (capability.txt), ``task`` and ``inputs``."""
    tile = root / "tiles" / "observability"
    for rel, text in {**CONTEXT_FILES, **OTHER_FILES}.items():
        path = tile / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (tile / "tile.json").write_text(json.dumps(TILE_JSON if tile_json is None else tile_json))
    for name, spec in scenarios.items():
        folder = tile / "evals" / name
        folder.mkdir(parents=True)
        (folder / "task.md").write_text(spec.get("task", f"Do the task of {name}.\n"))
        checklist = []
        for criterion, value in spec["criteria"].items():
            points, category = value if isinstance(value, tuple) else (value, None)
            entry = {"name": criterion, "description": f"checks {criterion}", "max_score": points}
            if category is not None:
                entry["category"] = category
            checklist.append(entry)
        criteria = {"context": f"ctx {name}", "type": "weighted_checklist", "checklist": checklist}
        (folder / "criteria.json").write_text(json.dumps(criteria))
        if "options" in spec:
            (folder / "scenario.json").write_text(json.dumps(spec["options"]))
        if "capability" in spec:
            (folder / "capability.txt").write_text(spec["capability"])
        for rel, text in spec.get("inputs", {}).items():
            path = folder / "inputs" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    return tile


def context_prompt() -> str:
    """The tile's part of a prompt, as the README documents it."""
    return "\n\n".join(f"--- {rel} ---\n{text}" for rel, text in CONTEXT_FILES.items())
