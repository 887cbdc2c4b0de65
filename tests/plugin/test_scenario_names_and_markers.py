"""Scenario folders under free names (the scenario_names setting), the direct and sandbox
markers, criterion categories and capability.txt, through pytester."""

from __future__ import annotations

import json

import pytest

from tests.architecture.test_core_without_pytest import run_without_pytest
from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, eval_args, write_scenario, write_skill
from tests.support.tiles import write_tile


def _free_named_skill(pytester: pytest.Pytester) -> None:
    skill = write_skill(pytester.path, "s", {"scenario-0": {"a": 100}})
    write_scenario(skill, "checkout-flow", {"a": 100})
    write_scenario(skill, "rate-limits", {"a": 100})
    (skill / "evals" / "notes").mkdir()  # neither scenario-* nor task.md and criteria.json


def test_free_named_folders_are_left_out_by_default_with_one_warning_naming_the_setting(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint
) -> None:
    _free_named_skill(pytester)

    result = pytester.runpytest("skills", "--co", "-q", *eval_args(endpoint.base_url))

    result.stdout.fnmatch_lines(
        [
            "skills/s/evals::scenario-0",
            "*PytestCollectionWarning: 2 folder(s) with task.md and criteria.json not "
            "collected, since their names do not match scenario_names (scenario-[*]): "
            "checkout-flow, rate-limits; set eval_scenario_names (ini) or scenario_names "
            "(YAML), e.g. to [*], or name a folder on the command line",
        ]
    )
    assert "1 test collected" in result.stdout.str()
    assert result.stdout.str().count("PytestCollectionWarning") == 1


@pytest.mark.parametrize(
    "setting",
    [
        ("-o", "eval_scenario_names=*"),
        ("--eval-scenario-names", "scenario-*, checkout-*,rate-*"),
    ],
    ids=["ini-star", "option-globs"],
)
def test_the_setting_collects_them_and_the_gate_counts_them(
    pytester: pytest.Pytester,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    setting: tuple[str, str],
) -> None:
    _free_named_skill(pytester)

    result = pytester.runpytest("skills", *setting, *eval_args(endpoint.base_url))

    result.assert_outcomes(passed=3)
    assert "PytestCollectionWarning" not in result.stdout.str()
    [report] = sorted(pytester.path.glob("skills/s/evals/results/**/*.json"))
    names = [s["name"] for s in json.loads(report.read_text())["scenarios"]]
    assert names == ["checkout-flow", "rate-limits", "scenario-0"]


def test_a_free_named_folder_named_on_the_command_line_is_always_collected(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    _free_named_skill(pytester)

    result = pytester.runpytest("skills/s/evals/checkout-flow", *eval_args(endpoint.base_url))

    result.assert_outcomes(passed=1)
    assert script.agent_calls == 1
    result.stdout.fnmatch_lines(["*checkout-flow*"])


def test_a_bad_scenario_names_value_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--eval-scenario-names", " , ")

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--eval-scenario-names*names no glob*"])


def _mixed_skill(pytester: pytest.Pytester) -> None:
    skill = write_skill(pytester.path, "s", {"answer-directly": {"a": 100}})
    # A sandboxed scenario whose name holds "direct", as real ones do.
    write_scenario(skill, "deprecation-redirect", {"a": 100}, sandbox=True)
    (skill / "evals" / "no-options").mkdir()
    (skill / "evals" / "no-options" / "task.md").write_text("T\n")
    (skill / "evals" / "no-options" / "criteria.json").write_text(
        json.dumps({"checklist": [{"name": "a", "max_score": 100}]})
    )


def test_markers_select_exactly_by_kind_and_pass_strict_markers(
    pytester: pytest.Pytester,
) -> None:
    _mixed_skill(pytester)
    star = ("-o", "eval_scenario_names=*", "--co", "-q", "--strict-markers")

    direct = pytester.runpytest("skills", "-m", "direct", *star)
    sandbox = pytester.runpytest("skills", "-m", "sandbox", *star)
    substring = pytester.runpytest("skills", "-k", "direct", *star)
    markers = pytester.runpytest("--markers")

    assert direct.ret == pytest.ExitCode.OK
    assert [line for line in direct.stdout.lines if "evals::" in line] == [
        "skills/s/evals::answer-directly"
    ]
    assert [line for line in sandbox.stdout.lines if "evals::" in line] == [
        "skills/s/evals::deprecation-redirect",
        "skills/s/evals::no-options",  # no scenario.json: sandboxed, as in the reference
    ]
    # -k keeps pytest's substring meaning: "direct" is in both names.
    assert [line for line in substring.stdout.lines if "evals::" in line] == [
        "skills/s/evals::answer-directly",
        "skills/s/evals::deprecation-redirect",
    ]
    markers.stdout.fnmatch_lines(["@pytest.mark.direct: *", "@pytest.mark.sandbox: *"])


_SHOW_KINDS = """
def pytest_collection_modifyitems(items):
    for item in items:
        kinds = sorted(m.name for m in item.iter_markers() if m.name in ("direct", "sandbox"))
        print(f"KINDS {item.name}: {','.join(kinds) or '-'}")
"""


@pytest.mark.parametrize(
    ("selection", "asked"),
    [
        ([], False),
        (["-k", "skill:s and not answer"], False),
        (["-m", "not slow"], False),
        (["-m", "not direct"], True),
        (["-m", "sandbox or slow"], True),
        (["-k", "not DIRECT"], True),
        (["-k", "box"], True),  # -k matches a part of a name: part of "sandbox"
    ],
)
def test_the_kind_is_read_at_collection_only_when_m_or_k_may_ask_for_it(
    pytester: pytest.Pytester, selection: list[str], asked: bool
) -> None:
    # Collection reads no scenario file otherwise: the markers are not there to be seen.
    _mixed_skill(pytester)
    pytester.makeconftest(_SHOW_KINDS)

    result = pytester.runpytest("skills", *selection, "-o", "eval_scenario_names=*", "--co", "-s")

    shown = sorted(line for line in result.stdout.lines if line.startswith("KINDS "))
    if asked:
        assert shown == [
            "KINDS answer-directly: direct",
            "KINDS deprecation-redirect: sandbox",
            "KINDS no-options: sandbox",
        ]
    else:
        assert shown == [
            "KINDS answer-directly: -",
            "KINDS deprecation-redirect: -",
            "KINDS no-options: -",
        ]


def test_lint_items_carry_the_markers_too(pytester: pytest.Pytester) -> None:
    _mixed_skill(pytester)

    result = pytester.runpytest(
        "skills", "--eval-lint", "-m", "direct", "-o", "eval_scenario_names=*", "--co", "-q"
    )

    assert [line for line in result.stdout.lines if "evals::" in line] == [
        "skills/s/evals::answer-directly"
    ]


def test_category_runs_and_scores_only_those_criteria_and_says_so(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    tile = write_tile(
        pytester.path,
        {
            "mixed": {
                "criteria": {"why": (30, "INTENT"), "how": (70, "QUALITY")},
                "options": {"sandbox": False},
            },
            "quality-only": {
                "criteria": {"style": (100, "QUALITY")},
                "options": {"sandbox": False},
            },
        },
    )
    script.verdicts["how"] = (False, "never judged")

    result = pytester.runpytest(
        "tiles",
        "--eval-category",
        "INTENT",
        *eval_args(endpoint.base_url),
        "-rs",
        "--eval-output",
        "out.json",
    )

    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(
        [
            "openkata: * category=INTENT (only these criteria run and score; no checks.json; "
            "partial: no gate, no automatic report)",
        ]
    )
    judged = [r for r in endpoint.requests if r.json["messages"][0]["role"] == "system"]
    [judge_message] = [r.json["messages"][-1]["content"] for r in judged]
    assert "**why**" in judge_message
    assert "**how**" not in judge_message
    assert not (tile / "evals" / "results").exists()  # partial: no automatic report
    [written] = sorted(pytester.path.glob("out*.json"))  # --eval-output adds the time
    [scenario] = json.loads(written.read_text())["scenarios"]
    assert (scenario["score"], scenario["max_score"], scenario["pass"]) == (30, 30, True)
    assert [c["name"] for c in scenario["criteria"]] == ["why"]


def test_capability_txt_is_the_description_when_scenario_json_gives_none(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_tile(
        pytester.path,
        {
            "with-capability": {
                "criteria": {"a": 100},
                "options": {"sandbox": False},
                "capability": "Exports spans\nwith semantic names.\n",
            },
            "both": {
                "criteria": {"a": 100},
                "options": {"sandbox": False, "description": "from scenario.json"},
                "capability": "ignored\n",
            },
        },
    )

    result = pytester.runpytest(
        "tiles", *eval_args(endpoint.base_url), "-W", "error::pytest_openkata.EvalLintWarning"
    )

    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["  both: from scenario.json", "  with-capability: Exports spans with semantic names."]
    )


def test_a_scenario_json_that_cannot_be_read_is_in_both_selections_so_its_error_shows(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    skill = write_skill(pytester.path, "s", {"scenario-0": {"a": 100}})
    (skill / "evals" / "scenario-0" / "scenario.json").write_text("{not json")

    for kind in ("direct", "sandbox"):
        result = pytester.runpytest("skills", "-m", kind, *eval_args(endpoint.base_url))
        result.assert_outcomes(errors=1)
        result.stdout.fnmatch_lines(["*scenario error: evals/scenario-0/scenario.json: not valid*"])


def test_categories_match_without_regard_to_case(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    write_tile(
        pytester.path,
        {
            "mixed": {
                "criteria": {"why": (30, "INTENT"), "how": (70, "QUALITY")},
                "options": {"sandbox": False},
            }
        },
    )

    result = pytester.runpytest("tiles", "--eval-category", "intent", *eval_args(endpoint.base_url))

    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["    ✓ why (30/30)", "    Score: 30/30 (100%) PASS"])


def test_evaluate_of_a_free_named_folder_given_by_path_is_a_partial_run(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    skill = write_skill(pytester.path, "s", {})
    write_scenario(skill, "checkout-flow", {"a": 100})
    write_scenario(skill, "rate-limits", {"a": 100})

    result = run_without_pytest(
        f"""
        from pytest_openkata import evaluate
        (summary,) = evaluate(
            "skills/s/evals/checkout-flow", backend="http",
            http={{"base_url": {endpoint.base_url!r}}},
        )
        print(summary.complete, [r.name for r in summary.results])
        """,
        cwd=pytester.path,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False ['checkout-flow']"
    assert not (skill / "evals" / "results").exists()
