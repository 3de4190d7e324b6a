"""``GET /costs`` from the block projections (any process answers) agrees with the leader's own accounting:
a projection carried forward to a later time, with nothing changed meanwhile, is what the engine counts."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from scalar.domain.release import billing_unit_s
from scalar.engine import Controller, ControllerConfig
from scalar.engine.codec import encode
from scalar.engine.costs import cost_report
from scalar.engine.queries import block_view
from scalar.runtime.views_market import block_account
from scalar.store.projections import Projection
from tests.engine.builders import tick
from tests.engine.world import World


@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 10**6), steps=st.integers(20, 60), later_s=st.integers(1, 7200))
def test_a_projection_carried_forward_matches_the_engine(seed: int, steps: int, later_s: int) -> None:
    world = World(seed=seed, steps=steps, tenants=("ml", "web"))
    c = Controller(ControllerConfig(idle_release_s=900))
    world.run(c)
    assert c.now is not None
    rows = []
    for rec in c.state.blocks.values():
        view = block_view(rec, c.state)
        rows.append(Projection("blocks", view.block_id, view.status, None, encode(view), c.now))
    later = c.now + timedelta(seconds=later_s)
    c.step(later, [tick()])  # accrues [now, later] over the state as it was, then acts
    projected = cost_report(block_account(r, later) for r in rows)
    engine = c.costs()
    for mine, theirs in zip(projected.by_block, engine.by_block, strict=True):
        assert mine.block_id == theirs.block_id
        got, want = mine.line, theirs.line
        rec = c.state.blocks[mine.block_id]
        if rec.released_at == later and billing_unit_s(rec.grant.provider) is None:
            # Released by the step at `later`, a contract paid whole pays the hours it had left then: an
            # action the projection of the state before it cannot know of; it only adds.
            assert want.accrued >= got.accrued - Decimal("0.000001")
            assert want.paid_gpu_hours >= got.paid_gpu_hours
            continue
        assert (got.paid_gpu_hours, got.delivered_gpu_hours, got.idle_gpu_hours) == (
            want.paid_gpu_hours,
            want.delivered_gpu_hours,
            want.idle_gpu_hours,
        )
        assert abs(got.accrued - want.accrued) <= Decimal("0.000001")  # the projection's accrued is rounded
        assert [(t.tenant, t.gpu_hours) for t in mine.by_tenant] == [
            (t.tenant, t.gpu_hours) for t in theirs.by_tenant
        ]
