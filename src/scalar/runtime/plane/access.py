"""``AccessService``: who may do what, and what they may spend: API tokens and the audit log
(``runtime/auth.py``, docs/security.md), the key secret job env values are sealed with
(``runtime/secrets.py``), and spend limits (``runtime/budgets.py``, docs/budgets.md)."""

from __future__ import annotations

from typing import Any

from scalar.runtime import auth as auth_mod
from scalar.runtime import budgets as budgets_mod
from scalar.runtime import secrets as secrets_mod
from scalar.runtime.plane.core import PlaneCore
from scalar.wire.auth import AuditEntryOut, TokenCreated, TokenOut
from scalar.wire.budgets import BudgetsOut


class AccessService:
    """Tokens, the audit log, the secret box and budgets of one control-plane process."""

    def __init__(self, core: PlaneCore) -> None:
        self._core = core
        self._secret_box: secrets_mod.SecretBox | None = None

    def secret_box(self) -> secrets_mod.SecretBox:
        """The key secret job env values are sealed with (``$SCALAR_SECRET_KEY`` or the data dir's)."""
        if self._secret_box is None:
            self._secret_box = secrets_mod.SecretBox.load(self._core.settings.data_dir, self._core.live_env)
        return self._secret_box

    @property
    def tokens(self) -> auth_mod.TokenService:
        return auth_mod.TokenService(lambda: self._core.opened()[0], self._core.clock)

    def authenticate(self, token: str) -> auth_mod.Principal | None:
        return self.tokens.authenticate(token)

    def create_token(
        self,
        tenant: str,
        role: str,
        name: str | None = None,
        *,
        actor: str = "(local)",
        expires_in: str | None = None,
    ) -> TokenCreated:
        return self.tokens.create(tenant, role, name, actor=actor, expires_in=expires_in)

    def list_tokens(self) -> list[TokenOut]:
        return self.tokens.list_all()

    def revoke_token(self, token_id: str, *, actor: str = "(local)") -> TokenOut:
        return self.tokens.revoke(token_id, actor=actor)

    def audit(
        self,
        tenant: str | None = None,
        action: str | None = None,
        after_id: int = 0,
        limit: int = 100,
        before_id: int | None = None,
    ) -> list[AuditEntryOut]:
        return self.tokens.audit(tenant, action, after_id, limit, before_id)

    def budgets(self) -> BudgetsOut:
        """Spend limits and what is committed against them (``runtime.budgets``), as ``GET /budgets``
        sends them (``wire/budgets.py``)."""
        store, _ = self._core.opened()
        return BudgetsOut.model_validate(budgets_mod.get_limits(store, self._core.clock()))

    def put_budgets(self, limits: Any, *, actor: str = "(local)") -> BudgetsOut:
        """Replace every spend limit (``[]``: none), audit-logged; ``InvalidSpecError`` names a bad field.
        Answers the limits now in force, as :meth:`budgets`."""
        store, _ = self._core.opened()
        return BudgetsOut.model_validate(
            budgets_mod.put_limits(store, limits, self._core.clock(), actor=actor)
        )
