"""The published decision state: a controller restored from ``snapshot`` + ``market_snapshot`` (through
JSON) decides exactly as the original on the next step (the cost preview relies on it)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from scalar.domain.market import CAUSE_PREEMPTED, NodeState
from scalar.engine import Controller
from scalar.engine.codec import CodecError
from scalar.engine.snapshot import market_key, market_snapshot, restore, snapshot
from tests.engine.builders import at, buys, filled, market, node_state, ready, spec, submit, tick
from tests.engine.test_consolidate import _scene
from tests.engine.test_procurement_economics import CONFIG, ON_DEMAND, SPOT


def _copy(c: Controller) -> Controller:
    data = json.loads(json.dumps(snapshot(c.state)))
    market = json.loads(json.dumps(market_snapshot(c.state)))
    copy = Controller(c.config)
    copy.state = restore(data, market)
    return copy


@pytest.mark.parametrize(
    "job",
    [
        spec("n1", 1, tier="FLEX", duration=600),
        spec("n2", 2, tier="FAST", duration=600),
        spec("n8", 8, tier="FAST", duration=3600),
        replace(spec("n3", 3, tier="FLEX", duration=7200), restartable=True),
        spec("n16", 16, tier="FLEX", duration=1800),
    ],
)
def test_a_restored_controller_decides_as_the_original(job) -> None:
    c, _ = _scene(restartable=True)
    copy = _copy(c)
    assert snapshot(copy.state) == snapshot(c.state)
    # the packer's online prior and the contract sizing's forecast travel with it (both decide)
    assert copy.state.shapes.arrived == c.state.shapes.arrived > 0
    assert copy.state.shapes.prior.weights == c.state.shapes.prior.weights
    assert list(copy.state.arrived_jobs) == list(c.state.arrived_jobs)
    events = submit(job)
    assert copy.step(at(800), events) == c.step(at(800), events)
    assert copy.step(at(2000), [tick()]) == c.step(at(2000), [tick()])


def test_the_market_part_changes_only_with_the_market() -> None:
    c, _ = _scene(restartable=False)
    before = market_key(c.state)
    c.step(at(800), [tick()])
    assert market_key(c.state) == before


def test_a_snapshot_of_another_version_is_refused() -> None:
    c, _ = _scene(restartable=False)
    data = {**snapshot(c.state), "version": 99}
    with pytest.raises(CodecError):
        restore(data, market_snapshot(c.state))


def test_the_spot_and_boot_history_travel_with_it() -> None:
    # the cost band prices spot risk and FAST waits with them (engine/cost_band.py)
    c = Controller(CONFIG)
    [first] = buys(c.step(at(0), [market(SPOT, ON_DEMAND, book=None), *submit(spec("a", 8, tier="FLEX"))]))
    c.step(at(10), [filled(first, at(10))])
    c.step(at(200), ready("blk-1-n0", when=at(200)))
    c.step(at(900), [node_state("blk-1-n0", NodeState.TERMINATED, at(900), cause=CAUSE_PREEMPTED)])
    assert c.state.spot_seen and c.state.boot_seen
    copy = _copy(c)
    assert copy.state.spot_seen == c.state.spot_seen
    assert copy.state.boot_seen == c.state.boot_seen
