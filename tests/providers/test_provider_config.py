"""Provider settings from environment variables: opt-in only, every base URL overridable."""

from __future__ import annotations

import pytest

from scalar.providers.config import PROVIDER_NAMES, settings_from_env
from scalar.providers.primeintellect import PrimeIntellectProvider
from scalar.providers.runpod import RunPodProvider
from scalar.providers.sfcompute import SFComputeProvider


@pytest.mark.parametrize("name", [n.lower() for n in PROVIDER_NAMES])
def test_nothing_is_enabled_by_default(name: str) -> None:
    settings = settings_from_env({}, name, "https://example.invalid/api")
    assert not settings.enabled and settings.api_key is None
    assert settings.base_url == "https://example.invalid/api"
    assert (
        settings.disabled_reason is not None and f"SCALAR_{name.upper()}_API_KEY" in settings.disabled_reason
    )


def test_an_api_key_enables_a_provider() -> None:
    settings = settings_from_env(
        {"SCALAR_SFCOMPUTE_API_KEY": "sk-1"}, "sfcompute", "https://api.sfcompute.com"
    )
    assert settings.enabled and settings.api_key == "sk-1" and settings.disabled_reason is None


def test_a_base_url_alone_enables_a_provider_and_overrides_the_default() -> None:
    env = {"SCALAR_PRIMEINTELLECT_BASE_URL": "http://127.0.0.1:8123/api/v1/"}
    settings = settings_from_env(env, "primeintellect", "https://api.primeintellect.ai/api/v1")
    assert settings.enabled and settings.api_key is None
    assert settings.base_url == "http://127.0.0.1:8123/api/v1"  # trailing slash dropped


def test_blank_values_count_as_unset() -> None:
    env = {"SCALAR_GCP_API_KEY": "  ", "SCALAR_GCP_BASE_URL": ""}
    assert not settings_from_env(env, "gcp", "https://cloudbilling.googleapis.com").enabled


def test_runpod_has_its_own_data_plane_url() -> None:
    env = {"SCALAR_RUNPOD_API_KEY": "rp", "SCALAR_RUNPOD_DATA_URL": "http://127.0.0.1:9/v2"}
    runpod = RunPodProvider.from_env(env)
    assert runpod.settings.data_url == "http://127.0.0.1:9/v2"
    assert runpod.settings.base_url == "https://api.runpod.io"
    assert RunPodProvider.from_env({}).settings.data_url == "https://api.runpod.ai/v2"


def test_clients_read_their_own_variables() -> None:
    env = {"SCALAR_SFCOMPUTE_API_KEY": "a", "SCALAR_PRIMEINTELLECT_BASE_URL": "http://127.0.0.1:1"}
    assert SFComputeProvider.from_env(env).settings.enabled
    assert PrimeIntellectProvider.from_env(env).settings.base_url == "http://127.0.0.1:1"
    assert not RunPodProvider.from_env(env).settings.enabled
