"""Repositories of skills with evals, laid out as the published formats lay them out, for
measuring how often each lint rule is right (the shapes follow each format's public schema;
every word is written here). Each layout holds sound scenarios with the things that used to
make lint cry wolf (files the task asks for, code identifiers, addresses, patterns, a
format's own weights) and a few real mistakes, so that every rule speaks at least once."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tests.support.format_layouts import write


def _json(data: Any) -> str:
    return json.dumps(data, indent=2) + "\n"


def _criteria(*items: tuple[str, str, int], context: str = "") -> str:
    checklist = [{"name": n, "description": d, "max_score": s} for n, d, s in items]
    data: dict[str, Any] = {"context": context} if context else {}
    data["type"] = "weighted_checklist"
    data["checklist"] = checklist
    return _json(data)


def _skill_md(name: str, description: str, body: str = "") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n\n{body}"


CHANGELOG = "# Changelog\n\n## [Unreleased]\n\n## [1.2.0] - 2026-03-01\n\n- Tighter rules\n"


def openkata_repo(root: Path) -> Path:
    """``skills/<name>/`` with SKILL.md, CHANGELOG.md and ``evals/scenario-*`` folders, as the
    reference repositories keep them."""
    skills = root / "skills"

    # A firewall-rules skill: tasks full of addresses, identifiers and patterns.
    fw = skills / "firewall-rules"
    write(
        fw / "SKILL.md",
        _skill_md(
            "firewall-rules",
            "Review and write cloud firewall rules.",
            "Read [the port table](references/ports.md) before answering.\n",
        ),
    )
    write(fw / "CHANGELOG.md", CHANGELOG)
    write(fw / "references" / "ports.md", "| port | use |\n|---|---|\n| 22 | ssh |\n")
    s0 = fw / "evals" / "scenario-0"
    write(
        s0 / "task.md",
        "# Tighten ingress\n\n"
        "Our policy in `policy/ingress.yaml` allows `0.0.0.0/0` on port 22. Rewrite it so "
        "that only `10.20.0.0/16` can reach SSH, keep the `input.action` field as it is, and "
        "write a short summary to `CHANGES.md`.\n\n"
        "Rules that match `*.internal` hosts or the pattern `^db-[0-9]+$` must stay. See "
        "https://example.com/docs/firewall for the syntax.\n",
    )
    write(s0 / "inputs" / "policy" / "ingress.yaml", "rules:\n  - port: 22\n    from: 0.0.0.0/0\n")
    write(
        s0 / "criteria.json",
        _criteria(
            (
                "cidr",
                "The SSH rule in `policy/ingress.yaml` allows only the private range",
                50,
            ),
            ("kept", "Rules for internal hosts and database hosts are kept", 30),
            ("summary", "CHANGES.md says which rule changed and why", 20),
            context="The agent edits a firewall policy.",
        ),
    )
    write(s0 / "scenario.json", _json({"description": "Narrow SSH ingress", "sandbox": True}))
    s1 = fw / "evals" / "scenario-1"
    write(
        s1 / "task.md",
        "Look at the rules in `rules/egress.tf` and tell me whether outbound DNS is open. "
        "Reply with the rule's `name` attribute and its `.tf` file.\n",
    )
    write(
        s1 / "criteria.json",
        _criteria(
            ("found", "The answer names the rule that opens UDP port 53", 60),
            ("good", "The answer is good", 40),
        ),
    )
    write(s1 / "scenario.json", _json({"description": "Egress review", "sandbox": True}))
    write(s1 / "expected_answer.md", "allow_dns in rules/egress.tf\n")
    s2 = fw / "evals" / "scenario-2"
    write(
        s2 / "task.md",
        "The handler reads `input.action` from each event and the allow list lives at "
        "`api.example.com`; requests from `192.168.1.0/24` fail. The `make lint` target fails "
        "too. Fix the handler in `handler.py`.\n",
    )
    write(s2 / "inputs" / "handler.py", "def handle(event):\n    return event['action']\n")
    write(
        s2 / "criteria.json",
        _criteria(
            ("lint", "`make lint` passes after the change", 50),
            ("range", "Requests from the private range are allowed", 50),
        ),
    )
    write(s2 / "scenario.json", _json({"description": "Handler fix", "sandbox": True}))
    write(s1 / "notes.txt", "The agent needs the terraform files.\n")

    _changelog_writer(skills)
    _api_routes(skills)
    _small_skills(skills)
    return skills


def _changelog_writer(skills: Path) -> None:
    """A changelog-writing skill: answers given away, mechanical criteria, bad files."""
    cl = skills / "changelog-writer"
    write(
        cl / "SKILL.md",
        _skill_md(
            "changelog-writer",
            "Write changelog entries from commit messages.",
            "See [the style guide](STYLE.md) and [an old eval](evals/scenario-0/task.md).\n",
        ),
    )
    write(cl / "STYLE.md", "Use the imperative.\n")
    write(cl / "CHANGELOG.md", "# Changelog\n\n## [Unreleased]\n")
    c0 = cl / "evals" / "scenario-0"
    write(
        c0 / "task.md",
        "Use the changelog-writer skill. The commits are in `history/commits.txt`. Write the "
        'entry under the heading "## [2.0.0] - 2026-04-01" and save it as `CHANGELOG.md`.\n',
    )
    write(c0 / "inputs" / "history" / "commits.txt", "feat: add export\nfix: crash on save\n")
    write(
        c0 / "criteria.json",
        _criteria(
            ("heading", 'The entry is under "## [2.0.0] - 2026-04-01"', 40),
            ("export", 'The output contains "Added export"', 30),
            ("fix", "A Fixed section lists the crash on save", 20),
        ),
    )
    write(c0 / "scenario.json", _json({"description": "Entry from commits", "sandbx": True}))
    c1 = cl / "evals" / "scenario-1"
    write(c1 / "task.md", "# TODO: the request in a few words\n\nTODO: write the request\n")
    write(
        c1 / "criteria.json",
        _json(
            {
                "checklist": [
                    {"name": "a", "description": "", "max_score": 50},
                    {"name": "b", "description": "Lists `feat` commits first", "max_score": "x"},
                ],
                "contxt": "typo",
            }
        ),
    )
    write(c1 / "checks.json", _json([{"name": "runs", "type": "comand", "max_score": 1}]))
    write(c1 / "scenario.json", _json({"description": "Scaffold left", "trials": "three"}))
    c2 = cl / "evals" / "scenario-2"
    write(c2 / "criteria.json", _criteria(("x", "Mentions `CHANGELOG.md`", 100)))
    write(
        cl / "evals" / "trigger_queries.json",
        _json([{"query": "write my changelog", "should_trigger": True}]),
    )


def _api_routes(skills: Path) -> None:
    """A skill whose sound scenario is full of what looks like a finding and is none: files to
    create, globs, URLs, negated and concrete criteria, links the prompt holds."""
    api = skills / "api-routes"
    write(
        api / "SKILL.md",
        _skill_md(
            "api-routes",
            "Add REST routes to an Express app.",
            "Follow [the conventions](references/conventions.md#naming), see "
            "[Express](https://expressjs.com/) and [below](#tests).\n\n## Tests\n",
        ),
    )
    write(api / "CHANGELOG.md", CHANGELOG)
    write(api / "references" / "conventions.md", "Plural nouns for collections.\n")
    scenario = api / "evals" / "scenario-users"
    write(
        scenario / "task.md",
        "# Users endpoint\n\n"
        "Our app in `src/app.ts` has no users route yet. Create `src/routes/users.ts` with a "
        "`GET /users` handler, register it in `src/app.ts`, and add tests matching "
        "`src/**/*.test.ts`. Read the schema from `process.env.DB_URL` and never log it. "
        "Keep `.env` files out of git. The API docs live at "
        "`https://api.example.com/v1/openapi.json`.\n\n"
        "## Expected output\n\nA new `src/routes/users.test.ts` and an updated "
        "`docs/routes.md`.\n",
    )
    write(scenario / "inputs" / "src" / "app.ts", "import express from 'express';\n")
    write(
        scenario / "criteria.json",
        _criteria(
            ("route", "`GET /users` returns the users as JSON with status 200", 40),
            ("clear", "The commit message is clear and under 72 characters", 20),
            ("secret", 'The output never contains "DB_URL="', 20),
            ("counter", "The answer gives a clear reason for each status code it uses", 20),
        ),
    )
    write(scenario / "scenario.json", _json({"description": "Users route", "sandbox": True}))


def _small_skills(skills: Path) -> None:
    """A skill with a huge reference; one with a free-named scenario folder only; one whose
    SKILL.md has another name and the scaffold's placeholder."""
    big = skills / "style-guide"
    write(big / "SKILL.md", _skill_md("style-guide", "Apply the house style."))
    write(big / "references" / "guide.md", "Prefer short sentences. " * 20000)
    prose = big / "evals" / "scenario-prose"
    write(prose / "task.md", "Rewrite `draft.md` in the house style.\n")
    write(prose / "criteria.json", _criteria(("x", "Sentences have at most 20 words", 100)))
    write(prose / "scenario.json", _json({"description": "House style"}))
    write(big / "CHANGELOG.md", CHANGELOG)

    write(skills / "lonely" / "SKILL.md", _skill_md("lonely", "Nothing evaluates me."))
    write(skills / "lonely" / "CHANGELOG.md", CHANGELOG)
    write(skills / "lonely" / "evals" / "smoke" / "task.md", "Say hello.\n")
    write(
        skills / "lonely" / "evals" / "smoke" / "criteria.json", _criteria(("x", "Says hello", 100))
    )
    write(
        skills / "misnamed" / "SKILL.md",
        _skill_md("mis-named", '"TODO: say in one or two sentences what this skill does"'),
    )
    write(skills / "misnamed" / "CHANGELOG.md", CHANGELOG)
    write(
        skills / "misnamed" / "evals" / "scenario-0" / "task.md",
        "Tidy `src/app.py`, which I attached.\n",
    )
    write(
        skills / "misnamed" / "evals" / "scenario-0" / "criteria.json",
        _criteria(("x", "Imports are sorted in `src/app.py`", 100)),
    )
    write(
        skills / "misnamed" / "evals" / "scenario-0" / "scenario.json",
        _json({"description": "tidy"}),
    )


def tessl_tile(root: Path) -> Path:
    """A Tessl tile: ``tile.json`` listing its skills, scenarios with any points."""
    tile = root / "tiles" / "api-kit"
    write(
        tile / "tile.json",
        _json(
            {
                "name": "acme/api-kit",
                "version": "0.3.0",
                "skills": {"openapi-lint": {"path": "skills/openapi-lint/SKILL.md"}},
            }
        ),
    )
    write(
        tile / "skills" / "openapi-lint" / "SKILL.md",
        _skill_md("openapi-lint", "Lint OpenAPI documents."),
    )
    for name, points in (("missing-ops", (3, 2)), ("bad-refs", (1, 1))):
        scenario = tile / "evals" / name
        write(
            scenario / "task.md",
            f"The document `openapi.yaml` has problems ({name}). Find them and write the "
            "fixes to `report.md`. Operation ids such as `getUser` must stay unique.\n",
        )
        write(scenario / "inputs" / "openapi.yaml", "openapi: 3.1.0\npaths: {}\n")
        write(
            scenario / "criteria.json",
            _criteria(
                ("ids", "report.md lists every operation without an operationId", points[0]),
                ("refs", "Every `$ref` that points nowhere is named", points[1]),
            ),
        )
        write(scenario / "scenario.json", _json({"description": f"Lint: {name}"}))
    return tile


def skill_creator_repo(root: Path) -> Path:
    """A skill with ``evals/evals.json`` and ``evals/files/``."""
    skill = root / "pdf-forms"
    write(skill / "SKILL.md", _skill_md("pdf-forms", "Fill PDF forms from data."))
    write(skill / "CHANGELOG.md", CHANGELOG)
    write(skill / "evals" / "files" / "applicants.csv", "name,city\nada,paris\n")
    evals = [
        {
            "id": 1,
            "prompt": "Fill `form.pdf` for every row of `applicants.csv` and save the results "
            "as `out/<name>.pdf`. Keep the `city` field as given.",
            "expected_output": "One filled PDF per applicant.",
            "files": ["evals/files/applicants.csv"],
            "expectations": [
                "There is one PDF per row under out/",
                "The city field of ada's form says paris",
            ],
        },
        {
            "id": 2,
            "prompt": "Read `data/scores.json` and fill the grade field of the form.",
            "expectations": ["The output is good and clean", "The grade field holds the score"],
        },
        {
            "id": 3,
            "prompt": "Which fields does the W-9 form have?",
            "assertions": [{"name": "names tin", "type": "icontains", "value": "TIN"}],
        },
        {
            "id": 4,
            "prompt": "Fill the form with the pdf-forms skill and tell me the field count.",
            "expectations": ["The answer gives the number of fields the form has"],
        },
        {
            # The kind of file the task is about, which the criterion names too: no answer.
            "id": 5,
            "prompt": "I edited a .fdf template. How do I merge it into the form and check it?",
            "assertions": ["Says to look for the `.fdf` files.", "Says how to merge them."],
        },
    ]
    write(skill / "evals" / "evals.json", _json({"skill_name": "pdf-forms", "evals": evals}))
    # A skill whose release tool stamps its version into SKILL.md's metadata, no CHANGELOG.
    stamped = root / "csv-merge"
    write(
        stamped / "SKILL.md",
        "---\nname: csv-merge\ndescription: Merge CSV files.\nmetadata:\n"
        "  version: 3.0.2\n---\n\n# csv-merge\n",
    )
    write(stamped / "evals" / "files" / "a.csv", "id\n1\n")
    write(
        stamped / "evals" / "evals.json",
        _json(
            {
                "skill_name": "csv-merge",
                "evals": [
                    {
                        "id": 1,
                        "name": "merge",  # a key of its authors' own, which the run passes over
                        "prompt": "Merge `a.csv` into `merged.csv`, keeping the header once.",
                        "files": ["evals/files/a.csv"],
                        "expectations": ["merged.csv has one header row"],
                    }
                ],
            }
        ),
    )
    return root


def waza_repo(root: Path) -> Path:
    """A skill with waza's ``eval.yaml`` and task files under ``tasks/``."""
    skill = root / "sql-review"
    write(skill / "SKILL.md", _skill_md("sql-review", "Review SQL migrations."))
    write(skill / "CHANGELOG.md", CHANGELOG)
    write(skill / "evals" / "fixtures" / "001_init.sql", "create table users (id int);\n")
    write(
        skill / "evals" / "eval.yaml",
        yaml.safe_dump(
            {
                "name": "sql-review-eval",
                "skill": "sql-review",
                "config": {
                    "trials_per_task": 2,
                    "timeout_seconds": 300,
                    "executor": "mock",
                    "model": "any",
                },
                "graders": [],
                "tasks": ["tasks/*.yaml"],
            }
        ),
    )
    write(
        skill / "evals" / "tasks" / "lock.yaml",
        yaml.safe_dump(
            {
                "id": "table-lock",
                "name": "Spot a table lock",
                "context_dir": "fixtures",
                "inputs": {
                    "prompt": "Review `001_init.sql` and the new `002_add_index.sql` I will "
                    "write next; say whether `CREATE INDEX` locks the table. Match names "
                    "with `idx_[a-z_]+`.",
                    "files": [{"path": "001_init.sql"}],
                },
                "graders": [
                    {
                        "name": "lock",
                        "type": "prompt",
                        "weight": 0.7,
                        "config": {"prompt": "The review says a plain CREATE INDEX blocks writes"},
                    },
                    {
                        "name": "tone",
                        "type": "prompt",
                        "weight": 0.3,
                        "config": {"prompt": "Clear and appropriate"},
                    },
                ],
            }
        ),
    )
    write(
        skill / "evals" / "tasks" / "explain.yaml",
        yaml.safe_dump(
            {
                "id": "explain-init",
                "name": "Explain the first migration",
                "inputs": {
                    "prompt": "Explain what `001_init.sql` creates.",
                    "files": [{"path": "001_init.sql"}],  # from waza's default fixtures/
                },
                "graders": [
                    {
                        "name": "table",
                        "type": "prompt",
                        "weight": 1,
                        "config": {"prompt": "The answer names the users table"},
                    },
                ],
            }
        ),
    )
    write(
        skill / "evals" / "tasks" / "rollback.yaml",
        yaml.safe_dump(
            {
                "id": "rollback",
                "name": "Rollback plan",
                "inputs": {
                    "prompt": "Check the migration in `migrations/003_drop.sql` and "
                    "write a rollback plan."
                },
                "graders": [
                    {
                        "name": "plan",
                        "type": "prompt",
                        "weight": 1,
                        "config": {"prompt": "The plan restores the dropped column"},
                    },
                ],
            }
        ),
    )
    return skill


def skillgrade_repo(root: Path) -> Path:
    """A skill with Skillgrade's ``eval.yaml`` at its root."""
    skill = root / "docker-slim"
    write(skill / "SKILL.md", _skill_md("docker-slim", "Make Docker images smaller."))
    write(skill / "CHANGELOG.md", CHANGELOG)
    write(skill / "fixtures" / "Dockerfile", "FROM node:20\nCOPY . .\nRUN npm ci\n")
    write(skill / "graders" / "size.sh", "#!/bin/sh\necho '{\"score\": 1}'\n")
    write(
        skill / "eval.yaml",
        yaml.safe_dump(
            {
                "version": "1",
                "defaults": {"trials": 3, "threshold": 0.7},
                "tasks": [
                    {
                        "name": "multi-stage",
                        "instruction": "Rewrite the `Dockerfile` as a multi-stage build; the "
                        "final image must be based on `node:20-slim` and copy only `dist/`. "
                        "Explain the change in `NOTES.md`.",
                        "workspace": [{"src": "fixtures/Dockerfile", "dest": "Dockerfile"}],
                        "graders": [
                            {"type": "deterministic", "run": "sh graders/size.sh", "weight": 0.6},
                            {
                                "type": "llm_rubric",
                                "rubric": "The final stage installs production dependencies only",
                                "weight": 0.4,
                            },
                        ],
                    },
                    {
                        "name": "cache-order",
                        "notes": "checks layer order",  # not Skillgrade's: passed over
                        "instruction": "Open `app/package.json` and reorder the Dockerfile so "
                        "that dependency layers are cached.",
                        "workspace": [{"src": "fixtures/Dockerfile", "dest": "Dockerfile"}],
                        "graders": [
                            {"type": "llm_rubric", "rubric": "Nice work", "weight": 1},
                        ],
                    },
                ],
            }
        ),
    )
    return skill


def harbor_dataset(root: Path) -> Path:
    """A Harbor dataset folder of task folders; one with a key its format does not have."""
    tasks = root / "tasks"
    for name, extra in (("fix-cron", ""), ("bad-key", "\n[verifier]\nretries = 2\n")):
        task = tasks / name
        write(
            task / "instruction.md",
            "The cron entry in `/etc/cron.d/backup` never runs. Fix it so that `backup.sh` runs "
            "at 02:00 every day, and write what was wrong to `/app/REPORT.md`.\n",
        )
        write(task / "task.toml", f'version = "1.0"\n\n[metadata]\ndifficulty = "easy"\n{extra}')
        write(task / "environment" / "Dockerfile", "FROM debian:bookworm-slim\nWORKDIR /app\n")
        write(task / "tests" / "test.sh", "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    return tasks


def tessl_plugin(root: Path) -> Path:
    """A Tessl plugin (``.tessl-plugin/plugin.json``, no ``tile.json``) whose scenarios sit
    in ``evals/tessl/`` without a ``scenario.json``, with the shapes that set rules off in
    public repositories: files the task holds inline or makes with its own shell lines, a
    file it asks to keep up, one it says is not there yet, skill names in addresses, a skill
    named by a plain word, and criteria about the given code's old names and parts."""
    plugin = root / "obs-kit"
    write(
        plugin / ".tessl-plugin" / "plugin.json",
        _json(
            {
                "name": "acme/obs-kit",
                "version": "2.1.0",
                "skills": ["skills/log-shipper", "skills/charts"],
            }
        ),
    )
    write(
        plugin / "skills" / "log-shipper" / "SKILL.md",
        _skill_md(
            "log-shipper",
            "Ship logs to a collector.",
            "Read [the inputs guide](rules/inputs.md) first.\n",
        ),
    )
    write(plugin / "skills" / "log-shipper" / "rules" / "inputs.md", "# Inputs\n")
    write(plugin / "skills" / "charts" / "SKILL.md", _skill_md("charts", "Draw charts."))
    evals = plugin / "evals" / "tessl"
    inline = evals / "log-shipper-scenario-1"
    write(
        inline / "task.md",
        "# Ship the billing logs\n\n"
        "The module `lib/shipper/` already has `config.rb`, `sender.rb` and `queue.rb`. "
        "Keep a running `worklog.md` as you go. No `dashboard.png` exists yet. The "
        "collector listens on `http://log-shipper:4317`; the sample log is fetched below.\n\n"
        "```bash\nmkdir -p samples\n"
        "curl -sL -o samples/billing.log https://example.com/acme/obs-kit/raw/main/billing.log\n"
        "cat > settings/ship.yaml <<'EOF'\nlevel: info\nEOF\n```\n\n"
        "Read `samples/billing.log` and `settings/ship.yaml` before you start.\n\n"
        "## Input Files\n\n"
        "=============== FILE: lib/shipper/config.rb ===============\n"
        "module Shipper; ENDPOINT = 'x'; end\n\n"
        "=============== FILE: lib/shipper/sender.rb ===============\n"
        "module Shipper\n  def self.send(attrs)\n    attrs['app.version'] = VERSION\n"
        "    retry! if retries > limit\n  end\nend\n",
    )
    write(
        inline / "criteria.json",
        _criteria(
            ("new key", "Uses `service.version` instead of the deprecated `app.version`", 4),
            ("branch", "A comment says why the `retries > limit` branch retries", 3),
            ("threshold", "The notes flag the team profile's `slow_flush` threshold", 3),
        ),
    )
    named = evals / "charts-scenario-1"
    write(
        named / "task.md",
        "Draw the weekly charts into `charts/week.svg`, then use the charts skill to check "
        "them. The weekly export holds `total_errors_per_day`, which the report must show.\n",
    )
    write(
        named / "criteria.json",
        _criteria(("total", "The chart plots `total_errors_per_day` per day", 10)),
    )
    return plugin


LAYOUTS: dict[str, Callable[[Path], Path]] = {
    "openkata": openkata_repo,
    "tessl-tile": tessl_tile,
    "tessl-plugin": tessl_plugin,
    "skill-creator": skill_creator_repo,
    "waza": waza_repo,
    "skillgrade": skillgrade_repo,
    "harbor": harbor_dataset,
}
"""Each layout's builder, by name; each returns the folder a user would lint."""
