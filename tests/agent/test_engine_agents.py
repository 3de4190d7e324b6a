"""The engine's side of agents (scalar.engine.agents), deterministic and without processes: user-owned
hosts as fixed blocks, commands only on agent-backed nodes, SUSPECT/LOST, attempts and their fencing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scalar.domain.market import NodeEvent, NodeState
from scalar.engine.actions import BuyCapacity, StartWork
from scalar.engine.codec import event_from_dict, event_to_dict
from scalar.engine.config import ControllerConfig
from scalar.engine.controller import Controller
from scalar.engine.events import (
    AgentRegistered,
    AssignmentReported,
    Event,
    HostRegistered,
    JobSpec,
    JobStarted,
    JobSubmitted,
    NodeReported,
    Tick,
)
from scalar.engine.lifecycle import JobState

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def host(node_id: str = "n1", gpus: int = 4) -> HostRegistered:
    return HostRegistered(
        f"reg-{node_id}", node_id, f"byo-{node_id}", "local", f"{gpus}xH100", "H100", gpus, 80.0, 16.0, 64.0
    )


def job(job_id: str, gpus: int = 1, command: tuple[str, ...] | None = ("true",)) -> JobSubmitted:
    return JobSubmitted(
        f"sub-{job_id}",
        JobSpec(job_id, "FAST", gpus, expected_duration_sec=600, command=command, env=(("A", "1"),)),
    )


def node_report(node_id: str, state: NodeState, i: int) -> NodeReported:
    return NodeReported(f"lease-{i}", NodeEvent(node_id, "", at(i), state=state, reason="lease"))


def started(ctl: Controller, now: float, events: list[Any] | None = None) -> list[StartWork]:
    """Step once and confirm every start (as the executor does)."""
    actions = ctl.step(at(now), events or [Tick(f"t{now}")])
    starts = [a for a in actions if isinstance(a, StartWork)]
    events = [JobStarted(f"ok-{a.action_id}", a.job_id, p.node_id) for a in starts for p in a.placements]
    if events:
        ctl.step(at(now), events)
    return starts


def test_a_registered_host_is_a_ready_fixed_block_and_runs_only_commands() -> None:
    ctl = Controller(ControllerConfig())
    actions = ctl.step(at(0), [host(), job("cmd"), job("reservation", command=None)])
    starts = [a for a in actions if isinstance(a, StartWork)]
    assert [a.job_id for a in starts] == ["cmd"]
    assert ctl.state.nodes["n1"].state is NodeState.READY and ctl.state.nodes["n1"].agent
    assert ctl.state.blocks["byo-n1"].fixed and ctl.state.blocks["byo-n1"].committed == 0
    reservation = ctl.state.jobs["reservation"]
    assert reservation.state is JobState.PENDING  # waits for bought capacity, never on the agent's host
    # the idle host is never released, however long it stays idle
    ctl.step(at(10 * 86400), [Tick("late")])
    assert ctl.state.blocks["byo-n1"].open


def test_a_command_job_without_an_agent_node_says_so_and_buys_nothing() -> None:
    ctl = Controller(ControllerConfig())
    actions = ctl.step(at(0), [job("cmd")])
    assert not [a for a in actions if isinstance(a, BuyCapacity)]
    rec = ctl.state.jobs["cmd"]
    assert rec.state is JobState.PENDING
    assert rec.reason is not None and rec.reason.code == "needs_agent_node"
    assert "scalar agent" in rec.reason.message


def test_lost_node_requeues_with_attempt_plus_one_then_fails_at_the_limit_and_fences_stale_reports() -> None:
    ctl = Controller(ControllerConfig(max_job_attempts=2))
    ctl.step(at(0), [host("n1"), host("n2")])
    started(ctl, 1, [job("j")])
    first = next(iter(ctl.state.jobs["j"].parts))
    assert ctl.state.jobs["j"].state is JobState.RUNNING
    ctl.step(at(2), [node_report(first, NodeState.SUSPECT, 2)])
    assert ctl.state.nodes[first].state is NodeState.SUSPECT
    assert ctl.state.jobs["j"].state is JobState.RUNNING  # suspect: not yet given up
    started(ctl, 3, [node_report(first, NodeState.LOST, 3)])
    rec = ctl.state.jobs["j"]
    assert ctl.state.nodes[first].state is NodeState.LOST
    assert rec.preemptions == 1  # attempt 2
    second = next(iter(rec.parts))
    assert second != first and rec.state is JobState.RUNNING
    # the lost node comes back and reports attempt 1 finished: fenced
    ctl.step(at(5), [node_report(first, NodeState.READY, 5)])
    ctl.step(at(5), [AssignmentReported("stale", first, "j", 1, "succeeded")])
    assert rec.state is JobState.RUNNING
    assert any(e.reason.code == "stale_attempt" for e in ctl.story("j"))
    # attempt 2 is lost too: max_job_attempts=2, so the job fails with the reason
    ctl.step(at(6), [node_report(second, NodeState.SUSPECT, 6), node_report(second, NodeState.LOST, 7)])
    rec = ctl.state.jobs["j"]
    assert rec.state is JobState.FAILED
    assert rec.reason is not None and rec.reason.code == "attempts_exhausted"


def test_the_current_attempt_finishes_the_job() -> None:
    ctl = Controller(ControllerConfig())
    ctl.step(at(0), [host("n1"), job("j")])
    ctl.step(at(1), [AssignmentReported("r1", "n1", "j", 1, "running")])
    assert ctl.state.jobs["j"].state is JobState.RUNNING
    ctl.step(at(2), [AssignmentReported("r2", "n1", "j", 1, "failed", "OOM: killed")])
    rec = ctl.state.jobs["j"]
    assert rec.state is JobState.FAILED and rec.reason is not None and "OOM" in rec.reason.message
    assert not ctl.state.nodes["n1"].jobs


def test_a_bought_node_of_an_agent_provider_waits_for_its_agent() -> None:
    from scalar.engine.agents import hold_for_agent
    from scalar.engine.state import NodeRecord

    ctl = Controller(ControllerConfig(agent_providers=("local",)))
    ctl.step(at(0), [host("n1")])
    node: NodeRecord = ctl.state.nodes["n1"]
    node.agent = False
    assert hold_for_agent(ctl.config, node, NodeState.READY) is NodeState.INITIALIZING
    ctl.step(at(1), [AgentRegistered("a", "n1")])
    assert node.agent


def test_new_events_round_trip_through_the_codec() -> None:
    events: list[Event] = [
        host("n9"),
        AgentRegistered("a", "n9"),
        AssignmentReported("r", "n9", "j", 3, "failed", "exited with code 2"),
        job("j"),
    ]
    for event in events:
        assert event_from_dict(event_to_dict(event)) == event


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=4), min_size=1, max_size=12))
def test_no_gpu_is_ever_given_to_two_jobs(sizes: list[int]) -> None:
    ctl = Controller(ControllerConfig())
    ctl.step(at(0), [host("n1", gpus=4), host("n2", gpus=8)])
    ctl.step(at(1), [job(f"j{i}", gpus=n) for i, n in enumerate(sizes)])
    held: dict[tuple[str, int], str] = {}
    for rec in ctl.state.jobs.values():
        for node_id, indices in rec.placements.items():
            for index in indices:
                assert (node_id, index) not in held, f"GPU {index} of {node_id} given twice"
                held[(node_id, index)] = rec.spec.job_id


def test_with_agent_providers_a_command_job_buys_only_where_agents_run() -> None:
    from dataclasses import replace

    from scalar.domain.offers import PRIME, SFCOMPUTE
    from tests.engine.builders import market, prime_offer, sf_offer, spec

    command_job = replace(spec("cmd", gpus=2, vram=40), command=("python", "train.py"))
    for providers, expected in (((PRIME,), PRIME), ((SFCOMPUTE,), SFCOMPUTE)):
        ctl = Controller(ControllerConfig(agent_providers=providers))
        actions = ctl.step(
            T0, [market(sf_offer("1.00"), prime_offer("9.00")), JobSubmitted("s", command_job)]
        )
        buys = [a for a in actions if isinstance(a, BuyCapacity)]
        assert buys and {b.request.provider for b in buys} == {expected}
    ctl = Controller(ControllerConfig())  # no agent provider: nothing is bought for it
    actions = ctl.step(T0, [market(sf_offer("1.00"), prime_offer("9.00")), JobSubmitted("s", command_job)])
    assert not [a for a in actions if isinstance(a, BuyCapacity)]
