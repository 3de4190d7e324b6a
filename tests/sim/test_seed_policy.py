"""The simulator's `seed` policy makes the decisions of seed 001's packer in scalar.domain.packing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scalar.domain.packing import schedule_job
from scalar.domain.packing_model import Block, GpuSlot, Job, Node
from scalar.domain.tier import Tier
from scalar.sim.state import ClusterState, Pod
from tests.sim.helpers import bind, make_state, node, pod

NOW = datetime(2026, 1, 1, tzinfo=UTC)
MILLI_GB = 1000.0  # one GPU = 1000 "GB": GPU milli map 1:1 onto the domain's VRAM


def domain_nodes(state: ClusterState, holders: dict[tuple[int, int], list[str]]) -> list[Node]:
    """The simulator's state as the domain's nodes (ids sort like the tie-break rank: node index)."""
    out = []
    for i in range(state.n):
        gpus = int(state.gpu_count[i])
        block = Block(
            id=f"b{i}",
            provider="trace",
            instance_type="trace",
            gpus_per_node=gpus,
            vram_per_gpu_gb=MILLI_GB,
            cpu_per_node=float(state.cpu_cap[i]),
            ram_per_node_gb=float(state.mem_cap[i]),
            start_time=NOW - timedelta(days=1),
            end_time=NOW + timedelta(days=3650),
            cost_per_hour=Decimal(gpus),  # $1/GPU-h everywhere: the trace has no prices, so a job's
            tier=Tier.FAST,  # gpu_models (a preference, then price) leaves the choice to the seed's score
            gpu_model=state.model_names[int(state.model[i])],
        )
        slots = []
        for g in range(gpus):
            used = float(1000 - int(state.gpu[i, g]))
            jobs = holders.get((i, g), [])
            whole = len(jobs) == 1 and used == MILLI_GB
            slots.append(
                GpuSlot(
                    g,
                    MILLI_GB,
                    used,
                    job_id=jobs[0] if whole else None,
                    job_ids=() if whole else tuple(jobs),
                )
            )
        out.append(
            Node(
                id=f"n{i:03d}",
                block=block,
                tier=Tier.FAST,
                gpu_slots=tuple(slots),
                cpu_used=float(state.cpu_cap[i] - state.cpu_left[i]),
                ram_used_gb=float(state.mem_cap[i] - state.mem_left[i]),
            )
        )
    return out


def job_of(p: Pod, spec: tuple[str, ...], name: str) -> Job:
    return Job(
        id=name,
        tier=Tier.FAST,
        gpu_count=p.num_gpu,
        vram_per_gpu_gb=float(p.milli),
        cpu_cores=float(p.cpu),
        ram_gb=float(p.mem),
        expected_duration_sec=60.0,
        gpu_models=spec or None,
        share_gpu=p.shares_gpu,
    )


@settings(max_examples=20)
@given(seed=st.integers(0, 10_000), jobs=st.integers(150, 300))
def test_seed_policy_matches_domain_schedule_job(seed: int, jobs: int) -> None:
    rng = np.random.default_rng(seed)
    nodes = [
        node(
            f"n{i:03d}",
            gpus=int(rng.choice([1, 2, 4, 8])),
            cpu=int(rng.choice([16_000, 64_000, 96_000])),
            mem=int(rng.choice([65_536, 262_144])),
            model=str(rng.choice(["T4", "V100", "A10"])),
        )
        for i in range(12)
    ]
    pods = []
    for j in range(jobs):
        num, milli = [
            (0, 0),
            (1, 1000),
            (1, 1000),
            (1, 500),
            (1, 470),
            (1, 250),
            (1, 810),
            (2, 1000),
            (4, 1000),
        ][int(rng.integers(9))]
        spec = ("T4",) if num and rng.random() < 0.2 else ()
        pods.append(
            pod(
                f"p{j}",
                num,
                milli,
                cpu=int(rng.choice([1_000, 4_000, 12_000])),
                mem=int(rng.choice([2_048, 16_384])),
                spec=spec,
            )
        )
    state, views = make_state(nodes, pods)
    chooser = bind("seed", state)  # rank = node index = order of the domain's node ids
    holders: dict[tuple[int, int], list[str]] = {}
    for p, spec in zip(views, [q.gpu_spec for q in pods], strict=True):
        decision = schedule_job(job_of(p, spec, f"p{p.index}"), domain_nodes(state, holders), NOW)
        feasible = state.feasible(p)
        if len(feasible) == 0:
            assert not decision.placed
            continue
        n, gpus = chooser.choose(p, feasible)
        assert decision.placed
        assert decision.node_id == f"n{n:03d}"
        assert tuple(sorted(decision.gpu_indices)) == tuple(sorted(gpus))
        state.place(p, n, gpus)
        for g in gpus:
            holders.setdefault((n, g), []).append(f"p{p.index}")
