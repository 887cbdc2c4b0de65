"""Tessl's variants (arms) file: reading it, every field's validation, and the two arms of a
run it gives a skill."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.contracts.errors import ConfigError
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
from pytest_openkata.infra.config import resolve_settings

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
    skill_count: int = 0,
) -> VariantPlan:
    plan = plan_variants(
        file,
        variant=variant,
        baseline=baseline,
        root=root,
        model="m1",
        backend="http",
        sandbox_agent="claude",
        prompt_delivery=prompt_delivery,
    )
    return replace(plan, skill_count=skill_count)


# --- reading ---------------------------------------------------------------------------------


def test_a_file_of_tessl_s_shape_reads_with_its_defaults(tmp_path: Path) -> None:
    file = _read(
        tmp_path,
        [
            {"label": "with", "agent": "claude", "model": "m1", "includeContext": True},
            {"label": "bare", "includeContext": False},
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
        Variant("bare", include_context=False, force_activation=False),
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
        ([{"label": "a\u202eb"}], "evals/arms.json: [0].label: must hold printable characters"),
        ([{"label": "a\x00"}], "evals/arms.json: [0].label: must hold printable characters"),
        ([{"label": "same"}], "evals/arms.json: [0].label: 'same' is reserved: it names an arm"),
        (
            [{"label": "a"}, {"label": "Without-Skill"}],
            "evals/arms.json: [1].label: 'Without-Skill' is reserved",
        ),
        ([{"label": "with-skill"}], "evals/arms.json: [0].label: 'with-skill' is reserved"),
        ([{"label": "none"}], "evals/arms.json: [0].label: 'none' is reserved"),
        ("[" * 100_000 + "]" * 100_000, "evals/arms.json: nested too deeply"),
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


def test_no_fixtures_is_no_context_as_tessl_s_demos_write_it(tmp_path: Path) -> None:
    file = _read(
        tmp_path,
        [
            {"label": "skills", "fixtures": {"s": {"localPath": "./s"}}},
            {"label": "no-skills", "fixtures": {}},
            {"label": "as-is"},
            {"label": "kept", "includeContext": True, "fixtures": {}},
        ],
    )

    assert [v.include_context for v in file.variants] == [True, False, True, True]
    assert file.variants[1].force_activation is False
    skill = _skill(tmp_path / "skills" / "s")
    baseline = _plan(file, tmp_path, variant="as-is").arms(skill, sandboxed=False)[1]
    assert baseline is not None
    assert (baseline.name, baseline.skill) == ("no-skills", False)


def test_a_registry_fixture_errors_its_variant_and_the_others_still_run(tmp_path: Path) -> None:
    registry = {"definition": {"type": "plugin", "name": "org/p", "version": "0.1.1"}}
    file = _read(
        tmp_path,
        [
            {"label": "bare", "includeContext": False},
            {"label": "registry", "fixtures": {"p": registry}},
            {"label": "local"},
        ],
    )
    skill = _skill(tmp_path / "skills" / "s")

    assert file.warnings == (
        "evals/arms.json: [1] (registry).fixtures.p.definition: a fixture from Tessl's registry "
        "cannot be installed here (only a local folder, localPath); this variant cannot be an "
        "arm",
    )
    own, baseline = _plan(file, tmp_path).arms(skill, sandboxed=False)  # the first that can
    assert (own.label, baseline.label if baseline else None) == ("local", "bare")
    with pytest.raises(VariantsError) as raised:
        _plan(file, tmp_path, variant="registry").arms(skill, sandboxed=False)
    assert str(raised.value) == (
        "evals/arms.json: variant 'registry': fixtures.p.definition: a fixture from Tessl's "
        "registry cannot be installed here (only a local folder, localPath)"
    )
    # Without the context, a registry fixture is not installed anyway.
    unused = _read(tmp_path, [{"label": "a"}, {"label": "b", "includeContext": False,
                                              "fixtures": {"p": registry}}])  # fmt: skip
    assert unused.variants[1].unsupported == ""
    assert unused.warnings == (
        "evals/arms.json: [1] (b).fixtures: not installed, as includeContext is false",
    )


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
            {"label": "bare", "includeContext": False},
            {"label": "with"},
            {"label": "other"},
            {"label": "none-2", "includeContext": False},
        ],
    )
    skill = _skill(tmp_path / "skills" / "s")

    own, baseline = _plan(file, tmp_path).arms(skill, sandboxed=False)

    assert (own.name, own.label, own.skill, own.activation) == ("", "with", True, False)
    assert baseline is not None
    assert (baseline.name, baseline.label, baseline.skill) == ("bare", "bare", False)


def test_the_settings_name_either_arm_by_its_label(tmp_path: Path) -> None:
    file = _read(
        tmp_path,
        [{"label": "with"}, {"label": "other"}, {"label": "bare", "includeContext": False}],
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
    # A variant that names no model or agent runs with the run's (model m1, agents http and
    # claude): the default baseline is one that runs with them too.
    unnamed = _read(
        tmp_path,
        [
            {"label": "with"},
            {"label": "none-m2", "model": "m2", "includeContext": False},
            {"label": "none-codex", "agent": "codex", "includeContext": False},
            {"label": "none-m1", "model": "m1", "includeContext": False},
        ],
    )
    assert _plan(unnamed, tmp_path).baseline_name == "none-m1"
    # Without a variant without the context, and no baseline set, there is no baseline arm.
    only = _read(tmp_path, [{"label": "with"}])
    assert _plan(only, tmp_path).arms(skill, sandboxed=False)[1] is None


def test_a_variant_label_the_file_does_not_have_is_a_bad_setting(tmp_path: Path) -> None:
    file = _read(tmp_path, [{"label": "a"}, {"label": "b", "includeContext": False}])

    with pytest.raises(ConfigError) as raised:
        _plan(file, tmp_path, variant="c")

    assert str(raised.value) == (
        "evals/arms.json: no variant is labelled 'c' (the variant setting); its labels: a, b"
    )


@pytest.mark.parametrize(
    ("data", "variant", "baseline", "message"),
    [
        ([{"label": "a", "includeContext": False}], "", "", "evals/arms.json: no variant "
         "that can run here includes the context (includeContext); name the run's own arm "
         "with --eval-variant, one of: a"),
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
    assert skill_of("folder") == tmp_path / "skills" / "s"
    # The only fixture, whatever its folder's name, in a run of one skill.
    alone = _plan(file, tmp_path, variant="draft", skill_count=1)
    assert alone.arms(skill, sandboxed=False)[0].skill == renamed


def test_a_fixture_of_another_name_is_no_copy_of_a_skill_of_a_run_of_several(
    tmp_path: Path,
) -> None:
    a = _skill(tmp_path / "skills" / "a", "---\nname: a\n---\n# a\n")
    b = _skill(tmp_path / "skills" / "b", "---\nname: b\n---\n# b\n")
    draft = _skill(tmp_path / "draft", "---\nname: a\ndescription: a, rewritten\n---\n")
    file = _read(tmp_path, [{"label": "r", "fixtures": {"d": {"localPath": "./draft"}}}])
    plan = _plan(file, tmp_path, skill_count=2)

    # The copy's SKILL.md names skill a: it is a's copy, and never b's.
    assert plan.arms(a, sandboxed=False)[0].skill == draft
    with pytest.raises(VariantsError) as raised:
        plan.arms(b, sandboxed=False)
    assert str(raised.value) == (
        "evals/arms.json: variant 'r': fixtures.d: ./draft holds the skill a, not b: a fixture "
        "of another name stands for a skill only in a run of one skill (name the copy's "
        "folder, or its SKILL.md name, b)"
    )


def test_a_fixture_of_the_wrong_kind_is_an_error_naming_it_and_no_machine_path(
    tmp_path: Path,
) -> None:
    skill = _skill(tmp_path / "skills" / "s")
    tile = tmp_path / "tiles" / "s"
    tile.mkdir(parents=True)
    (tile / "tile.json").write_text('{"name": "org/s"}')
    file = _read(
        tmp_path,
        [
            {"label": "tile", "fixtures": {"t": {"localPath": "tiles"}, "u": {"localPath": "u"}}},
            {"label": "only", "fixtures": {"t": {"localPath": str(tile)}}},
            {"label": "outside", "fixtures": {"x": {"localPath": str(tmp_path.parent / "gone")}}},
        ],
    )
    (tmp_path / "u").mkdir()

    messages = []
    for label in ("tile", "only", "outside"):
        with pytest.raises(VariantsError) as raised:
            _plan(file, tmp_path, variant=label, skill_count=1).arms(skill, sandboxed=False)
        messages.append(str(raised.value))

    assert messages == [
        "evals/arms.json: variant 'tile': fixtures.t: tiles/s holds a tile (tile.json) where the "
        "skill s needs a skill (SKILL.md)",
        "evals/arms.json: variant 'only': fixtures.t: tiles/s holds a tile (tile.json) where "
        "the skill s needs a skill (SKILL.md)",
        "evals/arms.json: variant 'outside': fixtures.x.localPath: <outside the rootdir>/gone "
        "is not a folder (paths are relative to the rootdir)",
    ]
    assert not any(str(tmp_path) in message for message in messages)


@pytest.mark.parametrize(
    ("local", "shown"), [("~nosuchuser12/copy", "~nosuchuser12/copy"), ("a" * 5000, "a" * 5000)]
)
def test_a_fixture_path_of_an_unknown_home_or_too_long_a_name_is_not_a_folder(
    tmp_path: Path, local: str, shown: str
) -> None:
    skill = _skill(tmp_path / "skills" / "s")
    file = _read(tmp_path, [{"label": "a", "fixtures": {"f": {"localPath": local}}}])

    with pytest.raises(VariantsError) as raised:
        _plan(file, tmp_path, variant="a").arms(skill, sandboxed=False)

    assert str(raised.value) == (
        f"evals/arms.json: variant 'a': fixtures.f.localPath: {shown} is not a folder (paths "
        "are relative to the rootdir)"
    )


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
            {"label": "this-run", "agent": "http", "model": "m1"},
            {"label": "bigger", "model": "m2"},
            {"label": "codex", "agent": "codex"},
        ],
    )

    own, _ = _plan(file, tmp_path, variant="this-run").arms(skill, sandboxed=False)
    assert own.label == "this-run"
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
        _plan(file, tmp_path, variant="this-run").arms(skill, sandboxed=True)


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
        json.dumps([{"label": "with"}, {"label": "bare", "includeContext": False}])
    )
    settings = EvalSettings(variants=SHOWN, model="m1")

    chosen, plan = run_variants(settings, tmp_path)
    bad, error = run_variants(EvalSettings(variants="evals/absent.json"), tmp_path)

    assert isinstance(plan, VariantPlan)
    assert (chosen.variant, chosen.baseline) == ("with", "bare")
    assert chosen.sources["baseline"] == f"{SHOWN} (its first variant without the context)"
    assert run_variants(EvalSettings(), tmp_path) == (EvalSettings(), None)
    assert isinstance(error, VariantsError)
    assert bad.baseline == ""
    assert str(error).startswith("evals/absent.json: no such file")
    # A file named by a machine path is named relative to the rootdir.
    _, absolute = run_variants(EvalSettings(variants=str(tmp_path / "evals/gone.json")), tmp_path)
    assert str(absolute).startswith("evals/gone.json: no such file")


def _resolved(cli: dict[str, str]) -> EvalSettings:
    return resolve_settings(ini={}, yaml_path=None, environ={}, cli={"eval_variants": SHOWN, **cli})


def test_baseline_none_switches_off_the_baseline_the_file_gives(tmp_path: Path) -> None:
    (tmp_path / "evals").mkdir()
    (tmp_path / SHOWN).write_text(
        json.dumps([{"label": "with"}, {"label": "none-arm", "includeContext": False}])
    )

    given, given_plan = run_variants(_resolved({}), tmp_path)
    off, off_plan = run_variants(_resolved({"eval_baseline": "none"}), tmp_path)

    assert isinstance(given_plan, VariantPlan)
    assert isinstance(off_plan, VariantPlan)
    assert (given.baseline, given_plan.baseline_name) == ("none-arm", "none-arm")
    assert (off.baseline, off_plan.baseline) == ("", None)
    skill = _skill(tmp_path / "skills" / "s")
    assert off_plan.arms(skill, sandboxed=False)[1] is None


def test_pairwise_judging_without_a_baseline_arm_is_a_bad_setting(tmp_path: Path) -> None:
    (tmp_path / "evals").mkdir()
    (tmp_path / SHOWN).write_text(
        json.dumps([{"label": "with"}, {"label": "none-arm", "includeContext": False}])
    )
    pairwise = {"eval_judge_pairwise": "true"}

    with pytest.raises(ConfigError) as off:
        run_variants(_resolved({**pairwise, "eval_baseline": "none"}), tmp_path)
    (tmp_path / SHOWN).write_text(json.dumps([{"label": "with"}]))
    with pytest.raises(ConfigError) as absent:
        run_variants(_resolved(pairwise), tmp_path)
    _, plan = run_variants(_resolved({**pairwise, "eval_baseline": "same"}), tmp_path)

    assert str(off.value) == (
        "option --eval-judge-pairwise: judge_pairwise compares a baseline arm with the "
        "skill's, and the run has none (option --eval-baseline sets none); name one with "
        "--eval-baseline LABEL, without-skill, same or a git ref"
    )
    assert str(absent.value).startswith(
        "option --eval-judge-pairwise: judge_pairwise compares a baseline arm with the "
        "skill's, and the run has none (evals/arms.json has no variant without the context"
    )
    assert isinstance(plan, VariantPlan)  # an A/A run has a baseline arm
