"""A steady runtime step of a real leader on SQLite, split into its parts.

    .venv/bin/python -m bench.runtime_step --pending 100000            # 1,000 READY nodes, 100,000 pending
    .venv/bin/python -m bench.runtime_step --pending 20000 --steps 10

A ``ControlPlane`` on a fresh SQLite database (no market: only the leader and its store are measured) is
loaded through its leader's own ``commit`` (a market, a filled block of ``--nodes`` READY 8-GPU nodes, then
``--pending`` FAST jobs of 1-8 GPUs submitted in one step, which fills the nodes and leaves the rest
waiting). Then each steady step reports 100 running jobs finished plus a Tick, as ``Leader.tick`` would,
and is timed in parts:

- *engine step*: ``Controller.step``;
- *snapshot*: building the published decision state (``engine.snapshot``), less the codec's encoding;
- *encode*: the codec's ``encode`` calls made for it, and the JSON of what it writes (the store's canonical
  JSON of ``runtime_state`` values, the rows' JSON text), not that of the projections, events or actions;
- *DB write*: the ``runtime_state``/snapshot rows written (statement and JSON serialisation), less the
  canonical JSON;
- *write tx*: the whole fenced write transaction (it holds the SQLite write lock submissions wait for);
- *commit*: all of ``Leader.commit``.

The parts are measured by wrapping module functions (``scalar.engine.snapshot.encode``,
``scalar.store.jsoncodec.canonical``, ``Tx.put_state`` and the snapshot-part writer when present), so the
same bench measures the code before and after a change to how the state is published.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from scalar.domain.market import BlockGrant, CapacityRequest, NodeEvent, NodeState, Order, OrderState
from scalar.domain.offers import Offer
from scalar.domain.tier import Tier
from scalar.engine import (
    ControllerConfig,
    JobSpec,
    JobSubmitted,
    MarketObserved,
    NodeReported,
    OrderUpdated,
    StartWork,
    Tick,
)
from scalar.runtime import ControlPlane, load_settings
from scalar.runtime.leader import new_event

T0 = datetime(2026, 1, 1, tzinfo=UTC)
PARTS = ("engine", "snapshot", "encode", "db_write", "write_tx", "commit")


class _Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


INCLUSIVE = ("write_tx", "commit")  # totals; the other parts exclude the parts nested in them


class Timer:
    """Seconds spent in each part during one step: a part nested in another (the codec's encode inside the
    snapshot, the canonical JSON inside the DB write) is counted in its own part only."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = dict.fromkeys(PARTS, 0.0)
        self.active = False
        self._stack: list[str] = []

    @contextlib.contextmanager
    def part(self, name: str) -> Iterator[None]:
        nested = name not in INCLUSIVE
        if nested:
            self._stack.append(name)
        started = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - started
            if nested:
                self._stack.pop()
            if self.active:
                self.spent[name] += elapsed
                if nested and self._stack:
                    self.spent[self._stack[-1]] -= elapsed

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            with self.part(name):
                return fn(*args, **kwargs)

        return timed


def _instrument(timer: Timer) -> None:
    """Wrap the functions whose time makes up the parts (module globals: looked up at each call)."""
    import scalar.engine.snapshot as snap_mod
    import scalar.runtime.leader as leader_mod
    import scalar.store.jsoncodec as jsoncodec
    import scalar.store.runtime_state as state_mod
    from scalar.store.store import Tx

    def patch(owner: Any, name: str, part: str) -> None:
        if hasattr(owner, name):
            setattr(owner, name, timer.wrap(part, getattr(owner, name)))

    patch(snap_mod, "encode", "encode")  # the codec, as the snapshot module calls it
    # the store's canonical JSON of a runtime_state value (only there: projections and events have theirs)
    proxy = SimpleNamespace(
        canonical=timer.wrap("encode", jsoncodec.canonical), dumps=jsoncodec.dumps, loads=jsoncodec.loads
    )
    setattr(state_mod, "jsoncodec", proxy)  # noqa: B010 (a module attribute mypy does not know)
    patch(leader_mod, "snapshot", "snapshot")  # built whole (before the parts)
    patch(leader_mod, "market_snapshot", "snapshot")
    patch(getattr(leader_mod, "SnapshotWriter", None), "prepare", "snapshot")  # built in parts
    patch(Tx, "put_state", "db_write")
    patch(Tx, "put_snapshot_parts", "db_write")
    if importlib.util.find_spec("scalar.runtime.snapshot_store") is not None:  # JSON text of each row
        patch(importlib.import_module("scalar.runtime.snapshot_store"), "dumps", "encode")


def run(nodes: int, pending: int, steps: int, seed: int = 1) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="scalar-runtime-step-"))
    clock = _Clock()
    config = ControllerConfig.from_dict({"scale_groups": [{"name": "bench", "max_slices": nodes + 100}]})
    settings = load_settings(
        None,
        {"database_url": f"sqlite:///{tmp}/bench.db", "data_dir": tmp, "controller": config},
        {},
    )
    plane = ControlPlane(settings, clock=clock, providers={})
    timer = Timer()
    try:
        plane.run_once()
        store, leader = plane.core.opened()
        assert leader.controller is not None
        offer = Offer("sfcompute", "8xH100", "us", Decimal("16"), "H100", 8, 80, 96, 1024)
        node_ids = tuple(f"n{i:05d}" for i in range(nodes))
        request = CapacityRequest("sfcompute", "8xH100", nodes, 30 * 86400, None, Tier.FAST, "H100", 8)
        t = T0
        grant = BlockGrant(
            "blk",
            "sfcompute",
            "8xH100",
            "H100",
            8,
            80,
            96,
            1024,
            t,
            t + timedelta(days=30),
            Decimal(2),
            node_ids,
        )
        rng = random.Random(seed)
        specs = [
            JobSpec(f"j{i:06d}", "FAST", rng.choice((1, 1, 2, 4, 8)), 40, 4, 32, rng.uniform(600, 7200), 0)
            for i in range(pending)
        ]
        loads: list[list[Any]] = [
            [MarketObserved("m", (offer,), t, {}, ("sfcompute",))],
            [OrderUpdated("fill", "adopted", Order("o1", "adopted", OrderState.FILLED, request, grant))],
            [NodeReported(f"r{i}", NodeEvent(n, "blk", t, NodeState.READY)) for i, n in enumerate(node_ids)],
            [JobSubmitted(f"s{i}", s) for i, s in enumerate(specs)],
        ]
        running: list[StartWork] = []
        load_started = time.perf_counter()
        for load in loads:
            clock.now += timedelta(seconds=1)
            actions = leader.commit(clock.now, [new_event(e, clock.now) for e in load], market_changed=True)
            running += [a for a in actions if isinstance(a, StartWork)]
        load_s = time.perf_counter() - load_started
        _instrument(timer)
        controller = leader.controller
        assert controller is not None
        controller.step = timer.wrap("engine", controller.step)  # type: ignore[method-assign]
        inner_write = store.write

        @contextlib.contextmanager
        def timed_write(*args: Any, **kwargs: Any) -> Iterator[Any]:
            with timer.part("write_tx"), inner_write(*args, **kwargs) as tx:
                yield tx

        store.write = timed_write  # type: ignore[method-assign]
        per_step: list[dict[str, float]] = []
        placed = 0
        for k in range(steps):
            clock.now += timedelta(seconds=1)
            done, running = running[:100], running[100:]
            events: list[Any] = [
                NodeReported(
                    f"d{k}-{i}", NodeEvent(p.node_id, "blk", clock.now, job_id=a.job_id, job_succeeded=True)
                )
                for i, a in enumerate(done)
                for p in a.placements
            ]
            events.append(Tick(f"t{k}"))
            timer.spent = dict.fromkeys(PARTS, 0.0)
            timer.active = True
            with timer.part("commit"):
                actions = leader.commit(clock.now, [new_event(e, clock.now) for e in events])
            timer.active = False
            new = [a for a in actions if isinstance(a, StartWork)]
            placed += len(new)
            running += new
            per_step.append(dict(timer.spent))
        with store.read() as tx:
            size = _published_bytes(tx)
        out: dict[str, Any] = {
            "nodes": nodes,
            "pending": len(controller.state.pending_ids),
            "steps": steps,
            "placed": placed,
            "load_s": load_s,
            "published_kb": size / 1024,
        }
        for part in PARTS:
            values = [s[part] for s in per_step]
            out[f"{part}_p50"] = statistics.median(values)
            out[f"{part}_max"] = max(values)
        return out
    finally:
        plane.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _published_bytes(tx: Any) -> int:
    """The size of the published decision state as stored (the snapshot row, or its parts)."""
    from sqlalchemy import text

    conn = tx._conn
    total = conn.execute(
        text(
            "SELECT coalesce(sum(length(value)), 0) FROM runtime_state WHERE key LIKE 'controller:snapshot%'"
        )
    ).scalar()
    with contextlib.suppress(Exception):  # the rows of the published state, where stored in parts
        total += conn.execute(text("SELECT coalesce(sum(length(value)), 0) FROM snapshot_parts")).scalar()
    return int(total or 0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nodes", type=int, default=1_000, help="READY 8-GPU nodes")
    parser.add_argument("--pending", type=int, default=100_000, help="jobs submitted (most stay pending)")
    parser.add_argument("--steps", type=int, default=10, help="steady steps measured")
    args = parser.parse_args(argv)
    r = run(args.nodes, args.pending, args.steps)
    print(r, flush=True)
    print(
        " | ".join(f"{p} {r[f'{p}_p50'] * 1000:,.1f} ms (max {r[f'{p}_max'] * 1000:,.0f})" for p in PARTS),
        flush=True,
    )


if __name__ == "__main__":
    main()
