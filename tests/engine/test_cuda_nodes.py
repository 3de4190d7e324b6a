"""Nodes carry the CUDA version their driver supports; jobs that list CUDA versions are placed and bought for
accordingly (seed 004's allowed CUDA versions, on the engine)."""

from __future__ import annotations

from dataclasses import replace

from scalar.engine.actions import StartWork
from scalar.engine.codec import event_from_dict, event_to_dict
from scalar.engine.config import ControllerConfig
from scalar.engine.controller import Controller
from scalar.engine.events import HostRegistered, JobSpec, JobSubmitted
from scalar.engine.lifecycle import JobState
from scalar.engine.queries import node_view
from scalar.engine.validation import validate_job_spec
from tests.engine.builders import at, buys, market, prime_offer, spec, submit


def host(node_id: str, cuda: str | None) -> HostRegistered:
    return HostRegistered(
        f"reg-{node_id}",
        node_id,
        f"byo-{node_id}",
        "local",
        "4xH100",
        "H100",
        4,
        80.0,
        16.0,
        64.0,
        cuda_version=cuda,
        driver_version=None if cuda is None else "570.86",
    )


def command_job(job_id: str, cuda: tuple[str, ...] | None) -> JobSubmitted:
    return JobSubmitted(
        f"sub-{job_id}",
        JobSpec(job_id, "FAST", 1, expected_duration_sec=600, command=("true",), cuda_versions=cuda),
    )


def test_a_registered_hosts_cuda_version_reaches_its_node_and_the_packer() -> None:
    ctl = Controller(ControllerConfig())
    # a-128 would win every tie (lowest id); the job allows only 12.4
    actions = ctl.step(at(0), [host("a-128", "12.8"), host("b-124", "12.4"), command_job("j", ("12.4",))])
    [start] = [a for a in actions if isinstance(a, StartWork)]
    assert [p.node_id for p in start.placements] == ["b-124"]
    view = node_view(ctl.state.nodes["a-128"])
    assert (view.cuda_version, view.driver_version) == ("12.8", "570.86")
    assert "CUDA 12.8" in ctl.story("a-128")[0].reason.message


def test_a_job_whose_cuda_no_node_has_waits_and_says_why() -> None:
    ctl = Controller(ControllerConfig())
    ctl.step(at(0), [host("a", "12.8"), host("b", "12.8"), command_job("old", ("11.8",))])
    rec = ctl.state.jobs["old"]
    assert rec.state is JobState.PENDING
    assert rec.placement is not None
    [count] = rec.placement.rejections
    assert (count.code, count.count) == ("cuda_mismatch", 2)
    assert count.example == "a: CUDA 12.8 on this node is not a version the job allows (11.8)"
    assert "2 nodes have a CUDA version the job does not allow" in rec.placement.message


def test_a_host_of_unknown_cuda_version_takes_a_job_that_lists_versions() -> None:
    ctl = Controller(ControllerConfig())
    actions = ctl.step(at(0), [host("a", None), command_job("j", ("12.4",))])
    assert [a.job_id for a in actions if isinstance(a, StartWork)] == ["j"]


def test_no_capacity_is_bought_from_offers_whose_cuda_the_job_does_not_allow() -> None:
    offer = replace(prime_offer("2.50", gpus=2), cuda_version="12.8")
    old = Controller()
    actions = old.step(
        at(0), [market(offer, book=None), *submit(replace(spec("old", 2), cuda_versions=("12.4",)))]
    )
    assert buys(actions) == []
    reason = old.state.jobs["old"].reason
    assert reason is not None and "cuda_mismatch" in reason.message, reason

    new = Controller()
    actions = new.step(
        at(0), [market(offer, book=None), *submit(replace(spec("new", 2), cuda_versions=("12.4", "12.8")))]
    )
    assert [b.for_jobs for b in buys(actions)] == [("new",)]


def test_bad_cuda_versions_are_refused_with_a_reason() -> None:
    bad = replace(spec("x", 1), cuda_versions=("12",))
    [problem] = validate_job_spec(bad, ControllerConfig())
    assert problem.code == "invalid_cuda_versions"
    assert problem.resource == "cuda_versions"
    assert "cuda_versions[0] '12' is not a CUDA version" in problem.message


def test_the_new_fields_survive_the_event_codec() -> None:
    event = host("n", "12.4")
    assert event_from_dict(event_to_dict(event)) == event
    job = JobSubmitted("s", replace(spec("x", 1), cuda_versions=("12.4", "12.8")))
    assert event_from_dict(event_to_dict(job)) == job
    # an event stored before the fields existed still decodes
    old = event_to_dict(host("m", None))
    del old["cuda_version"], old["driver_version"]
    assert event_from_dict(old) == host("m", None)
