"""What ``GET /budgets`` and ``PUT /budgets`` answer: the spend limits and what is committed against each
scope (docs/budgets.md).

One model from the runtime to the API: ``runtime.plane.access.AccessService.budgets`` returns it (built from
``runtime.budgets.get_limits``), the routes declare it as their response model. Amounts are decimal strings
in USD; a user token sees the global rows and its own tenant's only (``runtime.auth.redact_view``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class BudgetLimitOut(BaseModel):
    scope: str = Field(description="'global' or a tenant's name")
    usd_per_hour: str | None = Field(description="committed USD per hour; null: no limit")
    usd_per_period: str | None = Field(description="USD per period; null: no limit")
    period: Literal["day", "month"] = Field(description="the period of usd_per_period (UTC)")


class BudgetUsageOut(BaseModel):
    scope: str = Field(description="'global' or a tenant's name")
    committed_usd_per_hour: str = Field(description="the rate of the contracts running now")
    period: Literal["day", "month"]
    period_start: str = Field(description="when the current period began (ISO 8601)")
    committed_usd_this_period: str = Field(description="spent in the period and due until it ends")


class BudgetsOut(BaseModel):
    limits: list[BudgetLimitOut] = Field(description="every limit; scopes not listed have none")
    usage: list[BudgetUsageOut] = Field(description="per scope (global first): what is committed")
