"""Edge cases of lint and validate, as users run them: selection, ignore rules and conftest
hooks as in a run; files a run rejects or reads otherwise; validate's single grading."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.endpoint import RecordedRequest, Reply, ScriptedEndpoint
from tests.support.evals import CRITERION_LINE, eval_args

ANSWER = re.compile(r"## Agent Response\n\n(.*?)\n\n## Evaluation Criteria", re.DOTALL)
FENCE = re.compile(r"<<<(?:END )?AGENT OUTPUT [0-9a-f]+>>>\n?")

SKILL_MD = (
    "---\nname: {name}\ndescription: Writes tidy notes. Use when asked for notes.\n---\n\n# Notes\n"
)
CHANGELOG = "# Changelog\n\n## [1.0.0] - 2026-11-01\n"


def _skill(root: Path, name: str = "notes", *, skill_md: bool = True) -> Path:
    skill = root / "skills" / name
    skill.mkdir(parents=True)
    if skill_md:
        (skill / "SKILL.md").write_text(SKILL_MD.format(name=name))
    (skill / "CHANGELOG.md").write_text(CHANGELOG)
    return skill


def _scenario(
    skill: Path,
    name: str = "scenario-0",
    *,
    task: str = "Write a note about the meeting on Monday.\n",
    checklist: object = None,
    options: object = None,
) -> Path:
    folder = skill / "evals" / name
    folder.mkdir(parents=True)
    if isinstance(task, bytes):
        (folder / "task.md").write_bytes(task)
    else:
        (folder / "task.md").write_text(task)
    if checklist is None:
        checklist = {
            "context": "notes",
            "checklist": [
                {"name": "names-day", "description": "names the day `Monday`", "max_score": 100}
            ],
        }
    (folder / "criteria.json").write_text(
        checklist if isinstance(checklist, str) else json.dumps(checklist)
    )
    if options is None:
        options = {"description": f"about {name}", "sandbox": False}
    (folder / "scenario.json").write_text(
        options if isinstance(options, str) else json.dumps(options)
    )
    return folder


class Judge:
    """Judge calls pass a criterion when the answer holds 'Monday'; agent calls are refused."""

    def __init__(self) -> None:
        self.judge_calls = 0
        self.agent_calls = 0

    def __call__(self, request: RecordedRequest) -> Reply:
        messages = request.json["messages"]
        if messages[0]["role"] != "system":
            self.agent_calls += 1
            return Reply(status=400, body="validation must not call the agent model")
        self.judge_calls += 1
        text = messages[-1]["content"]
        found = ANSWER.search(text)
        answer = FENCE.sub("", found.group(1)) if found else ""
        verdicts = [
            {"name": name, "pass": "Monday" in answer, "reason": "read it"}
            for name, _points in CRITERION_LINE.findall(text)
        ]
        return Reply.chat(json.dumps(verdicts))


@pytest.fixture
def judge(endpoint: ScriptedEndpoint) -> Judge:
    made = Judge()
    endpoint.respond_with(made)
    return made


# --- lint: selection -------------------------------------------------------------------------


def test_lint_k_direct_selects_the_scenarios_a_run_selects(pytester: pytest.Pytester) -> None:
    skill = _skill(pytester.path)
    _scenario(skill, "scenario-0", options={"description": "d", "sandbox": False})
    _scenario(skill, "scenario-1", options={"description": "d", "sandbox": True})

    run = pytester.runpytest("skills", "--collect-only", "-q", "-k", "direct")
    lint = pytester.runpytest("--eval-lint", "skills", "--collect-only", "-q", "-k", "direct")

    run.stdout.fnmatch_lines(["skills/notes/evals::scenario-0", "*1/2 tests collected*"])
    lint.stdout.fnmatch_lines(["skills/notes/evals::scenario-0", "*1/3 tests collected*"])


def test_conftest_hooks_fire_for_scenario_lint_items(pytester: pytest.Pytester) -> None:
    skill = _skill(pytester.path)
    _scenario(skill)
    pytester.makeconftest(
        "from pathlib import Path\n"
        "def pytest_runtest_setup(item):\n"
        "    with open(Path(__file__).parent / 'seen.txt', 'a') as f:\n"
        "        f.write(item.nodeid + '\\n')\n"
    )

    result = pytester.runpytest("--eval-lint", "skills")

    result.assert_outcomes(passed=2)
    seen = (pytester.path / "seen.txt").read_text().splitlines()
    assert sorted(seen) == ["skills/notes/evals::scenario-0", "skills/notes::skill"]


def test_lint_k_skill_keeps_the_skills_own_item(pytester: pytest.Pytester) -> None:
    skill = _skill(pytester.path)
    _scenario(skill)

    result = pytester.runpytest(
        "--eval-lint", "skills", "--collect-only", "-q", "-k", "skill:notes"
    )

    result.stdout.fnmatch_lines(["skills/notes::skill", "skills/notes/evals::scenario-0"])


def test_lint_honours_ignore_as_a_run_does(pytester: pytest.Pytester) -> None:
    skill = _skill(pytester.path)
    _scenario(skill, "scenario-0")
    _scenario(skill, "scenario-1")
    ignore = ("--ignore", "skills/notes/evals/scenario-1")

    run = pytester.runpytest("skills", "--collect-only", "-q", *ignore)
    lint = pytester.runpytest("--eval-lint", "skills", "--collect-only", "-q", *ignore)

    assert "scenario-1" not in run.stdout.str()
    assert "scenario-1" not in lint.stdout.str(), lint.stdout.str()


# --- lint: lint accepts what a run rejects ----------------------------------------------------


def test_linting_one_scenario_of_a_skill_without_skill_md_fails(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, judge: Judge
) -> None:
    skill = _skill(pytester.path, skill_md=False)
    _scenario(skill)
    target = "skills/notes/evals/scenario-0"

    run = pytester.runpytest(target, *eval_args(endpoint.base_url))
    lint = pytester.runpytest("--eval-lint", target)

    run.assert_outcomes(errors=1)
    run.stdout.fnmatch_lines(["*SKILL.md*file not found*"])
    assert lint.ret == pytest.ExitCode.TESTS_FAILED, lint.stdout.str()


@pytest.mark.parametrize(
    ("linked", "shown"), [("task.md", "evals/scenario-0/task.md"), ("SKILL.md", "SKILL.md")]
)
def test_a_file_symlinked_out_of_the_skill_is_named_so_by_the_run_and_by_lint(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, judge: Judge, linked: str, shown: str
) -> None:
    # The run never reads through such a link: it used to say the file did not exist, and lint
    # (which read through it) passed.
    skill = _skill(pytester.path)
    _scenario(skill)
    own = skill / shown
    outside = pytester.path / "outside.md"
    outside.write_bytes(own.read_bytes())
    own.unlink()
    own.symlink_to(outside)
    said = f"*{shown}: leads out of the skill folder through a symbolic link: it is not read*"

    run = pytester.runpytest("skills", *eval_args(endpoint.base_url))
    lint = pytester.runpytest("--eval-lint", "skills")

    run.assert_outcomes(errors=1)
    run.stdout.fnmatch_lines([f"*scenario error: {said[1:]}"])
    run.stdout.no_fnmatch_line("*no such file or directory*")
    assert judge.agent_calls == judge.judge_calls == 0
    assert lint.ret == pytest.ExitCode.TESTS_FAILED, lint.stdout.str()
    lint.stdout.fnmatch_lines([said])


def test_a_latin1_task_that_names_the_skill_is_still_reported(pytester: pytest.Pytester) -> None:
    # The run reads task.md with errors="replace" and sends "Use the notes skill ..." to the
    # agent: lint reads it alike, and says the file is not UTF-8.
    skill = _skill(pytester.path)
    _scenario(skill, task="Use the notes skill to write a caf\xe9 note.\n".encode("latin-1"))

    result = pytester.runpytest("--eval-lint", "skills")

    result.stdout.fnmatch_lines(["SUBFAILED[[]task-names-skill[]] skills/notes/evals::scenario-0*"])


# --- validate -------------------------------------------------------------------------------


def _with_answer(folder: Path, answer: str = "The meeting is on Monday, at ten.\n") -> Path:
    (folder / "solution").mkdir()
    (folder / "solution" / "answer.md").write_text(answer)
    return folder


def test_validate_grades_each_scenario_twice_whatever_its_trials(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, judge: Judge
) -> None:
    # Once with the solution, once with the empty agent, whatever scenario.json's trials.
    skill = _skill(pytester.path)
    _with_answer(_scenario(skill, options={"description": "d", "sandbox": False, "trials": 3}))

    result = pytester.runpytest("--eval-validate", "skills", *eval_args(endpoint.base_url))

    result.assert_outcomes(passed=1)
    assert judge.judge_calls == 2


# --- lint: crashes and false positives ---------------------------------------------------------


def test_a_huge_number_in_criteria_json_is_a_finding_not_a_crash(pytester: pytest.Pytester) -> None:
    skill = _skill(pytester.path)
    criteria = (
        '{"checklist": [{"name": "a", "description": "names `Monday`", "max_score": '
        + "1" * 5000
        + "}]}"
    )
    _scenario(skill, checklist=criteria)

    result = pytester.runpytest("--eval-lint", "skills")

    assert "Traceback" not in result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "evals/scenario-0/criteria.json: cannot be read as JSON: Exceeds the limit (4300 "
            "digits) for integer string conversion*",
            "SUBFAILED[[]criteria-json[]] skills/notes/evals::scenario-0*",
        ]
    )


def test_a_deeply_nested_extra_key_does_not_hide_the_weights_error(
    pytester: pytest.Pytester,
) -> None:
    # The loader reads 600 levels of nesting; so must the rules, which read the top levels.
    skill = _skill(pytester.path)
    criteria = (
        '{"checklist": [{"name": "a", "description": "names `Monday`", "max_score": 90}], '
        '"notes": ' + "[" * 600 + "]" * 600 + "}"
    )
    _scenario(skill, checklist=criteria)

    result = pytester.runpytest("--eval-lint", "skills")

    result.stdout.fnmatch_lines(["*sum=90 (expected 100)*"])


def test_a_skill_named_git_does_not_fail_a_task_that_must_say_git(
    pytester: pytest.Pytester,
) -> None:
    # A skill named by a word ("git", "illustrations") may be the task's topic, or a folder
    # of its work: the rule cannot tell, so it stays silent; beside the word "skill" it is
    # an error.
    skill = _skill(pytester.path, "git")
    _scenario(
        skill,
        task="Undo my last git commit but keep the changes in the working tree; the hooks are "
        "in `git/hooks/`.\n",
    )
    _scenario(skill, "scenario-1", task="Use the git skill to undo my last commit.\n")

    result = pytester.runpytest("--eval-lint", "skills")

    result.assert_outcomes(passed=2, failed=2)  # scenario-1 and its subtest
    result.stdout.fnmatch_lines(
        ["SUBFAILED[[]task-names-skill[]] skills/git/evals::scenario-1 - *"]
    )
    assert "EvalLintWarning: [task-names-skill]" not in result.stdout.str()
