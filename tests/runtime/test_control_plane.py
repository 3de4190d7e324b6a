"""The control plane in one process with injected time: jobs in, capacity bought, jobs placed and done.

Each test drives ``run_once`` (the leader iteration) and ``run_executor_once`` (the action executor) itself,
on SQLite and on PostgreSQL, against the built-in market in the same database.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scalar.engine import JobState
from scalar.runtime import ControlPlane, JobRejectedError
from scalar.runtime.leader import PUBLISHED_OFFERS, decode_offers, encode_offers
from tests.runtime.helpers import TERMINAL, Clock, audit, drive, job, settings_for


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def plane(db_url: str, tmp_path: Path, clock: Clock):  # type: ignore[no-untyped-def]
    cp = ControlPlane(settings_for(db_url, tmp_path), clock=clock)
    yield cp
    cp.stop()


def test_jobs_are_placed_on_bought_capacity_and_finish(
    plane: ControlPlane, clock: Clock, db_url: str
) -> None:
    plane.run_once()
    assert plane.is_leader and plane.health().role == "leader"
    small = plane.submit_job(job(1, 40, name="one-gpu"))
    gang = plane.submit_job(job(16, 60))
    flex = plane.submit_job(job(8, 40, tier="FLEX"))
    assert small.state == "PENDING" and small.name == "one-gpu"
    assert plane.get_job(small.id).state == "PENDING"  # type: ignore[union-attr]

    drive([plane], clock, 30)
    running = {j.id: j for j in plane.list_jobs()}
    assert running[gang.id].state in ("SCHEDULED", "RUNNING")
    assert len(running[gang.id].placements) == 2  # 16 GPUs as a gang of two 8-GPU nodes

    drive([plane], clock, 120)
    done = {j.id: j for j in plane.list_jobs()}
    assert {j.state for j in done.values()} == {"SUCCEEDED"}, done
    assert done[small.id].finished_at is not None and done[small.id].reason
    assert [j.id for j in plane.list_jobs()] == sorted(done)  # listed in submission order
    assert plane.list_jobs(state="succeeded", limit=1, offset=1) == [done[sorted(done)[1]]]

    result = audit(db_url, plane.settings.controller)
    assert result.states() == {"SUCCEEDED": 3}
    assert result.market_orders and set(result.buy_actions.values()) == {"done"}
    assert {key for _, key in result.market_orders} == set(result.buy_actions)
    with plane.store.read() as tx:  # type: ignore[union-attr]
        assert tx.count_projection("nodes") >= 3 and tx.count_projection("orders") == len(result.buy_actions)
        assert tx.story(small.id)[-1].code == "succeeded"
        assert tx.count_unconsumed_inbox() == 0
    assert plane.story(flex.id)[0].code == "submitted"


def test_a_cancelled_job_ends_cancelled_and_unknown_ids_are_refused(
    plane: ControlPlane, clock: Clock
) -> None:
    plane.run_once()
    long = plane.submit_job(job(1, 500))  # a scaled contract lasts 7 days / 600 = 1008 s
    drive([plane], clock, 20)
    assert plane.get_job(long.id).state == "RUNNING"  # type: ignore[union-attr]
    assert plane.cancel_job(long.id).cancel_requested is True
    drive([plane], clock, 3)
    cancelled = plane.get_job(long.id)
    assert cancelled is not None and cancelled.state == "CANCELLED" and cancelled.placements == []
    with plane.store.read() as tx:  # type: ignore[union-attr]
        stops = [a for a in tx.list_actions() if a.kind == "StopWork"]
    assert [a.status for a in stops] == ["done"]
    with pytest.raises(KeyError):
        plane.cancel_job("job-nope")
    assert plane.get_job("job-nope") is None


@pytest.mark.parametrize(
    ("fields", "codes"),
    [
        (job(-2), {"negative_gpus"}),
        (job(1, tier="TURBO"), {"unknown_tier"}),
        (job(1000), {"too_large"}),
        (job(1, vram_per_gpu_gb=500), {"vram_too_large"}),
        ({"gpu_count": 1, "colour": "red"}, {"unknown_field", "missing_field"}),
    ],
)
def test_bad_input_is_refused_at_submission_with_reasons_and_nothing_is_written(
    plane: ControlPlane, fields: dict[str, object], codes: set[str]
) -> None:
    plane.run_once()
    with plane.store.read() as tx:  # type: ignore[union-attr]
        before = (tx.count_projection("jobs"), tx.count_unconsumed_inbox(), tx.last_seq())
    with pytest.raises(JobRejectedError) as err:
        plane.submit_job(fields)
    assert {r.code for r in err.value.reasons} == codes
    assert all(r.message for r in err.value.reasons)
    with plane.store.read() as tx:  # type: ignore[union-attr]
        assert (tx.count_projection("jobs"), tx.count_unconsumed_inbox(), tx.last_seq()) == before


def test_too_large_names_the_limit_and_how_to_raise_it(plane: ControlPlane) -> None:
    with pytest.raises(JobRejectedError) as err:  # before any leader step: the offers come from the market
        plane.submit_job(job(64))
    (reason,) = err.value.reasons
    assert reason.code == "too_large" and reason.need == 64 and reason.have == 40  # 4 x a 10-GPU pod
    assert "max_slices 4" in reason.message


def test_a_restarted_plane_resumes_the_same_state(db_url: str, tmp_path: Path, clock: Clock) -> None:
    first = ControlPlane(settings_for(db_url, tmp_path), clock=clock)
    first.run_once()
    ids = [first.submit_job(job(2, 30)).id for _ in range(3)]
    drive([first], clock, 15)
    seen = {i: first.get_job(i).state for i in ids}  # type: ignore[union-attr]
    first.stop()  # clean stop gives the lease up
    second = ControlPlane(settings_for(db_url, tmp_path), clock=clock)
    try:
        second.run_once()
        assert second.is_leader
        assert {i: second.get_job(i).state for i in ids} == seen  # type: ignore[union-attr]
        drive([second], clock, 60)
        assert {second.get_job(i).state for i in ids} == {"SUCCEEDED"}  # type: ignore[union-attr]
    finally:
        second.stop()
    result = audit(db_url, second.settings.controller)
    assert all(r.state in TERMINAL for r in result.controller.state.jobs.values())
    assert result.states() == {JobState.SUCCEEDED.value: 3}


def test_orderbook_and_health(plane: ControlPlane) -> None:
    book = plane.orderbook("8xH100", 2)
    assert book.instance_type == "8xH100" and book.fill is not None and book.fill.required_gpus == 16
    assert book.optimal_price is not None and book.optimal_price > 0
    with pytest.raises(KeyError):
        plane.orderbook("9xNOPE", 1)
    health = plane.health()
    assert health.status == "ok" and health.role == "follower" and health.last_step_at is None


def test_an_api_replica_validates_submissions_on_the_offers_the_leader_stored(
    plane: ControlPlane, clock: Clock, db_url: str, tmp_path: Path
) -> None:
    plane.run_once()  # leads; its first step observes the market and stores the offers it now holds
    leader = plane.core.leader
    assert leader is not None and leader.controller is not None
    held = leader.controller.offers()
    assert held
    assert plane.store is not None
    with plane.store.read() as tx:
        assert decode_offers(tx.get_state(PUBLISHED_OFFERS)) == held
    with plane.store.write() as tx:  # what the replica reads is that row (not a collection of its own)
        tx.put_state(PUBLISHED_OFFERS, encode_offers(held[:1], clock()))
    replica = ControlPlane(settings_for(db_url, tmp_path), clock=clock)  # opened only: no loops, no lease
    replica.open()
    try:
        assert replica.core.leader is not None and replica.core.leader.controller is None
        assert replica.job_service._validation_offers(clock()) == held[:1]
        replica.job_service._offers_cache = None
        with plane.store.write() as tx:
            tx.put_state(PUBLISHED_OFFERS, encode_offers(held, clock()))
        accepted = replica.submit_job({"tier": "FAST", "gpu_count": 2, "expected_duration_sec": 60})
        assert accepted.state == "PENDING"
        with pytest.raises(JobRejectedError):  # judged on the same offers: no GPU that large on offer
            replica.submit_job({"tier": "FAST", "gpu_count": 1, "vram_per_gpu_gb": 10_000})
    finally:
        replica.stop()
