"""The agent names GPUs as the registry does: NVML's device names and fake GPUs become canonical models with
the market's memory, so a job asking for the market's name lands on the node."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalar.agent.facts import FactsError, fake_gpu_list, nvml_model, parse_fake_gpus
from tests.agent.harness import agent, controller, wait_until

GIB = 2**30


@pytest.mark.parametrize(
    ("nvml_name", "memory_bytes", "model", "memory_gb"),
    [
        ("NVIDIA A100 80GB PCIe", 85_899_345_920, "A100-80GB", 80.0),
        ("A100-SXM4-80GB", 85_198_045_184, "A100-80GB", 80.0),  # drivers before 510 print no "NVIDIA"
        ("NVIDIA A100-SXM4-40GB", 42_505_273_344, "A100", 40.0),
        ("NVIDIA GeForce RTX 4090", 25_757_220_864, "RTX4090", 24.0),
        ("NVIDIA H100 80GB HBM3", 85_520_809_984, "H100", 80.0),
        ("NVIDIA H100 PCIe", 85_520_809_984, "H100", 80.0),
        ("NVIDIA H100 NVL", 100_485_038_080, "H100", 94.0),  # the NVL card has 94 GB
        ("NVIDIA H200", 150_754_820_096, "H200", 141.0),  # NVML's 150.8e9 bytes are the market's 141 GB
        ("Tesla V100-SXM2-16GB", 17_179_869_184, "V100", 16.0),
        ("Tesla V100-DGXS-32GB", 34_089_730_048, "V100-32GB", 32.0),  # not listed: the chip's word and size
        ("Tesla T4", 15_843_721_216, "T4", 16.0),
        ("NVIDIA L40S", 48_305_799_168, "L40S", 48.0),
        ("NVIDIA RTX 6000 Ada Generation", 51_527_024_640, "RTX6000Ada", 48.0),
    ],
)
def test_nvml_names_are_canonical_models_with_the_markets_memory(
    nvml_name: str, memory_bytes: int, model: str, memory_gb: float
) -> None:
    assert nvml_model(nvml_name, memory_bytes) == {"model": model, "memory_gb": memory_gb}


def test_nvml_memory_tells_an_a100_80gb_from_a_40gb_when_the_name_does_not() -> None:
    assert nvml_model("NVIDIA A100", 80 * GIB - 300 * 2**20)["model"] == "A100-80GB"
    assert nvml_model("NVIDIA A100", 40 * GIB - 300 * 2**20)["model"] == "A100"


def test_an_unknown_nvml_gpu_keeps_its_name_and_reports_gib() -> None:
    assert nvml_model("NVIDIA Quantum Q1 96GB", 96 * GIB) == {"model": "Quantum Q1 96GB", "memory_gb": 96.0}


@pytest.mark.parametrize(
    ("text", "model", "memory_gb"),
    [
        ("4xA100-80GB", "A100-80GB", 80.0),
        ("1xA100-40GB", "A100", 40.0),
        ("8xH100-80GB", "H100", 80.0),
        ("2xRTX6000-Ada-48GB", "RTX6000Ada", 48.0),
        ("2xV100-32GB", "V100-32GB", 32.0),
        ("1xfuture9-12GB", "future9", 12.0),  # a model the registry does not know keeps its name
    ],
)
def test_fake_gpus_are_named_as_the_registry_names_them(text: str, model: str, memory_gb: float) -> None:
    spec = parse_fake_gpus(text)
    assert (spec.model, spec.memory_gb) == (model, memory_gb)
    assert {g["model"] for g in fake_gpu_list(spec, "seed")} <= {model}


def test_a_malformed_fake_gpu_spec_says_the_expected_shape() -> None:
    with pytest.raises(FactsError, match="expected COUNTxMODEL-MEMORYGB"):
        parse_fake_gpus("4xA100")


def test_a_node_registered_with_4xa100_80gb_takes_a_job_asking_for_a100_80gb(
    sqlite_url: str, tmp_path: Path
) -> None:
    with controller(sqlite_url, tmp_path) as c:
        node = agent(c.url, c.token(), tmp_path / "a", "4xA100-80GB").start()
        try:
            [registered] = wait_until(c.agents, 30, "registration")
            gpus = registered["facts"]["gpus"]
            assert [(g["model"], g["memory_gb"]) for g in gpus] == [("A100-80GB", 80.0)] * 4
            # the market's name, RunPod's SXM spelling and NVML's device name all name this node's GPUs
            asked = ["A100-80GB", "A100-80GB-SXM", "NVIDIA A100-SXM4-80GB"]
            hold = ["python", "-c", "import time; time.sleep(30)"]
            ids = [c.submit(gpu_models=[name], vram_per_gpu_gb=80, command=hold) for name in asked]
            running = wait_until(
                lambda: all(c.job(i)["state"] == "RUNNING" for i in ids) or None, 40, "the jobs to run"
            )
            assert running
            for job_id in ids:
                assert c.job(job_id)["placements"][0]["node_id"] == registered["node_id"]
        finally:
            node.stop()
