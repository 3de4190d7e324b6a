"""Secret job environment values: encrypted at rest, shown as ``***``, opened only for the agent.

A job's ``env`` value may be ``{"value": "...", "secret": true}``. ``seal_job_fields`` replaces it, before
anything is stored, with ``scalar-secret:v1:<Fernet token>`` (AES-128-CBC + HMAC-SHA256, from
``cryptography``): the event log, the inbox and the job projection only ever hold the ciphertext. The API
shows such values as ``***`` (``scalar.wire.jobs.JobOut``); ``open_env`` decrypts them for the agent's
assignment, the one place the value is needed.

The key: ``$SCALAR_SECRET_KEY`` (a Fernet key: ``python -c "from cryptography.fernet import Fernet;
print(Fernet.generate_key().decode())"``), else ``<data dir>/secret.key``, created 0600 on first use.
Control planes sharing one database must share the key (set ``SCALAR_SECRET_KEY`` on each).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet, InvalidToken

from scalar.domain.reasons import Reason
from scalar.wire.jobs import REDACTED, SECRET_PREFIX

SECRET_KEY_ENV = "SCALAR_SECRET_KEY"
KEY_FILE_NAME = "secret.key"
SEALED_PREFIX = SECRET_PREFIX + "v1:"

__all__ = ["REDACTED", "SECRET_PREFIX", "SecretBox", "open_env", "redact_env", "seal_job_fields"]


class SecretError(ValueError):
    """A secret cannot be opened (wrong key, or not a sealed value)."""


class SecretBox:
    """Seals and opens secret values with one Fernet key."""

    def __init__(self, key: bytes) -> None:
        self._fernet = Fernet(key)

    @classmethod
    def load(cls, data_dir: Path, env: Mapping[str, str] | None = None) -> SecretBox:
        """The key of ``$SCALAR_SECRET_KEY``, else of ``<data_dir>/secret.key`` (created 0600)."""
        env = os.environ if env is None else env
        given = env.get(SECRET_KEY_ENV, "").strip()
        if given:
            try:
                return cls(given.encode())
            except ValueError:
                raise SecretError(
                    f"${SECRET_KEY_ENV} is not a Fernet key (32 url-safe base64-encoded bytes); make one "
                    'with: python -c "from cryptography.fernet import Fernet; '
                    'print(Fernet.generate_key().decode())"'
                ) from None
        path = Path(data_dir) / KEY_FILE_NAME
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                pass  # another process made it meanwhile
            else:
                with os.fdopen(fd, "wb") as out:
                    out.write(Fernet.generate_key())
        return cls(path.read_bytes().strip())

    def seal(self, value: str) -> str:
        return SEALED_PREFIX + self._fernet.encrypt(value.encode()).decode()

    def open(self, sealed: str) -> str:
        if not sealed.startswith(SEALED_PREFIX):
            raise SecretError("not a sealed value")
        try:
            return self._fernet.decrypt(sealed[len(SEALED_PREFIX) :].encode()).decode()
        except InvalidToken:
            raise SecretError(
                f"a secret cannot be opened with this key (was ${SECRET_KEY_ENV} or the data dir's "
                f"{KEY_FILE_NAME} changed?)"
            ) from None


def is_sealed(value: object) -> bool:
    return isinstance(value, str) and value.startswith(SECRET_PREFIX)


def seal_job_fields(
    fields: Mapping[str, Any], box: Callable[[], SecretBox]
) -> tuple[dict[str, Any], list[Reason]]:
    """The fields with each ``env`` value a plain string: secret ones sealed with ``box()`` (asked for only
    when there is a secret), ``{"value": v}`` as ``v``. A value that looks sealed already, or a malformed
    one, is a problem."""
    out = dict(fields)
    env = fields.get("env")
    if not isinstance(env, Mapping):
        return out, []
    plain: dict[str, Any] = {}
    for name, value in env.items():
        if isinstance(value, Mapping):
            secret, text = value.get("secret", False), value.get("value")
            if not isinstance(text, str) or not isinstance(secret, bool) or set(value) - {"value", "secret"}:
                return out, [_env_problem(name, 'give a string, or {"value": "...", "secret": true}')]
            if secret:
                plain[name] = box().seal(text)
                continue
            value = text
        if is_sealed(value):
            return out, [_env_problem(name, f"a value may not start with {SECRET_PREFIX!r}")]
        plain[name] = value
    out["env"] = plain
    return out, []


def _env_problem(name: object, fix: str) -> Reason:
    return Reason("invalid_env", f"env.{name}: {fix}", "env")


def redact_env(env: Mapping[str, str] | None) -> dict[str, str] | None:
    """``env`` with every secret value shown as ``***``."""
    if env is None:
        return None
    return {k: REDACTED if is_sealed(v) else v for k, v in env.items()}


def open_env(env: Mapping[str, str] | None, box: SecretBox) -> dict[str, str]:
    """``env`` with every secret value decrypted: for the agent's assignment only."""
    return {k: box.open(v) if is_sealed(v) else v for k, v in (env or {}).items()}
