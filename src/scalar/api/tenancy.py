"""The control plane as the caller may see it (docs/security.md, "Redaction").

``install_security`` hands the routes ``scoped_class(cp)(cp)``: job calls limited to the caller's tenant
(another tenant's job is 404), jobs submitted under it, and every answer passed through one redaction step
(``TenantScoped.as_caller_sees`` -> ``runtime.auth.redact_view``): a user sees other tenants' job ids,
names and limits as ``another tenant's job`` / ``another tenant``; an admin sees everything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from pydantic import BaseModel

from scalar.api.auth import current_principal, tenant_filter
from scalar.runtime.auth import redact_view
from scalar.wire.jobs import JobOut
from scalar.wire.views import PreviewOut

T = TypeVar("T")

# Calls whose answers hold no tenant's data (the market) or are for admins only: not redacted.
UNREDACTED_CALLS = frozenset(
    {
        "prices",
        "orderbook",
        "market_view",
        "provider_status",
        "quote",
        "health",
        "metrics_snapshot",
        "authenticate",
        "create_token",
        "list_tokens",
        "revoke_token",
        "audit",
    }
)


class TenantScoped:
    """The control plane as the caller may see it: job calls limited to the caller's tenant, jobs
    submitted under it, and every answer passed through one redaction step (``runtime.auth.redact_view``):
    a user sees other tenants' job ids, names and limits as ``another tenant's job`` / ``another tenant``
    in every view, reason, explanation and story; an admin sees everything. Every other call goes through
    unchanged (including ``isinstance`` checks against the API's port protocols, which see the wrapped
    object's calls)."""

    def __init__(self, inner: Any, tokens: Any = None) -> None:
        """``tokens``: who owns which job (``runtime.auth.TokenService``); default: ``inner.tokens``."""
        self._inner = inner
        self._tokens = tokens if tokens is not None else getattr(inner, "tokens", None)

    @property
    def unscoped(self) -> Any:
        return self._inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def as_caller_sees(self, answer: Any) -> Any:
        """``answer`` as the caller may see it (the one redaction step; admins see it whole)."""
        principal = current_principal()
        tokens = self._tokens
        if principal.is_admin or tokens is None or not isinstance(answer, dict | list | BaseModel):
            return answer
        return redact_view(answer, principal.tenant, tokens.foreign_job_ids, tokens.other_tenants)

    def submit_job(self, fields: Any) -> JobOut:
        result: JobOut = self._inner.submit_job({**fields, "tenant": current_principal().tenant})
        return result

    def preview_job(self, fields: Any) -> PreviewOut:
        """The preview of the job as the caller would submit it (its tenant's budgets apply); the answer is
        the controller's decision on the whole cluster, so other tenants' job ids in it are redacted."""
        result: PreviewOut = self._inner.preview_job({**fields, "tenant": current_principal().tenant})
        return self.as_caller_sees(result)  # type: ignore[no-any-return]

    def get_job(self, job_id: str) -> JobOut | None:
        result: JobOut | None = self._inner.get_job(job_id, tenant=tenant_filter())
        return self.as_caller_sees(result)  # type: ignore[no-any-return]

    def cancel_job(self, job_id: str) -> JobOut:
        result: JobOut = self._inner.cancel_job(job_id, tenant=tenant_filter())
        return self.as_caller_sees(result)  # type: ignore[no-any-return]

    def list_jobs(
        self,
        state: str | None = None,
        limit: int = 100,
        offset: int = 0,
        *,
        newest_first: bool = False,
        after: str | None = None,
    ) -> list[JobOut]:
        """A page of the caller's jobs (every job for an admin), redacted as one answer: the page's JSON
        goes through one redaction step (one look-up of whose jobs it names), then back into ``JobOut``."""
        result: list[JobOut] = self._inner.list_jobs(
            state, limit, offset, tenant=tenant_filter(), newest_first=newest_first, after=after
        )
        sent = [job.model_dump(mode="json", by_alias=True) for job in result]
        seen = self.as_caller_sees(sent)
        return result if seen is sent else [JobOut.model_validate(job) for job in seen]

    def explain_job(self, job_id: str) -> Any:
        if self.get_job(job_id) is None:
            return None
        return self.as_caller_sees(self._inner.explain_job(job_id))


def scoped_class(inner: Any) -> type[TenantScoped]:
    """A ``TenantScoped`` subclass that also declares the wrapped object's public calls, so a
    ``runtime_checkable`` protocol check (which looks at the class, on Python 3.12+) sees them; their
    answers go through ``as_caller_sees``."""
    names: dict[str, Any] = {}
    for name in dir(type(inner)):
        if name.startswith("_") or hasattr(TenantScoped, name):
            continue
        if callable(getattr(type(inner), name, None)):
            names[name] = _forwarder(name)
    return type(f"TenantScoped{type(inner).__name__}", (TenantScoped,), names)


def scoped_view(inner: T, tokens: Any) -> T:
    """``inner`` (another service the routes call, e.g. the serverless endpoints') with every answer passed
    through the same redaction step; ``tokens`` says who owns which job (``None``: no redaction)."""
    return cast(T, scoped_class(inner)(inner, tokens))


def _forwarder(name: str) -> Callable[..., Any]:
    def forward(self: TenantScoped, *args: Any, **kwargs: Any) -> Any:
        answer = getattr(self.unscoped, name)(*args, **kwargs)
        return answer if name in UNREDACTED_CALLS else self.as_caller_sees(answer)

    forward.__name__ = name
    return forward
