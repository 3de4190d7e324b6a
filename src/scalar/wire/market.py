"""What ``GET /prices`` and ``GET /market`` answer: every offer with its source and freshness, and one ask
book per GPU model across providers.

One model from the runtime to every surface: ``runtime.market_view`` builds these, the API returns them as
they are, ``scalar prices`` reads the JSON back. A field is added here (and filled in ``market_view``) and
every surface has it. Prices are JSON numbers rounded to micro-dollars (``domain.money.to_json_number``:
an integral price is an int), times ISO 8601 text.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

JsonNumber = int | float


class OfferFlagOut(BaseModel):
    code: str = Field(description="the catalog's anomaly code")
    action: str = Field(description="what the catalog did with the price (kept, untrusted, dropped)")
    message: str


class OfferRowOut(BaseModel):
    provider: str
    source: str = Field(description="builtin (the built-in market) or live (a real provider's price)")
    region: str
    availability_zone: str | None
    instance_type: str
    gpu_model: str | None
    gpu_count: int | float
    gpu_memory_gb: int | float
    vcpu: int | float
    memory_gb: int | float
    price_per_hour: JsonNumber | None
    price_per_gpu_hour: JsonNumber | None = Field(description="null for an offer without GPUs")
    spot: bool
    interruption_rate: JsonNumber | None
    observed_at: str | None = Field(description="when the seller published the price, if it says")
    fetched_at: str = Field(description="when the control plane read it")
    age_s: JsonNumber
    stale: bool
    trusted: bool = Field(description="false: flagged by the catalog; listed but never quoted")
    flags: list[OfferFlagOut]


class PricesOut(BaseModel):
    count: int
    offers: list[OfferRowOut]


class MarketLevelOut(BaseModel):
    price_per_gpu_hour: JsonNumber
    quantity_gpus: JsonNumber = Field(description="GPUs offered at this price")
    cumulative_gpus: JsonNumber = Field(description="GPUs offered at this price or cheaper")
    providers: list[str]
    sources: list[str]
    offers: int
    stale_offers: int


class GpuMarketOut(BaseModel):
    gpu_model: str
    best_price_per_gpu_hour: JsonNumber
    total_gpus: JsonNumber
    providers: list[str]
    levels: list[MarketLevelOut] = Field(description="cheapest first")


class MarketOut(BaseModel):
    gpu_models: list[GpuMarketOut]
