"""``python -m pytest_openkata rejudge LOG [PYTEST-OPTIONS...]``: grade a recorded run again.

The agent's answers of every trial the run log ``LOG`` holds are graded again, with the judge
and votes the settings give now (``--eval-judge-model``, ``--eval-judge-votes``...) and the
criteria as they are now, without running the agent. It is a pytest run of the log's
scenarios with ``--eval-rejudge LOG``: it writes a new run (its run log, and the results JSON,
HTML, Markdown and CSV the settings ask for) that says what it was re-judged from, and exits
as a pytest run does.

The log names skill folders relative to the root folder of the run that wrote it: they are
found under the current folder, or under ``--rootdir`` when it is given. What the log says of
the recorded answers is the new run's unless the command line says otherwise: the agent's
backend, model and label (the reports are filed under that model), the judge's backend and
model (so that more votes or edited criteria are judged by the same judge), and the baseline
arm. The options after ``LOG`` are pytest's (and the plugin's), passed on as they are.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from pytest_openkata.core.runlog import LoggedRun, RunLogError, read_run_log

USAGE_ERROR = 2
PROG = "python -m pytest_openkata rejudge"
USAGE = f"""usage: {PROG} LOG [PYTEST-OPTIONS...]

Grade the agent answers of a run log (.openkata/runs/*.jsonl) again, with the judge, votes
and criteria the settings and files give now, without running the agent. Writes a new run
that says it was re-judged and from what.

  LOG                 the run log of the run to re-judge
  PYTEST-OPTIONS      pytest's and the plugin's options, e.g. --eval-judge-model MODEL,
                      --eval-judge-votes 3, --rootdir DIR (where the log's skill folders are)
"""


# The options whose value is the recorded run's unless the command line gives one, and the
# keys of the log's settings they come from (core.runlog.run_settings).
FROM_THE_LOG = (
    ("--eval-backend", "agent"),
    ("--eval-model", "model"),
    ("--eval-model-label", "model_label"),
    ("--eval-judge-backend", "judge"),
    ("--eval-judge-model", "judge_model"),
    ("--eval-baseline", "baseline"),
)


def _option_value(args: Sequence[str], name: str) -> str | None:
    """The value of ``name`` among pytest's options (``--name VALUE`` or ``--name=VALUE``)."""
    for index, arg in enumerate(args):
        if arg == name and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith(f"{name}="):
            return arg.partition("=")[2]
    return None


def scenario_paths(run: LoggedRun, rootdir: Path) -> list[str]:
    """What pytest collects: each scenario folder the log holds (its skill folder when the
    scenario is not a folder of its ``evals/``, e.g. a scenario of another format), once."""
    found: dict[str, None] = {}
    for record in run.trials:
        skill_dir = rootdir / record.scenario["skill_dir"]
        folder = skill_dir / "evals" / record.scenario["scenario"]
        found.setdefault(str(folder if folder.is_dir() else skill_dir))
    return list(found)


def pytest_arguments(log: Path, run: LoggedRun, options: Sequence[str]) -> list[str]:
    """The pytest command line that re-judges ``run`` (read from ``log``) with ``options``."""
    given = _option_value(options, "--rootdir")
    rootdir = Path(given or ".")
    arguments = ["--eval-rejudge", str(log)]
    if given is None:  # the log's skill folders are relative to it: never left to pytest
        arguments += ["--rootdir", "."]
    recorded = run.info.settings
    for option, key in FROM_THE_LOG:
        value = recorded.get(key)
        if value and _option_value(options, option) is None:
            arguments += [option, str(value)]
    return [*arguments, *scenario_paths(run, rootdir), *options]


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0
    log, options = Path(argv[0]), argv[1:]
    try:
        run = read_run_log(log)
    except RunLogError as exc:
        sys.stderr.write(f"{PROG}: {exc}\n")
        return USAGE_ERROR
    if not run.trials:
        sys.stderr.write(f"{PROG}: {log}: the run log holds no trial to re-judge\n")
        return USAGE_ERROR
    import pytest  # only here: the other commands never start a run

    return int(pytest.main(pytest_arguments(log, run, options)))
