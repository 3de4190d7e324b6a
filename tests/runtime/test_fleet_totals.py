"""``GET /nodes`` totals from a few fields of each node (``fleet_totals``) equal the totals of the whole
slot map (``slot_totals`` of every node's ``slot_row``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from scalar.runtime.views import fleet_totals, slot_row, slot_totals

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
STATES = ("ready", "booting", "initializing", "requesting", "terminated")


@st.composite
def fleets(draw: Any) -> tuple[list[dict[str, Any]], dict[tuple[str, int], list[tuple[str, float]]]]:
    nodes, on_gpu = [], {}
    for n in range(draw(st.integers(0, 8))):
        gpus = draw(st.sampled_from([1, 2, 4, 8]))
        vram = draw(st.sampled_from([0.0, 24.0, 80.0]))
        busy = draw(st.lists(st.integers(0, gpus - 1), unique=True, max_size=gpus))
        node_id = f"node-{n}"
        for i in busy:
            on_gpu[(node_id, i)] = [
                (f"job-{n}-{i}-{k}", draw(st.sampled_from([0.0, 10.5, 40.0, 90.0])))
                for k in range(draw(st.integers(1, 3)))
            ]
        nodes.append(
            {
                "node_id": node_id,
                "state": draw(st.sampled_from(STATES)),
                "gpu_count": gpus,
                "gpus_free": gpus - len(busy),
                "vram_per_gpu_gb": vram,
            }
        )
    return nodes, on_gpu


@given(fleets())
def test_fleet_totals_equal_the_totals_of_the_whole_slot_map(
    fleet: tuple[list[dict[str, Any]], dict[tuple[str, int], list[tuple[str, float]]]],
) -> None:
    nodes, on_gpu = fleet
    by_state: dict[str, int] = {}
    for n in nodes:
        by_state[n["state"]] = by_state.get(n["state"], 0) + 1
    whole = slot_totals([slot_row(n, on_gpu, NOW) for n in nodes], by_state)
    assert fleet_totals(nodes, on_gpu, by_state) == whole
