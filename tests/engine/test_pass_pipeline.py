"""The autoscaling pass is a pipeline of steps that return values; the state is written once, at its end.

``autoscaler._route_and_buy`` runs demand -> ranking -> eligibility -> cost band -> routing -> purchases;
apart from procurement's ranking (written to the groups at once: eligibility reads it there) it writes
nothing: the purchases come back as a ``PurchasePlan`` and ``_apply`` records them, the jobs' outcomes and
the unmet demand (docs/decisions/engine.md, "The pass is a pipeline").
"""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest

from scalar.engine import BuyCapacity, Controller, ControllerConfig, autoscaler
from scalar.engine.budget import BudgetLimit
from scalar.engine.events import JobSubmitted
from scalar.engine.pass_outcomes import PurchasePlan
from scalar.engine.state import ClusterState
from tests.engine.builders import at, buys, market, prime_offer, sf_offer, sid, spec


def _written(state: ClusterState) -> tuple[Any, ...]:
    """What a pass may write, bar the groups' ranks."""
    return (
        len(state.story),
        dict(state.counters),
        list(state.orders),
        list(state.slices),
        list(state.outbox),
        dict(state.demand_entries),
        [(r.reason, r.routing, r.routing_group, r.order_key) for r in state.jobs.values()],
        state.unmet,
        state.last_routing,
        state.last_routing_at,
    )


def _jobs(n: int) -> list[JobSubmitted]:
    out = []
    for i in range(n):
        s = spec(f"j{i}", (1, 2, 8)[i % 3], tier=("FAST", "FLEX")[i % 2], vram=40, duration=1800)
        tenant = ("default", "ml")[i % 2]
        out.append(JobSubmitted(sid("submit"), replace(s, tenant=tenant)))
    return out


@pytest.mark.parametrize("budgets", [(), (BudgetLimit("global", Decimal("40"), None, "day"),)])
def test_the_steps_write_nothing_and_the_plan_is_what_the_pass_records(
    budgets: tuple[BudgetLimit, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    plans: list[PurchasePlan] = []
    real = autoscaler._route_and_buy

    def steps_only(state: ClusterState, *args: Any) -> Any:
        before = _written(state)
        routed, plan = real(state, *args)
        assert _written(state) == before, "a step of the pass wrote to the state"
        plans.append(plan if plan is not None else PurchasePlan())
        return routed, plan

    monkeypatch.setattr(autoscaler, "_route_and_buy", steps_only)
    c = Controller(ControllerConfig(budgets=budgets, flex_batch_gpus=1))
    offers = market(sf_offer("2.00"), prime_offer("2.50", gpus=2), prime_offer("1.90", gpus=1))
    actions = c.step(at(0), [offers, *_jobs(12)])
    planned = [p for plan in plans for p in plan.orders]
    assert len(planned) > 1  # several groups bought in one pass
    # The pass recorded exactly its plan: the orders, in plan order, under the action ids the plan named.
    assert buys(actions) == [p.action() for p in planned]
    assert [a.action_id for a in actions if isinstance(a, BuyCapacity)] == list(c.state.orders)
    for p in planned:
        order = c.state.orders[p.key]
        assert (order.reason, order.for_jobs, len(order.slice_ids)) == (p.reason, p.for_jobs, p.slices)
        assert all(c.state.jobs[j].order_key == p.key for j in p.for_jobs)


def test_a_budget_sees_the_orders_planned_before_it_in_the_same_pass() -> None:
    # $40/h: the first purchases fit; a later group's would take the committed rate over the limit, which
    # the budget can only know from the orders planned (not yet recorded) before it.
    limit = BudgetLimit("global", Decimal("40"), None, "day")
    c = Controller(ControllerConfig(budgets=(limit,), flex_batch_gpus=1))
    offers = market(sf_offer("2.00"), prime_offer("2.50", gpus=2), prime_offer("1.90", gpus=1))
    actions = c.step(at(0), [offers, *_jobs(12)])
    committed = sum(
        (b.request.limit_price_per_gpu_hour or Decimal(0)) * b.request.node_count * b.request.gpus_per_node
        for b in buys(actions)
    )
    assert buys(actions) and committed <= Decimal("40")
    refused = [
        r for r in c.state.jobs.values() if r.reason is not None and r.reason.code == "budget_exceeded"
    ]
    assert refused
