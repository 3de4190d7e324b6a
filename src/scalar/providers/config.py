"""Provider settings read from environment variables: opt-in, never enabled by default.

For a provider ``NAME`` (one of SFCOMPUTE, PRIMEINTELLECT, RUNPOD, AZURE, GCP):

- ``SCALAR_<NAME>_API_KEY``: the credential;
- ``SCALAR_<NAME>_BASE_URL``: overrides the API's base URL (point it at a local replay server in tests);
- ``SCALAR_RUNPOD_DATA_URL``: RunPod's serverless data plane, separate from its GraphQL API.

A provider is enabled when its API key or its base URL is set. Nothing else turns one on, so a fresh
install makes no outside calls. ``disabled_reason`` says, as a sentence, why one is off.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

PROVIDER_NAMES = ("SFCOMPUTE", "PRIMEINTELLECT", "RUNPOD", "AZURE", "GCP")


@dataclass(frozen=True, slots=True)
class ProviderSettings:
    """How to reach one provider. ``name`` is the lower-case provider name (``"sfcompute"``)."""

    name: str
    base_url: str
    api_key: str | None
    data_url: str | None = None
    enabled: bool = False
    disabled_reason: str | None = None


def env_prefix(name: str) -> str:
    """``"sfcompute"`` -> ``"SCALAR_SFCOMPUTE_"``."""
    return f"SCALAR_{name.upper().replace('-', '').replace('_', '')}_"


def _value(env: Mapping[str, str], key: str) -> str | None:
    raw = env.get(key)
    if raw is None:
        return None
    raw = raw.strip()
    return raw or None


def settings_from_env(
    env: Mapping[str, str],
    name: str,
    default_base_url: str,
    default_data_url: str | None = None,
) -> ProviderSettings:
    """Read one provider's settings from ``env`` (pass ``os.environ`` or a plain dict)."""
    prefix = env_prefix(name)
    api_key = _value(env, prefix + "API_KEY")
    base_override = _value(env, prefix + "BASE_URL")
    data_override = _value(env, prefix + "DATA_URL")
    enabled = api_key is not None or base_override is not None
    reason = None
    if not enabled:
        reason = (
            f"{name} is off: set {prefix}API_KEY (or {prefix}BASE_URL to point at a compatible server) "
            "to enable it"
        )
    return ProviderSettings(
        name=name.lower(),
        base_url=(base_override or default_base_url).rstrip("/"),
        api_key=api_key,
        data_url=(data_override or default_data_url),
        enabled=enabled,
        disabled_reason=reason,
    )
