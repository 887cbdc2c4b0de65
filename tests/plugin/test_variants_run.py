"""Tessl's variants file as the arms of a pytest run: the variants it names are the own arm
and the baseline, each with its copy of the skill, the reports name them by their labels,
and a file or a variant that cannot be run errors the scenarios it concerns, naming the file
and the key, while the rest of the run goes on."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pytest_openkata.core.variants import ACTIVATION_LINE
from tests.support.endpoint import RecordedRequest, Reply, ScriptedEndpoint
from tests.support.evals import CRITERION_LINE, EvalScript, eval_args, reports_under, write_skill
from tests.support.scripted_claude import install_scripted_claude

REWRITTEN = "Apply the REWRITTEN rule."  # the rewrite's SKILL.md
ORIGINAL = "Follow the rules."  # the text write_skill puts into every SKILL.md


@dataclass
class ArmScript:
    """The agent names which skill text its prompt held; the judge passes ``rewritten`` only
    for an answer of the rewrite (every other criterion passes)."""

    prompts: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: RecordedRequest) -> Reply:
        messages = request.json["messages"]
        with self._lock:
            if messages[0]["role"] == "system":
                user = messages[-1]["content"]
                answer = user.split("## Evaluation Criteria")[0]
                verdicts = [
                    {
                        "name": name,
                        "pass": "REWRITE" in answer if name == "rewritten" else True,
                        "reason": "judged",
                    }
                    for name, _ in CRITERION_LINE.findall(user)
                ]
                return Reply.chat(json.dumps(verdicts))
            prompt = messages[-1]["content"]
            self.prompts.append(prompt)
            if REWRITTEN in prompt:
                return Reply.chat("REWRITE answer, by the rewritten skill.")
            if ORIGINAL in prompt:
                return Reply.chat("An answer by the skill as it is.")
            return Reply.chat("An answer without any skill.")


@pytest.fixture
def arms(endpoint: ScriptedEndpoint) -> ArmScript:
    script = ArmScript()
    endpoint.respond_with(script)
    return script


def _rewrite(root: Path, *names: str) -> None:
    """A plugin folder ``rewrite/plugin`` holding a rewritten copy of each skill ``names``."""
    for name in names:
        copy = root / "rewrite" / "plugin" / "skills" / name
        copy.mkdir(parents=True)
        (copy / "SKILL.md").write_text(f"# {name}\n\n{REWRITTEN}\n")


def _arms_file(root: Path, variants: object) -> None:
    (root / "arms.json").write_text(json.dumps(variants))


VARIANTS = [
    {"label": "current", "model": "m1", "includeContext": True},
    {
        "label": "rewrite-1",
        "model": "m1",
        "forceContextActivation": True,
        "fixtures": {"plugin": {"localPath": "./rewrite/plugin"}},
    },
    {"label": "no-skill", "model": "m1", "includeContext": False, "notes": "control"},
]


def test_the_variants_file_gives_the_run_its_arms_and_the_reports_their_labels(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, arms: ArmScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"rewritten": 50, "clear": 50}})
    _rewrite(pytester.path, "s")
    _arms_file(pytester.path, VARIANTS)

    result = pytester.runpytest(
        "skills/s",
        *eval_args(endpoint.base_url, "--eval-model", "m1", "--eval-markdown", "run.md"),
        "--eval-html",
        "run.html",
        "--eval-variants",
        "arms.json",
        "--eval-variant",
        "rewrite-1",
    )

    # The own arm had the rewrite's copy of the skill, the baseline no skill at all.
    assert sorted(REWRITTEN in p for p in arms.prompts) == [False, True]
    assert not any(ORIGINAL in p for p in arms.prompts)
    [report_path] = reports_under(pytester.path)
    report = json.loads(report_path.read_text())
    assert report["config"]["variant"] == "rewrite-1"
    assert report["scenarios"][0]["percentage"] == 100
    assert report["scenarios"][0]["baseline"]["arm"] == "no-skill"
    assert report["scenarios"][0]["baseline"]["percentage"] == 50
    assert (report["uplift"]["arm"], report["uplift"]["difference"]) == ("no-skill", 50)
    result.stdout.fnmatch_lines(
        [
            "openkata: * variant=rewrite-1 baseline=no-skill",
            "*PytestConfigWarning: pytest-openkata: arms.json: [[]2] (no-skill).notes: unknown "
            "key, ignored",
            "*Baseline (no-skill): 50/100 (50%); with the skill +50 points",
        ]
    )
    markdown = (pytester.path / "run.md").read_text()
    assert "; variant rewrite-1; baseline no-skill." in markdown
    page = (pytester.path / "run.html").read_text()
    assert ", variant rewrite-1, baseline arm no-skill" in page
    assert result.ret == pytest.ExitCode.OK


def test_the_arms_are_the_same_under_xdist(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, arms: ArmScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"rewritten": 50, "clear": 50}})
    _rewrite(pytester.path, "s")
    _arms_file(pytester.path, VARIANTS)

    result = pytester.runpytest(
        "skills/s",
        "-n",
        "1",
        *eval_args(endpoint.base_url, "--eval-model", "m1"),
        "--eval-variants",
        "arms.json",
        "--eval-variant",
        "rewrite-1",
    )

    assert sorted(REWRITTEN in p for p in arms.prompts) == [False, True]
    [report_path] = reports_under(pytester.path)
    report = json.loads(report_path.read_text())
    assert report["config"]["variant"] == "rewrite-1"
    assert report["scenarios"][0]["baseline"]["arm"] == "no-skill"
    assert report["uplift"]["difference"] == 50
    assert result.ret == pytest.ExitCode.OK


def test_the_estimate_counts_the_baseline_arm_the_variants_file_gives(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"rewritten": 1}})
    _arms_file(pytester.path, VARIANTS)

    alone = pytester.runpytest("skills/s", *eval_args(endpoint.base_url, "--eval-estimate"))
    both = pytester.runpytest(
        "skills/s",
        *eval_args(endpoint.base_url, "--eval-estimate", "--eval-model", "m1"),
        "--eval-variants",
        "arms.json",
    )

    alone.stdout.fnmatch_lines(["skills/s: 1 scenario; agent 1 calls, *"])
    # The baseline arm is counted at the size of the own arm's prompt.
    both.stdout.fnmatch_lines(["skills/s: 1 scenario; agent 2 calls, *"])
    assert endpoint.requests == []


def test_a_bad_variants_file_errors_every_scenario_naming_the_file_and_the_key(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, arms: ArmScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"rewritten": 1}})
    write_skill(pytester.path, "t", {"scenario-0": {"rewritten": 1}})
    _arms_file(pytester.path, [{"label": "current", "includeContext": "yes"}])

    result = pytester.runpytest(
        "skills", *eval_args(endpoint.base_url), "--eval-variants", "arms.json"
    )

    # fnmatch reads "[" as a character class: "[[]" is a literal one.
    message = "arms.json: [[]0] (current).includeContext: must be true or false, not a string"
    result.stdout.fnmatch_lines(
        [
            *[f"scenario error: {message}"] * 2,
            f"*PytestConfigWarning: pytest-openkata: {message}",
            "skills/s",
            f"    ERROR: {message}",
            "skills/t",
            f"    ERROR: {message}",
        ]
    )
    assert "variant=" not in result.stdout.str()  # no variant: the file gives none
    result.assert_outcomes(errors=2)
    assert arms.prompts == []  # no agent ran on a file that cannot be run


def test_a_variant_that_cannot_run_one_skill_errors_that_skill_only(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, arms: ArmScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"rewritten": 1}})
    write_skill(pytester.path, "t", {"scenario-0": {"rewritten": 1}})
    _rewrite(pytester.path, "s")  # the rewrite holds no copy of t
    _arms_file(pytester.path, VARIANTS)

    result = pytester.runpytest(
        "skills",
        *eval_args(endpoint.base_url, "--eval-model", "m1"),
        "--eval-variants",
        "arms.json",
        "--eval-variant",
        "rewrite-1",
        "--eval-threshold",
        "0",
    )

    result.stdout.fnmatch_lines(
        [
            "*arms.json: variant 'rewrite-1': fixtures: none holds the skill t (looked in "
            "fixtures.plugin (./rewrite/plugin), their skills/t and t folders)*"
        ]
    )
    result.assert_outcomes(passed=1, errors=1)
    s, t = [json.loads(path.read_text()) for path in reports_under(pytester.path)]
    assert s["scenarios"][0]["percentage"] == 100
    assert s["scenarios"][0]["baseline"]["arm"] == "no-skill"
    assert t["scenarios"][0]["error"].startswith("arms.json: variant 'rewrite-1': fixtures:")


def test_a_variant_of_another_model_is_refused_with_the_run_that_takes_it(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, arms: ArmScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"rewritten": 1}})
    _arms_file(pytester.path, [{"label": "big", "model": "m2"}])

    result = pytester.runpytest(
        "skills/s",
        *eval_args(endpoint.base_url, "--eval-model", "m1"),
        "--eval-variants",
        "arms.json",
    )

    result.stdout.fnmatch_lines(
        [
            "*arms.json: variant 'big': model: m2 is not this run's agent model (m1); a run has "
            "one agent model: run this variant as a run of its own with --eval-variant big and "
            "--eval-model m2*"
        ]
    )
    result.assert_outcomes(errors=1)
    assert arms.prompts == []


def test_an_installed_variant_s_copy_is_installed_and_forced_activation_is_a_line_before_the_task(
    pytester: pytest.Pytester,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
) -> None:
    claude, path = install_scripted_claude(tmp_path / "bin")  # Claude Code's stand-in
    monkeypatch.setenv("PATH", path)
    task = "Do the task of scenario-0."
    claude.plan("s", {task: ["load"]})
    write_skill(pytester.path, "s", {"scenario-0": {"x": 1}})
    _rewrite(pytester.path, "s")
    notes = pytester.path / "rewrite" / "plugin" / "skills" / "s" / "references" / "notes.md"
    notes.parent.mkdir()
    notes.write_text("Only the rewrite has notes.\n")
    _arms_file(
        pytester.path,
        [
            {
                "label": "rewrite-1",
                "agent": "claude",
                "fixtures": {"p": {"localPath": "rewrite/plugin"}},
            },
            {"label": "no-skill", "agent": "claude", "includeContext": False},
        ],
    )

    result = pytester.runpytest_subprocess(
        "skills/s",
        "--eval-backend", "claude",
        "--eval-judge-backend", "http",
        "--eval-base-url", endpoint.base_url,
        "--eval-skill-delivery", "installed",
        "--eval-variants", "arms.json",
        "--eval-threshold", "0",
    )  # fmt: skip

    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    calls = {str(call["prompt"]).strip(): call for call in claude.calls()}
    forced = calls[f"{ACTIVATION_LINE}\n\n{task}"]
    assert forced["files"] == [
        ".claude/skills/s/SKILL.md",
        ".claude/skills/s/references/notes.md",
    ]
    assert calls[task]["files"] == []  # the baseline: no skill, and no line
    assert len(calls) == 2


def test_a_variant_label_the_file_does_not_have_stops_the_run_before_any_model_call(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, arms: ArmScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"rewritten": 1}})
    _arms_file(pytester.path, VARIANTS)

    result = pytester.runpytest(
        "skills/s",
        *eval_args(endpoint.base_url, "--eval-model", "m1"),
        "--eval-variants",
        "arms.json",
        "--eval-variant",
        "rewrite-2",
    )

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*pytest-openkata: arms.json: no variant is labelled 'rewrite-2' (the variant "
            "setting); its labels: current, rewrite-1, no-skill"
        ]
    )
    assert reports_under(pytester.path) == []  # no report names an arm that never ran
    assert endpoint.requests == []


def test_a_bad_variants_file_is_said_once_under_xdist(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, arms: ArmScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"rewritten": 1}})
    write_skill(pytester.path, "t", {"scenario-0": {"rewritten": 1}})
    _arms_file(pytester.path, [{"label": "same"}])

    result = pytester.runpytest(
        "skills", "-n", "2", *eval_args(endpoint.base_url), "--eval-variants", "arms.json"
    )

    said = "PytestConfigWarning: pytest-openkata: arms.json: [0].label: 'same' is reserved"
    assert result.stdout.str().count(said) == 1
    result.assert_outcomes(errors=2)  # each scenario errors with it, once
    assert arms.prompts == []


def test_arms_with_and_without_the_installed_skill_do_not_share_cached_answers(
    pytester: pytest.Pytester,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
) -> None:
    claude, path = install_scripted_claude(tmp_path / "bin")  # Claude Code's stand-in
    monkeypatch.setenv("PATH", path)
    task = "Do the task of scenario-0."
    claude.plan("s", {task: ["load"]})
    write_skill(pytester.path, "s", {"scenario-0": {"x": 1}})
    # Two arms whose prompts are the same task: only whether the skill is installed differs.
    _arms_file(
        pytester.path,
        [{"label": "quiet", "forceContextActivation": False}, {"label": "bare", "fixtures": {}}],
    )

    def run(variant: str) -> pytest.RunResult:
        return pytester.runpytest_subprocess(
            "skills/s",
            "--eval-backend", "claude",
            "--eval-judge-backend", "http",
            "--eval-base-url", endpoint.base_url,
            "--eval-skill-delivery", "installed",
            "--eval-variants", "arms.json",
            "--eval-variant", variant,
            "--eval-baseline", "none",
            "--eval-threshold", "0",
        )  # fmt: skip

    with_skill, without = run("quiet"), run("bare")

    assert with_skill.ret == without.ret == pytest.ExitCode.OK, without.stdout.str()
    first, second = claude.calls()  # the arm without the skill was not served from the cache
    assert [str(first["prompt"]).strip(), str(second["prompt"]).strip()] == [task, task]
    assert first["files"] == [".claude/skills/s/SKILL.md"]
    assert second["files"] == []


def test_a_single_fixture_is_the_copy_of_its_own_skill_or_of_a_run_s_only_skill(
    pytester: pytest.Pytester, endpoint: ScriptedEndpoint, arms: ArmScript
) -> None:
    write_skill(pytester.path, "s", {"scenario-0": {"rewritten": 1}})
    write_skill(pytester.path, "t", {"scenario-0": {"rewritten": 1}})
    draft = pytester.path / "draft"
    draft.mkdir()
    (draft / "SKILL.md").write_text(f"---\nname: s\n---\n{REWRITTEN}\n")
    _arms_file(pytester.path, [{"label": "draft", "fixtures": {"d": {"localPath": "./draft"}}}])
    options = (*eval_args(endpoint.base_url), "--eval-variants", "arms.json")

    both = pytester.runpytest("skills", *options, "--eval-threshold", "0")
    prompts = len(arms.prompts)
    alone = pytester.runpytest("skills/t", *options, "--eval-threshold", "0")

    both.assert_outcomes(passed=1, errors=1)  # s has its copy; t is not given s's
    both.stdout.fnmatch_lines(
        ["*arms.json: variant 'draft': fixtures.d: ./draft holds the skill s, not t: *"]
    )
    assert prompts == 1
    assert REWRITTEN in arms.prompts[0]
    alone.assert_outcomes(passed=1)  # a run of t alone: the only fixture is t's copy
    assert REWRITTEN in arms.prompts[-1]
