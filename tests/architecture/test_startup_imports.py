"""pytest loads the plugin in every run of an environment it is installed in, whether the run
evaluates a skill or not: what the plugin imports at start-up is what every run needs, and the
linter, the reports' renderers, the sandbox's and the local model's machinery, the statistics
of a comparison are imported where they are used.

Each check runs in a fresh interpreter, since this one has imported most of the package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_skill

# Modules a run that needs them imports when it uses them, never at start-up.
LOADED_WHEN_USED = (
    "jinja2",
    "jsonschema",
    "docker",
    "paramiko",
    "httpx",
    "yaml",
    "regex",
    "simpleeval",
    "pytest_openkata.core.expressions",
    "statsmodels",
    "pytest_openkata.core.lint",
    "pytest_openkata.core.compare",
    "pytest_openkata.core.uplift",
    "pytest_openkata.core.regression",
    "pytest_openkata.core.agreement",
    "pytest_openkata.core.evaluate",
    "pytest_openkata.core.run",
    "pytest_openkata.core.validate",
    "pytest_openkata.plugin.validation",
    "pytest_openkata.local",
    "pytest_openkata.commands",
    "pytest_openkata.providers.reporters.html",
    "pytest_openkata.providers.reporters.markdown",
    "pytest_openkata.providers.reporters.csvfile",
    "pytest_openkata.providers.reporters.runlog",
    "pytest_openkata.providers.reporters.results_json",
    "pytest_openkata.providers.sandboxes",
    "pytest_openkata.providers.backends",
)

# Prints which of the modules named in argv[1] (JSON) are loaded once the code before it ran.
REPORT_LOADED = """
import json, sys
names = json.loads(sys.argv[1])
loaded = sorted(n for n in names if any(m == n or m.startswith(n + ".") for m in sys.modules))
print(json.dumps(loaded))
"""


def _loaded_after(
    code: str, cwd: Path | None = None, names: tuple[str, ...] = LOADED_WHEN_USED
) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "OPENKATA_EVAL_"))}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # other plugins may import any of them
    done = subprocess.run(
        [sys.executable, "-c", code + REPORT_LOADED, json.dumps(names)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        cwd=cwd,
        env=env,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_loading_the_plugins_entry_point_imports_none_of_the_modules_loaded_when_used() -> None:
    code = (
        "from importlib.metadata import entry_points\n"
        "(point,) = entry_points(group='pytest11', name='openkata')\n"
        "point.load()\n"
    )
    assert _loaded_after(code) == []


def test_the_package_gives_its_public_names_on_first_use() -> None:
    assert _loaded_after("import pytest_openkata\n") == []
    assert _loaded_after("from pytest_openkata import EvalLintWarning\n") == [
        "pytest_openkata.core.lint"
    ]


@pytest.mark.parametrize("collect_only", [True, False], ids=["collect-only", "run"])
def test_a_run_without_skills_imports_none_of_them(tmp_path: Path, collect_only: bool) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    pass\n")
    args = ["-q", "-p", "openkata", "-p", "no:cacheprovider", "test_plain.py"]
    if collect_only:
        args.append("--collect-only")
    code = f"import pytest\nassert pytest.main({args!r}) == 0\n"
    assert _loaded_after(code, cwd=tmp_path) == []


def test_a_run_of_direct_scenarios_writing_no_page_imports_no_renderer_nor_sandbox(
    tmp_path: Path, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_skill(tmp_path, "s", {"scenario-a": {"good": 10}})
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    args = ["-q", "-p", "openkata", "-p", "no:cacheprovider", "skills"]
    args += eval_args(endpoint.base_url, "--eval-threshold", "0")
    code = f"import pytest\nassert pytest.main({args!r}) == 0\n"
    unused = (
        "jinja2",
        "markupsafe",
        "jsonschema",
        "docker",
        "paramiko",
        "pytest_openkata.local",
        "pytest_openkata.core.earlier",  # a run that compares with no earlier run
    )
    assert _loaded_after(code, cwd=tmp_path, names=unused) == []
    assert script.agent_calls == 1


def test_collecting_scenarios_imports_nothing_that_runs_them(tmp_path: Path) -> None:
    write_skill(tmp_path, "s", {"scenario-a": {"good": 10}})
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    args = ["-q", "-p", "openkata", "-p", "no:cacheprovider", "--collect-only", "skills"]
    code = f"import pytest\nassert pytest.main({args!r}) == 0\n"
    runs = (
        "pytest_openkata.core.run",
        "pytest_openkata.core.validate",
        "pytest_openkata.plugin.validation",
        "httpx",
    )
    assert _loaded_after(code, cwd=tmp_path, names=runs) == []


def test_validate_mode_loads_the_validation_plugin(tmp_path: Path) -> None:
    write_skill(tmp_path, "s", {"scenario-a": {"good": 10}})
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    args = ["-q", "-p", "openkata", "-p", "no:cacheprovider", "--collect-only", "skills"]
    args.append("--eval-validate")
    code = f"import pytest\nassert pytest.main({args!r}) == 0\n"
    loaded = _loaded_after(code, cwd=tmp_path, names=("pytest_openkata.plugin.validation",))
    assert loaded == ["pytest_openkata.plugin.validation"]
