"""The project's own skills are valid eval data: they load, and each checklist sums to 100."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_openkata.core.prompt import build_prompt
from pytest_openkata.core.scenario import discover_scenarios, load_scenario
from pytest_openkata.core.versions import read_skill_version

SKILLS = Path(__file__).resolve().parent.parent / "skills"
SCENARIOS = sorted(p for skill in SKILLS.iterdir() for p in discover_scenarios(skill / "evals"))


def test_the_example_skill_has_direct_and_sandboxed_scenarios() -> None:
    loaded = [load_scenario(p) for p in SCENARIOS if p.parent.parent.name == "commit-message"]
    assert len(loaded) >= 4
    assert sum(not s.sandbox for s in loaded) >= 2
    sandboxed = [s for s in loaded if s.sandbox]
    assert len(sandboxed) >= 2
    assert all((s.path / "inputs").is_dir() for s in sandboxed)
    assert read_skill_version(SKILLS / "commit-message") == "1.0.0"


@pytest.mark.parametrize(
    "scenario_dir", SCENARIOS, ids=lambda p: f"{p.parent.parent.name}/{p.name}"
)
def test_scenario_is_valid_and_weights_sum_to_100(scenario_dir: Path) -> None:
    scenario = load_scenario(scenario_dir)
    assert sum(c.max_score for c in scenario.criteria) == 100
    assert build_prompt(scenario.skill_dir, scenario.path).startswith("---\nname: ")
