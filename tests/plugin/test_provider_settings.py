"""A provider's own settings: an agent of another distribution declares two settings, which
join the settings table under ``agents.parrot.*`` and are configured from every source (option,
ini key, YAML, environment variable, keyword of ``evaluate()``) as a built-in setting is; the
agent reads them and its answer shows them."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.distributions import install_distribution
from tests.support.endpoint import ScriptedEndpoint
from tests.support.evals import EvalScript, write_skill

PARROT = '''\
"""An agent that says its greeting as many times as it is told: both are its own settings."""

from contextlib import nullcontext

from pytest_openkata import AgentInvocation, ProviderSetting

GREETING = ProviderSetting(name="greeting", type=str, default="hello", help="what the parrot says")
TIMES = ProviderSetting(name="times", type=int, default=1, help="how often it says it")


class ParrotAgent:
    name = "parrot"
    install_hint = ""
    output_in_errors = True
    credential_mounts = ()
    endpoint = "parrot"
    settings = (GREETING, TIMES)

    def __init__(self, settings):
        greeting = GREETING.value_in(settings.provider_settings, "agents.parrot")
        times = TIMES.value_in(settings.provider_settings, "agents.parrot")
        self.says = "the parrot says " + " ".join([greeting] * times)

    def invocation(self, *, model, workspace_agent, sandboxed=False):
        argv = ["sh", "-c", 'printf "%s" "$PARROT_SAYS"']
        return AgentInvocation(argv, {"PARROT_SAYS": self.says})

    def clean(self, output):
        return output.strip()

    def workspace_files(self):
        return ()

    def host_folder(self, skill_dir):
        return nullcontext(None)
'''

MISDECLARED = """\
class MisdeclaredProvider:
    settings = ("region",)

    def __init__(self, settings):
        raise RuntimeError("never made")
"""


@pytest.fixture(scope="module")
def parrot_distribution(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install_distribution(
        tmp_path_factory,
        "openkata-parrot",
        PARROT,
        {"pytest_openkata.agents": {"parrot": "openkata_parrot:ParrotAgent"}},
    )


@pytest.fixture
def with_parrot(
    parrot_distribution: Path, monkeypatch: pytest.MonkeyPatch, pytester: pytest.Pytester
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(parrot_distribution))
    write_skill(pytester.path, "s", {"scenario-a": {"judged": 10}})


def _run(pytester: pytest.Pytester, endpoint: ScriptedEndpoint, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "skills",
        "--eval-backend", "parrot",
        "--eval-judge-backend", "http",
        "--eval-base-url", endpoint.base_url,
        *args,
    )  # fmt: skip


def _judged(endpoint: ScriptedEndpoint) -> str:
    """The agent's answer as the last judge call was shown it."""
    return str(endpoint.requests[-1].json["messages"][-1]["content"])


def test_the_declared_settings_are_options_and_ini_keys_with_their_help(
    pytester: pytest.Pytester, with_parrot: None
) -> None:
    result = pytester.runpytest_subprocess("--help")

    text = " ".join(result.stdout.str().split())
    assert "--eval-agents-parrot-greeting=TEXT what the parrot says (default hello)" in text
    assert "--eval-agents-parrot-times=N how often it says it (default 1)" in text
    assert "eval_agents_parrot_greeting (string): what the parrot says (default hello)" in text


def test_the_defaults_reach_the_agent(
    pytester: pytest.Pytester, with_parrot: None, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    result = _run(pytester, endpoint)

    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert "the parrot says hello\n" in _judged(endpoint)


@pytest.mark.parametrize("source", ["option", "ini", "yaml", "environment"])
def test_each_source_configures_the_agent_as_it_does_a_built_in_setting(
    pytester: pytest.Pytester,
    with_parrot: None,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    monkeypatch: pytest.MonkeyPatch,
    source: str,
) -> None:
    args: list[str] = []
    if source == "option":
        args = ["--eval-agents-parrot-greeting", "ahoy", "--eval-agents-parrot-times=2"]
    elif source == "ini":
        pytester.makeini(
            "[pytest]\neval_agents_parrot_greeting = ahoy\neval_agents_parrot_times = 2\n"
        )
    elif source == "yaml":
        (pytester.path / ".openkata-eval.yaml").write_text(
            "agents:\n  parrot:\n    greeting: ahoy\n    times: 2\n"
        )
    else:
        monkeypatch.setenv("OPENKATA_EVAL_AGENTS_PARROT_GREETING", "ahoy")
        monkeypatch.setenv("OPENKATA_EVAL_AGENTS_PARROT_TIMES", "2")

    result = _run(pytester, endpoint, *args)

    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert "the parrot says ahoy ahoy\n" in _judged(endpoint)


def test_a_later_layer_wins_and_a_changed_value_is_not_answered_from_the_cache(
    pytester: pytest.Pytester,
    with_parrot: None,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (pytester.path / ".openkata-eval.yaml").write_text("agents:\n  parrot:\n    greeting: ahoy\n")
    assert _run(pytester, endpoint).ret == pytest.ExitCode.OK
    assert "the parrot says ahoy\n" in _judged(endpoint)

    monkeypatch.setenv("OPENKATA_EVAL_AGENTS_PARROT_GREETING", "hullo")
    result = _run(pytester, endpoint)

    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert script.judge_calls == 2  # the judge saw the new answer: no cached one was reused
    assert "the parrot says hullo\n" in _judged(endpoint)


def test_the_keyword_of_evaluate_configures_the_agent(
    pytester: pytest.Pytester, with_parrot: None, endpoint: ScriptedEndpoint, script: EvalScript
) -> None:
    code = textwrap.dedent(f"""\
        from pytest_openkata import evaluate
        (summary,) = evaluate(
            "skills",
            backend="parrot",
            judge_backend="http",
            http={{"base_url": {endpoint.base_url!r}}},
            agents={{"parrot": {{"greeting": "ahoy", "times": 3}}}},
        )
        print("overall", summary.overall)
        """)

    result = pytester.run(sys.executable, "-c", code)

    assert result.ret == 0, result.stderr.str()
    assert "overall 100" in result.stdout.str()
    assert "the parrot says ahoy ahoy ahoy\n" in _judged(endpoint)


@pytest.mark.parametrize(
    ("given", "error"),
    [
        (
            ["--eval-agents-parrot-times", "often"],
            "*option --eval-agents-parrot-times: 'often' is not a whole number*",
        ),
        (
            ["-o", "eval_agents_parrot_times=2.5"],
            "*ini option eval_agents_parrot_times: '2.5' is not a whole number*",
        ),
    ],
    ids=["option", "ini"],
)
def test_a_value_that_does_not_parse_is_a_usage_error_naming_its_source_and_key(
    pytester: pytest.Pytester, with_parrot: None, given: list[str], error: str
) -> None:
    result = pytester.runpytest_subprocess("--collect-only", *given)

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([error])


def test_a_setting_the_agent_does_not_declare_is_an_unknown_key(
    pytester: pytest.Pytester, with_parrot: None
) -> None:
    (pytester.path / ".openkata-eval.yaml").write_text("agents:\n  parrot:\n    colour: red\n")

    result = pytester.runpytest_subprocess("--collect-only")

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*.openkata-eval.yaml: unknown key 'agents.parrot.colour'; known keys: *"]
    )
    assert "agents.parrot.greeting, agents.parrot.times" in result.stderr.str()


def test_a_declaration_that_cannot_be_read_is_a_warning_and_pytest_still_runs(
    pytester: pytest.Pytester,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    site = install_distribution(
        tmp_path_factory,
        "openkata-misdeclared",
        MISDECLARED,
        {"pytest_openkata.sandboxes": {"misdeclared": "openkata_misdeclared:MisdeclaredProvider"}},
    )
    monkeypatch.setenv("PYTHONPATH", str(site))
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")

    result = pytester.runpytest_subprocess("-W", "always::pytest.PytestConfigWarning")

    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(
        [
            "*PytestConfigWarning: pytest-openkata: the sandbox provider 'misdeclared' declares "
            "settings that are not a tuple of ProviderSetting: ('region',)",
        ]
    )


KEYWORD_GRADER = '''\
"""A grader that looks for one word in the agent's answer: the word is its own setting."""

from pytest_openkata import CriterionResult, Grading, ProviderSetting

WORD = ProviderSetting(name="word", type=str, default="absent", help="the word to look for")


class KeywordGrader:
    name = "keyword"
    settings = (WORD,)

    def grade(self, task):
        word = WORD.value_in(task.context.provider_settings, "graders.keyword")
        found = word in task.agent.text
        return Grading([CriterionResult.judged("says-it", 5, found, f"looked for {word!r}")])
'''


def test_a_grader_reads_the_setting_it_declares(
    pytester: pytest.Pytester,
    with_parrot: None,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    endpoint: ScriptedEndpoint,
    script: EvalScript,
) -> None:
    grader = install_distribution(
        tmp_path_factory,
        "openkata-keyword",
        KEYWORD_GRADER,
        {"pytest_openkata.graders": {"keyword": "openkata_keyword:KeywordGrader"}},
    )
    # The parrot's folder stays on the path beside the grader's.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([os.environ["PYTHONPATH"], str(grader)]))

    by_default = _run(pytester, endpoint, "--eval-cache", "off")
    told = _run(pytester, endpoint, "--eval-cache", "off", "--eval-graders-keyword-word", "parrot")

    # The parrot's answer holds "parrot" but not "absent": only the run told the word passes.
    assert by_default.ret == pytest.ExitCode.TESTS_FAILED, by_default.stdout.str()
    by_default.stdout.fnmatch_lines(["*says-it*looked for 'absent'*"])
    assert told.ret == pytest.ExitCode.OK, told.stdout.str()
