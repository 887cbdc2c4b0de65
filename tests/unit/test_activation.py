"""Whether the agent loaded the skill: three states per trial, a rate per scenario."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pytest_openkata.contracts.results import TrialResult, TrialTrace
from pytest_openkata.contracts.transcripts import SkillLoad, Transcript, one_turn
from pytest_openkata.core.activation import (
    LOADED,
    NOT_LOADED,
    UNKNOWN,
    activation,
    activation_rate,
    names_of,
    scenario_activation,
    skill_files_read,
)
from pytest_openkata.core.tile import skill_names
from pytest_openkata.core.trials import scored_trial
from tests.support.results import judged


def _trial(index: int, transcript: Transcript | None) -> TrialResult:
    return scored_trial(index, [judged("x", 1, True)], trace=TrialTrace(transcript=transcript))


@pytest.mark.parametrize(
    ("transcript", "state"),
    [
        (Transcript("claude stream-json", skills_loaded=(SkillLoad("Review"),)), LOADED),
        (Transcript("claude stream-json", skills_loaded=(SkillLoad("review", "t2"),)), LOADED),
        (Transcript("codex exec --json", skills_loaded=(SkillLoad("other"),)), NOT_LOADED),
        (Transcript("codex exec --json"), NOT_LOADED),
        (one_turn("an answer"), UNKNOWN),
        (None, UNKNOWN),
    ],
    ids=["by the agent", "by a subagent", "another skill", "none", "a model backend", "no events"],
)
def test_a_trial_is_loaded_not_loaded_or_unknown(transcript: Transcript | None, state: str) -> None:
    assert activation(transcript, ["review"]) == state


def test_the_rate_counts_only_the_trials_that_could_tell() -> None:
    loaded = Transcript("claude stream-json", skills_loaded=(SkillLoad("review"),))
    trials = [_trial(1, loaded), _trial(2, Transcript("claude stream-json")), _trial(3, None)]

    rate = activation_rate(trials, ["review"])

    assert (rate.loaded, rate.known, rate.trials) == (1, 2, 3)
    assert rate.text == "loaded in 1 of 2 trials (1 unknown)"
    nothing = activation_rate([replace(trials[2], index=1)], ["review"])
    assert nothing.text == "unknown (the agent gave no events)"


def test_the_skills_files_read_are_named_below_its_folder_once_each() -> None:
    first = Transcript(
        "claude stream-json",
        files_read=(
            "/home/someone/project/skills/review/SKILL.md",
            "/home/someone/project/src/review/main.py",  # a folder "review", not a skill's
            "/home/someone/.claude/skills/review/scripts/run.sh",
            "C:\\work\\skills\\review\\references\\style.md",
            "review",  # the folder's name alone is no file of it
        ),
    )
    second = Transcript("codex exec --json", files_read=("/workspace/skill/SKILL.md", "notes.md"))

    read = skill_files_read([first, second, None], ["review", "skill"])

    assert read == ("SKILL.md", "references/style.md", "scripts/run.sh")
    assert not any("someone" in path or "work" in path for path in read)


def test_the_rate_names_the_first_skill_files_read() -> None:
    paths = tuple(f"/p/skills/review/references/{n}.md" for n in "abcdefg")
    read = ("/p/skills/review/SKILL.md", *paths)
    trials = [_trial(1, Transcript("claude stream-json", files_read=read))]

    rate = activation_rate(trials, ["review"])

    assert rate.files_read == ("SKILL.md", *(p.removeprefix("/p/skills/review/") for p in paths))
    assert rate.text == (
        "loaded in 0 of 1 trial; read SKILL.md, references/a.md, references/b.md, "
        "references/c.md, references/d.md and 3 more"
    )


def test_a_tiles_skills_go_by_their_names_and_folders(tmp_path: Path) -> None:
    tile = tmp_path / "my-tile"
    (tile / "skills" / "review-folder").mkdir(parents=True)
    (tile / "skills" / "review-folder" / "SKILL.md").write_text("# R\n")
    (tile / "tile.json").write_text(
        '{"name": "org/my-tile", "version": "1.0.0",'
        ' "skills": {"review": {"path": "skills/review-folder/SKILL.md"}}}'
    )

    assert skill_names(tile) == ("my-tile", "org/my-tile", "review", "review-folder")
    assert skill_names(tmp_path / "plain") == ("plain",)


def test_reading_the_skill_in_a_sandboxs_workspace_counts_as_loading_it(tmp_path: Path) -> None:
    from tests.support.results import scenario

    read = Transcript("codex exec --json", skills_loaded=(SkillLoad("skill"),))  # skill/SKILL.md
    result = scenario("scenario-a")
    [trial] = result.trials
    assert trial.trace is not None
    result = replace(result, trials=[replace(trial, trace=replace(trial.trace, transcript=read))])

    rate = scenario_activation(result)

    assert rate is not None
    assert (rate.loaded, rate.known) == (1, 1)
    assert "skill" in names_of(tmp_path / "commit-message")
