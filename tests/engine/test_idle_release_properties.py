"""Properties of the idle release (engine/housekeeping.py ``release_idle``): an idle node is never released
while a queued job could be placed on it, and a node nothing is forecast for is never held past the short
hold (a billing minute in the seller's clock)."""

from __future__ import annotations

import math
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from scalar.domain.packing import evaluate_node
from scalar.domain.release import MIN_HOLD_S
from scalar.engine import Controller, ControllerConfig
from scalar.engine.housekeeping import release_idle
from scalar.engine.state import JobRecord
from scalar.engine.validation import job_from_spec
from tests.engine.builders import (
    at,
    buys,
    filled,
    job_done,
    market,
    prime_offer,
    ready,
    spec,
    started,
    submit,
)

IDLE = 1800
DONE = 4_000  # the first job's arrival (at 0) is over an hour old by then

shapes = st.tuples(
    st.integers(1, 4),  # GPUs: the pod has 2
    st.sampled_from([24.0, 80.0, 100.0]),  # GB per GPU: the pod's have 80
    st.sampled_from([4.0, 40.0]),  # cores: the pod has 32
    st.sampled_from(["FAST", "FLEX"]),
)


def _idle_pod(scale: float) -> Controller:
    c = Controller(ControllerConfig(idle_release_s=IDLE, market_time_scales={"prime": scale}))
    [buy] = buys(c.step(at(0), [market(prime_offer("2.50"), book=None), *submit(spec("j", 2, duration=600))]))
    c.step(at(30), [filled(buy, at(30))])
    c.step(at(300), ready("blk-1-n0", when=at(300)))
    c.step(at(301), [started("j", "blk-1-n0")])
    c.step(at(DONE), [job_done("blk-1-n0", "j", at(DONE))])
    return c


@settings(max_examples=60, deadline=None)
@given(
    scale=st.sampled_from([1.0, 60.0]),
    queued=st.lists(shapes, max_size=3),
    arrivals=st.lists(st.tuples(st.integers(1, 7_000), shapes), max_size=5),
    idle_for=st.integers(0, 2 * IDLE),
)
def test_never_released_while_a_queued_job_fits_never_held_past_the_hold_when_nothing_is_forecast(
    scale: float,
    queued: list[tuple[int, float, float, str]],
    arrivals: list[tuple[int, tuple[int, float, float, str]]],
    idle_for: int,
) -> None:
    c = _idle_pod(scale)
    state = c.state
    now = at(DONE + idle_for)
    node = state.nodes["blk-1-n0"].node
    for i, (ago, (gpus, vram, cpu, tier)) in enumerate(sorted(arrivals, key=lambda a: -a[0])):
        when = now - timedelta(seconds=ago)
        state.arrived_jobs.append(
            (when, job_from_spec(spec(f"a{i}", gpus, vram=vram, cpu=cpu, tier=tier), when))
        )
    for i, (gpus, vram, cpu, tier) in enumerate(queued):  # waiting, as the scheduler left them
        s = spec(f"q{i}", gpus, vram=vram, cpu=cpu, tier=tier)
        state.jobs[s.job_id] = JobRecord(s, job_from_spec(s, now), now)
        state.pending_ids[s.job_id] = None

    def fits(gpus: int, vram: float, cpu: float, tier: str) -> bool:
        job = job_from_spec(spec("probe", gpus, vram=vram, cpu=cpu, tier=tier), now)
        return gpus <= 2 and evaluate_node(job, node, now).reason is None

    release_idle(state, c.config, now)
    released = not state.blocks["blk-1"].open
    queued_fits = any(fits(*shape) for shape in queued)
    if queued_fits:
        assert not released, "a queued job could be placed on it"
    forecast = any(ago < 3600 and fits(*shape) for ago, shape in arrivals)
    short = math.ceil(MIN_HOLD_S / 60.0) * 60.0 / scale  # Prime bills per minute
    if not queued_fits and not forecast:
        assert released == (idle_for >= short), "nothing forecast: released after the short hold exactly"
    if not queued_fits and idle_for >= IDLE:
        assert released, "never held past idle_release_s"
