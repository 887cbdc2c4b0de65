"""What a provider declares of its own settings is checked where it is declared, and read back
typed as declared."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_openkata import EvalSettings, ProviderSetting

REGION = ProviderSetting(name="region", type=str, default="eu", help="where sandboxes start")
SLOTS = ProviderSetting(name="slots", type=int, default=4, help="sandboxes at once")
SHARE = ProviderSetting(name="share", type=float, default=0.5, help="part of the pool")
WARM = ProviderSetting(name="warm", type=bool, default=False, help="keep one sandbox warm")


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"name": "Region"}, "setting name 'Region': use lower-case letters"),
        ({"name": "re.gion"}, "setting name 're.gion': use lower-case letters"),
        ({"type": list}, "setting region: type must be str, int, float or bool"),
        ({"default": 3}, "setting region: default 3 is not a str"),
        ({"type": int, "default": True}, "setting region: default True is not a int"),
        ({"help": " "}, "setting region: give a help text"),
    ],
)
def test_a_declaration_that_cannot_be_a_setting_is_refused_where_it_is_made(
    fields: dict[str, Any], error: str
) -> None:
    declared: dict[str, Any] = {"name": "region", "type": str, "default": "eu", "help": "h"}

    with pytest.raises((TypeError, ValueError), match=error):
        ProviderSetting(**{**declared, **fields})


def test_a_whole_number_is_a_number() -> None:
    assert ProviderSetting(name="share", type=float, default=1, help="h").default == 1


def test_a_provider_reads_its_own_values_typed_as_declared() -> None:
    settings = EvalSettings(
        provider_settings={
            "sandboxes.acme.region": "us",
            "sandboxes.acme.slots": 8,
            "sandboxes.acme.share": 1,
            "sandboxes.acme.warm": True,
            "sandboxes.other.region": "ap",
        }
    )

    values = settings.provider_settings
    assert REGION.value_in(values, "sandboxes.acme") == "us"
    assert SLOTS.value_in(values, "sandboxes.acme") == 8
    share = SHARE.value_in(values, "sandboxes.acme")
    assert (share, type(share)) == (1.0, float)
    assert WARM.value_in(values, "sandboxes.acme") is True
    assert settings.provider_values("sandboxes.other") == {"region": "ap"}


def test_a_provider_made_outside_a_run_reads_its_defaults() -> None:
    assert REGION.value_in({}, "sandboxes.acme") == "eu"
    assert WARM.value_in(EvalSettings().provider_settings, "sandboxes.acme") is False


def test_a_value_of_another_type_is_refused() -> None:
    with pytest.raises(TypeError, match=r"setting sandboxes.acme.slots: 'many' is not a int"):
        SLOTS.value_in({"sandboxes.acme.slots": "many"}, "sandboxes.acme")


def test_the_values_cross_to_xdist_workers_with_their_types() -> None:
    sent = EvalSettings(provider_settings={"agents.p.times": 2, "agents.p.loud": True})

    received = EvalSettings.model_validate(sent.model_dump(mode="json"))

    assert dict(received.provider_settings) == {"agents.p.times": 2, "agents.p.loud": True}
    assert type(received.provider_settings["agents.p.loud"]) is bool
