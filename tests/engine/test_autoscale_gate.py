"""The autoscaler's change gate (``AutoscaleGate``): a pass whose inputs did not change is skipped, and
skipping never changes what the controller decides.

On random controller runs (several offers, pending jobs of a few shapes and tiers, bought capacity
arriving, idle ticks seconds apart, FLEX jobs crossing their batch wait), a controller whose gate is
cleared before every step (a full pass every time, as before the gate) must give the same actions and the
same reasons on every job as one that skips."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scalar.engine import BuyCapacity, Controller, ControllerConfig, Tick, action_to_dict
from scalar.engine.autoscaler import AutoscaleGate
from tests.engine.builders import at, filled, market, prime_offer, ready, sf_offer, spec, submit


def _run(job_args: list[tuple[int, str, int]], arrive: bool, gaps: list[int], forced: bool) -> list[Any]:
    c = Controller(ControllerConfig())
    out: list[Any] = []

    def step(seconds: float, events: list[Any]) -> None:
        if forced:
            c.state.autoscale_gate = None
        out.extend(c.step(at(seconds), events))

    step(0, [market(sf_offer("2.00"), prime_offer("2.50", gpus=2), prime_offer("2.20", gpus=8))])
    specs = [spec(f"j{i:04d}", g, tier=tier, priority=p) for i, (g, tier, p) in enumerate(job_args)]
    step(1, list(submit(*specs)))
    if arrive:
        buys = [a for a in out if isinstance(a, BuyCapacity)]
        if buys:
            update = filled(buys[0], at(2))
            step(2, [update])
            grant = update.order.block
            assert grant is not None
            step(3, list(ready(*grant.node_ids, when=at(3), block_id=grant.block_id)))
    now = 4.0
    for k, gap in enumerate(gaps):
        now += gap
        step(now, [Tick(f"idle-{k}")])
    reasons = [(j, r.routing, r.routing_group, r.reason) for j, r in sorted(c.state.jobs.items())]
    return [action_to_dict(a) for a in out] + reasons


jobs = st.lists(
    st.tuples(
        st.sampled_from([1, 2, 4, 8, 16]), st.sampled_from(["FAST", "BATCH", "FLEX"]), st.integers(0, 2)
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=25, deadline=None)
@given(jobs, st.booleans(), st.lists(st.integers(0, 400), min_size=1, max_size=8))
def test_skipping_unchanged_passes_decides_what_full_passes_decide(
    job_args: list[tuple[int, str, int]], arrive: bool, gaps: list[int]
) -> None:
    assert _run(job_args, arrive, gaps, forced=False) == _run(job_args, arrive, gaps, forced=True)


def test_an_idle_tick_skips_the_pass_and_new_work_runs_it() -> None:
    c = Controller(ControllerConfig())
    c.step(at(0), [market(sf_offer("2.00"))])
    c.step(at(1), list(submit(*(spec(f"j{i}", 8) for i in range(30)))))
    assert c.state.autoscale_gate is None  # that pass bought: the next one sees its purchases in flight
    c.step(at(1.5), [Tick("settle")])
    gate = c.state.autoscale_gate
    assert isinstance(gate, AutoscaleGate)
    routed_at = c.state.last_routing_at
    c.step(at(2), [Tick("idle")])  # nothing changed: the gate stays, no new routing decision
    assert c.state.autoscale_gate is gate
    assert c.state.last_routing_at == routed_at
    c.step(at(3), list(submit(spec("late", 2))))  # a new job: a full pass
    assert c.state.autoscale_gate is not gate
    assert c.state.jobs["late"].routing is not None
    c.step(at(3) + timedelta(seconds=31), [Tick("timer")])  # past REROUTE_EVERY_S: a full pass anyway
    assert c.state.last_routing_at is not None and routed_at is not None
    assert c.state.last_routing_at > routed_at
