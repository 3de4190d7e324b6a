"""Shared pieces of the runtime tests: injected time, small settings, and the end-state audit.

The audit reads only the database (the store's tables and the built-in market's tables), so it judges a
run whatever process made it: the event log replayed into a fresh controller must keep the engine's
invariants, every job submitted is there exactly once, and every purchase the market made is matched to
exactly one outbox action by its idempotency key and known to the controller.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from scalar.domain.market import CapacityRequest, Order
from scalar.engine import Controller, ControllerConfig, JobState, OrderStatus, event_from_dict
from scalar.providers.base import ProviderError
from scalar.providers.builtin import schema as market_schema
from scalar.runtime import ControlPlane, Settings, load_settings
from scalar.store import Store, make_engine
from tests.engine.invariants import check_bookings

T0 = datetime(2026, 3, 2, 9, tzinfo=UTC)
TERMINAL = {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.REJECTED}
PROVIDERS = ("sfcompute", "prime")

# A small, fast market: two providers, a few scale groups, short idle release.
CONTROLLER = {
    "scale_groups": [{"name": "test", "providers": list(PROVIDERS), "max_slices": 4}],
    "idle_release_s": 120,
    "flex_batch_wait_s": 30,
}


class Clock:
    """Injected time: ``advance`` moves it; every ControlPlane of a test may share one."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


class Crash(BaseException):
    """The process dies here (not an Exception: nothing in the runtime may swallow it)."""


class Seller:
    """A built-in market provider that can fail on purpose: ``fail_buy``/``fail_start`` raise that
    ``ProviderError`` (once each time it is set), ``crash_after_buy`` kills the caller after a real purchase."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.crash_after_buy = False
        self.fail_buy: ProviderError | None = None
        self.fail_start: ProviderError | None = None
        self.buys: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def buy(self, request: CapacityRequest, idempotency_key: str, now: datetime) -> Order:
        if self.fail_buy is not None:
            error, self.fail_buy = self.fail_buy, None
            raise error
        order = self.inner.buy(request, idempotency_key, now)
        self.buys.append(idempotency_key)
        if self.crash_after_buy:
            raise Crash(idempotency_key)
        return order

    def start_work(self, node_id: str, job_id: str, expected_duration_s: int, now: datetime) -> None:
        if self.fail_start is not None:
            error, self.fail_start = self.fail_start, None
            raise error
        self.inner.start_work(node_id, job_id, expected_duration_s, now)


def settings_for(db_url: str, tmp_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "data_dir": tmp_path / "data",
        "database_url": db_url,
        "time_scale": 600.0,
        "market_seed": 7,
        "enabled": PROVIDERS,
        "controller": ControllerConfig.from_dict(CONTROLLER),
        "lease_ttl_s": 10.0,
        "lease_renew_s": 2.0,
        "price_interval_s": 15.0,
        "auth_required": False,
    }
    values.update(overrides)
    return load_settings(None, values, {})


def drive(planes: list[ControlPlane], clock: Clock, seconds: int, step_s: float = 1.0) -> None:
    """Advance time in steps; each plane runs one leader iteration and drains its executor."""
    for _ in range(int(seconds / step_s)):
        clock.advance(step_s)
        for plane in planes:
            plane.run_once()
            while plane.run_executor_once():
                pass


def job(gpus: int = 1, duration: float = 30, tier: str = "FAST", **more: Any) -> dict[str, Any]:
    return {"tier": tier, "gpu_count": gpus, "expected_duration_sec": duration, **more}


@dataclass
class Audit:
    controller: Controller
    jobs: dict[str, str]  # job id -> projected state
    submitted: list[str]  # job ids in the inbox, in order
    market_orders: Counter[tuple[str, str]]  # (provider, idempotency key) -> count
    buy_actions: dict[str, str]  # action id -> status

    def states(self) -> Counter[str]:
        return Counter(r.state.value for r in self.controller.state.jobs.values() if r.state is not None)


def stepping_config(settings: Settings) -> ControllerConfig:
    """The controller config a control plane opened on ``settings`` steps with (the built-in market's clock
    applied to the providers it sells): what ``audit`` must replay with."""
    plane = ControlPlane(settings)
    plane.open()
    try:
        return plane.settings.controller
    finally:
        plane.stop()


def audit(db_url: str, config: ControllerConfig, *, settled: bool = True) -> Audit:
    """Read everything back and check the invariants that must hold after any run, crashed or not.

    ``settled=False`` is the check right after a ``kill -9``: requests may still wait in the inbox and a
    purchase may have been made whose action is still in flight (it will be executed again, same key)."""
    store = Store.open(db_url)
    try:
        controller = Controller(config)
        for batch in store.read_batches():
            controller.step(batch.at, [event_from_dict(e.payload) for e in batch.events])
        check_bookings(controller)
        with store.read() as tx:
            inbox = tx.list_inbox(kind="submit", limit=1_000_000)
            submitted = [i.entity_id for i in inbox]
            consumed = {i.entity_id for i in inbox if i.consumed_at is not None}
            projected = {p.id: p.state for p in tx.list_projection("jobs", limit=1_000_000)}
            actions = tx.list_actions(limit=1_000_000)
            submitted_events = Counter(
                e.payload["spec"]["job_id"]
                for e in tx.read_events_page(0, 10_000_000)
                if e.kind == "JobSubmitted"
            )
    finally:
        store.close()
    # No job lost or duplicated: each accepted job reached the log exactly once and the controller has it.
    assert len(submitted) == len(set(submitted)), "a job id was accepted twice"
    assert set(submitted_events) == consumed, "a consumed request is not in the log, or one appeared"
    assert all(n == 1 for n in submitted_events.values()), "a job was submitted to the controller twice"
    assert set(controller.state.jobs) == consumed
    if settled:
        assert consumed == set(submitted), "accepted jobs still wait in the inbox"
    # Projections agree with the replayed state for every job the controller has seen.
    for job_id, rec in controller.state.jobs.items():
        assert rec.state is not None and projected.get(job_id) == rec.state.value, (job_id, rec.state)
    buys = {a.action_id: a.status for a in actions if a.kind == "BuyCapacity"}
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                select(
                    market_schema.orders.c.provider,
                    market_schema.orders.c.idempotency_key,
                    func.count(),
                ).group_by(market_schema.orders.c.provider, market_schema.orders.c.idempotency_key)
            ).all()
            filled = {
                r.idempotency_key: r.block_id
                for r in conn.execute(
                    select(market_schema.orders.c.idempotency_key, market_schema.blocks.c.block_id).join(
                        market_schema.blocks,
                        market_schema.blocks.c.order_id == market_schema.orders.c.order_id,
                    )
                )
            }
    finally:
        engine.dispose()
    orders: Counter[tuple[str, str]] = Counter({(r[0], r[1]): int(r[2]) for r in rows})
    # No purchase made twice: one market order per key, and each key is exactly one BuyCapacity action.
    assert all(n == 1 for n in orders.values()), orders
    keys = Counter(key for _, key in orders)
    assert all(n == 1 for n in keys.values()), "one idempotency key bought at two providers"
    assert set(keys) <= set(buys), f"the market sold orders no action asked for: {set(keys) - set(buys)}"
    # Every purchase accounted for: each filled market order is a filled purchase the controller knows,
    # on the same block; each completed buy action reached the market.
    for key, block_id in filled.items():
        order = controller.state.orders.get(key)
        if not settled and buys.get(key) in ("pending", "in_flight"):
            continue  # bought just before the kill: the next leader executes it again and records it
        assert order is not None and order.status is OrderStatus.FILLED, (key, order and order.status)
        assert order.block_id == block_id, (key, order.block_id, block_id)
    for key, status in buys.items():
        if status == "done":
            assert key in keys, f"buy {key} is done but the market never saw it"
    return Audit(controller, projected, submitted, orders, buys)
