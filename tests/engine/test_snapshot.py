"""The published decision state: a controller restored from ``snapshot`` + ``market_snapshot`` (through
JSON) decides exactly as the original on the next step (the cost preview relies on it)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from scalar.engine import Controller
from scalar.engine.codec import CodecError
from scalar.engine.snapshot import market_key, market_snapshot, restore, snapshot
from tests.engine.builders import at, spec, submit, tick
from tests.engine.test_consolidate import _scene


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
