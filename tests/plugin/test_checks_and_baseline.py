"""Deterministic checks of direct scenarios and the baseline arm, run as users run them
(pytester, a real scripted endpoint whose agent answers depend on whether the skill's text
is in the prompt, and whose judge passes a criterion only for an answer that applied it)."""

from __future__ import annotations

import json
import subprocess
import threading
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.endpoint import RecordedRequest, Reply, ScriptedEndpoint
from tests.support.evals import (
    CRITERION_LINE,
    eval_args,
    reports_under,
    write_scenario,
    write_skill,
)

SKILL_RULE = "Follow the rules."  # the text write_skill puts into every SKILL.md
SKILLED = "SKILLED answer: ANSWER-42, following the rules of the skill."
UNSKILLED = "A plain answer from a model that knows nothing of the skill."


@dataclass
class SkillAwareScript:
    """Agent calls answer :data:`SKILLED` when the prompt holds ``marker`` (the skill's text),
    else :data:`UNSKILLED`; the judge passes ``applied`` only for a skilled answer (every
    other criterion passes)."""

    marker: str = SKILL_RULE
    applied: str = "applies-rule"
    invert: bool = False  # the skill makes the answers worse
    prompts: list[str] = field(default_factory=list)
    judge_calls: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: RecordedRequest) -> Reply:
        messages = request.json["messages"]
        with self._lock:
            if messages[0]["role"] == "system":
                self.judge_calls += 1
                user = messages[-1]["content"]
                skilled = "SKILLED" in user.split("## Evaluation Criteria")[0]
                verdicts = [
                    {
                        "name": name,
                        "pass": skilled if name == self.applied else True,
                        "reason": "applied" if skilled else "not applied",
                    }
                    for name, _ in CRITERION_LINE.findall(user)
                ]
                return Reply.chat(json.dumps(verdicts))
            prompt = messages[-1]["content"]
            self.prompts.append(prompt)
            has_skill = (self.marker in prompt) != self.invert
            return Reply.chat(SKILLED if has_skill else UNSKILLED)


@pytest.fixture
def aware(endpoint: ScriptedEndpoint) -> SkillAwareScript:
    script = SkillAwareScript()
    endpoint.respond_with(script)
    return script


def _report(root: Path) -> dict:
    [report] = reports_under(root)
    return json.loads(report.read_text())


def _reports(root: Path) -> list[dict]:
    return [json.loads(path.read_text()) for path in reports_under(root)]


def _checks(scenario: Path, checks: list[dict]) -> None:
    (scenario / "checks.json").write_text(json.dumps(checks))


ANSWER_CHECK = {
    "name": "names-the-answer",
    "description": "the answer's code is given",
    "max_score": 30,
    "type": "output_regex",
    "pattern": r"ANSWER-\d+",
}


# --- checks ----------------------------------------------------------------------------------


def test_checks_count_with_the_judged_criteria_and_never_reach_the_judge(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, aware: SkillAwareScript
) -> None:
    skill = write_skill(pytester.path, "s", {"scenario-0": {"applies-rule": 40, "clear": 30}})
    _checks(
        skill / "evals" / "scenario-0",
        [
            ANSWER_CHECK,
            {
                "name": "no-apology",
                "description": "does not apologise",
                "max_score": 20,
                "type": "output_regex",
                "pattern": "(?i)sorry",
                "absent": True,
            },
            {
                "name": "is-json",
                "description": "answers in JSON",
                "max_score": 10,
                "type": "json_schema",
                "schema": {"type": "object"},
            },
        ],
    )

    result = pytester.runpytest("skills/s", "--junitxml=junit.xml", *eval_args(endpoint.base_url))

    [scenario] = _report(pytester.path)["scenarios"]
    criteria = {c["name"]: c for c in scenario["criteria"]}
    # The reference's fields first, in order: the judge's criteria, then the checks.
    assert list(criteria) == ["applies-rule", "clear", "names-the-answer", "no-apology", "is-json"]
    assert "kind" not in criteria["applies-rule"]
    assert criteria["names-the-answer"] == {
        "name": "names-the-answer", "pass": True, "score": 30, "max_score": 30,
        "reason": "the agent's output matches 'ANSWER-\\\\d+': 'ANSWER-42'", "kind": "check",
    }  # fmt: skip
    assert criteria["no-apology"]["pass"] is True
    assert criteria["is-json"]["pass"] is False
    assert criteria["is-json"]["reason"].startswith("the agent's output is not JSON")
    # 40 + 30 judged, 30 + 20 checked, of 130 points.
    assert (scenario["score"], scenario["max_score"]) == (120, 130)
    assert scenario["percentage"] == pytest.approx(120 / 130 * 100)
    # The judge was asked about its own criteria only.
    [judge] = [r for r in endpoint.requests if r.json["messages"][0]["role"] == "system"]
    judged = [name for name, _ in CRITERION_LINE.findall(judge.json["messages"][1]["content"])]
    assert judged == ["applies-rule", "clear"]
    result.stdout.fnmatch_lines(["*✓ names-the-answer (30/30)*", "SUBFAILED*is-json (0/10)*"])
    cases = {
        case.get("name"): case
        for case in ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
    }
    kind = {p.get("name"): p.get("value") for p in cases["is-json"].iter("property")}["kind"]
    assert kind == "check"
    assert cases["is-json"].find("failure") is not None


def test_a_scenario_of_checks_only_makes_no_judge_call(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, aware: SkillAwareScript
) -> None:
    skill = write_skill(pytester.path, "s", {"scenario-0": {"unused": 1}})
    scenario = skill / "evals" / "scenario-0"
    (scenario / "criteria.json").write_text(json.dumps({"checklist": []}))
    _checks(scenario, [ANSWER_CHECK])

    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url))

    assert aware.judge_calls == 0
    assert len(aware.prompts) == 1
    report = _report(pytester.path)
    assert report["scenarios"][0]["percentage"] == 100
    assert report["pass"] is True
    assert result.ret == pytest.ExitCode.OK


def test_a_broken_checks_file_errors_its_scenario_naming_file_and_field(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, aware: SkillAwareScript
) -> None:
    skill = write_skill(
        pytester.path, "s", {"scenario-a": {"c": 1}, "scenario-b": {"c": 1}, "scenario-c": {"c": 1}}
    )
    _checks(skill / "evals" / "scenario-a", [{**ANSWER_CHECK, "patern": "x"}])
    _checks(
        skill / "evals" / "scenario-b",
        [{"name": "notes", "description": "", "max_score": 5, "type": "file", "path": "n.md"}],
    )

    result = pytester.runpytest("skills/s", *eval_args(endpoint.base_url))

    shown = result.stdout.str()
    assert (
        "scenario error: evals/scenario-a/checks.json: [0] ('names-the-answer').patern: "
        "unknown key for a check of type output_regex; did you mean 'pattern'?"
    ) in shown
    assert (
        "scenario error: evals/scenario-b/checks.json: [0] ('notes').type: a file check "
        "reads the workspace, which only a sandboxed scenario has"
    ) in shown
    result.assert_outcomes(passed=1, errors=2)
    assert len(aware.prompts) == 1  # only scenario-c ran its agent


def test_changing_only_the_checks_runs_only_the_checks_again(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, aware: SkillAwareScript
) -> None:
    skill = write_skill(pytester.path, "s", {"scenario-0": {"applies-rule": 1}})
    scenario = skill / "evals" / "scenario-0"
    _checks(scenario, [ANSWER_CHECK])
    args = ("skills/s", *eval_args(endpoint.base_url, "--eval-output", "out/"))
    pytester.runpytest(*args)
    assert (len(aware.prompts), aware.judge_calls) == (1, 1)
    first = set((pytester.path / "out").iterdir())

    _checks(scenario, [{**ANSWER_CHECK, "pattern": r"ANSWER-\d{3}"}])
    result = pytester.runpytest(*args)

    assert (len(aware.prompts), aware.judge_calls) == (1, 1)  # both from the cache
    [written] = set((pytester.path / "out").iterdir()) - first
    second = json.loads(written.read_text())
    check = second["scenarios"][0]["criteria"][1]
    assert (check["name"], check["pass"]) == ("names-the-answer", False)
    result.stdout.fnmatch_lines(["*From the cache: 1 agent answer, 1 judge verdict*"])


# --- the baseline arm ------------------------------------------------------------------------


SIX = {f"scenario-{n}": {"applies-rule": 50, "clear": 50} for n in range(6)}


def test_without_skill_runs_every_scenario_again_without_the_skill_and_reports_the_uplift(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, aware: SkillAwareScript
) -> None:
    skill = write_skill(pytester.path, "s", SIX)
    (skill / "references").mkdir()
    (skill / "references" / "guide.md").write_text("A guide of the skill.\n")

    result = pytester.runpytest(
        "skills/s",
        "--junitxml=junit.xml",
        *eval_args(endpoint.base_url, "--eval-baseline", "without-skill"),
    )

    with_skill = [p for p in aware.prompts if SKILL_RULE in p]
    without = [p for p in aware.prompts if SKILL_RULE not in p]
    assert (len(with_skill), len(without)) == (6, 6)
    for prompt in without:  # the task and the inputs only
        assert "A guide of the skill." not in prompt
        assert prompt.startswith("Do the task of scenario-")
    report = _report(pytester.path)
    # The gate and the reference's fields are the with-skill arm's.
    assert report["overall_percentage"] == 100
    assert report["pass"] is True
    first = report["scenarios"][0]
    assert first["percentage"] == 100
    assert first["baseline"]["arm"] == "without-skill"
    assert first["baseline"]["percentage"] == 50
    uplift = report["uplift"]
    assert {k: uplift[k] for k in ("arm", "with", "without", "difference", "ci95")} == {
        "arm": "without-skill", "with": 100, "without": 50, "difference": 50, "ci95": [50, 50],
    }  # fmt: skip
    assert uplift["normalized_gain"] == 1
    # Six scenarios, all +50: 2 of the 2^6 sign assignments are as extreme.
    assert uplift["p_value"] == pytest.approx(2 / 64)
    assert uplift["test"] == "sign-flip exact"
    assert uplift["verdict"] == "improves"
    assert uplift["mcnemar"] == {
        "passed_with_only": 6, "passed_without_only": 0, "p_value": pytest.approx(2 / 64),
    }  # fmt: skip
    moved = [c for c in uplift["criteria"] if c["with"] != c["without"]]
    assert {(c["name"], c["with"], c["without"]) for c in moved} == {("applies-rule", 1, 0)}
    result.stdout.fnmatch_lines(
        [
            "    Baseline (without-skill): 50/100 (50%); with the skill +50 points",
            "  Uplift against without-skill: with the skill 100.0%, without-skill 50.0% over 6 "
            "scenarios; difference +50.0 points (95% CI +50.0 to +50.0)",
            "    normalized gain 1.00; p = 0.0312 (sign-flip exact); criteria: McNemar p = "
            "0.0312 (6 passed with the skill only, 0 without it only); verdict: improves",
            "    moved most: scenario-0 applies-rule 0% -> 100%; *",
        ]
    )
    suite = ET.parse(pytester.path / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    figures = {p.get("name"): p.get("value") for p in suite.find("properties") or ()}
    assert figures["openkata_uplift.s.verdict"] == "improves"
    assert figures["openkata_uplift.s.difference"] == "50"
    assert figures["openkata_uplift.s.ci95"] == "50 50"
    assert figures["openkata_uplift.s.p_value"] == "0.03125"
    [case] = [c for c in suite.iter("testcase") if c.get("name") == "scenario-0"]
    scenario_figures = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert scenario_figures["openkata_baseline_arm"] == "without-skill"
    assert scenario_figures["openkata_baseline_percentage"] == "50"
    assert result.ret == pytest.ExitCode.OK

    # The arms are cached apart: a repeat makes no call at all.
    calls = len(aware.prompts), aware.judge_calls
    pytester.runpytest(
        "skills/s", *eval_args(endpoint.base_url, "--eval-baseline", "without-skill")
    )
    assert (len(aware.prompts), aware.judge_calls) == calls


def test_require_uplift_fails_a_skill_that_does_worse_than_without_it(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, aware: SkillAwareScript
) -> None:
    aware.invert = True  # the skill's text makes the agent answer badly
    write_skill(pytester.path, "s", SIX)
    args = eval_args(endpoint.base_url, "--eval-baseline", "without-skill", "--eval-threshold", "0")

    plain = pytester.runpytest("skills/s", *args)
    required = pytester.runpytest("skills/s", *args, "--eval-require-uplift")

    assert _reports(pytester.path)[0]["uplift"]["verdict"] == "regresses"
    assert plain.ret == pytest.ExitCode.OK  # the verdict alone gates nothing
    assert required.ret == pytest.ExitCode.TESTS_FAILED
    required.stdout.fnmatch_lines(["s 50% >= 0%; s regresses against the baseline: exit 1"])


def test_an_a_a_run_measures_the_noise_floor_and_never_fails_the_uplift_gate(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, aware: SkillAwareScript
) -> None:
    write_skill(pytester.path, "s", SIX)

    result = pytester.runpytest(
        "skills/s",
        *eval_args(endpoint.base_url, "--eval-baseline", "same"),
        "--eval-require-uplift",
    )

    # The identical arm runs for real: its agent answers are not the first arm's cache hits.
    assert len(aware.prompts) == 12
    assert all(SKILL_RULE in prompt for prompt in aware.prompts)
    uplift = _report(pytester.path)["uplift"]
    assert (uplift["arm"], uplift["difference"], uplift["p_value"]) == ("same", 0, 1)
    assert uplift["verdict"] == "no-difference"
    assert result.ret == pytest.ExitCode.OK


def _git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=root,
        check=True,
        capture_output=True,
    )


def test_a_git_ref_compares_the_skill_with_its_files_at_that_ref(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, aware: SkillAwareScript
) -> None:
    skill = write_skill(pytester.path, "s", {"scenario-0": {"applies-rule": 1}})
    (skill / "SKILL.md").write_text("# s\n\nAn early draft.\n")
    _git(pytester.path, "init", "-q")
    _git(pytester.path, "add", "skills")
    _git(pytester.path, "commit", "-q", "-m", "v1")
    _git(pytester.path, "tag", "v1")
    (skill / "SKILL.md").write_text(f"# s\n\n{SKILL_RULE}\n")

    pytester.runpytest("skills/s", *eval_args(endpoint.base_url, "--eval-baseline", "v1"))
    [report] = _reports(pytester.path)
    unknown = pytester.runpytest(
        "skills/s", *eval_args(endpoint.base_url, "--eval-baseline", "v9", "--eval-cache", "off")
    )

    old = [p for p in aware.prompts if "An early draft." in p]
    assert len(old) == 1
    assert SKILL_RULE not in old[0]
    assert old[0].endswith("Do the task of scenario-0.\n")
    assert report["scenarios"][0]["baseline"]["arm"] == "v1"
    assert (report["uplift"]["with"], report["uplift"]["without"]) == (100, 0)
    # The working tree is untouched: the old files were extracted elsewhere.
    assert (skill / "SKILL.md").read_text() == f"# s\n\n{SKILL_RULE}\n"
    unknown.stdout.fnmatch_lines(["*baseline v9: v9: no such git ref*"])
    unknown.assert_outcomes(errors=1)


def test_a_scenario_whose_baseline_errored_is_left_out_of_the_comparison(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint
) -> None:
    def answer(request: RecordedRequest) -> Reply:
        messages = request.json["messages"]
        if messages[0]["role"] == "system":
            names = CRITERION_LINE.findall(messages[-1]["content"])
            return Reply.chat(
                json.dumps([{"name": n, "pass": True, "reason": "ok"} for n, _ in names])
            )
        prompt = messages[-1]["content"]
        if SKILL_RULE not in prompt and "scenario-1" in prompt:
            return Reply(status=400, json={"error": {"message": "bad request"}})
        return Reply.chat(SKILLED)

    endpoint.respond_with(answer)
    skill = write_skill(pytester.path, "s", {})
    for name in ("scenario-0", "scenario-1"):
        write_scenario(skill, name, {"c": 1})

    result = pytester.runpytest(
        "skills/s", *eval_args(endpoint.base_url, "--eval-baseline", "without-skill")
    )

    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*baseline without-skill: agent: *400*",
            "    left out: scenario-1 (errored in the without-skill arm)",
        ]
    )
    report = _report(pytester.path)
    assert report["uplift"]["scenarios"] == 1
    assert report["uplift"]["left_out"] == [
        {"scenario": "scenario-1", "why": "errored in the without-skill arm"}
    ]
    assert report["scenarios"][1]["percentage"] == 100  # the gate's arm is unaffected


def test_the_comparison_is_the_same_under_xdist(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, aware: SkillAwareScript
) -> None:
    write_skill(pytester.path, "s", SIX)
    args = eval_args(endpoint.base_url, "--eval-baseline", "without-skill", "--eval-cache", "off")

    serial = pytester.runpytest("skills/s", *args, "--eval-output", "serial/")
    spread = pytester.runpytest("skills/s", *args, "--eval-output", "spread/", "-n", "2")

    [one] = (pytester.path / "serial").iterdir()
    [two] = (pytester.path / "spread").iterdir()
    first, second = json.loads(one.read_text()), json.loads(two.read_text())
    assert second["uplift"] == first["uplift"]

    def arms(report: dict) -> list[dict]:  # timings aside
        return [{**s["baseline"], "usage": None} for s in report["scenarios"]]

    assert arms(second) == arms(first)
    serial.stdout.fnmatch_lines(["openkata: * baseline=without-skill"])
    spread.stdout.fnmatch_lines(["*verdict: improves"])


def test_checks_follow_the_majority_of_trials(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint
) -> None:
    answers = iter(
        [f"{text}, in an answer long enough to judge." for text in ("ANSWER-1", "none", "ANSWER-3")]
    )

    def answer(request: RecordedRequest) -> Reply:
        messages = request.json["messages"]
        if messages[0]["role"] == "system":
            names = CRITERION_LINE.findall(messages[-1]["content"])
            verdicts = [{"name": n, "pass": True, "reason": "ok"} for n, _ in names]
            return Reply.chat(json.dumps(verdicts))
        return Reply.chat(next(answers))

    endpoint.respond_with(answer)
    skill = write_skill(pytester.path, "s", {"scenario-0": {"judged": 70}})
    _checks(skill / "evals" / "scenario-0", [ANSWER_CHECK])

    pytester.runpytest("skills/s", *eval_args(endpoint.base_url, "--eval-trials", "3"))

    [scenario] = _report(pytester.path)["scenarios"]
    check = scenario["criteria"][1]
    assert (check["name"], check["pass"], check["votes"], check["kind"]) == (
        "names-the-answer", True, {"pass": 2, "total": 3}, "check",
    )  # fmt: skip
    assert [t["percentage"] for t in scenario["trials"]] == [100, 70, 100]


def test_the_reason_cap_setting_reaches_the_judge_schema_and_only_then(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, aware: SkillAwareScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"applies-rule": 1}})

    pytester.runpytest("skills/s", *eval_args(endpoint.base_url, "--eval-cache", "off"))
    pytester.runpytest(
        "skills/s",
        *eval_args(endpoint.base_url, "--eval-cache", "off", "--eval-judge-reason-max-chars", "90"),
    )

    judged = [r for r in endpoint.requests if r.json["messages"][0]["role"] == "system"]
    reasons = [
        r.json["response_format"]["json_schema"]["schema"]["properties"]["applies-rule"][
            "properties"
        ]["reason"]
        for r in judged
    ]
    assert reasons == [{"type": "string"}, {"type": "string", "maxLength": 90}]


def test_a_baseline_added_later_runs_only_the_baseline_arm(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, aware: SkillAwareScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"applies-rule": 1}, "scenario-1": {"c": 1}})
    pytester.runpytest("skills/s", *eval_args(endpoint.base_url))
    assert (len(aware.prompts), aware.judge_calls) == (2, 2)

    result = pytester.runpytest(
        "skills/s", *eval_args(endpoint.base_url, "--eval-baseline", "without-skill")
    )

    # The own arm's answers and verdicts come from the first run's cache entries.
    assert (len(aware.prompts), aware.judge_calls) == (4, 4)
    assert all(SKILL_RULE not in prompt for prompt in aware.prompts[2:])
    result.stdout.fnmatch_lines(["*agent 2 calls*(+2 from the cache)*"])
