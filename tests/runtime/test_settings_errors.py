"""How a bad setting is reported: every key of every section, written with a value of the wrong shape, is
named as ``[section].key`` (a flag as ``--the-flag``, the environment by its variable); unknown keys are
refused naming them and the keys that exist; the layers merge key by key, not table by table."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalar.domain.consolidation import ConsolidationPolicy
from scalar.runtime import SettingsError, load_settings
from scalar.runtime.settings import SCHEMA, SECTIONS, kubernetes_settings

EVERY_KEY = [(section, key) for section, keys in SCHEMA.items() for key in keys]
K8S = 'kubeconfig = "k"\ncontroller_url = "http://c"\nimage = "i"\n'


def toml_value(value: Any) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def refusal(
    text: str, overrides: dict[str, Any] | None = None, env: dict[str, str] | None = None
) -> SettingsError:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "scalar.toml"
        path.write_text(text)
        with pytest.raises(SettingsError) as err:
            load_settings(path, overrides or {}, env or {})
        assert str(err.value).startswith(f"{err.value.source}: {err.value.key}: ")
        if not (overrides or env):
            assert err.value.source == str(path)
        return err.value


tables = st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True), st.integers(-5, 5), max_size=3)


@settings(max_examples=60, deadline=None)
@given(spot=st.sampled_from(EVERY_KEY), table=tables)
def test_a_table_where_a_value_belongs_names_the_section_and_key(
    spot: tuple[str, str], table: dict[str, int]
) -> None:
    section, key = spot
    err = refusal(f"[{section}]\n{key} = {toml_value(table)}\n")
    assert err.key == f"[{section}].{key}"
    assert err.problem.startswith(("must be", "uid_range"))


@pytest.mark.parametrize(("section", "key"), EVERY_KEY)
def test_every_flag_with_a_wrong_value_names_the_flag(section: str, key: str) -> None:
    name = SCHEMA[section][key]
    with pytest.raises(SettingsError) as err:
        load_settings(None, {name: {"a": 1}}, {})
    assert err.value.key == "--" + name.replace("_", "-")
    assert err.value.source == "command line"
    assert str(err.value).startswith(f"command line: --{name.replace('_', '-')}: ")


@pytest.mark.parametrize(
    ("header", "body", "keys"),
    [
        *[(f"[{section}]", "", list(keys)) for section, keys in SCHEMA.items() if section != "providers"],
        ("[providers]", "", ["enabled", "sfcompute"]),
        ("[providers.sfcompute]", "", ["buy_via", "controller_url", "image_id", "join_token_ttl_s"]),
        ("[kubernetes]", K8S, ["kubeconfig", "server", "image", "fake_gpus", "reconcile_s"]),
        ("[budgets]", "", ["limits"]),
        (
            "[controller.consolidation]",
            "",
            ["enabled", "max_used_fraction", "restart_overhead_s", "max_moves"],
        ),
    ],
)
def test_an_unknown_key_is_named_with_the_keys_that_exist(header: str, body: str, keys: list[str]) -> None:
    err = refusal(f"{header}\n{body}bogus_key = 1\n")
    assert err.problem == "unknown setting"
    assert (
        err.key == header.replace("[controller.consolidation]", "[controller].consolidation") + ".bogus_key"
    )
    assert err.hint is not None and all(k in err.hint for k in keys)


def test_an_unknown_section_names_the_sections_that_exist() -> None:
    err = refusal("[loop]\ntick_s = 1\n")
    assert (err.key, err.problem) == ("[loop]", "unknown section")
    assert err.hint is not None and all(s in err.hint for s in SECTIONS)
    err = refusal("loops = 3\n")
    assert err.key == "[loops]" and err.problem.startswith("must be a table")


@settings(max_examples=80, deadline=None)
@given(value=st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(10**6), 10**6))
def test_a_positive_interval_loads_exactly_when_it_is_above_zero(value: float) -> None:
    text = f"[loops]\nexecutor_interval_s = {value!r}\n"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "scalar.toml"
        path.write_text(text)
        if value > 0:
            assert math.isclose(load_settings(path, {}, {}).executor_interval_s, value)
        else:
            with pytest.raises(SettingsError) as err:
                load_settings(path, {}, {})
            assert err.value.key == "[loops].executor_interval_s"
            assert err.value.problem == f"must be > 0, got {value!r}"


@settings(max_examples=40, deadline=None)
@given(value=st.integers(-100, 70000) | st.booleans() | st.text(max_size=5))
def test_a_port_is_a_whole_number_from_0_to_65535(value: int | bool | str) -> None:
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 65535
    try:
        got = load_settings(None, {"port": value}, {}).port
    except SettingsError as err:
        assert not ok and err.key == "--port" and "port number 0-65535" in err.problem
    else:
        assert ok and got == value


def test_the_layers_merge_key_by_key() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "scalar.toml"
        path.write_text('[loops]\ntick_s = 0.5\nprice_interval_s = 30\n[store]\ndata_dir = "from-file"\n')
        settings = load_settings(path, {"price_interval_s": 7.0}, {"SCALAR_DATABASE_URL": "sqlite:///env.db"})
    assert (settings.tick_s, settings.price_interval_s) == (0.5, 7.0)  # the flag replaced one key only
    assert settings.data_dir == Path("from-file") and settings.database_url == "sqlite:///env.db"


def test_where_a_bad_value_came_from_is_named() -> None:
    err = refusal("[loops]\ntick_s = 1\n", env={"SCALAR_DATABASE_URL": "oracle://x"})
    assert (err.source, err.key) == ("environment", "SCALAR_DATABASE_URL")
    with pytest.raises(SettingsError) as flag:
        load_settings(None, {"database_url": "oracle://x"}, {"SCALAR_DATABASE_URL": "sqlite:///ok.db"})
    assert (flag.value.source, flag.value.key) == ("command line", "--database-url")
    with pytest.raises(SettingsError) as unknown:
        load_settings(None, {"tick": 1}, {})
    assert (unknown.value.key, unknown.value.problem) == ("tick", "unknown setting")


def test_nested_and_listed_keys_keep_their_path() -> None:
    assert refusal('[providers]\nenabled = ["prime", 3]\n').key == "[providers].enabled[1]"
    assert refusal('[endpoints]\nhandlers = ["ok", "not ok"]\n').key == "[endpoints].handlers[1]"
    assert refusal("[providers.sfcompute]\nzone = 1\n").key == "[providers.sfcompute].zone"
    err = refusal("[controller.consolidation]\nmax_used_fraction = 1.5\n")
    assert (err.key, err.problem) == (
        "[controller].consolidation.max_used_fraction",
        "must be a probability between 0 and 1, got 1.5",
    )
    err = refusal('[[budgets.limits]]\nscope = "global"\nusd_per_hour = true\n')
    assert (err.key, err.problem) == (
        "[budgets].limits[0].usd_per_hour",
        "must be an amount in USD, got True",
    )
    err = refusal("[kubernetes]\n" + K8S.replace('"http://c"', '"c:80"'))
    assert (err.key, err.problem) == ("[kubernetes].controller_url", "must be an http(s) URL, got 'c:80'")


def test_the_kubernetes_table_alone_is_checked_the_same_way() -> None:
    with pytest.raises(SettingsError) as err:
        kubernetes_settings({"kubeconfig": "k", "controller_url": "http://c", "image": "i", "reconcile_s": 0})
    assert (err.value.key, err.value.problem) == ("[kubernetes].reconcile_s", "must be > 0, got 0")
    with pytest.raises(SettingsError) as missing:
        kubernetes_settings({"kubeconfig": "k", "controller_url": "http://c"})
    assert (missing.value.key, missing.value.problem) == ("[kubernetes].image", "is required")


def test_the_consolidation_table_builds_the_engine_policy() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "scalar.toml"
        path.write_text("[controller.consolidation]\nenabled = false\nmax_moves = 2\n")
        policy = load_settings(path, {}, {}).controller.consolidation
    assert policy == ConsolidationPolicy(enabled=False, max_moves=2)
