"""A contract's spend is one number wherever it is shown: ``GET /blocks`` (the dashboard's "Spent" per
contract), ``/status`` and ``/metrics`` carry a block's accounting forward between steps by the rule
``GET /costs`` uses (``views_market.block_account``: from the step that wrote it, at the GPUs still paid
for). Here a block of an hourly seller has had one node released alone (``ReleaseNodes``), so it pays for
its working node only: between steps every view adds that node's GPUs, not every node's."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from scalar.domain.money import micros_text, round_micros
from scalar.domain.timefmt import parse_iso
from scalar.engine import ControllerConfig
from scalar.runtime import ControlPlane
from tests.runtime.helpers import Clock, drive, job, settings_for

PROVIDER = "aws"  # bills each node while it runs: an idle node of a working block is released alone
HOUR = Decimal(3600)
CONTROLLER = {
    "scale_groups": [{"name": "hourly", "providers": [PROVIDER], "max_slices": 4}],
    "idle_release_s": 120,
    "reservation_s": 0,
}


def _spend_everywhere(plane: ControlPlane) -> dict[str, dict[str, str]]:
    """Each view's spend: per block (/blocks, /costs) and per provider (/costs, /status, /metrics)."""
    costs = plane.costs()
    status = plane.status()
    metrics = plane.metrics_snapshot()
    return {
        "blocks": {b.block_id: b.accrued for b in plane.blocks().blocks},
        "costs": {b.block_id: b.accrued for b in costs.by_block},
        "costs by provider": {p.provider: p.accrued for p in costs.by_provider},
        "status by provider": dict(status.spend.by_provider),
        "metrics by provider": {p: micros_text(v) for p, v in metrics.spend_by_provider.items()},
        "totals": {
            "blocks": plane.blocks().totals.accrued,
            "costs": costs.accrued,
            "status": status.spend.accrued,
        },
    }


def test_blocks_spend_is_costs_spend_after_a_node_is_released_alone(sqlite_url: str, tmp_path: Path) -> None:
    clock = Clock()
    config = ControllerConfig.from_dict(CONTROLLER)
    plane = ControlPlane(
        settings_for(sqlite_url, tmp_path, enabled=(PROVIDER,), price_interval_s=1e6, controller=config),
        clock=clock,
    )
    try:
        plane.run_once()
        # two jobs that each take a whole node of the cheapest small on-demand shape: one 2-node block
        offers = [o for o in plane.prices(provider=PROVIDER) if not o.spot and o.gpu_count]
        offer = min(offers, key=lambda o: (o.gpu_count, o.price_per_hour or 0, o.instance_type))
        shape = {
            "vram_per_gpu_gb": float(offer.gpu_memory_gb),
            "cpu_cores": float(offer.vcpu) / 2,
            "ram_gb": float(offer.memory_gb) / 2,
        }
        short = plane.submit_job(job(int(offer.gpu_count), 600, "FAST", **shape))
        long = plane.submit_job(job(int(offer.gpu_count), 6 * 3600, "FAST", **shape))
        for _ in range(60):  # the short job ends; its idle node goes alone, the other works on
            drive([plane], clock, 60, step_s=10)
            if any(a.kind == "ReleaseNodes" for a in plane.autoscaler_status().recent_actions):
                break
        else:
            raise AssertionError("no node was released alone")
        drive([plane], clock, 30, step_s=10)  # the release executed and its node reported gone
        assert plane.get_job(short.id).state == "SUCCEEDED" and plane.get_job(long.id).state == "RUNNING"
        [block] = plane.blocks(status="open").blocks
        assert block.node_count == 2
        store, _ = plane.core.opened()
        with store.read() as tx:
            row = tx.get_projection("blocks", block.block_id)
        assert row is not None
        paid = int(row.data["paid_gpus"])
        assert 0 < paid < block.gpu_count  # only the working node is paid for
        accounted_at = parse_iso(row.data["accounted_at"])
        assert accounted_at is not None

        assert _equal(_spend_everywhere(plane))
        # half an hour with no step: every view carries the block forward at the GPUs still paid for
        clock.advance(1800)
        later = _equal(_spend_everywhere(plane))
        elapsed = Decimal(int((clock.now - accounted_at).total_seconds()))
        carried = Decimal(block.price_per_gpu_hour) * paid * elapsed / HOUR
        assert Decimal(later[block.block_id]) == round_micros(Decimal(row.data["accrued"]) + carried)
    finally:
        plane.stop()


def _equal(spend: dict[str, dict[str, str]]) -> dict[str, str]:
    """Every view shows the same spend; the per-block one is returned."""
    assert spend["blocks"] == spend["costs"], spend
    by_provider = spend["costs by provider"]
    assert spend["status by provider"] == by_provider and spend["metrics by provider"] == by_provider, spend
    assert len(set(spend["totals"].values())) == 1, spend
    return spend["blocks"]
