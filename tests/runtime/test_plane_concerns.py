"""Each concern of the control plane (``scalar.runtime.plane``) built alone on a ``PlaneCore``, without the
``ControlPlane`` facade: what it needs from the others is only the core (and, for jobs, the secret box)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from scalar.runtime import ControlPlane
from scalar.runtime.plane.access import AccessService
from scalar.runtime.plane.cluster import ClusterService
from scalar.runtime.plane.core import PlaneCore
from scalar.runtime.plane.jobs import JobRejectedError, JobService
from scalar.runtime.plane.market import MarketService
from scalar.wire.providers import ProviderStatusOut
from tests.runtime.helpers import Clock, job, settings_for


@pytest.fixture
def core(sqlite_url: str, tmp_path: Path) -> Iterator[PlaneCore]:
    plane_core = PlaneCore(settings_for(sqlite_url, tmp_path), clock=Clock(), live_env={})
    try:
        yield plane_core
    finally:
        plane_core.stop()


def _drive(core: PlaneCore, seconds: int) -> None:
    assert isinstance(core.clock, Clock)
    for _ in range(seconds):
        core.clock.advance(1)
        core.run_once()
        while core.run_executor_once():
            pass


def test_jobs_are_accepted_read_and_cancelled_through_the_core_alone(core: PlaneCore) -> None:
    jobs = JobService(core, AccessService(core).secret_box)
    accepted = jobs.submit_job(job(1, 60, name="alone"))
    assert accepted.state == "PENDING" and core.store is not None  # the first call opened the core
    assert jobs.get_job(accepted.id) == accepted
    assert [j.id for j in jobs.list_jobs()] == [accepted.id]
    assert jobs.cancel_job(accepted.id).cancel_requested is True
    with pytest.raises(KeyError):
        jobs.cancel_job("job-20990101T000000-000000")
    with pytest.raises(JobRejectedError) as refused:
        jobs.submit_job(job(4096, 60))
    assert [r.code for r in refused.value.reasons] == ["too_large"]


def test_the_cluster_views_follow_the_leader_the_core_runs(core: PlaneCore) -> None:
    jobs = JobService(core, AccessService(core).secret_box)
    cluster = ClusterService(core)
    job_id = jobs.submit_job(job(1, 600)).id
    assert cluster.nodes().nodes == []
    _drive(core, 30)
    assert core.is_leader
    nodes = cluster.nodes().nodes
    assert [n.jobs for n in nodes if n.jobs] == [[job_id]]
    assert cluster.status().health["role"] == "leader"
    explained = cluster.explain(job_id)
    assert explained is not None and explained.state == "RUNNING"
    assert jobs.explain_job(job_id) is not None  # the leader's own explanation
    assert [s.code for s in jobs.story(job_id)][:1] == ["submitted"]


def test_market_reads_the_built_in_market_of_the_core(core: PlaneCore) -> None:
    market = MarketService(core)
    offers = market.prices(gpu_model="V100")
    assert offers and {o.gpu_model for o in offers} == {"V100"}
    prices = [o.price_per_gpu_hour for o in offers]
    assert prices == sorted(prices)
    assert {p.name for p in market.provider_status()} >= {"sfcompute", "prime"}
    with pytest.raises(KeyError):
        market.orderbook("9xZ999", 1)


def test_access_keeps_tokens_audit_and_budgets_in_the_core_store(core: PlaneCore) -> None:
    access = AccessService(core)
    made = access.create_token("team-a", "user", "ci", actor="test")
    principal = access.authenticate(made.token)
    assert principal is not None and principal.tenant == "team-a"
    assert [t.name for t in access.list_tokens()] == ["ci"]
    assert access.put_budgets([{"scope": "team-a", "usd_per_hour": "2"}], actor="test").limits
    assert {e.action for e in access.audit()} >= {"token.create", "budgets.replace"}
    assert access.secret_box() is access.secret_box()


def test_the_facade_hands_out_one_core_to_every_concern(sqlite_url: str, tmp_path: Path) -> None:
    plane = ControlPlane(settings_for(sqlite_url, tmp_path), clock=Clock(), live_env={})
    try:
        plane.open()
        assert plane.store is plane.core.store is not None
        assert plane.settings is plane.core.settings  # replaced by open(): read through the core
        job_id = plane.submit_job(job(1, 60)).id
        assert plane.job_service.get_job(job_id) == plane.get_job(job_id)
    finally:
        plane.stop()
    assert plane.store is None and plane.core.leader is None


def test_the_provider_status_model_declares_every_field_the_runtime_fills(core: PlaneCore) -> None:
    """``ProviderStatusOut`` is the one declaration of a provider state's fields: a key the runtime adds to
    ``ProviderStatus.to_dict`` without declaring it there would be dropped from every surface."""
    statuses = core.live_prices().statuses()
    assert statuses
    for status in statuses:
        assert list(status.to_dict()) == list(ProviderStatusOut.model_fields)
