"""Single nodes of an hourly block released end to end against the built-in market: two jobs buy one
2-node block from a seller billing running time, the short one finishes, the controller releases its idle
node alone (``ReleaseNodes``) through the runtime's executor, the market terminates that node only, and the
controller's accounting stops paying for it while the other node works on."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from pathlib import Path

from scalar.domain.market import NodeState
from scalar.engine import ReleaseBlock, ReleaseNodes
from scalar.engine.events import MarketObserved
from scalar.engine.lifecycle import JobState
from scalar.providers.sim import BuiltinMarket, MarketConfig
from tests.engine.builders import T0, sid, spec, starts, submit
from tests.engine.test_costs import assert_report_adds_up
from tests.runtime.test_resale_builtin import Loop

PROVIDER = "aws"


class HourlyLoop(Loop):
    """The resale test's loop on a seller billing per node, observing its on-demand offers only."""

    def __init__(self, market: BuiltinMarket) -> None:
        super().__init__(market, PROVIDER, idle_release_s=3600)

    def observed(self, now: object) -> MarketObserved:
        offers = tuple(o for o in self.seller.list_offers(now) if not o.spot)  # type: ignore[arg-type]
        return MarketObserved(sid("m"), offers, now, {}, (PROVIDER,))  # type: ignore[arg-type]


def test_the_idle_node_of_a_working_block_is_released_alone(tmp_path: Path) -> None:
    market = BuiltinMarket(f"sqlite:///{tmp_path / 'm.db'}", MarketConfig(seed=6))
    loop = HourlyLoop(market)
    offer = min(loop.observed(T0).offers, key=lambda o: (o.gpu_count, o.price_per_hour, o.key))
    gpus = int(offer.gpu_count)
    shape = {
        "vram": float(offer.gpu_memory_gb),
        "cpu": float(offer.vcpu) / 2,
        "ram": float(offer.memory_gb) / 2,
    }
    jobs = [spec("short", gpus, duration=600, **shape), spec("long", gpus, duration=6 * 3600, **shape)]  # type: ignore[arg-type]
    loop.step(T0, [loop.observed(T0), *submit(*jobs)])
    [block] = loop.c.state.blocks.values()
    assert len(block.node_ids) == 2  # one purchase of two nodes
    t = T0
    while len({s.job_id for s in starts(loop.actions)}) < 2:
        t += timedelta(minutes=1)
        loop.step(t, [])
        assert t < T0 + timedelta(hours=1), "the jobs never started"
    placed = {s.job_id: s.node_ids[0] for s in starts(loop.actions)}
    released: list[ReleaseNodes] = []
    while not released:
        t += timedelta(minutes=1)
        released = [a for a in loop.step(t, []) if isinstance(a, ReleaseNodes)]
        assert t < T0 + timedelta(hours=2), "the idle node was never released"
    [release] = released
    assert release.node_ids == (placed["short"],) and release.reason.code == "idle_nodes"
    assert market.node_state(placed["short"], t) is NodeState.TERMINATED
    assert market.node_state(placed["long"], t) is NodeState.READY
    assert not [a for a in loop.actions if isinstance(a, ReleaseBlock)]
    view = {b.block_id: b for b in loop.c.blocks()}[block.grant.block_id]
    assert view.status == "open" and view.paid_gpus == gpus
    # From now on the block pays for the working node only.
    paid = block.paid_gpu_s
    loop.step(t + timedelta(minutes=10), [])
    assert block.paid_gpu_s - paid == Decimal(gpus * 600)
    assert loop.c.state.jobs["long"].state is JobState.RUNNING
    assert_report_adds_up(loop.c.costs())
    market.close()
