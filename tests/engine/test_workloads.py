"""Random workloads in a seeded world: determinism on replay, and the invariants after every step."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from scalar.domain.release import billing_unit_s
from scalar.engine import Controller, ControllerConfig, event_from_dict, event_to_dict
from tests.conftest import REPO
from tests.engine.invariants import check_all
from tests.engine.world import World, replay


def snapshot(c: Controller) -> tuple[object, ...]:
    """Everything the queries can show, for comparing two controllers."""
    keys = list(c.state.story_index)
    return (
        c.jobs(),
        c.nodes(),
        c.blocks(),
        c.orders(),
        c.scale_groups(),
        c.autoscaler_status(),
        c.costs(),
        tuple(c.explain(j) for j in c.state.jobs),
        tuple(c.story(k) for k in keys),
    )


def test_replaying_the_same_steps_into_a_fresh_controller_gives_identical_actions_and_state() -> None:
    world = World(seed=11, steps=150)
    first = Controller()
    world.run(first)
    assert sum(len(a) for a in world.actions) > 50  # a busy run, not a trivial one

    second = Controller()
    assert replay(world.log, second) == world.actions
    assert snapshot(second) == snapshot(first)

    # The runtime persists events as JSON: replaying decoded events changes nothing either.
    decoded = [(now, [event_from_dict(event_to_dict(e)) for e in events]) for now, events in world.log]
    third = Controller()
    assert replay(decoded, third) == world.actions
    assert snapshot(third) == snapshot(first)


def test_a_restart_mid_run_resumes_exactly() -> None:
    world = World(seed=5, steps=120)
    original = Controller()
    world.run(original)
    # Replay the first half, then "restart" (a fresh controller replays it all) and continue.
    half = len(world.log) // 2
    resumed = Controller()
    replay(world.log[:half], resumed)
    restarted = Controller()
    replay(world.log[:half], restarted)
    assert replay(world.log[half:], restarted) == world.actions[half:]
    assert snapshot(restarted) == snapshot(original)


def _expected_paid_gpu_s(world: World, block_id: str, now: datetime) -> Decimal:
    block = world.blocks[block_id]
    grant = block.grant
    end = min(grant.end_time, block.released_at or now, now)
    if block.released_at is not None and billing_unit_s(grant.provider) is None:
        end = grant.end_time  # a contract paid whole is paid to its end, released early or not
    paid = Decimal(0)
    for node in grant.node_ids:  # a node released alone stops being paid for then
        stop = min(end, block.stopped.get(node, end))
        paid += grant.gpus_per_node * Decimal(int(max(0.0, (stop - grant.start_time).total_seconds())))
    return paid


@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    arrival=st.sampled_from([0.3, 0.6, 0.9]),
    fill=st.sampled_from([0.3, 0.8]),
    fail=st.sampled_from([0.0, 0.05]),
)
def test_random_workloads_keep_every_invariant(seed: int, arrival: float, fill: float, fail: float) -> None:
    world = World(seed=seed, steps=70, arrival_rate=arrival, fill_rate=fill, fail_rate=fail)
    config = ControllerConfig(request_timeout_s=600, backoff_s=300, idle_release_s=900, flex_batch_wait_s=600)
    c = Controller(config)

    def check(c: Controller, w: World, step: int) -> None:
        check_all(c, w.actions, w.submitted)

    world.run(c, check)
    # Spend is never counted twice: each block is paid for exactly the GPU-seconds it was held.
    assert c.now is not None
    for block_id, rec in c.state.blocks.items():
        assert rec.paid_gpu_s == _expected_paid_gpu_s(world, block_id, c.now), block_id
        assert rec.busy_gpu_s <= rec.paid_gpu_s
    buy_keys = [a.action_id for step in world.actions for a in step if type(a).__name__ == "BuyCapacity"]
    assert len(buy_keys) == len(set(buy_keys)) == len(c.state.orders)
    assert set(c.state.blocks) <= set(world.blocks)


def test_the_same_run_in_another_process_with_another_hash_seed_gives_the_same_digest() -> None:
    """A restart is a new process: nothing may depend on set or hash order."""
    script = (
        "import hashlib, json\n"
        "from tests.engine.world import World\n"
        "from scalar.engine import Controller, action_to_dict\n"
        "w = World(3, steps=80); c = Controller(); w.run(c)\n"
        "blob = json.dumps([[action_to_dict(a) for a in s] for s in w.actions])\n"
        "blob += repr(c.jobs()) + repr(c.autoscaler_status()) + repr([c.story(k) for k in c.state.story_index])\n"
        "print(hashlib.sha256(blob.encode()).hexdigest())\n"
    )
    digests = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)}
        out = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=REPO, timeout=120
        )
        assert out.returncode == 0, out.stderr
        digests.add(out.stdout.strip())
    assert len(digests) == 1
