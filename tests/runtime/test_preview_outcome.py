"""The cost preview is the controller's decision: previewed, then submitted, each job of a range (shapes,
tiers) lands where the preview said (the same READY node, or the same scale group bought, same node count,
same price), on a real control plane over SQLite whose leader publishes its decision state each step."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

from scalar.domain.money import round_micros
from scalar.engine import ControllerConfig
from scalar.runtime import ControlPlane
from tests.runtime.helpers import CONTROLLER, Clock, drive, job, settings_for

FLEX_WAIT_S = CONTROLLER["flex_batch_wait_s"]

JOBS = [
    job(1, 600, "FAST"),
    job(1, 600, "FAST"),
    job(2, 900, "FAST", vram_per_gpu_gb=40),
    job(8, 1800, "FAST", vram_per_gpu_gb=80),
    job(1, 3600, "FLEX", restartable=True),
    job(4, 3600, "FLEX", cpu_cores=8, ram_gb=64),
    job(3, 1200, "FAST", vram_per_gpu_gb=20),
    job(8, 7200, "FLEX", restartable=True),
    job(1, 300, "FAST", vram_per_gpu_gb=70),
]


def _outcome(plane: ControlPlane, job_id: str) -> dict[str, Any]:
    """Where the job went at the step that decided it: its node, or the purchase made for it."""
    got = plane.get_job(job_id)
    assert got is not None
    if got.placements:
        return {"node": got.placements[0].node_id}
    status = plane.autoscaler_status(all_groups=True)
    for order in status.open_orders:
        if job_id in order.for_jobs:
            group = next(g for g in status.groups if g.name == order.group)
            assert group.price_per_gpu_hour is not None
            return {
                "group": order.group,
                "node_count": order.node_count,
                "price": round_micros(Decimal(group.price_per_gpu_hour)),
            }
    return {"pending": got.reason}


def _check(plane: ControlPlane, clock: Clock, fields: dict[str, Any], compared: dict[str, int]) -> None:
    plane.run_once()  # a step publishes the state the preview decides on
    preview = plane.preview_job(fields)
    accepted = plane.submit_job(fields)
    plane.run_once()
    if fields["tier"] == "FLEX" and not preview.node:
        clock.advance(FLEX_WAIT_S)  # the batch is released: the preview stepped to this time too
        plane.run_once()
    outcome = _outcome(plane, accepted.id)
    if preview.node is not None:
        assert outcome == {"node": preview.node.node_id}, (fields, preview.reason, outcome)
        compared["node"] += 1
    elif preview.purchase is not None:
        buy = preview.purchase
        expected = {
            "group": buy.group,
            "node_count": buy.node_count,
            "price": Decimal(buy.price_per_gpu_hour),
        }
        assert outcome == expected, (fields, preview.reason, outcome)
        compared["group"] += 1
    else:
        assert "pending" in outcome, (fields, preview.reason, outcome)
    while plane.run_executor_once():
        pass


def test_every_preview_is_what_the_controller_then_does(sqlite_url: str, tmp_path: Path) -> None:
    clock = Clock()
    # prices stay as first observed, and capacity bought for jobs is not held for them once READY
    config = ControllerConfig.from_dict({**CONTROLLER, "reservation_s": 0})
    plane = ControlPlane(
        settings_for(sqlite_url, tmp_path, price_interval_s=1e6, controller=config), clock=clock
    )
    try:
        plane.run_once()
        compared = {"node": 0, "group": 0}
        for fields in JOBS:  # mostly purchases: nothing is READY yet
            _check(plane, clock, fields, compared)
        drive([plane], clock, 60, step_s=5)  # purchases fill, nodes boot
        # now jobs that fit the free GPUs of READY nodes (a job that fits is placed at once, either tier; a
        # FLEX job that does not fit is decided when its batch is released, after events the preview cannot
        # know of)
        for tier in ("FAST", "FAST", "FLEX", "FLEX", "FLEX"):
            free = [n for n in plane.nodes().nodes if str(n.state).upper() == "READY" and n.tier == tier]
            free = [n for n in free if n.gpus_free >= 1]
            if free:
                node = max(free, key=lambda n: n.gpus_free)
                _check(plane, clock, job(min(2, node.gpus_free), 600, tier), compared)
        assert compared["node"] >= 2 and compared["group"] >= 3, compared
    finally:
        plane.stop()
