"""Which node ids are scenarios' (as an xdist worker reports them to the controller)."""

from __future__ import annotations

import pytest

from pytest_openkata.plugin.items import is_scenario_nodeid


@pytest.mark.parametrize(
    ("nodeid", "scenario"),
    [
        ("skills/s/evals::scenario-a", True),
        ("skills/s/evals/g1::scenario-a", True),
        ("skills/s/evals/v1.2::scenario-a", True),  # a group folder's name with a dot
        ("skills/s/evals/evals.json::eval-1", True),
        ("skills/s/evals/eval.yaml::sort", True),
        ("tasks/t/task.toml::t", True),
        ("tests/evals/test_x.py::test_a", False),  # a Python test module under evals/
        ("tests/test_evals.py::test_a", False),
    ],
)
def test_a_scenarios_node_id_is_told_from_a_tests(nodeid: str, scenario: bool) -> None:
    assert is_scenario_nodeid(nodeid) is scenario
