"""scalar.toml: defaults without a file, the example documents every key with its default, bad values
name their key and say how to fix them, the environment and flags override the file."""

from __future__ import annotations

import tomllib
from dataclasses import fields
from decimal import Decimal
from pathlib import Path

import pytest

from scalar.domain.tier import Tier
from scalar.engine import ControllerConfig
from scalar.engine.config import ScaleGroupConfig
from scalar.providers.builtin.config import MARKET_PROVIDERS
from scalar.runtime import Settings, SettingsError, load_settings
from scalar.runtime.settings import SCHEMA
from tests.conftest import REPO

EXAMPLE = REPO / "scalar.example.toml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "scalar.toml"
    path.write_text(text)
    return path


def test_without_a_file_everything_has_a_sensible_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no ./scalar.toml here
    settings = load_settings(None, {}, {})
    assert settings.database_url == "sqlite:///.scalar/scalar.db"
    assert (settings.host, settings.port, settings.time_scale, settings.market_seed) == (
        "127.0.0.1",
        8000,
        1.0,
        None,
    )
    assert settings.controller == ControllerConfig()
    assert settings.providers.enabled == MARKET_PROVIDERS
    assert settings.holder != load_settings(None, {}, {}).holder  # unique per instance


def test_the_example_file_loads_and_equals_the_defaults() -> None:
    loaded = load_settings(EXAMPLE, {}, {})
    defaults = Settings()
    for f in fields(Settings):
        if f.name != "holder":
            assert getattr(loaded, f.name) == getattr(defaults, f.name), f.name


def test_the_example_file_documents_every_key() -> None:
    data = tomllib.loads(EXAMPLE.read_text())
    text = EXAMPLE.read_text()
    for section, keys in SCHEMA.items():
        for key in keys:
            assert key in data.get(section, {}) or f"# {key} =" in text, f"[{section}].{key} undocumented"
    controller = data["controller"]
    for name in ControllerConfig.__dataclass_fields__:  # unset by default (TOML has no null): commented out
        assert name in controller or f"# {name} =" in text, f"[controller].{name} undocumented"
    for name in ScaleGroupConfig.__dataclass_fields__:
        assert name in controller["scale_groups"][0] or f"# {name} =" in text, f"scale group {name}"


def test_a_file_sets_values_and_the_controller_table_is_the_engine_config(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
[store]
data_dir = "state"
[market]
seed = 9
time_scale = 60
[loops]
tick_s = 0.5
[lease]
ttl_s = 6
renew_s = 1
[providers]
enabled = ["sfcompute", "prime"]
[controller]
idle_release_s = 60
[controller.tiers.FLEX]
max_price_per_gpu_hour = 3.5
[[controller.scale_groups]]
name = "h100"
gpu_models = ["H100"]
max_slices = 8
""",
    )
    settings = load_settings(path, {}, {})
    assert settings.database_url == "sqlite:///state/scalar.db"
    assert (settings.market_seed, settings.time_scale, settings.tick_s) == (9, 60.0, 0.5)
    assert (settings.lease_ttl_s, settings.lease_renew_s) == (6.0, 1.0)
    assert settings.providers.enabled == ("sfcompute", "prime")
    assert settings.controller.idle_release_s == 60
    assert settings.controller.cap_for(Tier.FLEX) == Decimal("3.5")
    assert settings.controller.cap_for(Tier.FAST) is None
    assert [g.name for g in settings.controller.scale_groups] == ["h100"]
    assert settings.controller.scale_groups[0].max_slices == 8


def test_the_environment_and_flags_override_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, '[store]\ndatabase_url = "sqlite:///from-file.db"\n[server]\nport = 9000\n')
    env = {"SCALAR_DATABASE_URL": "postgresql://postgres@db:5432/scalar"}
    settings = load_settings(path, {"port": 9100, "host": None}, env)
    assert settings.database_url == "postgresql://postgres@db:5432/scalar"
    assert (settings.port, settings.host) == (9100, "127.0.0.1")
    assert load_settings(path, {"database_url": "sqlite:///flag.db"}, env).database_url == "sqlite:///flag.db"


@pytest.mark.parametrize(
    ("text", "key", "words"),
    [
        ("[loops]\ntick_s = -1\n", "[loops].tick_s", "must be > 0"),
        ("[loops]\ntick = 1\n", "[loops].tick", "use one of tick_s"),
        ("[lease]\nttl_s = 2\nrenew_s = 5\n", "[lease].renew_s", "renew well within the lease"),
        ("[server]\nport = 70000\n", "[server].port", "port number"),
        ("[loops]\npark_ttl_s = 60\n", "[loops].park_ttl_s", "well above action_stale_after_s"),
        ("[market]\nseed = -3\n", "[market].seed", "whole number >= 0"),
        ("[market]\nboot_failure_rate = 2\n", "[market].boot_failure_rate", "between 0 and 1"),
        ('[store]\ndatabase_url = "mysql://x/y"\n', "[store].database_url", "not supported"),
        ('[providers]\nenabled = ["sfcompute", "lambda"]\n', "[providers].enabled[1]", "unknown provider"),
        ("[gpus]\nx = 1\n", "[gpus]", "unknown section"),
        (
            "[controller.tiers.FLEX]\nmax_price_per_gpu_hour = -1\n",
            "[controller].tiers.FLEX.max_price_per_gpu_hour",
            "positive amount",
        ),
        (
            "[[controller.scale_groups]]\nmax_slices = 1\nmin_slices = 2\n",
            "[controller].scale_groups[0].min_slices",
            "make min_slices <= max_slices",
        ),
        ("[controller]\nspeed = 1\n", "[controller].speed", "unknown setting"),
        (
            '[controller]\npacking_score = "fgd"\n',
            "[controller].packing_score",
            "use one of 'scalar', 'seed'",
        ),
        ("[loops\n", "(file)", "not valid TOML"),
    ],
)
def test_a_bad_value_names_its_key_and_how_to_fix_it(tmp_path: Path, text: str, key: str, words: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(SettingsError) as err:
        load_settings(path, {}, {})
    assert err.value.key == key
    assert words in str(err.value) and str(err.value).startswith(str(path))


def test_a_missing_file_and_a_bad_flag_are_refused(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="does not exist"):
        load_settings(tmp_path / "nope.toml", {}, {})
    with pytest.raises(SettingsError, match="--time-scale: must be > 0"):
        load_settings(None, {"time_scale": 0}, {})
    with pytest.raises(SettingsError, match="SCALAR_DATABASE_URL"):
        load_settings(None, {}, {"SCALAR_DATABASE_URL": "oracle://x"})
