"""The engine meets a host and a job on the GPU registry's canonical model, whatever spelling each used: an
agent's ``NVIDIA A100-SXM4-80GB`` (or an old agent's ``A100`` with 80 GB) takes a job asking ``A100-80GB``."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from scalar.domain.gpus import GPU_MODELS, GpuModel
from scalar.engine.actions import StartWork
from scalar.engine.config import ControllerConfig
from scalar.engine.controller import Controller
from scalar.engine.events import HostRegistered, JobSpec, JobSubmitted

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
SPELLINGS = [(model, spelling) for model in GPU_MODELS for spelling in model.names]


def placed(host_model: str, memory_gb: float, asked: str) -> bool:
    ctl = Controller(ControllerConfig())
    host = HostRegistered("reg", "n1", "byo-n1", "local", "4xGPU", host_model, 4, memory_gb, 16.0, 64.0)
    job = JobSubmitted(
        "sub", JobSpec("j", "FAST", 1, expected_duration_sec=600, command=("true",), gpu_models=(asked,))
    )
    actions = ctl.step(T0, [host, job])
    return any(isinstance(a, StartWork) and a.job_id == "j" for a in actions)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(SPELLINGS), st.sampled_from(SPELLINGS))
def test_a_host_takes_a_job_exactly_when_both_spell_one_model(
    host: tuple[GpuModel, str], job: tuple[GpuModel, str]
) -> None:
    (host_model, host_spelling), (job_model, job_spelling) = host, job
    assert placed(host_spelling, host_model.memory_gb, job_spelling) == (host_model is job_model)


def test_an_a100_registered_with_80_gb_is_the_markets_a100_80gb() -> None:
    assert placed("A100", 80.0, "A100-80GB")
    assert placed("A100", 80.0, "NVIDIA A100 80GB PCIe")
    assert not placed("A100", 80.0, "A100")  # the 40 GB model
    assert placed("A100", 40.0, "A100")
