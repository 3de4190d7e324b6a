"""What ``GET /providers`` answers: each real provider's state as the control plane collects its prices.

One model from the runtime to every surface: ``runtime.prices.ProviderStatus.to_wire`` builds it, the
API returns it as it is (``ProvidersOut``), ``scalar providers`` and the dashboard's overview read it back
with ``ProvidersOut.model_validate``. A field is added here (and filled in ``to_wire``) and every surface
has it. Times are ISO 8601 text as the runtime wrote them (``datetime.isoformat``), not re-rendered.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class DroppedPriceOut(BaseModel):
    code: str = Field(description="why this price became no offer")
    offer: str = Field(description="the provider's key of the price")
    message: str


class ProviderStatusOut(BaseModel):
    name: str
    enabled: bool
    state: str = Field(description="ok | stale | error | disabled | pending (first fetch not done yet)")
    disabled_reason: str | None = Field(description="how to enable it, when disabled")
    last_success_at: str | None = Field(description="when the last successful fetch ended")
    age_s: float | None = Field(description="seconds since the last successful fetch")
    offer_count: int
    last_error: str | None
    last_error_at: str | None
    interval_s: float = Field(description="seconds between fetches")
    # defaults as ``runtime.prices.ProviderStatus``'s: what a server from before these fields means
    sells: str = Field(
        "none",
        description="live: the controller buys through this client; builtin: the built-in market sells "
        "under this name; none",
    )
    sells_note: str = ""
    anomaly_count: int = Field(0, description="prices flagged on the last good fetch (dropped ones included)")
    untrusted_count: int = 0
    dropped: list[DroppedPriceOut] = Field(
        default_factory=list, description="prices of the last good fetch that became no offer"
    )


class ProvidersOut(BaseModel):
    providers: list[ProviderStatusOut]
