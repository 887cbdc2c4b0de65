"""Tessl's variants (arms) file: reading it, every field's validation, and the two arms of a
run it gives a skill."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.core.arms import ArmError
from pytest_openkata.core.variants import (
    Variant,
    VariantPlan,
    VariantsError,
    VariantsFile,
    plan_variants,
    read_variants,
    run_variants,
)

SHOWN = "evals/arms.json"


def _file(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "arms.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def _read(tmp_path: Path, data: object) -> VariantsFile:
    return read_variants(_file(tmp_path, data), SHOWN)


def _skill(folder: Path, text: str = "# s\n") -> Path:
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(text)
    return folder


def _plan(
    file: VariantsFile,
    root: Path,
    *,
    variant: str = "",
    baseline: str = "",
    prompt_delivery: bool = True,
) -> VariantPlan:
    return plan_variants(
        file,
        variant=variant,
        baseline=baseline,
        root=root,
        model="m1",
        backend="http",
        sandbox_agent="claude",
        prompt_delivery=prompt_delivery,
    )


# --- reading ---------------------------------------------------------------------------------


def test_a_file_of_tessl_s_shape_reads_with_its_defaults(tmp_path: Path) -> None:
    file = _read(
        tmp_path,
        [
            {"label": "with", "agent": "claude", "model": "m1", "includeContext": True},
            {"label": "none", "includeContext": False},
            {
                "label": "rewrite",
                "forceContextActivation": False,
                "fixtures": {"plugin": {"localPath": "./rewrite/plugin"}},
            },
        ],
    )

    assert file.variants == (
        Variant("with", agent="claude", model="m1"),
        # forceContextActivation defaults to includeContext.
        Variant("none", include_context=False, force_activation=False),
        Variant("rewrite", force_activation=False, fixtures=(("plugin", "./rewrite/plugin"),)),
    )
    assert file.warnings == ()
    assert file.shown == SHOWN


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("{not json", "evals/arms.json: not valid JSON: "),
        ({"label": "a"}, "evals/arms.json: must be an array of variants, not an object"),
        ([], "evals/arms.json: holds no variant"),
        (["a"], "evals/arms.json: [0]: a variant must be an object, not a string"),
        ([{"agent": "claude"}], "evals/arms.json: [0].label: missing"),
        ([{"label": 3}], "evals/arms.json: [0].label: must be a string, not a number"),
        ([{"label": " "}], "evals/arms.json: [0].label: must not be empty"),
        ([{"label": "two words"}], "evals/arms.json: [0].label: must not hold white space"),
        ([{"label": "-x"}], "evals/arms.json: [0].label: must be printable"),
        ([{"label": "a\x1b[31m"}], "evals/arms.json: [0].label: must hold printable characters"),
        (
            [{"label": "a", "includeContext": "yes"}],
            "evals/arms.json: [0] (a).includeContext: must be true or false, not a string",
        ),
        (
            [{"label": "a", "forceContextActivation": 1}],
            "evals/arms.json: [0] (a).forceContextActivation: must be true or false, not a number",
        ),
        ([{"label": "a", "agent": ["x"]}], "evals/arms.json: [0] (a).agent: must be a string"),
        ([{"label": "a", "model": None}], "evals/arms.json: [0] (a).model: must be a string"),
        ([{"label": "a", "fixtures": []}], "evals/arms.json: [0] (a).fixtures: must be an object"),
        (
            [{"label": "a", "fixtures": {"p": "./p"}}],
            "evals/arms.json: [0] (a).fixtures.p: must be an object, not a string",
        ),
        (
            [{"label": "a", "fixtures": {"p": {}}}],
            "evals/arms.json: [0] (a).fixtures.p.localPath: missing",
        ),
        (
            [{"label": "a", "model": "m\x1b[2J"}],
            "evals/arms.json: [0] (a).model: must hold printable characters only",
        ),
        (
            [{"label": "a", "fixtures": {"p\n": {"localPath": "./p"}}}],
            "evals/arms.json: [0] (a).fixtures: a fixture's name must be printable",
        ),
        (
            [{"label": "a", "fixtures": {"p": {"localPath": "./p\r"}}}],
            "evals/arms.json: [0] (a).fixtures.p.localPath: must hold printable characters only",
        ),
        (
            [{"label": "a", "fixtures": {"p": {"localPath": ""}}}],
            "evals/arms.json: [0] (a).fixtures.p.localPath: must not be empty",
        ),
        (
            [{"label": "a"}, {"label": "a"}],
            "evals/arms.json: [1].label: 'a' is the label of an earlier variant",
        ),
    ],
)
def test_a_bad_file_is_an_error_naming_the_file_and_the_key(
    tmp_path: Path, data: object, message: str
) -> None:
    with pytest.raises(VariantsError) as raised:
        _read(tmp_path, data)
    assert str(raised.value).startswith(message)
    assert isinstance(raised.value, ArmError)  # a baseline arm that cannot be made


def test_a_missing_file_names_the_setting_that_names_it(tmp_path: Path) -> None:
    with pytest.raises(VariantsError, match=r"^evals/arms.json: no such file \(the variants"):
        read_variants(tmp_path / "absent.json", SHOWN)


def test_unknown_keys_are_warnings_and_the_variant_still_reads(tmp_path: Path) -> None:
    file = _read(
        tmp_path,
        [
            {
                "label": "a",
                "fixtureNames": ["p"],
                "fixtures": {"p": {"localPath": "./p", "installPath": "."}},
            },
            {"label": "b", "includeContext": False, "fixtures": {"p": {"localPath": "./p"}}},
        ],
    )

    assert [v.label for v in file.variants] == ["a", "b"]
    assert file.warnings == (
        "evals/arms.json: [0] (a).fixtures.p.installPath: unknown key, ignored",
        "evals/arms.json: [0] (a).fixtureNames: unknown key, ignored",
        "evals/arms.json: [1] (b).fixtures: not installed, as includeContext is false",
    )
    several = _read(
        tmp_path,
        [{"label": "a", "fixtures": {"p": {"localPath": "./p"}, "q": {"localPath": "./q"}}}],
    )
    assert several.warnings == (
        "evals/arms.json: [0] (a).fixtures: only the one that holds the skill evaluated is "
        "installed, not the other 1",
    )


# --- the run's two arms ----------------------------------------------------------------------


def test_the_own_arm_is_the_first_with_the_context_and_the_baseline_the_first_without(
    tmp_path: Path,
) -> None:
    file = _read(
        tmp_path,
        [
            {"label": "none", "includeContext": False},
            {"label": "with"},
            {"label": "other"},
            {"label": "none-2", "includeContext": False},
        ],
    )
    skill = _skill(tmp_path / "skills" / "s")

    own, baseline = _plan(file, tmp_path).arms(skill, sandboxed=False)

    assert (own.name, own.label, own.skill, own.activation) == ("", "with", True, False)
    assert baseline is not None
    assert (baseline.name, baseline.label, baseline.skill) == ("none", "none", False)


def test_the_settings_name_either_arm_by_its_label(tmp_path: Path) -> None:
    file = _read(
        tmp_path,
        [{"label": "with"}, {"label": "other"}, {"label": "none", "includeContext": False}],
    )
    skill = _skill(tmp_path / "skills" / "s")

    own, baseline = _plan(file, tmp_path, variant="other", baseline="with").arms(
        skill, sandboxed=False
    )

    assert own.label == "other"
    assert baseline is not None
    assert (baseline.name, baseline.skill) == ("with", True)
    # A baseline that is no label keeps its meaning (without-skill, a git ref).
    plan = _plan(file, tmp_path, baseline="without-skill")
    assert plan.baseline is None
    # same: the own variant twice, its copy of the skill in both arms.
    copy = _skill(tmp_path / "copy" / "s")
    rewrite = _read(tmp_path, [{"label": "r", "fixtures": {"c": {"localPath": "copy"}}}])
    own, same = _plan(rewrite, tmp_path, baseline="same").arms(skill, sandboxed=False)
    assert same is not None
    assert (own.skill, same.name, same.label, same.skill) == (copy, "same", "r", copy)
    # The default baseline is of the own variant's agent and model.
    models = _read(
        tmp_path,
        [
            {"label": "with", "model": "m1"},
            {"label": "none-m2", "model": "m2", "includeContext": False},
            {"label": "none-claude", "agent": "claude", "includeContext": False},
            {"label": "none-m1", "model": "m1", "includeContext": False},
        ],
    )
    assert _plan(models, tmp_path).baseline_name == "none-claude"
    other_model = _read(
        tmp_path,
        [{"label": "with", "model": "m1"}, {"label": "x", "model": "m2", "includeContext": False}],
    )
    assert _plan(other_model, tmp_path).baseline is None
    # Without a variant without the context, and no baseline set, there is no baseline arm.
    only = _read(tmp_path, [{"label": "with"}])
    assert _plan(only, tmp_path).arms(skill, sandboxed=False)[1] is None


@pytest.mark.parametrize(
    ("data", "variant", "baseline", "message"),
    [
        ([{"label": "a"}], "b", "", "evals/arms.json: no variant is labelled 'b' (the variant "
         "setting); its labels: a"),
        ([{"label": "a", "includeContext": False}], "", "", "evals/arms.json: no variant "
         "includes the context (includeContext); name the run's own arm with --eval-variant, "
         "one of: a"),
        ([{"label": "a"}], "a", "a", "evals/arms.json: the variant 'a' cannot be both arms"),
    ],
)  # fmt: skip
def test_labels_the_file_does_not_have_are_errors_naming_its_labels(
    tmp_path: Path, data: object, variant: str, baseline: str, message: str
) -> None:
    with pytest.raises(VariantsError) as raised:
        _plan(_read(tmp_path, data), tmp_path, variant=variant, baseline=baseline)
    assert str(raised.value).startswith(message)


def test_a_fixture_gives_the_arm_its_copy_of_the_skill(tmp_path: Path) -> None:
    skill = _skill(tmp_path / "skills" / "s")
    plugin = tmp_path / "rewrite" / "plugin"
    copy = _skill(plugin / "skills" / "s", "# s, rewritten\n")
    _skill(plugin / "skills" / "neighbour")
    renamed = _skill(tmp_path / "draft")
    file = _read(
        tmp_path,
        [
            {
                "label": "rewrite",
                "fixtures": {
                    "other": {"localPath": "./draft"},
                    "p": {"localPath": "rewrite/plugin"},
                },
            },
            {"label": "draft", "fixtures": {"d": {"localPath": "./draft"}}},
            {"label": "folder", "fixtures": {"d": {"localPath": "skills/s"}}},
        ],
    )  # fmt: skip

    def skill_of(label: str) -> Path | bool:
        return _plan(file, tmp_path, variant=label).arms(skill, sandboxed=False)[0].skill

    assert skill_of("rewrite") == copy  # the plugin's skills/<name>
    assert skill_of("draft") == renamed  # the only fixture, whatever its folder's name
    assert skill_of("folder") == tmp_path / "skills" / "s"


def test_a_fixture_that_holds_no_such_skill_is_an_error_naming_where_it_looked(
    tmp_path: Path,
) -> None:
    skill = _skill(tmp_path / "skills" / "s")
    _skill(tmp_path / "p1" / "skills" / "other")
    (tmp_path / "p2").mkdir()
    file = _read(
        tmp_path,
        [
            {"label": "a", "fixtures": {"one": {"localPath": "p1"}, "two": {"localPath": "p2"}}},
            {"label": "b", "fixtures": {"gone": {"localPath": "./absent"}}},
        ],
    )

    with pytest.raises(VariantsError) as none:
        _plan(file, tmp_path, variant="a").arms(skill, sandboxed=False)
    with pytest.raises(VariantsError) as absent:
        _plan(file, tmp_path, variant="b").arms(skill, sandboxed=False)

    assert str(none.value) == (
        "evals/arms.json: variant 'a': fixtures: none holds the skill s (looked in "
        "fixtures.one (p1), fixtures.two (p2), their skills/s and s folders)"
    )
    assert str(absent.value) == (
        "evals/arms.json: variant 'b': fixtures.gone.localPath: ./absent is not a folder "
        "(paths are relative to the rootdir)"
    )


def test_a_variant_of_another_agent_or_model_is_refused_with_the_run_that_would_take_it(
    tmp_path: Path,
) -> None:
    skill = _skill(tmp_path / "skills" / "s")
    file = _read(
        tmp_path,
        [
            {"label": "same", "agent": "http", "model": "m1"},
            {"label": "bigger", "model": "m2"},
            {"label": "codex", "agent": "codex"},
        ],
    )

    own, _ = _plan(file, tmp_path, variant="same").arms(skill, sandboxed=False)
    assert own.label == "same"
    with pytest.raises(VariantsError) as model:
        _plan(file, tmp_path, variant="bigger").arms(skill, sandboxed=False)
    with pytest.raises(VariantsError) as agent:
        _plan(file, tmp_path, variant="codex").arms(skill, sandboxed=True)

    assert str(model.value) == (
        "evals/arms.json: variant 'bigger': model: m2 is not this run's agent model (m1); a run "
        "has one agent model: run this variant as a run of its own with --eval-variant bigger "
        "and --eval-model m2"
    )
    assert str(agent.value) == (
        "evals/arms.json: variant 'codex': agent: codex is not this run's agent (claude); a run "
        "has one agent: run this variant as a run of its own with --eval-variant codex and "
        "--eval-sandbox-agent codex"
    )
    # A direct scenario's agent is the backend, a sandboxed one's the sandbox agent CLI.
    with pytest.raises(VariantsError, match="agent: http is not this run's agent \\(claude\\)"):
        _plan(file, tmp_path, variant="same").arms(skill, sandboxed=True)


def test_force_context_activation_is_the_activation_line_of_an_installed_skill(
    tmp_path: Path,
) -> None:
    skill = _skill(tmp_path / "skills" / "s")
    file = _read(
        tmp_path,
        [{"label": "forced"}, {"label": "free", "forceContextActivation": False}],
    )

    forced = _plan(file, tmp_path, prompt_delivery=False).arms(skill, sandboxed=False)[0]
    free = _plan(file, tmp_path, variant="free", prompt_delivery=False).arms(
        skill, sandboxed=False
    )[0]
    pasted = _plan(file, tmp_path).arms(skill, sandboxed=False)[0]

    assert (forced.activation, free.activation, pasted.activation) == (True, False, False)
    with pytest.raises(VariantsError) as raised:  # pasted into the prompt: always in use
        _plan(file, tmp_path, variant="free").arms(skill, sandboxed=False)
    assert str(raised.value).startswith(
        "evals/arms.json: variant 'free': forceContextActivation: false needs the skill "
        "installed where the agent discovers it (--eval-skill-delivery installed)"
    )


def test_a_run_s_settings_take_the_labels_of_its_arms(tmp_path: Path) -> None:
    (tmp_path / "evals").mkdir()
    (tmp_path / SHOWN).write_text(
        json.dumps([{"label": "with"}, {"label": "none", "includeContext": False}])
    )
    settings = EvalSettings(variants=SHOWN, model="m1")

    chosen, plan = run_variants(settings, tmp_path)
    bad, error = run_variants(EvalSettings(variants="evals/absent.json"), tmp_path)

    assert isinstance(plan, VariantPlan)
    assert (chosen.variant, chosen.baseline) == ("with", "none")
    assert chosen.sources["baseline"] == f"{SHOWN} (its first variant without the context)"
    assert run_variants(EvalSettings(), tmp_path) == (EvalSettings(), None)
    assert isinstance(error, VariantsError)
    assert bad.baseline == ""
    assert str(error).startswith("evals/absent.json: no such file")
