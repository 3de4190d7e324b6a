"""The cost preview is the controller's decision: previewed, then submitted, each job of a range (shapes,
tiers) lands where the preview said (the same READY node, or the same scale group bought, same node count,
same price), on a real control plane over SQLite whose leader publishes its decision state each step.

The preview's ``job_cost`` is checked against the outcome: the price paid on the node it landed on (or the
group bought) x its GPUs x its run hours on that node's GPU model (a FLEX job's duration is work in A100
GPU-hours, ``domain.contracts.work_rate``); a preview that says the job waits says why in the words the
job's own reason then uses. A user-owned host joined through a local agent (``node-local-...``) is one of
the READY nodes a job is previewed onto and then placed on."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

from scalar import __version__
from scalar.domain.contracts import work_rate
from scalar.domain.money import round_micros
from scalar.domain.tier import Tier
from scalar.engine import ControllerConfig
from scalar.runtime import ControlPlane
from scalar.wire.agent import PROTOCOL, GpuFact, HostFacts, JoinTokenRequest, RegisterRequest
from scalar.wire.views import PreviewOut
from tests.runtime.helpers import CONTROLLER, Clock, drive, job, settings_for

FLEX_WAIT_S = CONTROLLER["flex_batch_wait_s"]
HOUR = Decimal(3600)
LOCAL_PRICE = Decimal("1.25")  # $/GPU-h the user-owned host's block is recorded at

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


def _cost(fields: dict[str, Any], price: Decimal, gpu_model: str | None) -> Decimal:
    """What the job costs where it went: price x GPUs x its run hours on that GPU model."""
    rate = Decimal(repr(work_rate(gpu_model, Tier.parse(fields["tier"]))))
    hours = Decimal(str(fields["expected_duration_sec"])) / rate / HOUR
    return round_micros(price * fields["gpu_count"] * hours)


def _outcome(plane: ControlPlane, job_id: str, fields: dict[str, Any]) -> dict[str, Any]:
    """Where the job went at the step that decided it (its node, or the purchase made for it) and what it
    costs there; or the reason it waits."""
    got = plane.get_job(job_id)
    assert got is not None
    if got.placements:
        node_id = got.placements[0].node_id
        node = next(n for n in plane.nodes().nodes if n.node_id == node_id)
        block = next(b for b in plane.blocks().blocks if b.block_id == node.block_id)
        price = Decimal(block.price_per_gpu_hour)
        return {"node": node_id, "cost": _cost(fields, price, node.gpu_model), "model": node.gpu_model}
    status = plane.autoscaler_status(all_groups=True)
    for order in status.open_orders:
        if job_id in order.for_jobs:
            group = next(g for g in status.groups if g.name == order.group)
            assert group.price_per_gpu_hour is not None
            price = Decimal(group.price_per_gpu_hour)  # exact: the preview shows it to the micro-dollar
            return {
                "group": order.group,
                "node_count": order.node_count,
                "price": round_micros(price),
                "cost": _cost(fields, price, group.gpu_model),
                "model": group.gpu_model,
            }
    reason = (got.reason or "").replace(job_id, "the job")
    return {"pending": f"the controller would reject it: {reason}" if got.state == "REJECTED" else reason}


def _check(
    plane: ControlPlane, clock: Clock, fields: dict[str, Any], compared: dict[str, int]
) -> tuple[PreviewOut, dict[str, Any], str]:
    plane.run_once()  # a step publishes the state the preview decides on
    preview = plane.preview_job(fields)
    accepted = plane.submit_job(fields)
    plane.run_once()
    if fields["tier"] == "FLEX" and not preview.node:
        clock.advance(FLEX_WAIT_S)  # the batch is released: the preview stepped to this time too
        plane.run_once()
    outcome = _outcome(plane, accepted.id, fields)
    where = {k: v for k, v in outcome.items() if k not in ("cost", "model")}
    if preview.node is not None:
        assert where == {"node": preview.node.node_id}, (fields, preview.reason, outcome)
        compared["node"] += 1
    elif preview.purchase is not None:
        buy = preview.purchase
        expected = {
            "group": buy.group,
            "node_count": buy.node_count,
            "price": Decimal(buy.price_per_gpu_hour),
        }
        assert where == expected, (fields, preview.reason, outcome)
        compared["group"] += 1
    else:
        # it waits (for a purchase on its way, or held): the reason the preview gave is the job's own
        assert "pending" in outcome, (fields, preview.reason, outcome)
        assert preview.job_cost is None
        assert preview.reason in (
            f"no purchase now: {outcome['pending']}",
            outcome["pending"],  # rejected: said as such
        ), (fields, preview.reason, outcome)
        compared["wait"] += 1
    if "cost" in outcome:
        assert preview.job_cost is not None
        assert Decimal(preview.job_cost) == outcome["cost"], (fields, preview.reason, outcome)
        compared[f"cost {fields['tier']}"] += 1
        if fields["tier"] == "FLEX" and work_rate(outcome["model"], Tier.FLEX) != 1.0:
            compared["cost FLEX off the reference GPU"] += 1
    while plane.run_executor_once():
        pass
    return preview, outcome, accepted.id


def _join_local_host(plane: ControlPlane, tier: str, gpus: int, model: str, vram_gb: float) -> str:
    """A user-owned host joined the way `scalar up --demo`'s local agent joins: its node id."""
    token = plane.agents.create_join_token(
        JoinTokenRequest(provider="local", tier=tier, price_per_gpu_hour=LOCAL_PRICE)
    )
    facts = HostFacts(
        hostname="local",
        gpus=[GpuFact(index=i, uuid=f"GPU-{i}", model=model, memory_gb=vram_gb) for i in range(gpus)],
        cpu_count=64,
        ram_gb=512.0,
        disk_gb=1000.0,
    )
    joined = plane.agents.register(
        RegisterRequest(join_token=token.token, version=__version__, protocol=PROTOCOL, facts=facts)
    )
    plane.run_once()  # the controller learns of the host
    [node] = [n for n in plane.nodes().nodes if n.node_id == joined.node_id]
    assert node.node_id.startswith("node-local-") and str(node.state).upper() == "READY", node
    return node.node_id


def test_every_preview_is_what_the_controller_then_does(sqlite_url: str, tmp_path: Path) -> None:
    clock = Clock()
    # prices stay as first observed, and capacity bought for jobs is not held for them once READY
    config = ControllerConfig.from_dict({**CONTROLLER, "reservation_s": 0})
    plane = ControlPlane(
        settings_for(sqlite_url, tmp_path, price_interval_s=1e6, controller=config), clock=clock
    )
    try:
        plane.run_once()
        compared = dict.fromkeys(
            ("node", "group", "wait", "cost FAST", "cost FLEX", "cost FLEX off the reference GPU"), 0
        )
        for fields in JOBS:  # mostly purchases: nothing is READY yet
            _check(plane, clock, fields, compared)
        # a job with a command waits for a node with an agent (none yet): the preview says why, as the job
        # then does
        preview, _, waiting = _check(plane, clock, job(1, 600, "FAST", command=["true"]), compared)
        assert preview.node is None and preview.purchase is None and "agent" in preview.reason
        plane.cancel_job(waiting)
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
        # a user-owned H200 host joins through a local agent: a job with a command (only a node with an
        # agent runs one) is previewed onto it, at the host's recorded price, and lands there; FLEX work
        # runs faster on it than on the reference GPU, so costs less than its duration says
        for tier in ("FAST", "FLEX"):
            local = _join_local_host(plane, tier, 4, "H200", 141.0)
            fields = job(2, 3600, tier, command=["python", "-c", "pass"])
            preview, outcome, _ = _check(plane, clock, fields, compared)
            assert preview.node is not None and preview.node.node_id == local, preview.reason
            assert Decimal(preview.node.price_per_gpu_hour) == LOCAL_PRICE
            assert outcome["cost"] == _cost(fields, LOCAL_PRICE, "H200")
        assert compared["node"] >= 4 and compared["group"] >= 3 and compared["wait"] == 1, compared
        assert compared["cost FAST"] >= 3 and compared["cost FLEX off the reference GPU"] >= 1, compared
    finally:
        plane.stop()
