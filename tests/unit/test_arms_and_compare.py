"""Baseline arms (a skill's files at a git ref) and the comparison of two arms' results."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest

from pytest_openkata.contracts.results import CriterionResult, ScenarioResult
from pytest_openkata.core.arms import WITHOUT_SKILL, Arm, ArmError, baseline_arm, skill_at_ref
from pytest_openkata.core.compare import compare_skill
from pytest_openkata.core.trials import combine_trials, errored_trial, scored_trial

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]


def _git(root: Path, *args: str) -> None:
    subprocess.run([*GIT, *args], cwd=root, check=True, capture_output=True)


def _repository(root: Path) -> Path:
    """``root`` as a repository whose skill ``skills/s`` has one commit, tagged v1."""
    skill = root / "skills" / "s"
    (skill / "references").mkdir(parents=True)
    (skill / "SKILL.md").write_text("version one\n")
    (skill / "references" / "guide.md").write_text("guide one\n")
    _git(root, "init", "-q")
    _git(root, "add", "skills")
    _git(root, "commit", "-q", "-m", "v1")
    _git(root, "tag", "v1")
    return skill


def test_a_ref_gives_the_skill_s_files_of_that_commit_once(tmp_path: Path) -> None:
    skill = _repository(tmp_path / "repo")
    (skill / "SKILL.md").write_text("version two\n")
    folder = tmp_path / "refs"

    copy = skill_at_ref(skill, "v1", folder)
    again = skill_at_ref(skill, "v1", folder)

    assert copy == again
    assert (copy / "SKILL.md").read_text() == "version one\n"
    assert (copy / "references" / "guide.md").read_text() == "guide one\n"
    assert (skill / "SKILL.md").read_text() == "version two\n"  # the working tree is untouched
    assert [p.name for p in folder.iterdir()] == [copy.parents[1].name]  # no staging left


def test_a_skill_at_the_repository_root_is_extracted_too(tmp_path: Path) -> None:
    root = tmp_path / "skill"
    root.mkdir()
    (root / "SKILL.md").write_text("at the root\n")
    _git(root, "init", "-q")
    _git(root, "add", "SKILL.md")
    _git(root, "commit", "-q", "-m", "one")

    copy = skill_at_ref(root, "HEAD", tmp_path / "refs")

    assert (copy / "SKILL.md").read_text() == "at the root\n"


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("v9", "v9: no such git ref"),
        ("--help", "--help: no such git ref"),
    ],
)
def test_an_unknown_ref_is_named(tmp_path: Path, ref: str, message: str) -> None:
    skill = _repository(tmp_path)

    with pytest.raises(ArmError, match=f"^{message}"):
        skill_at_ref(skill, ref, tmp_path / "refs")


def test_a_skill_that_did_not_exist_at_the_ref_is_named(tmp_path: Path) -> None:
    _repository(tmp_path)
    later = tmp_path / "skills" / "later"
    later.mkdir()
    (later / "SKILL.md").write_text("new\n")

    with pytest.raises(ArmError, match=r"^v1: skills/later does not exist at v1 \([0-9a-f]{12}\)"):
        skill_at_ref(later, "v1", tmp_path / "refs")


def test_a_skill_without_skill_md_at_the_ref_is_named(tmp_path: Path) -> None:
    skill = _repository(tmp_path)
    _git(tmp_path, "rm", "-q", "skills/s/SKILL.md")
    _git(tmp_path, "commit", "-q", "-m", "no skill file")
    (skill / "SKILL.md").write_text("back\n")

    with pytest.raises(ArmError, match=r"^HEAD: skills/s has no SKILL\.md at HEAD"):
        skill_at_ref(skill, "HEAD", tmp_path / "refs")


def test_a_skill_outside_a_repository_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    skill = tmp_path / "plain"
    skill.mkdir()
    (skill / "SKILL.md").write_text("x\n")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # no repository above

    with pytest.raises(ArmError, match=r"^v1: the skill is not in a git repository"):
        skill_at_ref(skill, "v1", tmp_path / "refs")


def test_a_symlink_out_of_the_tree_at_the_ref_is_an_arm_error(tmp_path: Path) -> None:
    skill = _repository(tmp_path)
    (skill / "references" / "escape").symlink_to("/etc/passwd")
    _git(tmp_path, "add", "skills")
    _git(tmp_path, "commit", "-q", "-m", "a symlink out")

    with pytest.raises(ArmError, match=r"^HEAD: the skill's files cannot be extracted"):
        skill_at_ref(skill, "HEAD", tmp_path / "refs")


def test_the_setting_names_the_arm(tmp_path: Path) -> None:
    skill = _repository(tmp_path)

    assert baseline_arm("", skill, tmp_path) is None
    assert baseline_arm(WITHOUT_SKILL, skill, tmp_path) == Arm(WITHOUT_SKILL, False)
    same = baseline_arm("same", skill, tmp_path)
    assert same is not None
    assert same.skill is True
    at_ref = baseline_arm("v1", skill, tmp_path / "refs")
    assert at_ref is not None
    assert at_ref.name == "v1"
    assert isinstance(at_ref.skill, Path)
    assert (at_ref.skill / "SKILL.md").read_text() == "version one\n"


# --- the comparison ----------------------------------------------------------------------------


def _result(name: str, own: list[list[bool]], other: list[list[bool] | str]) -> ScenarioResult:
    """A scenario whose own trials pass criteria ``a`` and ``b`` as given, with a baseline of
    such trials (a string is an errored trial)."""

    def trials(passes: list[list[bool] | str]) -> list:
        made = []
        for index, trial in enumerate(passes, start=1):
            if isinstance(trial, str):
                made.append(errored_trial(index, trial))
            else:
                made.append(
                    scored_trial(
                        index,
                        [
                            CriterionResult.judged(n, 5, p, "")
                            for n, p in zip("ab", trial, strict=True)
                        ],
                    )
                )
        return made

    identity = {"skill": "s", "skill_dir": "/s", "name": name, "description": name}
    mine = combine_trials(trials(list(own)), **identity)
    compared = combine_trials(trials(other), **identity)
    return dataclasses.replace(mine, baseline=dataclasses.replace(compared, arm="without-skill"))


def test_pairs_pass_rates_and_mcnemar_with_one_trial_per_arm() -> None:
    results = [
        _result("scenario-0", [[True, True]], [[False, True]]),
        _result("scenario-1", [[True, False]], [[True, False]]),
    ]

    comparison = compare_skill(results)

    assert comparison is not None
    uplift = comparison.uplift
    assert uplift is not None
    assert (uplift.with_mean, uplift.without_mean, uplift.scenarios) == (75, 50, 2)
    assert uplift.mcnemar is not None
    assert (uplift.mcnemar.b, uplift.mcnemar.c) == (1, 0)
    assert [(m.scenario, m.name, m.with_rate, m.without_rate) for m in comparison.criteria] == [
        ("scenario-0", "a", 1, 0),
        ("scenario-0", "b", 1, 1),
        ("scenario-1", "a", 1, 1),
        ("scenario-1", "b", 0, 0),
    ]
    assert [(m.scenario, m.name) for m in comparison.moved_most()] == [("scenario-0", "a")]


def test_several_trials_give_pass_rates_and_no_mcnemar() -> None:
    results = [_result("scenario-0", [[True, True], [True, False]], [[False, True], [True, True]])]

    comparison = compare_skill(results)

    assert comparison is not None
    assert comparison.uplift is not None
    assert comparison.uplift.mcnemar is None
    rates = {m.name: (m.with_rate, m.without_rate) for m in comparison.criteria}
    assert rates == {"a": (1, 0.5), "b": (0.5, 1)}


def test_a_scenario_with_an_errored_trial_in_either_arm_is_left_out() -> None:
    results = [
        _result("scenario-0", [[True, True]], [[False, False]]),
        _result("scenario-1", [[True, True], [True, True]], [[True, True], "agent: HTTP 500"]),
        _result("scenario-2", ["judge: no answer"], [[True, True]]),  # type: ignore[list-item]
    ]

    comparison = compare_skill(results)

    assert comparison is not None
    assert comparison.uplift is not None
    assert comparison.uplift.scenarios == 1
    assert comparison.left_out == [
        ("scenario-1", "errored in the without-skill arm"),
        ("scenario-2", "errored with the skill"),
    ]


def test_no_baseline_no_comparison_and_a_scenario_without_one_is_named() -> None:
    plain = combine_trials(
        [scored_trial(1, [CriterionResult.judged("a", 1, True, "")])],
        skill="s", skill_dir="/s", name="scenario-9", description="",
    )  # fmt: skip

    assert compare_skill([plain]) is None
    comparison = compare_skill([_result("scenario-0", [[True, True]], [[True, True]]), plain])
    assert comparison is not None
    assert comparison.left_out == [("scenario-9", "no baseline run")]
