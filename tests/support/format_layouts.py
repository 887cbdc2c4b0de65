"""Folders laid out as each published eval format lays them out, written for the tests (the
shapes follow each format's public schema; the words are ours)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

SKILL_MD = "---\nname: csv-tidy\ndescription: Tidy CSV files.\n---\n\nSort rows, trim cells.\n"


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def skill_creator(root: Path, evals: list[dict[str, Any]] | None = None) -> Path:
    """A skill with ``evals/evals.json`` and one file under ``evals/files/``."""
    skill = root / "csv-tidy"
    write(skill / "SKILL.md", SKILL_MD)
    write(skill / "evals" / "files" / "people.csv", "name,age\nbo,3\nal,2\n")
    if evals is None:
        evals = [
            {
                "id": 1,
                "prompt": "Sort people.csv by age and save it as sorted.csv.",
                "expected_output": "A sorted.csv with al before bo.",
                "files": ["evals/files/people.csv"],
                "expectations": ["sorted.csv lists al before bo", "The header row is kept"],
            },
            {
                "id": 2,
                "prompt": "Say which column people.csv is sorted by.",
                "assertions": [
                    "The answer names a column",
                    {"name": "names age", "type": "contains", "value": "age (years)"},
                    {"name": "no apology", "type": "not_contains", "value": "sorry"},
                ],
            },
        ]
    write(skill / "evals" / "evals.json", json.dumps({"skill_name": "csv-tidy", "evals": evals}))
    return skill


def waza(
    root: Path, task: dict[str, Any] | None = None, spec: dict[str, Any] | None = None
) -> Path:
    """An eval folder with ``eval.yaml``, one task file, a prompt file and a fixture file."""
    folder = root / "csv-tidy-eval"
    write(
        folder / "eval.yaml",
        yaml.safe_dump(
            spec
            or {
                "name": "csv-tidy-eval",
                "skill": "csv-tidy",
                "config": {
                    "trials_per_task": 3,
                    "timeout_seconds": 300,
                    "executor": "mock",
                    "model": "any",
                },
                "metrics": [{"name": "task_completion", "weight": 1.0, "threshold": 0.8}],
                "graders": [
                    {"name": "no-errors", "type": "text", "config": {"not_contains": ["Traceback"]}}
                ],
                "tasks": ["tasks/*.yaml"],
            }
        ),
    )
    write(folder / "fixtures" / "people.csv", "name,age\nbo,3\nal,2\n")
    write(folder / "tasks" / "sort.md", "Sort people.csv by age into sorted.csv.\n")
    write(
        folder / "tasks" / "sort.yaml",
        yaml.safe_dump(
            task
            or {
                "id": "sort-by-age",
                "name": "Sort by age",
                "context_dir": "fixtures",
                "inputs": {
                    "prompt_file": "sort.md",
                    "files": [
                        {"path": "people.csv"},
                        {"path": "notes.txt", "content": "keep the header\n"},
                    ],
                    "follow_up_prompts": ["Now sort by name."],
                },
                "expected": {"output_contains": ["sorted"]},
                "graders": [
                    {
                        "name": "tidy",
                        "type": "prompt",
                        "weight": 0.6,
                        "config": {"prompt": "The rows are sorted by age."},
                    },
                    {
                        "name": "file-made",
                        "type": "file",
                        "weight": 0.3,
                        "config": {"must_exist": ["sorted.csv"]},
                    },
                    {
                        "name": "lean",
                        "type": "behavior",
                        "weight": 0.1,
                        "config": {"max_tool_calls": 12},
                    },
                ],
            }
        ),
    )
    return folder


def harbor(root: Path, toml: str | None = None) -> Path:
    """A dataset folder holding one Harbor task."""
    task = root / "tasks" / "sort-csv"
    write(task / "instruction.md", "Sort /app/people.csv by age, in place.\n")
    write(
        task / "task.toml",
        toml
        or (
            'version = "1.0"\n\n[metadata]\ndifficulty = "easy"\n\n'
            "[verifier]\ntimeout_sec = 120.0\n\n"
            "[agent]\ntimeout_sec = 600.0\n\n[environment]\ncpus = 1\nmemory_mb = 2048\n"
            "allow_internet = false\n"
        ),
    )
    write(task / "environment" / "Dockerfile", "FROM debian:bookworm-slim\nWORKDIR /app\n")
    write(
        task / "tests" / "test.sh",
        "#!/bin/bash\nif head -2 people.csv | tail -1 | grep -q '^al,'; then echo 1 > "
        "/logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n",
    )
    write(
        task / "solution" / "solve.sh",
        "#!/bin/bash\nprintf 'name,age\\nal,2\\nbo,3\\n' > people.csv\n",
    )
    return root / "tasks"


def skillgrade(root: Path, data: dict[str, Any] | None = None) -> Path:
    """A skill folder with Skillgrade's ``eval.yaml``, an instruction file, a grader script and
    a workspace fixture."""
    skill = root / "csv-tidy"
    write(skill / "SKILL.md", SKILL_MD)
    write(skill / "instructions" / "sort.md", "Sort people.csv by age into sorted.csv.\n")
    write(skill / "fixtures" / "people.csv", "name,age\nbo,3\nal,2\n")
    write(skill / "graders" / "check.sh", '#!/bin/bash\necho \'{"score": 1, "details": "ok"}\'\n')
    write(
        skill / "eval.yaml",
        yaml.safe_dump(
            data
            or {
                "version": "1",
                "defaults": {
                    "agent": "claude",
                    "trials": 5,
                    "threshold": 0.8,
                    "docker": {"base": "node:20-slim", "setup": "apt-get install -y jq"},
                    "environment": {"cpus": 2, "memory_mb": 2048},
                },
                "tasks": [
                    {
                        "name": "sort-rows",
                        "instruction": "instructions/sort.md",
                        "workspace": [
                            {"src": "fixtures/people.csv", "dest": "people.csv"},
                            {"src": "graders/check.sh", "dest": "bin/check", "chmod": "+x"},
                        ],
                        "graders": [
                            {
                                "type": "deterministic",
                                "run": "bash graders/check.sh",
                                "weight": 0.7,
                            },
                            {
                                "type": "llm_rubric",
                                "rubric": "Rows are sorted by age, header kept.",
                                "weight": 0.3,
                            },
                        ],
                        "trials": 10,
                    }
                ],
            }
        ),
    )
    return skill


def openkata(root: Path) -> Path:
    """A skill with one openkata scenario holding every file, and Tessl's fixtures and setup."""
    skill = root / "csv-tidy"
    write(skill / "SKILL.md", SKILL_MD)
    scenario = skill / "evals" / "scenario-1"
    write(scenario / "task.md", "Sort people.csv by age.\n")
    write(
        scenario / "criteria.json",
        json.dumps(
            {
                "context": "The agent works on a small CSV.",
                "type": "weighted_checklist",
                "checklist": [
                    {"name": "sorted", "description": "Rows are in age order", "max_score": 7}
                ],
            }
        ),
    )
    write(
        scenario / "checks.json",
        json.dumps([{"name": "file there", "type": "file", "path": "sorted.csv", "max_score": 3}]),
    )
    write(
        scenario / "scenario.json",
        json.dumps(
            {
                "description": "sorting",
                "trials": 2,
                "fixtures": {
                    "app": {"type": "directory", "path": "../../app", "installPath": "app"}
                },
                "setup": ["./app/setup.sh"],
            }
        ),
    )
    write(scenario / "inputs" / "people.csv", "name,age\nbo,3\nal,2\n")
    write(skill / "app" / "setup.sh", "#!/bin/sh\ntrue\n")
    return skill
