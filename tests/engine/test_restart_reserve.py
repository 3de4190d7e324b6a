"""The restart reserve (engine/reserve.py): a spot group hosting FAST services keeps free slices, so that an
interrupted service restarts on one at once instead of waiting for a new node's boot."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalar.domain.market import CAUSE_PREEMPTED, NodeState
from scalar.domain.offers import PRIME, Offer
from scalar.engine import Action, BuyCapacity, Controller, Event, ReleaseBlock
from scalar.engine.config import ConfigError, ControllerConfig, ScaleGroupConfig
from scalar.engine.reserve import RESTART_RESERVE_CODE, restart_reserves
from tests.engine.builders import (
    at,
    buys,
    filled,
    market,
    node_state,
    only,
    ready,
    spec,
    started,
    starts,
    submit,
    tick,
)
from tests.engine.invariants import check_all

SPOT_POD = Offer(
    provider=PRIME,
    instance_type="1xA100-spot",
    region="fi",
    price_per_hour=Decimal("0.50"),
    gpu_model="A100",
    gpu_count=1,
    gpu_memory_gb=80,
    vcpu=16,
    memory_gb=120,
    spot=True,
)
CONFIG = ControllerConfig(
    scale_groups=(ScaleGroupConfig(name="spot", providers=(PRIME,), spot=True, max_slices=16),),
    fast_spare_per_services=2,
)
DAY = 24 * 3600


def _two_services(config: ControllerConfig) -> tuple[Controller, list[BuyCapacity]]:
    """Two day-long 1-GPU FAST services on two spot pods of one purchase, READY at 100 s, running from 101 s;
    what was bought once they were placed."""
    c = Controller(config)
    jobs = [spec(f"svc-{i}", 1, vram=40, cpu=8, ram=32, duration=DAY) for i in range(2)]
    [buy] = buys(c.step(at(0), [market(SPOT_POD, book=None), *submit(*jobs)]))
    assert buy.request.node_count == 2 and len(buy.for_jobs) == 2
    c.step(at(10), [filled(buy, at(10))])
    actions = c.step(at(100), ready("blk-1-n0", "blk-1-n1", when=at(100)))
    placed = starts(actions)
    assert sorted(s.job_id for s in placed) == ["svc-0", "svc-1"]
    return c, buys(actions) + buys(c.step(at(101), [started(s.job_id, s.node_id) for s in placed]))


def test_a_spot_group_hosting_fast_services_buys_a_spare_and_an_interrupted_service_restarts_on_it() -> None:
    c, [spare] = _two_services(CONFIG)
    assert spare.for_jobs == () and spare.request.node_count == 1 and spare.request.spot
    assert "hosts 2 FAST services on spot nodes: it keeps 1 slice free (one per 2 services; 0 free now)" in (
        spare.reason.message
    )
    # On its way, the spare counts: nothing more is bought.
    assert buys(c.step(at(103), [tick()])) == []
    c.step(at(110), [filled(spare, at(110), block_id="blk-2")])
    assert starts(c.step(at(200), ready("blk-2-n0", when=at(200), block_id="blk-2"))) == []
    # Idle for hours, it is kept (and the block's story says why, once).
    for t in (200 + 3600, 200 + 7200):
        assert only(c.step(at(t), [tick()]), ReleaseBlock) == []
    kept = [e for e in c.story("blk-2") if e.reason.code == RESTART_RESERVE_CODE]
    assert len(kept) == 1
    # A service's pod is preempted: it runs again on the spare in the same step, and a new spare is bought.
    gone = node_state("blk-1-n0", NodeState.TERMINATED, at(9000), why="preempted", cause=CAUSE_PREEMPTED)
    actions = c.step(at(9000), [gone])
    [restart] = starts(actions)
    assert restart.node_id == "blk-2-n0"
    [again] = buys(actions)
    assert again.for_jobs == () and "keeps 1 slice free" in again.reason.message


def test_without_a_reserve_an_interrupted_service_waits_for_a_new_node() -> None:
    c, bought = _two_services(replace(CONFIG, fast_spare_per_services=0))
    assert bought == [] and buys(c.step(at(102), [tick()])) == []
    gone = node_state("blk-1-n0", NodeState.TERMINATED, at(9000), why="preempted", cause=CAUSE_PREEMPTED)
    actions = c.step(at(9000), [gone])
    assert starts(actions) == []
    [buy] = buys(actions)
    assert len(buy.for_jobs) == 1  # bought for the service, which waits for its boot


def test_the_spare_goes_once_the_services_it_protects_are_over() -> None:
    c, [spare] = _two_services(CONFIG)
    c.step(at(110), [filled(spare, at(110), block_id="blk-2")])
    c.step(at(200), ready("blk-2-n0", when=at(200), block_id="blk-2"))
    assert set(restart_reserves(c.state, 2, at(300))) == {"prime/1xA100-spot/spot/FAST"}
    # Within its last hour a service no longer counts (an interruption is unlikely before it ends): no
    # reserve is wanted, and the idle spare is released like any idle node.
    late = 101 + DAY - 1800
    assert restart_reserves(c.state, 2, at(late)) == {}
    released = only(c.step(at(late), [tick()]), ReleaseBlock)
    assert [r.block_id for r in released] == ["blk-2"]


def test_fewer_services_than_one_spare_is_worth_keep_none() -> None:
    c, bought = _two_services(replace(CONFIG, fast_spare_per_services=3))
    assert bought == [] and buys(c.step(at(102), [tick()])) == []
    assert restart_reserves(c.state, 3, at(102)) == {}


@pytest.mark.parametrize("bad", [-1, 1.5, True, "2"])
def test_a_bad_spare_ratio_is_refused_with_what_to_write(bad: object) -> None:
    with pytest.raises(ConfigError) as err:
        ControllerConfig.from_dict({"fast_spare_per_services": bad})
    assert err.value.field == "fast_spare_per_services"
    assert "whole number >= 0" in str(err.value)
    assert ControllerConfig.from_dict({"fast_spare_per_services": 4}).fast_spare_per_services == 4


@settings(max_examples=25, deadline=None)
@given(
    services=st.integers(0, 9),
    per=st.integers(1, 4),
    preempted=st.lists(st.integers(0, 8), max_size=6),
)
def test_spares_are_bought_for_the_services_they_protect_and_never_more(
    services: int, per: int, preempted: list[int]
) -> None:
    """Day-long FAST services on a spot group; each purchase fills at once and its pods are READY a step
    later; the pods of the services listed in ``preempted`` are preempted one per step. Nothing is ever
    booked twice, and the spares bought (purchases for no job) are at most the reserve first wanted plus
    one per preemption."""
    config = replace(CONFIG, fast_spare_per_services=per)
    c = Controller(config)
    jobs = [spec(f"svc-{i}", 1, vram=40, cpu=8, ram=32, duration=DAY) for i in range(services)]
    history: list[list[Action]] = [c.step(at(0), [market(SPOT_POD, book=None), *submit(*jobs)])]
    blocks = 0
    spares = 0
    events: list[Event] = []
    queue = list(preempted)
    for step in range(1, 30):
        for buy in buys(history[-1]):
            blocks += 1
            spares += not buy.for_jobs
            block = f"b{blocks}"
            fill = filled(buy, at(step * 60), block_id=block)
            assert fill.order.block is not None
            events += [fill, *ready(*fill.order.block.node_ids, when=at(step * 60 + 30), block_id=block)]
        events += [started(s.job_id, s.node_id) for s in starts(history[-1])]
        if queue and step > 3:
            rec = c.state.jobs.get(f"svc-{queue.pop(0) % max(1, services)}")
            node = next(iter(rec.placement.node_ids), None) if rec and rec.placement else None
            if node is not None:
                block = c.state.nodes[node].block_id
                events.append(node_state(node, NodeState.TERMINATED, at(step * 60 + 45), block, "preempted",
                                         CAUSE_PREEMPTED))  # fmt: skip
        history.append(c.step(at(step * 60 + 59), events))
        events = []
        check_all(c, history, [j.job_id for j in jobs])
    assert spares <= services // per + len(preempted)
    if services >= per:
        assert spares >= 1  # the reserve was bought


def test_a_restart_while_the_spare_is_on_its_way_stays_on_the_group_that_keeps_one() -> None:
    """Spot pods interrupted every two hours, an on-demand pod beside them: without a reserve a restarted
    day-long service expects a boot per interruption over the rest of its day, far over its ten minutes,
    and is sent on demand; with one, an interruption costs it no boot, so it stays on spot."""
    risky = replace(SPOT_POD, interruption_rate=0.5)
    steady = replace(SPOT_POD, instance_type="1xA100", spot=False, price_per_hour=Decimal("1.50"))
    groups = (
        ScaleGroupConfig(name="spot", providers=(PRIME,), spot=True, max_slices=16),
        ScaleGroupConfig(name="od", providers=(PRIME,), spot=False, max_slices=16),
    )
    gone = node_state("blk-1-n0", NodeState.TERMINATED, at(300), why="preempted", cause=CAUSE_PREEMPTED)

    def restart(per: int) -> list[BuyCapacity]:
        c = Controller(
            replace(CONFIG, scale_groups=groups, interruption_period_hours=1.0, fast_spare_per_services=per)
        )
        jobs = [spec(f"svc-{i}", 1, vram=40, cpu=8, ram=32, duration=DAY) for i in range(2)]
        [buy] = buys(c.step(at(0), [market(risky, steady, book=None), *submit(*jobs)]))
        assert buy.request.spot
        c.step(at(10), [filled(buy, at(10))])
        actions = c.step(at(100), ready("blk-1-n0", "blk-1-n1", when=at(100)))
        c.step(at(101), [started(s.job_id, s.node_id) for s in starts(actions)])
        return buys(actions) + buys(c.step(at(300), [gone]))

    # Without a reserve: nothing spare; the restart buys an on-demand pod for the service.
    [od] = restart(0)
    assert not od.request.spot and od.for_jobs == ("svc-0",)
    # With one: the spare bought when the services started is still booting; the restart stays on spot
    # (it waits for capacity on its way or buys a spot pod), never on demand.
    bought = restart(2)
    assert bought[0].for_jobs == () and bought[0].request.spot  # the spare
    assert all(b.request.spot for b in bought)
