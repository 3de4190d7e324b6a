"""What the contracts cost and what they delivered: the engine's per-block accounting as a report.

Every open block accrues, between two steps, ``price x GPUs x time`` and counts the GPU-seconds that held a
job, per job (engine/housekeeping.py ``accrue``; state between steps is constant, so both are exact). A
``BlockAccount`` is one block's accounting as plain values: the GPU-seconds paid for and those each tenant's
jobs held. ``cost_report`` turns accounts into the report ``GET /costs``, ``scalar costs`` and the dashboard
show, from the leader's memory (``Controller.costs``) or from the block projections any process reads
(runtime/views_market.py), with one rule so the two agree.

The identity ``paid = delivered + idle`` holds exactly at every level (block, provider, tenant, total): the
atoms are each block's paid GPU-hours and each (block, tenant)'s GPU-hours, rounded once to micro-hours;
idle is what a block paid for that no tenant held, and every total is a sum of atoms. Money the same way:
a block's accrued cost splits into its tenants' shares (by the GPU-seconds they held) and its idle cost.
Resold capacity (``sold_back_gpu_hours``, ``sold_back_revenue``; engine/resale.py) is reported with each
block. Sold GPU-hours are not paid-for time (accrual stops at a sold node's cut), so ``paid = delivered +
idle`` still holds, and for a block held to its end ``committed GPU-hours = paid + sold back``. What the
sold hours cost under the contract (``sold_back_cost``) is added back and the proceeds taken off:
``net_cost = accrued + sold_back_cost - sold_back_revenue``, for a block held to its end its committed value
less the resale proceeds; ``cost_per_delivered_gpu_hour`` divides ``net_cost``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal

from scalar.domain.money import round_micros
from scalar.domain.release import billing_unit_s
from scalar.engine.budget import tenant_of
from scalar.engine.state import BlockRecord, ClusterState

HOUR = Decimal(3600)
IDLE_TENANT = "(idle)"  # the by-tenant row of GPU-hours paid for that no job held
_ZERO = Decimal(0)


@dataclass(frozen=True, slots=True)
class BlockAccount:
    """One contract's accounting: GPU-seconds paid for, the GPU-seconds each tenant's jobs held (never more
    than paid in total), the money accrued and committed, and what was resold."""

    block_id: str
    provider: str
    status: str  # open | released | ended
    paid_gpu_s: Decimal
    busy_gpu_s_by_tenant: Mapping[str, Decimal]
    accrued: Decimal
    committed: Decimal
    sold_back_gpu_s: Decimal = _ZERO
    sold_back_revenue: Decimal = _ZERO
    sold_back_cost: Decimal = _ZERO  # what the sold GPU-seconds cost under the contract
    buyers: tuple[str, ...] = ()  # the tenants the block was bought for: its resale is credited to them


@dataclass(frozen=True, slots=True)
class TenantCost:
    """One tenant's part of the spend: the GPU-hours its jobs held and their share of the blocks' cost
    (``(idle)``: what no job held)."""

    tenant: str
    gpu_hours: Decimal
    cost: Decimal
    sold_back_gpu_hours: Decimal = _ZERO  # the resale credited to this tenant (a buyer of the block)
    sold_back_revenue: Decimal = _ZERO


@dataclass(frozen=True, slots=True)
class CostLine:
    """Totals of some blocks (one block, one provider or all): the identity
    ``paid_gpu_hours == delivered_gpu_hours + idle_gpu_hours`` holds exactly."""

    blocks: int
    committed: Decimal
    accrued: Decimal
    paid_gpu_hours: Decimal
    delivered_gpu_hours: Decimal
    idle_gpu_hours: Decimal
    idle_cost: Decimal
    sold_back_gpu_hours: Decimal
    sold_back_revenue: Decimal
    sold_back_cost: Decimal = _ZERO

    @property
    def net_cost(self) -> Decimal:
        """Spend, plus what the resold hours cost under their contracts, less resale proceeds: a block held
        to its end costs its committed value less what its resale brought in."""
        return self.accrued + self.sold_back_cost - self.sold_back_revenue

    @property
    def cost_per_delivered_gpu_hour(self) -> Decimal | None:
        if not self.delivered_gpu_hours:
            return None
        return round_micros(self.net_cost / self.delivered_gpu_hours)


@dataclass(frozen=True, slots=True)
class BlockCostLine:
    block_id: str
    provider: str
    status: str
    line: CostLine
    by_tenant: tuple[TenantCost, ...]


@dataclass(frozen=True, slots=True)
class ProviderCost:
    provider: str
    line: CostLine


@dataclass(frozen=True, slots=True)
class CostReport:
    """Spend so far (accrued while blocks were held), the contracts' full value (committed), $ per
    delivered GPU-hour (a GPU holding a job) and what idle GPUs cost; per provider, per block, per tenant."""

    total: CostLine
    by_provider: tuple[ProviderCost, ...]
    by_block: tuple[BlockCostLine, ...]
    # Each block's cost split by the GPU-hours each tenant's jobs held; ``(idle)`` is what no job held.
    by_tenant: tuple[TenantCost, ...]

    # The totals under the names the report has always had.
    @property
    def committed(self) -> Decimal:
        return self.total.committed

    @property
    def accrued(self) -> Decimal:
        return self.total.accrued

    @property
    def paid_gpu_hours(self) -> Decimal:
        return self.total.paid_gpu_hours

    @property
    def delivered_gpu_hours(self) -> Decimal:
        return self.total.delivered_gpu_hours

    @property
    def idle_gpu_hours(self) -> Decimal:
        return self.total.idle_gpu_hours

    @property
    def idle_cost(self) -> Decimal:
        return self.total.idle_cost

    @property
    def cost_per_delivered_gpu_hour(self) -> Decimal | None:
        return self.total.cost_per_delivered_gpu_hour


def _shares(
    total: Decimal, parts: Mapping[str, Decimal], weights: Mapping[str, Decimal]
) -> dict[str, Decimal]:
    """``parts`` (already rounded) trimmed so they never sum past ``total``: rounding can overshoot by a few
    micro-units; the excess comes off the largest part (``weights`` break ties by name)."""
    out = dict(parts)
    excess = sum(out.values(), _ZERO) - total
    while excess > 0 and out:
        name = max(out, key=lambda t: (out[t], weights.get(t, _ZERO), t))
        take = min(excess, out[name])
        out[name] -= take
        excess -= take
    return out


def block_line(account: BlockAccount) -> tuple[CostLine, dict[str, tuple[Decimal, Decimal]]]:
    """One block's totals and its atoms: per tenant (GPU-hours, cost), each rounded once."""
    paid_h = round_micros(account.paid_gpu_s / HOUR)
    accrued = round_micros(account.accrued)
    held = {t: s for t, s in account.busy_gpu_s_by_tenant.items() if s > 0}
    hours = _shares(paid_h, {t: round_micros(s / HOUR) for t, s in held.items()}, held)
    money = {
        t: round_micros(account.accrued * s / account.paid_gpu_s) if account.paid_gpu_s else _ZERO
        for t, s in held.items()
    }
    money = _shares(accrued, money, held)
    delivered = sum(hours.values(), _ZERO)
    charged = sum(money.values(), _ZERO)
    line = CostLine(
        blocks=1,
        committed=round_micros(account.committed),
        accrued=accrued,
        paid_gpu_hours=paid_h,
        delivered_gpu_hours=delivered,
        idle_gpu_hours=paid_h - delivered,
        idle_cost=accrued - charged,
        sold_back_gpu_hours=round_micros(account.sold_back_gpu_s / HOUR),
        sold_back_revenue=round_micros(account.sold_back_revenue),
        sold_back_cost=round_micros(account.sold_back_cost),
    )
    return line, {t: (hours[t], money[t]) for t in sorted(held)}


def _split(total: Decimal, names: tuple[str, ...]) -> dict[str, Decimal]:
    """``total`` in equal micro-rounded parts, the rounding residue on the first name: sums exactly."""
    part = round_micros(total / len(names))
    out = dict.fromkeys(names, part)
    out[names[0]] += total - part * len(names)
    return out


def resale_credit(line: CostLine, buyers: tuple[str, ...]) -> dict[str, tuple[Decimal, Decimal]]:
    """A block's resold GPU-hours and proceeds credited to the tenants it was bought for, in equal parts
    (``(idle)`` when it was bought for no job: a ``min_slices`` floor)."""
    if not line.sold_back_gpu_hours and not line.sold_back_revenue:
        return {}
    names = tuple(sorted(set(buyers))) or (IDLE_TENANT,)
    hours = _split(line.sold_back_gpu_hours, names)
    money = _split(line.sold_back_revenue, names)
    return {t: (hours[t], money[t]) for t in names}


def _add(a: CostLine, b: CostLine) -> CostLine:
    return CostLine(
        a.blocks + b.blocks,
        a.committed + b.committed,
        a.accrued + b.accrued,
        a.paid_gpu_hours + b.paid_gpu_hours,
        a.delivered_gpu_hours + b.delivered_gpu_hours,
        a.idle_gpu_hours + b.idle_gpu_hours,
        a.idle_cost + b.idle_cost,
        a.sold_back_gpu_hours + b.sold_back_gpu_hours,
        a.sold_back_revenue + b.sold_back_revenue,
        a.sold_back_cost + b.sold_back_cost,
    )


EMPTY_LINE = CostLine(0, _ZERO, _ZERO, _ZERO, _ZERO, _ZERO, _ZERO, _ZERO, _ZERO)


def cost_report(accounts: Iterable[BlockAccount], tenant: str | None = None) -> CostReport:
    """The report of these blocks. ``tenant``: keep only that tenant's by-tenant row (and no idle row)."""
    total = EMPTY_LINE
    providers: dict[str, CostLine] = {}
    blocks: list[BlockCostLine] = []
    tenants: dict[str, tuple[Decimal, Decimal, Decimal, Decimal]] = {}
    for account in accounts:
        line, atoms = block_line(account)
        total = _add(total, line)
        providers[account.provider] = _add(providers.get(account.provider, EMPTY_LINE), line)
        held = {t: (h, c) for t, (h, c) in atoms.items()}
        if line.paid_gpu_hours or line.accrued:
            held[IDLE_TENANT] = (line.idle_gpu_hours, line.idle_cost)
        credit = resale_credit(line, account.buyers)
        names = [*atoms, *(t for t in sorted(credit) if t not in atoms and t != IDLE_TENANT)]
        if IDLE_TENANT in held or IDLE_TENANT in credit:
            names.append(IDLE_TENANT)
        rows = [TenantCost(t, *held.get(t, (_ZERO, _ZERO)), *credit.get(t, (_ZERO, _ZERO))) for t in names]
        for row in rows:
            h, c, sh, sr = tenants.get(row.tenant, (_ZERO, _ZERO, _ZERO, _ZERO))
            tenants[row.tenant] = (
                h + row.gpu_hours,
                c + row.cost,
                sh + row.sold_back_gpu_hours,
                sr + row.sold_back_revenue,
            )
        mine = tuple(r for r in rows if tenant is None or r.tenant == tenant)
        blocks.append(BlockCostLine(account.block_id, account.provider, account.status, line, mine))
    by_tenant = tuple(
        TenantCost(t, h, c, sh, sr)
        for t, (h, c, sh, sr) in sorted(tenants.items(), key=lambda kv: (kv[0] == IDLE_TENANT, kv[0]))
        if tenant is None or t == tenant
    )
    return CostReport(
        total,
        tuple(ProviderCost(p, line) for p, line in sorted(providers.items())),
        tuple(blocks),
        by_tenant,
    )


def busy_by_tenant(state: ClusterState, by_job: Mapping[str, Decimal]) -> dict[str, Decimal]:
    """Per-job GPU quantities summed per tenant (a job the state forgot counts for ``default``)."""
    out: dict[str, Decimal] = {}
    for job_id, value in by_job.items():
        rec = state.jobs.get(job_id)
        name = tenant_of(rec.spec) if rec is not None else "default"
        out[name] = out.get(name, _ZERO) + value
    return out


def paid_node(state: ClusterState, block: BlockRecord, node_id: str) -> bool:
    """Whether ``node_id`` of ``block`` is still paid for: a seller billing running time (everyone but the
    block sellers, ``domain.release.billing_unit_s``) stops billing a node that stopped (released alone,
    preempted, failed); a contract paid whole is paid for every node to its end."""
    node = state.nodes.get(node_id)
    return node is None or node.live or billing_unit_s(block.grant.provider) is None


def paid_gpus_now(state: ClusterState, block: BlockRecord) -> int:
    """The GPUs of an open block paid for each second from now until the next change (what /costs
    extrapolates its accounting by): the nodes still paid for whose time was not sold back."""
    if not block.open or state.now is None:
        return 0
    count = 0
    for node_id in block.node_ids:
        node = state.nodes.get(node_id)
        if not paid_node(state, block, node_id):
            continue
        if node is not None and node.node.block.end_time <= state.now:
            continue  # its time was sold back from a cut already passed
        count += 1
    return count * block.grant.gpus_per_node


def busy_gpus_now(state: ClusterState, block: BlockRecord) -> dict[str, Decimal]:
    """The GPUs of an open block holding each job right now (a shared GPU counts ``1/n`` for each of its
    ``n`` jobs): what the block's busy GPU-seconds grow by per second until the next change."""
    by_job: dict[str, Decimal] = {}
    if not block.open:
        return by_job
    for node_id in block.node_ids:
        node = state.nodes.get(node_id)
        if node is None or not node.live or not node.jobs:
            continue
        for slot in node.node.gpu_slots:
            if slot.job_id is not None:
                by_job[slot.job_id] = by_job.get(slot.job_id, _ZERO) + 1
            elif slot.job_ids:
                share = Decimal(1) / len(slot.job_ids)
                for job_id in slot.job_ids:
                    by_job[job_id] = by_job.get(job_id, _ZERO) + share
    return by_job


def block_status(block: BlockRecord) -> str:
    return "released" if block.released_at else "ended" if block.ended_at else "open"


def account_of(state: ClusterState, block: BlockRecord) -> BlockAccount:
    return BlockAccount(
        block_id=block.grant.block_id,
        provider=block.grant.provider,
        status=block_status(block),
        paid_gpu_s=block.paid_gpu_s,
        busy_gpu_s_by_tenant=busy_by_tenant(state, block.busy_gpu_s_by_job),
        accrued=block.accrued,
        committed=block.committed,
        sold_back_gpu_s=block.sold_back_gpu_s,
        sold_back_revenue=block.sold_back_revenue,
        sold_back_cost=block.sold_back_cost,
        buyers=buyers_of(state, block),
    )


def buyers_of(state: ClusterState, block: BlockRecord) -> tuple[str, ...]:
    """The tenants whose jobs the block was bought for (its order's ``for_jobs``), sorted."""
    order = state.orders.get(block.order_key) if block.order_key else None
    if order is None:
        return ()
    names = set()
    for job_id in order.for_jobs:
        rec = state.jobs.get(job_id)
        names.add(tenant_of(rec.spec) if rec is not None else "default")
    return tuple(sorted(names))


def costs(state: ClusterState, tenant: str | None = None) -> CostReport:
    """The report from the controller's own accounting, as of its last step."""
    return cost_report((account_of(state, b) for b in state.blocks.values()), tenant)


def extrapolate(
    account: BlockAccount,
    busy_now: Mapping[str, Decimal],
    gpus: int,
    price_per_gpu_hour: Decimal,
    seconds: Decimal,
) -> BlockAccount:
    """``account`` ``seconds`` later, with nothing changed meanwhile: ``gpus`` more paid GPU-seconds each
    second, ``busy_now`` more busy ones per tenant, the money at the block's price."""
    if seconds <= 0:
        return account
    busy = dict(account.busy_gpu_s_by_tenant)
    for name, n in busy_now.items():
        busy[name] = busy.get(name, _ZERO) + n * seconds
    return BlockAccount(
        account.block_id,
        account.provider,
        account.status,
        account.paid_gpu_s + gpus * seconds,
        busy,
        account.accrued + price_per_gpu_hour * gpus * seconds / HOUR,
        account.committed,
        account.sold_back_gpu_s,
        account.sold_back_revenue,
        account.sold_back_cost,
        account.buyers,
    )
