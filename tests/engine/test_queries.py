"""What the API, CLI and dashboard read: explain, autoscaler status, stories, costs."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from scalar.domain.market import BlockGrant, CapacityRequest, Order, OrderState
from scalar.domain.tier import Tier
from scalar.engine import BuyCapacity, Controller, JobState, OrderUpdated, StartWork
from tests.engine.builders import (
    at,
    buys,
    filled,
    job_done,
    market,
    ready,
    sf_offer,
    spec,
    started,
    starts,
    submit,
    tick,
)


def ghost_fill(when_s: float, hours: float) -> OrderUpdated:
    """A filled order the controller never placed (say, from before a lost record): adopted, not lost."""
    request = CapacityRequest(
        "sfcompute", "8xH100", 1, int(hours * 3600), Decimal("2.00"), Tier.FAST, "H100", 8
    )
    block = BlockGrant(
        "ghost", "sfcompute", "8xH100", "H100", 8, 80, 96, 1024,
        at(when_s), at(when_s) + timedelta(hours=hours), Decimal("2.00"), ("ghost-n0",),
    )  # fmt: skip
    return OrderUpdated(
        "ghost-fill", "act-999999", Order("o-ghost", "act-999999", OrderState.FILLED, request, block)
    )


def busy_cluster() -> tuple[Controller, BuyCapacity]:
    c = Controller()
    [buy] = c.step(
        at(0), [market(sf_offer()), *submit(spec("f1", 6, duration=7200), spec("f2", 6, duration=7200))]
    )
    assert buy.request.node_count == 2
    c.step(at(30), [filled(buy, at(30)), ghost_fill(30, hours=1)])
    actions = c.step(
        at(60), ready("blk-1-n0", "blk-1-n1", when=at(60)) + ready("ghost-n0", when=at(60), block_id="ghost")
    )
    assert sorted(s.job_id for s in starts(actions)) == ["f1", "f2"]
    # A 2-hour job for 4 GPUs: the two busy nodes have 2 GPUs free each, the adopted node ends within the hour.
    [second] = c.step(at(120), submit(spec("x", 4, vram=60, duration=7200)))
    return c, second


def test_explain_counts_the_node_rejections_and_names_routing_purchase_and_queue() -> None:
    c, buy = busy_cluster()
    why = c.explain("x")
    assert why is not None and why.state is JobState.PENDING
    assert why.placement is not None
    assert [(r.code, r.count) for r in why.placement.rejections] == [
        ("insufficient_gpus", 2),
        ("expires_too_soon", 1),
    ]
    assert "blk-1-n0" in why.placement.rejections[0].example
    assert why.routing is not None and why.routing_group == "sfcompute/8xH100/FAST"
    assert why.purchase is not None and why.purchase.key == buy.action_id == "act-000004"
    assert (why.queue_position, why.queue_length) == (1, 1)
    assert buy.reason.message.startswith(
        "FAST job x needs 4x60 GB GPUs: 2 nodes lack 4 GPUs with 60 GB free, 1 expires within 2h05m; "
        "buying 1x 8xH100 on sfcompute at $2.20/GPU-h (optimal level 2 of the 8xH100 book)"
    )
    assert any(line.startswith("queue position 1 of 1") for line in why.lines)
    assert c.explain("nobody") is None


def test_autoscaler_status_shows_routing_pending_groups_unmet_slices_and_recent_actions() -> None:
    c, buy = busy_cluster()
    status = c.autoscaler_status()
    assert status.at == at(120)
    assert status.last_routing is not None
    assert status.last_routing.group_to_launch == {"sfcompute/8xH100/FAST": 1}
    assert [p.name for p in status.pending_groups] == ["sfcompute/8xH100/FAST"]
    assert any("task x" in line for line in status.routing_lines)
    assert status.unmet == ()
    [fast] = [g for g in status.groups if g.name == "sfcompute/8xH100/FAST"]
    assert (fast.slices.ready, fast.slices.requesting, fast.priority, fast.availability) == (
        3,
        1,
        1,
        "available",
    )
    assert fast.price_per_gpu_hour == Decimal("2.00")
    assert [o.key for o in status.open_orders] == [buy.action_id]
    assert [type(a).__name__ for a in status.recent_actions] == [
        "BuyCapacity",
        "StartWork",
        "StartWork",
        "BuyCapacity",
    ]
    # The adopted purchase is accounted for.
    assert {b.block_id for b in c.blocks()} == {"blk-1", "ghost"}


def test_recent_actions_keep_the_last_hundred() -> None:
    c = Controller()
    [buy] = c.step(at(0), [market(sf_offer()), *submit(*(spec(f"j{i}", 1, duration=60) for i in range(8)))])
    c.step(at(30), [filled(buy, at(30))])
    c.step(at(60), ready("blk-1-n0", when=at(60)))
    t = 60
    for round_ in range(20):
        t += 120
        jobs = [f"r{round_}-{i}" for i in range(8)]
        done = [job_done("blk-1-n0", j.job_id, at(t)) for j in c.jobs() if j.state is JobState.SCHEDULED]
        c.step(at(t), done + submit(*(spec(j, 1, duration=60) for j in jobs)))
    recent = c.autoscaler_status().recent_actions
    assert len(recent) == 100
    assert len({a.action_id for a in recent}) == 100
    assert recent[-1].action_id == f"act-{c.state.counters['act']:06d}"


def test_story_tells_every_move_with_time_and_cause() -> None:
    c = Controller()
    [buy] = c.step(at(0), [market(sf_offer()), *submit(spec("j", 4))])
    c.step(at(30), [filled(buy, at(30))])
    c.step(at(60), ready("blk-1-n0", when=at(60)))
    start = started("j", "blk-1-n0")
    done = job_done("blk-1-n0", "j", at(3700))
    c.step(at(70), [start])
    c.step(at(3700), [done])
    story = [(e.at, e.kind, e.from_state, e.to_state) for e in c.story("j")]
    assert story == [
        (at(0), "job", None, "PENDING"),
        (at(0), "action", None, "BuyCapacity"),
        (at(60), "job", "PENDING", "SCHEDULED"),
        (at(60), "action", None, "StartWork"),
        (at(70), "job", "SCHEDULED", "RUNNING"),
        (at(3700), "job", "RUNNING", "SUCCEEDED"),
    ]
    assert [e.stimulus_id for e in c.story("j")][-2:] == [start.stimulus_id, done.stimulus_id]
    node_story = [(e.from_state, e.to_state) for e in c.story("blk-1-n0") if e.kind == "node"]
    assert node_story == [(None, "booting"), ("booting", "ready")]
    order_story = [
        (e.from_state, e.to_state) for e in c.story(buy.action_id) if e.kind == "order" and e.to_state
    ]
    assert order_story == [(None, "placed"), ("placed", "filled")]
    # Why that limit price: the orderbook's own explanation is in the order's story.
    [why_price] = [e.reason for e in c.story(buy.action_id) if e.reason.code == "optimal_level"]
    assert why_price.message.startswith("Bid $2.20/GPU-h (sorted ask 2")


def test_costs_spend_delivered_and_idle_gpu_hours() -> None:
    c = Controller()
    [buy] = c.step(at(0), [market(sf_offer()), *submit(spec("j", 4, duration=1800))])
    c.step(at(0), [filled(buy, at(0))])
    [start] = starts(c.step(at(0), ready("blk-1-n0", when=at(0))))
    assert isinstance(start, StartWork)
    c.step(at(1800), [job_done("blk-1-n0", "j", at(1800))])
    c.step(at(3600), [tick()])
    report = c.costs()
    # One 8-GPU node at $2.20/GPU-h on a 2-hour contract (sized to the 30-minute job and its 45 minutes of
    # allowances), released idle after an hour: paid whole, it costs its commitment all the same; 4 GPUs
    # held a job for half an hour of it.
    assert report.committed == Decimal("35.20")
    assert report.accrued == Decimal("35.20")
    assert report.paid_gpu_hours == Decimal(16)
    assert report.delivered_gpu_hours == Decimal(2)
    assert report.idle_cost == Decimal("30.80")
    assert report.cost_per_delivered_gpu_hour == Decimal("17.60")
    [row] = report.by_provider
    assert (row.provider, row.line.idle_gpu_hours) == ("sfcompute", Decimal(14))
    [block] = report.by_block
    assert [(t.tenant, t.gpu_hours, t.cost) for t in block.by_tenant] == [
        ("default", Decimal(2), Decimal("4.40")),
        ("(idle)", Decimal(14), Decimal("30.80")),
    ]
    # Asking again changes nothing: spend is never counted twice.
    c.step(at(3600), [tick()])
    assert c.costs() == report
    assert buys(c.step(at(3600), [])) == []
