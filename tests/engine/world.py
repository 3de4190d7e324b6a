"""A tiny seeded world around the controller: a seller that fills, rejects or sits on purchases, nodes that
boot, fail and run jobs to completion. It answers the controller's actions with events, step by step,
and records the (now, events) log so a run can be replayed. Test code only: it uses ``random.Random``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from decimal import Decimal

from scalar.domain.market import BlockGrant, NodeEvent, NodeState, Order, OrderState
from scalar.domain.offers import PRIME
from scalar.engine import (
    Action,
    BuyCapacity,
    Controller,
    JobCancelRequested,
    JobStarted,
    JobSubmitted,
    NodeReported,
    OrderUpdated,
    ReleaseBlock,
    ReleaseNodes,
    StartWork,
    StopWork,
    Tick,
)
from scalar.engine.events import Event
from tests.engine.builders import T0, asks, market, prime_offer, sf_offer, spec

STEP_S = 60


@dataclass
class Block:
    grant: BlockGrant
    released_at: datetime | None = None
    stopped: dict[str, datetime] = field(default_factory=dict)  # nodes released alone, and when


@dataclass
class World:
    seed: int
    steps: int = 60
    arrival_rate: float = 0.5
    fill_rate: float = 0.7
    reject_rate: float = 0.05
    fail_rate: float = 0.01
    cancel_rate: float = 0.02
    tenants: tuple[str, ...] = ()  # jobs are spread over these tenants (none: every job is ``default``'s)
    rng: random.Random = field(init=False)
    log: list[tuple[datetime, list[Event]]] = field(default_factory=list)
    actions: list[list[Action]] = field(default_factory=list)
    blocks: dict[str, Block] = field(default_factory=dict)
    submitted: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self._buys: list[tuple[BuyCapacity, int]] = []  # (buy, step placed)
        self._booting: dict[str, tuple[str, int]] = {}  # node -> (block, ready at step)
        self._running: dict[tuple[str, str], int] = {}  # (job, node) -> finish step
        self._to_start: list[tuple[str, str]] = []
        self._next: list[Event] = []
        self._n = 0

    def sid(self, kind: str) -> str:
        self._n += 1
        return f"w{self.seed}-{kind}-{self._n}"

    def now(self, step: int) -> datetime:
        return T0 + timedelta(seconds=step * STEP_S)

    def _market(self, step: int) -> Event:
        drift = Decimal(self.rng.choice(["1.80", "2.00", "2.20", "2.60"]))
        book = asks((str(drift), 8), (str(drift + Decimal("0.1")), 16), (str(drift + Decimal("0.3")), 64))
        offers = (
            sf_offer(str(drift)),
            prime_offer(str(drift + Decimal("0.4")), gpus=2),
            prime_offer("3.00", gpus=4),
        )
        ev = market(*offers, book=book, when=self.now(step))
        return ev

    def events_for(self, step: int) -> list[Event]:
        rng = self.rng
        events = list(self._next)
        self._next = []
        if step % 10 == 0:
            events.append(self._market(step))
        if step < self.steps - 10 and rng.random() < self.arrival_rate:
            job_id = f"j{len(self.submitted)}"
            self.submitted.append(job_id)
            gpus = (
                rng.choice([-1, 0, 1, 2, 4, 8, 8, 16, 40])
                if rng.random() < 0.1
                else rng.choice([1, 2, 4, 8, 16])
            )
            tier = "FLEX" if rng.random() < 0.3 else "FAST"
            job = spec(
                job_id,
                gpus,
                tier=tier,
                vram=rng.choice([10, 40, 80]),
                cpu=rng.choice([1, 8]),
                ram=rng.choice([8, 64]),
                duration=rng.choice([300, 1200, 3600]),
                priority=rng.choice([0, 0, 5]),
                share=rng.random() < 0.2,
            )
            if self.tenants:
                job = replace(job, tenant=rng.choice(self.tenants))
            events.append(JobSubmitted(self.sid("submit"), job))
        if self.submitted and rng.random() < self.cancel_rate:
            events.append(JobCancelRequested(self.sid("cancel"), rng.choice(self.submitted)))
        keep: list[tuple[BuyCapacity, int]] = []
        for buy, placed in self._buys:
            roll = rng.random()
            if roll < self.reject_rate:
                order = Order(
                    f"o-{buy.action_id}",
                    buy.action_id,
                    OrderState.REJECTED,
                    buy.request,
                    None,
                    "no liquidity",
                )
                events.append(OrderUpdated(self.sid("order"), buy.action_id, order))
            elif roll < self.fill_rate:
                grant = self._grant(buy, step)
                order = Order(f"o-{buy.action_id}", buy.action_id, OrderState.FILLED, buy.request, grant)
                update = OrderUpdated(self.sid("order"), buy.action_id, order)
                events.append(update)
                if rng.random() < 0.2:
                    self._next.append(
                        OrderUpdated(self.sid("dup"), buy.action_id, order)
                    )  # a duplicate answer
            elif step - placed > 30:
                grant = self._grant(buy, step)  # very late fill
                order = Order(f"o-{buy.action_id}", buy.action_id, OrderState.FILLED, buy.request, grant)
                events.append(OrderUpdated(self.sid("late"), buy.action_id, order))
            else:
                keep.append((buy, placed))
        self._buys = keep
        for node, (block, ready_step) in list(self._booting.items()):
            if step >= ready_step:
                del self._booting[node]
                if self.blocks[block].released_at is None:
                    state = NodeState.FAILED if rng.random() < 0.05 else NodeState.READY
                    events.append(
                        NodeReported(self.sid("node"), NodeEvent(node, block, self.now(step), state=state))
                    )
        for job, node in self._to_start:
            events.append(JobStarted(self.sid("start"), job, node))
        self._to_start = []
        for (job, node), finish in list(self._running.items()):
            if step >= finish:
                del self._running[(job, node)]
                ok = rng.random() < 0.9
                block = node.rsplit("-n", 1)[0]
                events.append(
                    NodeReported(
                        self.sid("done"), NodeEvent(node, block, self.now(step), job_id=job, job_succeeded=ok)
                    )
                )
        if rng.random() < self.fail_rate and self.blocks:
            block = rng.choice(sorted(self.blocks))
            node = rng.choice(self.blocks[block].grant.node_ids)
            events.append(
                NodeReported(
                    self.sid("fail"),
                    NodeEvent(node, block, self.now(step), state=NodeState.FAILED, reason="chaos"),
                )
            )
        events.append(Tick(self.sid("tick")))
        return events

    def _grant(self, buy: BuyCapacity, step: int) -> BlockGrant:
        req = buy.request
        block_id = f"b-{buy.action_id}"
        hours = self.rng.choice([1, 2, 168]) if req.provider != PRIME else 168
        grant = BlockGrant(
            block_id=block_id,
            provider=req.provider,
            instance_type=req.instance_type,
            gpu_model=req.gpu_model,
            gpus_per_node=req.gpus_per_node,
            vram_per_gpu_gb=80,
            cpu_per_node=req.gpus_per_node * 12,
            ram_per_node_gb=req.gpus_per_node * 120,
            start_time=self.now(step),
            end_time=self.now(step) + timedelta(hours=hours),
            price_per_gpu_hour=req.limit_price_per_gpu_hour or Decimal(1),
            node_ids=tuple(f"{block_id}-n{i}" for i in range(req.node_count)),
        )
        if block_id not in self.blocks:
            self.blocks[block_id] = Block(grant)
            for node in grant.node_ids:
                self._booting[node] = (block_id, step + self.rng.choice([1, 2, 3]))
        return self.blocks[block_id].grant

    def react(self, step: int, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, BuyCapacity):
                self._buys.append((action, step))
            elif isinstance(action, StartWork):
                duration = max(1, action.expected_duration_s // STEP_S)
                for placement in action.placements:
                    self._running[(action.job_id, placement.node_id)] = step + duration
                self._to_start.append((action.job_id, action.node_id))
            elif isinstance(action, StopWork):
                self._running.pop((action.job_id, action.node_id), None)
            elif isinstance(action, ReleaseNodes):
                block = self.blocks[action.block_id]
                for node in action.node_ids:
                    block.stopped.setdefault(node, self.now(step))
                    self._booting.pop(node, None)
                    for key in [k for k in self._running if k[1] == node]:
                        del self._running[key]
            elif isinstance(action, ReleaseBlock):
                self.blocks[action.block_id].released_at = self.now(step)
                for node in self.blocks[action.block_id].grant.node_ids:
                    self._booting.pop(node, None)
                    for key in [k for k in self._running if k[1] == node]:
                        del self._running[key]

    def run(self, controller: Controller, check: object = None) -> None:
        for step in range(self.steps):
            now = self.now(step)
            events = self.events_for(step)
            actions = controller.step(now, events)
            self.log.append((now, events))
            self.actions.append(actions)
            self.react(step, actions)
            if callable(check):
                check(controller, self, step)


def replay(log: list[tuple[datetime, list[Event]]], controller: Controller) -> list[list[Action]]:
    return [controller.step(now, events) for now, events in log]
