"""The scaler (domain/endpoint_scaling.py) as a pure function: the seed's two rules, the worker range,
idle scale-down and scale to zero, each decision with its reason; and the worker lifecycle table."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalar.domain.endpoint_scaling import (
    IllegalTransitionError,
    ScaleAction,
    ScalingInput,
    WorkerState,
    WorkerView,
    check_worker_move,
    cold_start_s,
    decide_scale,
    service_time_s,
)
from scalar.domain.endpoints import ServerlessEndpoint
from scalar.domain.gpus import GpuGroup


def endpoint(**more: object) -> ServerlessEndpoint:
    fields: dict[str, object] = {"name": "ep", "image_name": "img:1", "gpus": ["AMPERE_80"], **more}
    return ServerlessEndpoint.create(**fields)  # type: ignore[arg-type]


def workers(*states: WorkerState, idle_for_s: float = 0.0) -> tuple[WorkerView, ...]:
    return tuple(WorkerView(f"w{i}", s, idle_for_s) for i, s in enumerate(states))


def test_queue_delay_adds_workers_only_once_the_oldest_request_waited_longer_than_scaler_value() -> None:
    spec = endpoint(scaler_type="QUEUE_DELAY", scaler_value=4, workers_max=5)
    busy = workers(WorkerState.BUSY)
    short = decide_scale(spec, ScalingInput(queued=3, in_progress=1, oldest_queued_wait_s=3.9, workers=busy))
    assert short.action is ScaleAction.HOLD and short.reason.code == "hold"
    long = decide_scale(spec, ScalingInput(queued=3, in_progress=1, oldest_queued_wait_s=4.5, workers=busy))
    assert long.action is ScaleAction.UP and long.start == 3 and long.reason.code == "queue_delay"
    assert "4.5 s, more than scalerValue 4 s" in long.reason.message


def test_queue_delay_counts_starting_workers_and_stops_at_workers_max() -> None:
    spec = endpoint(scaler_type="QUEUE_DELAY", scaler_value=1, workers_max=3)
    seen = ScalingInput(2, 1, 10.0, workers(WorkerState.BUSY, WorkerState.PENDING))
    decision = decide_scale(spec, seen)
    assert decision.start == 1 and decision.target == 3
    full = decide_scale(spec, ScalingInput(5, 3, 10.0, workers(*[WorkerState.BUSY] * 3)))
    assert full.action is ScaleAction.HOLD and full.reason.code == "at_workers_max"


def test_request_count_targets_ceil_in_flight_over_scaler_value() -> None:
    spec = endpoint(scaler_type="REQUEST_COUNT", scaler_value=3, workers_max=10)
    decision = decide_scale(spec, ScalingInput(5, 2, 0.0, workers(WorkerState.BUSY)))
    assert (
        decision.target == 3 and decision.start == 2 and decision.reason.code == "request_count"
    )  # ceil(7/3)
    capped = decide_scale(
        endpoint(scaler_type="REQUEST_COUNT", scaler_value=1, workers_max=2), ScalingInput(9, 0, 0.0, ())
    )
    assert capped.target == 2 and "capped at workersMax 2" in capped.reason.message


def test_idle_workers_stop_after_idle_timeout_down_to_zero_or_workers_min() -> None:
    spec = endpoint(idle_timeout_s=5, workers_min=0)
    young = decide_scale(spec, ScalingInput(0, 0, None, workers(WorkerState.IDLE, idle_for_s=4.0)))
    assert young.action is ScaleAction.HOLD
    old = decide_scale(
        spec, ScalingInput(0, 0, None, workers(WorkerState.IDLE, WorkerState.IDLE, idle_for_s=6.0))
    )
    assert old.action is ScaleAction.DOWN and old.stop == ("w0", "w1") and old.reason.code == "scale_to_zero"
    kept = decide_scale(
        endpoint(idle_timeout_s=5, workers_min=1),
        ScalingInput(0, 0, None, workers(WorkerState.IDLE, WorkerState.IDLE, idle_for_s=6.0)),
    )
    assert kept.target == 1 and len(kept.stop) == 1 and kept.reason.code == "idle_timeout"


def test_workers_min_and_scale_from_zero() -> None:
    warm = decide_scale(endpoint(workers_min=2), ScalingInput(0, 0, None, ()))
    assert warm.start == 2 and warm.reason.code == "below_workers_min"
    cold = decide_scale(endpoint(), ScalingInput(1, 0, 0.0, ()))
    assert cold.start == 1 and cold.reason.code == "scale_from_zero"


def test_lowering_workers_max_stops_idle_workers_first() -> None:
    decision = decide_scale(
        endpoint(workers_max=1),
        ScalingInput(0, 1, None, workers(WorkerState.BUSY, WorkerState.IDLE, WorkerState.IDLE)),
    )
    assert decision.reason.code == "above_workers_max" and set(decision.stop) == {"w1", "w2"}


STATES = st.sampled_from([WorkerState.PENDING, WorkerState.INITIALIZING, WorkerState.IDLE, WorkerState.BUSY])


@given(
    scaler=st.sampled_from(["QUEUE_DELAY", "REQUEST_COUNT"]),
    value=st.integers(1, 10),
    lo=st.integers(0, 3),
    span=st.integers(0, 5),
    queued=st.integers(0, 50),
    in_progress=st.integers(0, 20),
    wait=st.floats(0, 100),
    states=st.lists(STATES, max_size=10),
    idle_for=st.floats(0, 100),
)
def test_every_decision_stays_in_range_and_carries_a_reason(
    scaler: str,
    value: int,
    lo: int,
    span: int,
    queued: int,
    in_progress: int,
    wait: float,
    states: list[WorkerState],
    idle_for: float,
) -> None:
    spec = endpoint(scaler_type=scaler, scaler_value=value, workers_min=lo, workers_max=lo + span)
    seen = ScalingInput(queued, in_progress, wait if queued else None, workers(*states, idle_for_s=idle_for))
    decision = decide_scale(spec, seen)
    after = len(states) + decision.start - len(decision.stop)
    assert decision.reason.code and decision.reason.message
    assert not (decision.start and decision.stop)
    if decision.reason.code == "above_workers_max":  # busy workers finish first; idle ones stop now
        assert after >= decision.target == lo + span
    else:
        assert after == decision.target
    if lo <= len(states) <= lo + span:
        assert lo <= after <= lo + span
    idle = {f"w{i}" for i, s in enumerate(states) if s is WorkerState.IDLE}
    assert set(decision.stop) <= idle  # only idle workers are ever stopped


def test_the_worker_lifecycle_refuses_illegal_moves() -> None:
    check_worker_move(WorkerState.PENDING, WorkerState.INITIALIZING)
    with pytest.raises(IllegalTransitionError, match="stopped to idle"):
        check_worker_move(WorkerState.STOPPED, WorkerState.IDLE)


def test_cold_start_and_service_time_follow_the_gpu_group() -> None:
    assert (
        cold_start_s(GpuGroup.AMPERE_16)
        < cold_start_s(GpuGroup.AMPERE_80)
        < cold_start_s(GpuGroup.HOPPER_141)
    )
    rng = random.Random(1)
    ampere = sum(service_time_s(GpuGroup.AMPERE_80, rng) for _ in range(500)) / 500
    hopper = sum(service_time_s(GpuGroup.HOPPER_141, rng) for _ in range(500)) / 500
    assert 0.9 < ampere < 1.1 and hopper < ampere / 2
    assert service_time_s(GpuGroup.ADA_24, random.Random(3)) == service_time_s(
        GpuGroup.ADA_24, random.Random(3)
    )
