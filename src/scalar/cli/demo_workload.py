"""``scalar up --demo``'s workload: a seeded, realistic mix arriving in bursts on the built-in market.

Two populations, as on a shared GPU cluster:

- **interactive** FAST jobs (notebooks, debugging, evaluation): 1-2 GPUs, a few market minutes to under an
  hour, high priority, never restartable (a person waits on them);
- **training** FLEX jobs (fine-tunes, training runs, now and then a 16-GPU gang over two nodes): 2-16 GPUs,
  one to eight market hours; most checkpoint, so they are ``restartable`` and consolidation may move them
  to cheaper capacity.

Jobs arrive in **bursts** (a team starting work, a sweep launched at once): a burst of 2-7 jobs a fraction
of a second apart, then a quiet gap of 6-20 s of wall time. Everything is drawn from one
``random.Random`` seeded with ``scalar-demo:<seed>``, so a seed gives the same jobs in the same order.
Durations are in market time, divided by the time scale (``--time-scale 60``: one market hour is a minute).

**Work, not wall time.** A job's ``expected_duration_sec`` means what the engine takes it to mean
(``domain.contracts``): for a FLEX job, its work in seconds on the reference GPU (the A100,
``domain.gpus.relative_throughput`` = 1); for a FAST job, its wall time on any model. The demo tells the
built-in market each job's work as it submits it (``BuiltinMarket.declare_work``), and the market runs a
FLEX job for ``work / relative throughput`` of the GPUs it got: an A100-hour of training takes 19 market
minutes on an H100 and two and a half hours on a V100, as in Protocol B's simulated jobs. The demo's jobs
carry no command (a job with a command runs only where a node agent runs, and the built-in market's nodes
run none), so the market, the demo's world, runs them.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("scalar.up")


@dataclass(frozen=True, slots=True)
class DemoKind:
    """One kind of demo job. ``hours``: its run time in market hours (divided by the time scale);
    ``restartable``: the share of such jobs that checkpoint and may be moved."""

    name: str
    weight: float
    gpus: int
    vram_gb: float
    tier: str
    hours: tuple[float, float]
    priority: int
    restartable: float


DEMO_MIX: tuple[DemoKind, ...] = (
    DemoKind("notebook", 4.0, 1, 24.0, "FAST", (0.1, 0.5), 5, 0.0),
    DemoKind("eval", 2.5, 2, 40.0, "FAST", (0.15, 0.75), 5, 0.0),
    DemoKind("finetune", 2.0, 2, 40.0, "FLEX", (1.0, 3.0), 2, 0.6),
    DemoKind("train", 2.0, 4, 80.0, "FLEX", (2.0, 6.0), 1, 0.7),
    DemoKind("train-node", 1.2, 8, 80.0, "FLEX", (3.0, 8.0), 1, 0.7),
    DemoKind("gang", 0.2, 16, 80.0, "FLEX", (3.0, 6.0), 3, 0.5),
)
DEMO_BURST_JOBS = (2, 7)
DEMO_IN_BURST_S = (0.2, 1.0)
DEMO_BURST_GAP_S = (6.0, 20.0)
DEMO_MIN_DURATION_S = 10.0
DEMO_MAX_PENDING = 30


def demo_job(rng: random.Random, time_scale: float) -> dict[str, Any]:
    """One job of the demo mix: its fields for ``ControlPlane.submit_job``."""
    kind = rng.choices(DEMO_MIX, weights=[k.weight for k in DEMO_MIX])[0]
    hours = rng.uniform(*kind.hours)
    restartable = rng.random() < kind.restartable
    duration = max(DEMO_MIN_DURATION_S, round(hours * 3600.0 / time_scale))
    per_node = min(kind.gpus, 8)
    fields: dict[str, Any] = {
        "name": f"demo-{kind.name}-{kind.gpus}gpu",
        "tier": kind.tier,
        "gpu_count": kind.gpus,
        "vram_per_gpu_gb": kind.vram_gb,
        "cpu_cores": 4.0 * per_node,
        "ram_gb": 32.0 * per_node,
        "expected_duration_sec": float(duration),
        "priority": kind.priority,
    }
    if restartable:
        fields["restartable"] = True
    return fields


def demo_bursts(rng: random.Random, time_scale: float) -> Any:
    """Endless ``(wait_s, fields)``: how long to wait before submitting each job, burst after burst."""
    while True:
        size = rng.randint(*DEMO_BURST_JOBS)
        for i in range(size):
            wait = rng.uniform(*DEMO_BURST_GAP_S) if i == 0 else rng.uniform(*DEMO_IN_BURST_S)
            yield wait, demo_job(rng, time_scale)


class DemoWorkload(threading.Thread):
    """Submits the demo's bursts through the control plane, while fewer than ``DEMO_MAX_PENDING`` jobs
    wait (so a long run does not pile up work)."""

    def __init__(
        self,
        control_plane: Any,
        *,
        seed: int,
        time_scale: float,
        stop: threading.Event,
        say: Callable[[str], None] = print,
    ) -> None:
        super().__init__(name="scalar-demo", daemon=True)
        self.control_plane = control_plane
        self.rng = random.Random(f"scalar-demo:{seed}")
        self.time_scale = time_scale
        self.stop = stop
        self.say = say
        self.submitted = 0

    def declare_work(self, job_id: str, fields: dict[str, Any]) -> None:
        """Tell the built-in market (the demo's world) the work the job does: its expected duration, read
        as the engine reads it (reference-model seconds for FLEX, wall seconds for FAST), so a FLEX job
        runs that work at the speed of the GPUs it gets. Without a built-in market, nothing to tell."""
        market = getattr(self.control_plane, "market", None)
        if market is None:
            return
        try:
            market.declare_work(
                job_id,
                float(fields["expected_duration_sec"]),
                str(fields["tier"]),
                self.control_plane.clock(),
            )
        except Exception:  # the job runs anyway, for its expected duration on any model
            log.exception("demo workload: telling the market the work of %s failed", job_id)

    def run(self) -> None:
        from scalar.runtime import JobRejectedError

        for wait, fields in demo_bursts(self.rng, self.time_scale):
            if self.stop.wait(wait):
                return
            try:
                waiting = self.control_plane.list_jobs(state="PENDING", limit=DEMO_MAX_PENDING)
                if len(waiting) >= DEMO_MAX_PENDING:
                    continue
                job = self.control_plane.submit_job(fields)
                self.submitted += 1
                self.declare_work(job.id, fields)
            except JobRejectedError as exc:
                self.say(f"demo: {fields['name']} refused: {exc}")
            except Exception:
                log.exception("demo workload: submitting a job failed")
