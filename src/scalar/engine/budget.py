"""Spend limits: per tenant and global, in USD per hour and in USD per period (a UTC day or month).

Pure: the autoscaler asks :func:`check_purchase` before every ``BuyCapacity`` and the runtime asks it again
inside the transaction that records the purchase, over the commitments stored in the database.

A **commitment** is money the cluster is committed to spend at a rate (USD per hour) over a time span:

- a purchase on its way (PLACED or ACKNOWLEDGED) at its limit price, from when it was placed for its
  whole contract;
- a block at its granted price, from its start until it ends, is released or reaches its end time.

Each commitment is shared between tenants by the GPUs their jobs asked for (``shares`` sum to 1); capacity
bought for no job (a group's ``min_slices``) belongs to :data:`SHARED` and counts towards global limits only.

A limit holds when, with the new purchase added,

- ``usd_per_hour``: the rate of every commitment live now stays within it (rates only fall later, as
  commitments end, so now is the worst moment);
- ``usd_per_period``: for the current period and every later period the purchase reaches, what the
  commitments spend inside that period (spent already + due until its end, if nothing is released)
  stays within it. A 7-day contract is checked against 8 daily windows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from scalar.domain.errors import InvalidSpecError
from scalar.domain.market import BlockGrant
from scalar.domain.money import cents_text, usd_cents
from scalar.domain.reasons import Reason
from scalar.domain.timefmt import exact_seconds
from scalar.engine.lifecycle import OrderStatus

if TYPE_CHECKING:
    from scalar.engine.state import ClusterState

BUDGET_EXCEEDED = "budget_exceeded"
GLOBAL = "global"
SHARED = "shared"
PERIODS = ("day", "month")
_HOUR = Decimal(3600)
_MAX_WINDOWS = 400  # a purchase longer than this many periods is checked against the first 400


@dataclass(frozen=True, slots=True)
class BudgetLimit:
    """One scope's limits. ``scope`` is ``global`` (everything) or a tenant's name; ``None`` = no limit."""

    scope: str = GLOBAL
    usd_per_hour: Decimal | None = None
    usd_per_period: Decimal | None = None
    period: str = "day"

    def __post_init__(self) -> None:
        if not isinstance(self.scope, str) or not self.scope.strip() or len(self.scope) > 64:
            raise InvalidSpecError(
                "scope", f"must be 'global' or a tenant name (1-64 chars), got {self.scope!r}"
            )
        for name in ("usd_per_hour", "usd_per_period"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, Decimal) or not value.is_finite() or value < 0):
                raise InvalidSpecError(name, f"must be an amount >= 0 in USD, got {value!r}")
        if self.period not in PERIODS:
            raise InvalidSpecError("period", f"unknown period {self.period!r}; use day or month")

    def to_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "usd_per_hour": None if self.usd_per_hour is None else str(self.usd_per_hour),
            "usd_per_period": None if self.usd_per_period is None else str(self.usd_per_period),
            "period": self.period,
        }


def limit_from_dict(data: Any, key: str = "budgets") -> BudgetLimit:
    """A limit from the config file's or the API's plain shape; errors name ``key.field``."""
    if not isinstance(data, Mapping):
        raise InvalidSpecError(key, "must be a table like {scope = 'global', usd_per_hour = 50}")
    known = set(BudgetLimit.__dataclass_fields__)
    kwargs: dict[str, Any] = {}
    for name, value in data.items():
        if name not in known:
            raise InvalidSpecError(
                f"{key}.{name}", "unknown setting", f"use one of {', '.join(sorted(known))}"
            )
        if name in ("usd_per_hour", "usd_per_period") and value is not None:
            if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
                raise InvalidSpecError(f"{key}.{name}", f"must be an amount in USD, got {value!r}")
            try:
                value = Decimal(str(value))
            except ArithmeticError:
                raise InvalidSpecError(f"{key}.{name}", f"must be an amount in USD, got {value!r}") from None
        kwargs[name] = value
    try:
        return BudgetLimit(**kwargs)
    except InvalidSpecError as err:
        raise InvalidSpecError(f"{key}.{err.field}", err.problem, err.hint) from None


def limits_from_list(data: Any, key: str = "budgets") -> tuple[BudgetLimit, ...]:
    if not isinstance(data, list | tuple):
        raise InvalidSpecError(key, "must be a list of limits")
    limits = tuple(limit_from_dict(item, f"{key}[{i}]") for i, item in enumerate(data))
    scopes = [lim.scope for lim in limits]
    for i, scope in enumerate(scopes):
        if scope in scopes[:i]:
            raise InvalidSpecError(f"{key}[{i}].scope", f"{scope!r} is given twice", "one limit per scope")
    return limits


@dataclass(frozen=True, slots=True)
class Commitment:
    """Money committed at ``usd_per_hour`` over ``[start, end)``, shared between tenants (shares sum to 1)."""

    key: str
    usd_per_hour: Decimal
    start: datetime
    end: datetime
    shares: Mapping[str, Decimal] = field(default_factory=lambda: {SHARED: Decimal(1)})

    def share_of(self, scope: str) -> Decimal:
        return Decimal(1) if scope == GLOBAL else self.shares.get(scope, Decimal(0))


def period_window(at: datetime, period: str) -> tuple[datetime, datetime]:
    """The UTC day or month holding ``at``."""
    at = at.astimezone(UTC)
    if period == "day":
        start = at.replace(hour=0, minute=0, second=0, microsecond=0)
        return start, start + timedelta(days=1)
    start = at.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    end = (
        start.replace(year=start.year + 1, month=1)
        if start.month == 12
        else start.replace(month=start.month + 1)
    )
    return start, end


def spend_in(commitments: Iterable[Commitment], scope: str, start: datetime, end: datetime) -> Decimal:
    """What ``scope`` spends inside ``[start, end)`` if nothing is released early."""
    total = Decimal(0)
    for c in commitments:
        share = c.share_of(scope)
        lo, hi = max(c.start, start), min(c.end, end)
        if share and hi > lo:
            total += c.usd_per_hour * share * exact_seconds(hi - lo) / _HOUR
    return total


def rate_at(commitments: Iterable[Commitment], scope: str, at: datetime) -> Decimal:
    """``scope``'s spend rate at ``at`` (USD per hour)."""
    return sum((c.usd_per_hour * c.share_of(scope) for c in commitments if c.start <= at < c.end), Decimal(0))


def _who(scope: str) -> str:
    return "the global" if scope == GLOBAL else f"tenant {scope}'s"


def check_purchase(
    limits: Sequence[BudgetLimit], existing: Sequence[Commitment], new: Commitment, now: datetime
) -> Reason | None:
    """``None`` when ``new`` keeps every applicable limit; else the first limit it breaks, with numbers."""
    for limit in limits:
        share = new.share_of(limit.scope)
        if not share:
            continue
        if limit.usd_per_hour is not None:
            committed = rate_at(existing, limit.scope, now)
            this = new.usd_per_hour * share
            if committed + this > limit.usd_per_hour:
                return Reason(
                    BUDGET_EXCEEDED,
                    f"this purchase adds {usd_cents(this)}/h to {_who(limit.scope)} committed {usd_cents(committed)}/h; "
                    f"its limit is {usd_cents(limit.usd_per_hour)}/h",
                    "usd_per_hour",
                    cents_text(this),
                    cents_text(committed),
                    str(limit.usd_per_hour),
                )
        if limit.usd_per_period is not None:
            start, end = period_window(now, limit.period)
            for _ in range(_MAX_WINDOWS):
                if start >= new.end:
                    break
                committed = spend_in(existing, limit.scope, start, end)
                this = spend_in((new,), limit.scope, start, end)
                if committed + this > limit.usd_per_period:
                    return Reason(
                        BUDGET_EXCEEDED,
                        f"this purchase would spend {usd_cents(this)} in the {limit.period} from "
                        f"{start.date().isoformat()}, where {_who(limit.scope)} committed {usd_cents(committed)}; its "
                        f"limit is {usd_cents(limit.usd_per_period)} per {limit.period}",
                        f"usd_per_{limit.period}",
                        cents_text(this),
                        cents_text(committed),
                        str(limit.usd_per_period),
                    )
                start, end = end, period_window(end, limit.period)[1]
    return None


def shares_by_gpus(tenants_gpus: Iterable[tuple[str, int]]) -> dict[str, Decimal]:
    """Tenant shares of a purchase, by the GPUs each tenant's jobs asked for (no jobs: all shared)."""
    gpus: dict[str, int] = {}
    for tenant, count in tenants_gpus:
        gpus[tenant] = gpus.get(tenant, 0) + max(int(count), 0)
    total = sum(gpus.values())
    if not total:
        return {SHARED: Decimal(1)}
    return {t: Decimal(n) / Decimal(total) for t, n in gpus.items() if n}


def block_commitment(key: str, grant: BlockGrant, end: datetime, shares: Mapping[str, Decimal]) -> Commitment:
    return Commitment(key, grant.cost_per_hour, grant.start_time, max(end, grant.start_time), shares)


_IN_FLIGHT = (OrderStatus.PLACED, OrderStatus.ACKNOWLEDGED)
_LOOKBACK = timedelta(days=32)  # the longest period (a month) that can still count an ended commitment


def tenant_of(spec: object) -> str:
    """A job's tenant (``default`` for jobs submitted without one)."""
    return str(getattr(spec, "tenant", None) or "default")


def shares_of_jobs(state: ClusterState, job_ids: Iterable[str]) -> dict[str, Decimal]:
    pairs = []
    for job_id in job_ids:
        rec = state.jobs.get(job_id)
        if rec is not None:
            pairs.append((tenant_of(rec.spec), int(rec.spec.gpu_count)))
    return shares_by_gpus(pairs)


def commitments(state: ClusterState, now: datetime) -> list[Commitment]:
    """Every commitment that can still count towards a limit at ``now`` (ended ones within a month)."""
    out: list[Commitment] = []
    since = now - _LOOKBACK
    for order in state.orders.values():
        if order.status not in _IN_FLIGHT:
            continue
        req = order.request
        rate = (req.limit_price_per_gpu_hour or Decimal(0)) * req.node_count * req.gpus_per_node
        end = order.placed_at + timedelta(seconds=req.duration_s)
        out.append(Commitment(order.key, rate, order.placed_at, end, shares_of_jobs(state, order.for_jobs)))
    for block in state.blocks.values():
        grant = block.grant
        end = block.released_at or block.ended_at or grant.end_time
        if end <= since:
            continue
        bought = state.orders.get(block.order_key) if block.order_key else None
        shares = shares_of_jobs(state, bought.for_jobs) if bought is not None else {SHARED: Decimal(1)}
        out.append(block_commitment(block.order_key or grant.block_id, grant, end, shares))
    return out


@dataclass(frozen=True, slots=True)
class BudgetFit:
    """What of a launch the limits allow: ``launches`` for ``job_ids`` (0: nothing), and why others wait."""

    launches: int
    job_ids: tuple[str, ...]
    refused: Mapping[str, Reason]  # job id -> the limit that holds it back


def fit_launch(
    state: ClusterState,
    limits: Sequence[BudgetLimit],
    key: str,
    usd_per_launch_hour: Decimal,
    launches: int,
    duration_s: float,
    job_ids: Sequence[str],
    now: datetime,
) -> BudgetFit:
    """The launch as routed if it keeps every limit; else, when it serves several tenants, only the jobs of
    the tenants whose own limits hold (launches scaled by their share of the GPUs); else nothing."""
    everything = BudgetFit(launches, tuple(job_ids), {})
    if not limits:
        return everything
    over = check_in_state(state, limits, key, usd_per_launch_hour * launches, duration_s, job_ids, now)
    if over is None:
        return everything
    by_tenant: dict[str, list[str]] = {}
    for job_id in job_ids:
        rec = state.jobs.get(job_id)
        by_tenant.setdefault(tenant_of(rec.spec) if rec is not None else "default", []).append(job_id)
    gpus = {j: int(state.jobs[j].spec.gpu_count) if j in state.jobs else 0 for j in job_ids}
    total = sum(gpus.values()) or 1
    refused: dict[str, Reason] = dict.fromkeys(job_ids, over)
    if len(by_tenant) > 1:
        kept: list[str] = []
        for tenant_jobs in by_tenant.values():
            n = max(1, -(-launches * sum(gpus[j] for j in tenant_jobs) // total))
            alone = check_in_state(state, limits, key, usd_per_launch_hour * n, duration_s, tenant_jobs, now)
            if alone is None:
                kept += tenant_jobs
            else:
                refused.update(dict.fromkeys(tenant_jobs, alone))
        if kept:
            n = min(launches, max(1, -(-launches * sum(gpus[j] for j in kept) // total)))
            if check_in_state(state, limits, key, usd_per_launch_hour * n, duration_s, kept, now) is None:
                return BudgetFit(n, tuple(kept), {j: r for j, r in refused.items() if j not in kept})
            refused.update(dict.fromkeys(kept, over))
    return BudgetFit(0, (), refused)


def check_in_state(
    state: ClusterState,
    limits: Sequence[BudgetLimit],
    key: str,
    usd_per_hour: Decimal,
    duration_s: float,
    job_ids: Sequence[str],
    now: datetime,
) -> Reason | None:
    """The autoscaler's check of one purchase against the limits and what ``state`` has committed."""
    if not limits:
        return None
    new = Commitment(
        key, usd_per_hour, now, now + timedelta(seconds=duration_s), shares_of_jobs(state, job_ids)
    )
    return check_purchase(limits, commitments(state, now), new, now)


def budgets_text(limits: Sequence[BudgetLimit]) -> str:
    """``spend limits now: global $50.00/h, $1,000.00 per day; tenant ml $20.00/h``."""
    if not limits:
        return "spend limits now: none"
    parts = []
    for lim in limits:
        said = [f"{usd_cents(lim.usd_per_hour)}/h"] if lim.usd_per_hour is not None else []
        if lim.usd_per_period is not None:
            said.append(f"{usd_cents(lim.usd_per_period)} per {lim.period}")
        who = "global" if lim.scope == GLOBAL else f"tenant {lim.scope}"
        parts.append(f"{who} {', '.join(said) or 'unlimited'}")
    return "spend limits now: " + "; ".join(parts)
