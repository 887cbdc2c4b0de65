"""Settings resolution: defaults, the five layers, sources and errors that name source and key.

Spec references: section 2 (config resolution) and section 13 items 3-6 (this plugin
rejects bad values instead of ignoring them).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from pytest_openkata.contracts.config import EvalSettings
from pytest_openkata.contracts.errors import ConfigError
from pytest_openkata.infra.config import (
    CONFIG_FILE_NAME,
    FIELDS,
    FIELDS_BY_KEY,
    find_yaml_file,
    read_yaml_file,
    resolve_settings,
)

SECRET = "sk-test-0123456789abcdef"
LAYERS = ("default", "ini", "yaml", "env", "cli")


def resolve(
    *,
    ini: Mapping[str, str | None] | None = None,
    yaml_path: Path | None = None,
    environ: Mapping[str, str] | None = None,
    cli: Mapping[str, str | None] | None = None,
) -> EvalSettings:
    return resolve_settings(
        ini=ini or {}, yaml_path=yaml_path, environ=environ or {}, cli=cli or {}
    )


def write_yaml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / CONFIG_FILE_NAME
    path.write_text(text, encoding="utf-8")
    return path


def source_name(layer: str, key: str, yaml_path: Path) -> str:
    field = FIELDS_BY_KEY[key]
    return {
        "ini": f"ini option {field.ini}",
        "yaml": f"{yaml_path}: key {key}",
        "env": f"environment {field.env}",
        "cli": f"option {field.option}",
    }[layer]


def layered(tmp_path: Path, key: str, values: Mapping[str, str]) -> tuple[EvalSettings, Path]:
    """Resolve with ``values[layer]`` set for each named layer (not "default")."""
    field = FIELDS_BY_KEY[key]
    yaml_path = None
    if "yaml" in values:
        head, _, tail = key.partition(".")
        body = f"{head}:\n  {tail}: {values['yaml']}\n" if tail else f"{key}: {values['yaml']}\n"
        yaml_path = write_yaml(tmp_path, body)
    settings = resolve(
        ini={field.dest: values["ini"]} if "ini" in values else None,
        yaml_path=yaml_path,
        environ={field.env: values["env"]} if "env" in values else None,
        cli={field.dest: values["cli"]} if "cli" in values else None,
    )
    return settings, tmp_path / CONFIG_FILE_NAME


# --- defaults -----------------------------------------------------------------------------


def test_defaults_with_no_layer_set() -> None:
    settings = resolve()
    assert settings.backend == "kiro"
    assert settings.model == "claude-sonnet-4.6"
    assert settings.judge_model == "claude-sonnet-4.6"
    assert settings.threshold == 95
    assert settings.concurrency == 2
    assert settings.direct_timeout == 120
    assert settings.sandbox.image == "openkata-eval:latest"
    assert settings.sandbox.timeout == 300
    assert settings.sandbox.network == "host"
    assert settings.http.base_url == ""
    assert settings.http.api_key == ""
    assert settings.output == ""
    assert settings.model_label == ""
    assert settings.secrets == ()


def test_default_judge_model_source_says_it_is_the_agent_model() -> None:
    settings = resolve()
    assert settings.sources["judge_model"] == "default (agent model)"


def test_unrelated_environment_variables_are_ignored() -> None:
    settings = resolve(environ={"PATH": "/usr/bin", "OPENKATA_OTHER": "x", "HOME": "/root"})
    assert settings.backend == "kiro"
    assert settings.model == "claude-sonnet-4.6"


# --- precedence: defaults -> ini -> yaml -> env -> cli ---------------------------------------

PAIRS = [(low, high) for i, low in enumerate(LAYERS) for high in LAYERS[i + 1 :]]


@pytest.mark.parametrize(("low", "high"), PAIRS, ids=[f"{a}<{b}" for a, b in PAIRS])
def test_later_layer_wins_for_text_setting(tmp_path: Path, low: str, high: str) -> None:
    values = {layer: f"model-from-{layer}" for layer in (low, high) if layer != "default"}
    settings, yaml_path = layered(tmp_path, "model", values)
    assert settings.model == f"model-from-{high}"
    assert settings.sources["model"] == source_name(high, "model", yaml_path)


@pytest.mark.parametrize(("low", "high"), PAIRS, ids=[f"{a}<{b}" for a, b in PAIRS])
def test_later_layer_wins_for_integer_setting(tmp_path: Path, low: str, high: str) -> None:
    numbers = {"ini": "60", "yaml": "70", "env": "80", "cli": "90"}
    values = {layer: numbers[layer] for layer in (low, high) if layer != "default"}
    settings, yaml_path = layered(tmp_path, "threshold", values)
    assert settings.threshold == int(numbers[high])
    assert settings.sources["threshold"] == source_name(high, "threshold", yaml_path)


@pytest.mark.parametrize("layer", ["ini", "yaml", "env", "cli"])
def test_nested_base_url_from_each_layer(tmp_path: Path, layer: str) -> None:
    url = f"http://127.0.0.1:8080/{layer}"
    settings, yaml_path = layered(tmp_path, "http.base_url", {layer: url})
    assert settings.http.base_url == url
    assert settings.sources["http.base_url"] == source_name(layer, "http.base_url", yaml_path)


def test_all_layers_at_once_each_key_keeps_its_own_winner(tmp_path: Path) -> None:
    yaml_path = write_yaml(
        tmp_path,
        "backend: http\n"
        "model: yaml-model\n"
        "threshold: 70\n"
        "concurrency: 4\n"
        "sandbox:\n  image: img:yaml\n  network: bridge\n",
    )
    settings = resolve(
        ini={"eval_model": "ini-model", "eval_concurrency": "3", "eval_sandbox_timeout": "30"},
        yaml_path=yaml_path,
        environ={"OPENKATA_EVAL_THRESHOLD": "80"},
        cli={"eval_backend": "kiro"},
    )
    assert settings.backend == "kiro"
    assert settings.sources["backend"] == "option --eval-backend"
    assert settings.model == "yaml-model"
    assert settings.threshold == 80
    assert settings.concurrency == 4
    assert settings.sandbox.timeout == 30
    assert settings.sources["sandbox.timeout"] == "ini option eval_sandbox_timeout"
    assert settings.sandbox.image == "img:yaml"
    assert settings.sandbox.network == "bridge"


# --- judge model fallback -----------------------------------------------------------------


def test_spec_example_yaml_judge_model_and_env_model(tmp_path: Path) -> None:
    yaml_path = write_yaml(tmp_path, "judge_model: A\n")
    settings = resolve(yaml_path=yaml_path, environ={"OPENKATA_EVAL_MODEL": "B"})
    assert settings.judge_model == "A"
    assert settings.model == "B"
    assert settings.sources["judge_model"] == f"{yaml_path}: key judge_model"
    assert settings.sources["model"] == "environment OPENKATA_EVAL_MODEL"


def test_judge_model_falls_back_to_the_final_model(tmp_path: Path) -> None:
    yaml_path = write_yaml(tmp_path, "model: from-yaml\n")
    settings = resolve(
        ini={"eval_model": "from-ini"},
        yaml_path=yaml_path,
        environ={"OPENKATA_EVAL_MODEL": "from-env"},
        cli={"eval_model": "from-cli"},
    )
    assert settings.model == "from-cli"
    assert settings.judge_model == "from-cli"
    assert settings.sources["judge_model"] == "option --eval-model (agent model)"


def test_judge_model_set_on_cli_beats_fallback() -> None:
    settings = resolve(environ={"OPENKATA_EVAL_MODEL": "agent"}, cli={"eval_judge_model": "judge"})
    assert settings.model == "agent"
    assert settings.judge_model == "judge"


# --- empty values keep the earlier layer --------------------------------------------------


def test_empty_yaml_value_keeps_ini_value(tmp_path: Path) -> None:
    yaml_path = write_yaml(tmp_path, 'model: ""\n')
    settings = resolve(ini={"eval_model": "from-ini"}, yaml_path=yaml_path)
    assert settings.model == "from-ini"
    assert settings.sources["model"] == "ini option eval_model"


def test_empty_env_value_keeps_yaml_value(tmp_path: Path) -> None:
    yaml_path = write_yaml(tmp_path, "model: from-yaml\n")
    settings = resolve(yaml_path=yaml_path, environ={"OPENKATA_EVAL_MODEL": ""})
    assert settings.model == "from-yaml"
    assert settings.sources["model"] == f"{yaml_path}: key model"


@pytest.mark.parametrize("empty", ["", None])
def test_empty_cli_value_keeps_env_value(empty: str | None) -> None:
    settings = resolve(environ={"OPENKATA_EVAL_MODEL": "from-env"}, cli={"eval_model": empty})
    assert settings.model == "from-env"
    assert settings.sources["model"] == "environment OPENKATA_EVAL_MODEL"


def test_empty_ini_value_keeps_default() -> None:
    settings = resolve(ini={"eval_backend": "", "eval_threshold": ""})
    assert settings.backend == "kiro"
    assert settings.threshold == 95
    assert "backend" not in settings.sources
    assert "threshold" not in settings.sources


def test_yaml_key_without_value_keeps_earlier_layer(tmp_path: Path) -> None:
    yaml_path = write_yaml(tmp_path, "threshold:\nmodel:\n")
    settings = resolve(ini={"eval_threshold": "50"}, yaml_path=yaml_path)
    assert settings.threshold == 50
    assert settings.sources["threshold"] == "ini option eval_threshold"
    assert settings.model == "claude-sonnet-4.6"


def test_empty_yaml_file_is_no_layer(tmp_path: Path) -> None:
    yaml_path = write_yaml(tmp_path, "")
    assert read_yaml_file(yaml_path) == {}
    assert resolve(yaml_path=yaml_path).threshold == 95


def test_empty_yaml_section_keeps_defaults(tmp_path: Path) -> None:
    # A section whose keys are all commented out is an empty section, not an unknown key.
    yaml_path = write_yaml(tmp_path, "http:\n  # base_url: http://127.0.0.1:8080/v1\n")
    settings = resolve(yaml_path=yaml_path)
    assert settings.http.base_url == ""


# --- sources --------------------------------------------------------------------------------


def test_sources_name_each_layer(tmp_path: Path) -> None:
    yaml_path = write_yaml(tmp_path, "sandbox:\n  network: none\n")
    settings = resolve(
        ini={"eval_concurrency": "5"},
        yaml_path=yaml_path,
        environ={"OPENKATA_EVAL_DIRECT_TIMEOUT": "30"},
        cli={"eval_http_base_url": "http://x"},
    )
    assert settings.sources["concurrency"] == "ini option eval_concurrency"
    assert settings.sources["sandbox.network"] == f"{yaml_path}: key sandbox.network"
    assert settings.sources["direct_timeout"] == "environment OPENKATA_EVAL_DIRECT_TIMEOUT"
    assert settings.sources["http.base_url"] == "option --eval-base-url"
    assert settings.concurrency == 5
    assert settings.sandbox.network == "none"
    assert settings.direct_timeout == 30
    assert settings.http.base_url == "http://x"


def test_read_yaml_file_flattens_nested_keys(tmp_path: Path) -> None:
    yaml_path = write_yaml(
        tmp_path, "backend: http\nhttp:\n  base_url: http://h\nsandbox:\n  timeout: 10\n"
    )
    assert read_yaml_file(yaml_path) == {
        "backend": "http",
        "http.base_url": "http://h",
        "sandbox.timeout": "10",  # scalars stay text; each setting parses its own
    }


def test_yaml_scalars_keep_their_written_text(tmp_path: Path) -> None:
    yaml_path = write_yaml(tmp_path, "model: 4.10\nthreshold: 90\n")
    settings = resolve(yaml_path=yaml_path)
    assert settings.model == "4.10"
    assert settings.threshold == 90


# --- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize("layer", ["ini", "yaml", "env", "cli"])
def test_unknown_backend_is_an_error_naming_source_and_key(tmp_path: Path, layer: str) -> None:
    with pytest.raises(ConfigError) as info:
        layered(tmp_path, "backend", {layer: "foo"})
    message = str(info.value)
    assert message.startswith(source_name(layer, "backend", tmp_path / CONFIG_FILE_NAME) + ":")
    assert "'foo'" in message
    assert "kiro" in message
    assert "http" in message


def test_non_numeric_threshold_from_env() -> None:
    with pytest.raises(ConfigError) as info:
        resolve(environ={"OPENKATA_EVAL_THRESHOLD": "high"})
    message = str(info.value)
    assert message.startswith("environment OPENKATA_EVAL_THRESHOLD:")
    assert "'high'" in message


@pytest.mark.parametrize("value", ["101", "-1"])
@pytest.mark.parametrize("layer", ["ini", "yaml", "env", "cli"])
def test_threshold_out_of_range(tmp_path: Path, layer: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        layered(tmp_path, "threshold", {layer: value})
    message = str(info.value)
    assert message.startswith(source_name(layer, "threshold", tmp_path / CONFIG_FILE_NAME) + ":")
    assert value in message
    assert "between 0 and 100" in message


@pytest.mark.parametrize("value", ["0", "100"])
def test_threshold_range_bounds_are_accepted(value: str) -> None:
    assert resolve(environ={"OPENKATA_EVAL_THRESHOLD": value}).threshold == int(value)


@pytest.mark.parametrize("layer", ["ini", "yaml", "env", "cli"])
def test_fractional_threshold_is_an_error(tmp_path: Path, layer: str) -> None:
    with pytest.raises(ConfigError) as info:
        layered(tmp_path, "threshold", {layer: "95.5"})
    message = str(info.value)
    assert message.startswith(source_name(layer, "threshold", tmp_path / CONFIG_FILE_NAME) + ":")
    assert "95.5" in message


@pytest.mark.parametrize("value", ["9_5", "\u0669\u0665"])  # underscore, Arabic-Indic digits
def test_threshold_accepts_only_plain_ascii_digits(value: str) -> None:
    # Python's int() takes "9_5" and non-ASCII digits; Go's Atoi (the reference) does not.
    with pytest.raises(ConfigError, match="OPENKATA_EVAL_THRESHOLD"):
        resolve(environ={"OPENKATA_EVAL_THRESHOLD": value})


@pytest.mark.parametrize(
    ("key", "value"), [("concurrency", "0"), ("direct_timeout", "0"), ("sandbox.timeout", "-5")]
)
def test_positive_settings_reject_zero_and_negatives(key: str, value: str) -> None:
    field = FIELDS_BY_KEY[key]
    with pytest.raises(ConfigError) as info:
        resolve(environ={field.env: value})
    assert str(info.value).startswith(f"environment {field.env}:")
    assert "at least 1" in str(info.value)


@pytest.mark.parametrize("layer", ["ini", "yaml", "env", "cli"])
@pytest.mark.parametrize(
    ("value", "count"),
    [
        ("4194304", 4 << 20),
        ("512k", 512 << 10),
        ("4m", 4 << 20),
        ("4MiB", 4 << 20),
        ("1g", 1 << 30),
    ],
)
def test_answer_max_bytes_from_each_layer_with_or_without_a_unit(
    tmp_path: Path, layer: str, value: str, count: int
) -> None:
    settings, _ = layered(tmp_path, "answer_max_bytes", {layer: value})
    assert settings.answer_max_bytes == count


def test_answer_max_bytes_defaults_to_4_mib() -> None:
    assert resolve().answer_max_bytes == 4 << 20


@pytest.mark.parametrize("value", ["0", "-1", "1.5m", "4t", "many"])
def test_answer_max_bytes_refuses_what_is_not_a_size(value: str) -> None:
    with pytest.raises(ConfigError) as info:
        resolve(environ={"OPENKATA_EVAL_ANSWER_MAX_BYTES": value})
    assert str(info.value).startswith("environment OPENKATA_EVAL_ANSWER_MAX_BYTES: ")


def test_yaml_that_does_not_parse(tmp_path: Path) -> None:
    yaml_path = write_yaml(tmp_path, "model: [unclosed\n")
    with pytest.raises(ConfigError) as info:
        resolve(yaml_path=yaml_path)
    assert str(info.value).startswith(f"{yaml_path}: not valid YAML")


def test_yaml_top_level_list_is_an_error(tmp_path: Path) -> None:
    yaml_path = write_yaml(tmp_path, "- backend\n- kiro\n")
    with pytest.raises(ConfigError) as info:
        resolve(yaml_path=yaml_path)
    assert str(info.value).startswith(f"{yaml_path}:")
    assert "mapping" in str(info.value)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("colour: blue\n", "colour"),
        ("http:\n  bogus: 1\n", "http.bogus"),
        ("sandbox:\n  gpus: 1\n", "sandbox.gpus"),
        ("output_dir: x\n", "output_dir"),
    ],
)
def test_yaml_unknown_key_is_an_error(tmp_path: Path, text: str, key: str) -> None:
    yaml_path = write_yaml(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        resolve(yaml_path=yaml_path)
    message = str(info.value)
    assert message.startswith(f"{yaml_path}: unknown key {key!r}")


@pytest.mark.parametrize(
    ("text", "key", "detail"),
    [
        ('threshold: "high"\n', "threshold", "'high' is not a whole number"),
        ("threshold: true\n", "threshold", "'true' is not a whole number"),
        ("threshold: [1, 2]\n", "threshold", "got list"),
        ("threshold: 95.5\n", "threshold", "'95.5' is not a whole number"),
        ("http:\n  base_url:\n    host: x\n", "http.base_url", "got dict"),
    ],
)
def test_yaml_type_mismatch_is_an_error_naming_file_and_key(
    tmp_path: Path, text: str, key: str, detail: str
) -> None:
    yaml_path = write_yaml(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        resolve(yaml_path=yaml_path)
    message = str(info.value)
    assert message.startswith(f"{yaml_path}: key {key}:")
    assert detail in message


def test_yaml_section_given_a_scalar_is_an_error_naming_file(tmp_path: Path) -> None:
    yaml_path = write_yaml(tmp_path, "http: 5\n")
    with pytest.raises(ConfigError) as info:
        resolve(yaml_path=yaml_path)
    message = str(info.value)
    assert message.startswith(f"{yaml_path}:")
    assert "key http: expected a mapping of keys" in message


def test_yaml_error_is_raised_before_later_layers_apply(tmp_path: Path) -> None:
    # A valid env value does not hide a broken file.
    yaml_path = write_yaml(tmp_path, "backend: foo\n")
    with pytest.raises(ConfigError, match="key backend"):
        resolve(yaml_path=yaml_path, environ={"OPENKATA_EVAL_BACKEND": "http"})


def test_unknown_openkata_environment_variable() -> None:
    with pytest.raises(ConfigError) as info:
        resolve(environ={"OPENKATA_EVAL_FOO": "1"})
    message = str(info.value)
    assert "OPENKATA_EVAL_FOO" in message
    assert message.startswith("unknown environment variable OPENKATA_EVAL_FOO")


def test_misspelt_environment_variable_is_an_error_even_when_empty() -> None:
    with pytest.raises(ConfigError, match="OPENKATA_EVAL_THRESOLD"):
        resolve(environ={"OPENKATA_EVAL_THRESOLD": ""})


def test_debug_variable_is_accepted() -> None:
    settings = resolve(environ={"OPENKATA_EVAL_DEBUG": "1", "OPENKATA_EVAL_MODEL": "m"})
    assert settings.model == "m"


def test_every_field_environment_variable_is_known() -> None:
    environ = {field.env: "" for field in FIELDS}
    settings = resolve(environ=environ)
    assert settings.backend == "kiro"


# --- find_yaml_file -------------------------------------------------------------------------


def test_explicit_config_path_that_does_not_exist(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as info:
        find_yaml_file(str(missing), [tmp_path])
    message = str(info.value)
    assert message.startswith("option --eval-config:")
    assert str(missing) in message


def test_explicit_config_path_wins_over_search_dirs(tmp_path: Path) -> None:
    write_yaml(tmp_path, "model: found\n")
    explicit = tmp_path / "custom.yaml"
    explicit.write_text("model: explicit\n", encoding="utf-8")
    found = find_yaml_file(str(explicit), [tmp_path])
    assert found == explicit
    assert resolve(yaml_path=found).model == "explicit"


def test_search_dirs_first_match_wins(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (second / CONFIG_FILE_NAME).write_text("model: second\n", encoding="utf-8")
    assert find_yaml_file(None, [first, second]) == second / CONFIG_FILE_NAME
    (first / CONFIG_FILE_NAME).write_text("model: first\n", encoding="utf-8")
    assert find_yaml_file(None, [first, second]) == first / CONFIG_FILE_NAME


def test_no_config_file_anywhere(tmp_path: Path) -> None:
    assert find_yaml_file(None, [tmp_path]) is None
    assert find_yaml_file("", [tmp_path]) is None


def test_a_folder_named_like_the_config_file_is_not_a_config_file(tmp_path: Path) -> None:
    (tmp_path / CONFIG_FILE_NAME).mkdir()
    assert find_yaml_file(None, [tmp_path]) is None


def test_relative_explicit_path_is_resolved_from_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "rel.yaml").write_text("threshold: 42\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    found = find_yaml_file("rel.yaml", [])
    assert found is not None
    assert resolve(yaml_path=found).threshold == 42


# --- the api key ----------------------------------------------------------------------------


def test_api_key_from_env_reaches_secrets_and_http_settings() -> None:
    settings = resolve(environ={"OPENKATA_EVAL_HTTP_API_KEY": SECRET})
    assert settings.http.api_key == SECRET
    assert settings.secrets == (SECRET,)
    assert settings.sources["http.api_key"] == "environment OPENKATA_EVAL_HTTP_API_KEY"


def test_api_key_from_yaml(tmp_path: Path) -> None:
    yaml_path = write_yaml(tmp_path, f"http:\n  api_key: {SECRET}\n")
    settings = resolve(yaml_path=yaml_path)
    assert settings.http.api_key == SECRET
    assert settings.secrets == (SECRET,)


def test_api_key_has_no_command_line_option() -> None:
    field = FIELDS_BY_KEY["http.api_key"]
    assert field.secret
    assert field.option is None
    options = [f.option for f in FIELDS if f.option]
    assert all("key" not in option for option in options)


def test_api_key_passed_as_cli_value_is_ignored() -> None:
    settings = resolve(cli={"eval_http_api_key": SECRET})
    assert settings.http.api_key == ""
    assert settings.secrets == ()


def test_api_key_value_not_in_sources() -> None:
    settings = resolve(environ={"OPENKATA_EVAL_HTTP_API_KEY": SECRET})
    assert all(SECRET not in text for text in settings.sources.values())


def test_api_key_value_not_in_settings_repr() -> None:
    # The settings object is a pytest fixture value; its repr shows up in assertion
    # introspection and in --showlocals tracebacks.
    settings = resolve(environ={"OPENKATA_EVAL_HTTP_API_KEY": SECRET})
    assert SECRET not in repr(settings)
    assert SECRET not in str(settings)


def test_api_key_of_wrong_type_is_an_error_naming_file_and_key(tmp_path: Path) -> None:
    yaml_path = write_yaml(tmp_path, "http:\n  api_key: [a, b]\n")
    with pytest.raises(ConfigError) as info:
        resolve(yaml_path=yaml_path)
    assert str(info.value).startswith(f"{yaml_path}: key http.api_key:")


# --- FIELDS ---------------------------------------------------------------------------------


def test_fields_spellings() -> None:
    spellings = {f.key: (f.env, f.ini, f.option, f.dest) for f in FIELDS}
    assert spellings["threshold"] == (
        "OPENKATA_EVAL_THRESHOLD",
        "eval_threshold",
        "--eval-threshold",
        "eval_threshold",
    )
    assert spellings["judge_model"][2] == "--eval-judge-model"
    assert spellings["http.base_url"] == (
        "OPENKATA_EVAL_HTTP_BASE_URL",
        "eval_http_base_url",
        "--eval-base-url",
        "eval_http_base_url",
    )
    assert spellings["sandbox.network"][0] == "OPENKATA_EVAL_SANDBOX_NETWORK"
    assert len({f.dest for f in FIELDS}) == len(FIELDS)
    assert len({f.env for f in FIELDS}) == len(FIELDS)


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("trials", "0", "must be at least 1"),
        ("judge_votes", "two", "is not a whole number"),
        ("judge_fence", "maybe", "is not a boolean"),
        ("cache", "sometimes", "unknown cache mode 'sometimes'; choose one of: on, off, refresh"),
        ("max_in_flight", "-1", "must be at least 0"),
        ("retry.attempts", "0", "must be at least 1"),
        ("retry.budget", "-5", "must be zero or a positive number"),
        ("price.agent_input", "cheap", "is not a number"),
    ],
)
def test_bad_values_of_the_run_settings_name_their_key(
    tmp_path: Path, key: str, value: str, expected: str
) -> None:
    with pytest.raises(ConfigError) as info:
        layered(tmp_path, key, {"env": value})

    message = str(info.value)
    assert message.startswith(source_name("env", key, tmp_path / CONFIG_FILE_NAME) + ":")
    assert expected in message


def test_run_settings_from_the_settings_file(tmp_path: Path) -> None:
    yaml_path = write_yaml(
        tmp_path,
        "trials: 3\njudge_votes: 5\njudge_fence: false\ncache: REFRESH\nmax_in_flight: 4\n"
        "retry:\n  attempts: 6\n  budget: 30\n"
        "price:\n  agent_input: 3\n  agent_output: 15\n  judge_input: 0.5\n  judge_output: 2\n",
    )

    settings = resolve(yaml_path=yaml_path)

    assert (settings.trials, settings.judge_votes, settings.judge_fence) == (3, 5, False)
    assert (settings.cache, settings.max_in_flight) == ("refresh", 4)
    assert (settings.retry.attempts, settings.retry.budget) == (6, 30.0)
    assert settings.price.model_dump() == {
        "agent_input": 3.0, "agent_output": 15.0, "judge_input": 0.5, "judge_output": 2.0,
    }  # fmt: skip


def test_skill_delivery_and_the_trigger_settings_parse_from_every_source(tmp_path: Path) -> None:
    yaml_path = tmp_path / "settings.yaml"
    yaml_path.write_text("skill_delivery: installed\ntrigger_skills:\n  - skills/a\n  - skills/b\n")

    from_yaml = resolve_settings(ini={}, yaml_path=yaml_path, environ={}, cli={})
    from_env = resolve_settings(
        ini={},
        yaml_path=None,
        environ={"OPENKATA_EVAL_TRIGGER_RUNS": "5", "OPENKATA_EVAL_TRIGGER_SKILLS": "none"},
        cli={},
    )

    assert from_yaml.skill_delivery == "installed"
    assert from_yaml.trigger_skills == ("skills/a", "skills/b")
    assert (from_env.trigger_runs, from_env.trigger_skills) == (5, ())
    assert EvalSettings().skill_delivery == "prompt"
    with pytest.raises(ConfigError, match="unknown skill delivery 'pasted'"):
        resolve_settings(
            ini={}, yaml_path=None, environ={"OPENKATA_EVAL_SKILL_DELIVERY": "pasted"}, cli={}
        )


# --- the variants file -------------------------------------------------------------------


@pytest.mark.parametrize("layer", ["ini", "yaml", "env", "cli"])
def test_the_variants_file_and_the_variant_are_set_in_every_layer(
    tmp_path: Path, layer: str
) -> None:
    settings, yaml_path = layered(tmp_path, "variants", {layer: "evals/arms.json"})
    assert settings.variants == "evals/arms.json"
    assert settings.sources["variants"] == source_name(layer, "variants", yaml_path)
    with_label = resolve(cli={"eval_variants": "arms.json", "eval_variant": " rewrite-1 "})
    assert with_label.variant == "rewrite-1"


def test_a_variant_without_a_variants_file_is_an_error_naming_its_source() -> None:
    with pytest.raises(ConfigError) as raised:
        resolve(environ={"OPENKATA_EVAL_VARIANT": "rewrite-1"})
    assert str(raised.value) == (
        "environment OPENKATA_EVAL_VARIANT: variant names a variant of a variants file, and no "
        "variants file is set (--eval-variants PATH)"
    )
    with pytest.raises(ConfigError, match="'two words' is not a variant's label"):
        resolve(cli={"eval_variants": "arms.json", "eval_variant": "two words"})


def test_pairwise_judging_takes_its_baseline_from_a_variants_file() -> None:
    settings = resolve(cli={"eval_variants": "arms.json", "eval_judge_pairwise": "true"})
    assert settings.judge_pairwise is True
