"""What the agent tells the controller about its host: GPUs (NVML or fake), CPU, RAM, disk, versions.

GPUs come from NVML through ``nvidia-ml-py`` (``pynvml``) when a driver answers. Machines without GPUs use
fake ones, ``SCALAR_FAKE_GPUS=8xH100-80GB`` (or ``--fake-gpus``): count, model and memory, with UUIDs that
are stable for one state directory (a restarted agent reports the same GPUs).

Either way a GPU is reported as the GPU registry (``scalar.domain.gpus``) names it: its canonical model and
its memory in GB as the market sells it, so a node and an offer of the same GPU compare equal. NVML's
``NVIDIA A100 80GB PCIe`` with 85.1e9 bytes is an ``A100-80GB`` of 80 GB; fake ``4xA100-80GB`` is the same.
A GPU the registry does not know keeps NVML's name (without ``NVIDIA``) and its memory in GiB.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scalar.domain.gpus import device_memory_gb, find_gpu_model

FAKE_GPUS_ENV = "SCALAR_FAKE_GPUS"
_FAKE = re.compile(r"^\s*(\d+)\s*x\s*([A-Za-z0-9_.-]+?)-(\d+(?:\.\d+)?)\s*GB\s*$", re.IGNORECASE)


class FactsError(ValueError):
    """A bad ``--fake-gpus`` value; the message says the expected shape."""


@dataclass(frozen=True, slots=True)
class FakeGpus:
    count: int
    model: str
    memory_gb: float


def parse_fake_gpus(text: str) -> FakeGpus:
    """``8xH100-80GB`` -> 8 GPUs of model H100 with 80 GB each (``0xH100-80GB``: none); ``4xA100-80GB`` ->
    the registry's ``A100-80GB`` (the A100 with 80 GB). A model the registry does not know keeps its name."""
    match = _FAKE.match(text)
    if match is None:
        raise FactsError(f"fake GPUs {text!r}: expected COUNTxMODEL-MEMORYGB, e.g. 8xH100-80GB")
    count = int(match.group(1))
    if count > 64:
        raise FactsError(f"fake GPUs {text!r}: at most 64 GPUs")
    name, memory_gb = match.group(2), float(match.group(3))
    model = find_gpu_model(name, memory_gb)
    return FakeGpus(count, name if model is None else model.name, memory_gb)


def fake_gpu_list(spec: FakeGpus, seed: str) -> list[dict[str, Any]]:
    """Fake GPUs with UUIDs derived from ``seed`` (the state directory): stable across restarts."""
    return [
        {
            "index": i,
            "uuid": f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, f'scalar-fake-gpu:{seed}:{i}')}",
            "model": spec.model,
            "memory_gb": spec.memory_gb,
        }
        for i in range(spec.count)
    ]


def nvml_gpus() -> tuple[list[dict[str, Any]], str | None, str | None]:
    """The GPUs NVML reports, with the driver and CUDA versions; ``([], None, None)`` without a driver."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no library, no driver, no GPU
        return [], None, None
    try:
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(handle)
            uid = pynvml.nvmlDeviceGetUUID(handle)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle).total
            gpus.append(
                {
                    "index": i,
                    "uuid": uid.decode() if isinstance(uid, bytes) else str(uid),
                    **nvml_model(name.decode() if isinstance(name, bytes) else str(name), memory),
                }
            )
        driver = pynvml.nvmlSystemGetDriverVersion()
        cuda = pynvml.nvmlSystemGetCudaDriverVersion()
        return (
            gpus,
            driver.decode() if isinstance(driver, bytes) else str(driver),
            f"{cuda // 1000}.{cuda % 1000 // 10}",
        )
    except Exception:
        return [], None, None
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def nvml_model(name: str, memory_bytes: int) -> dict[str, Any]:
    """The ``model`` and ``memory_gb`` of a GPU NVML calls ``name`` with ``memory_bytes`` of memory.

    A known model gets its canonical name and marketed memory (``NVIDIA H200`` with 150.8e9 bytes: ``H200``,
    141; ``NVIDIA H100 NVL``: ``H100``, 94); the memory tells an A100 40 GB from an 80 GB when the name does
    not. An unknown one keeps its name without ``NVIDIA`` and reports GiB (bytes / 2**30), the unit the
    market's GB figures are in.
    """
    gib = memory_bytes / 2**30
    model = find_gpu_model(name, gib)
    if model is None:
        cleaned = " ".join(w for w in name.split() if w.upper() != "NVIDIA")
        return {"model": cleaned or "GPU", "memory_gb": round(gib, 1)}
    return {"model": model.name, "memory_gb": float(device_memory_gb(name, model))}


def ram_gb() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) * 1024 / 1e9, 1)
    except OSError:
        pass
    return 0.0


def gather(
    state_dir: Path,
    fake_gpus: str | None = None,
    *,
    hostname: str | None = None,
    instance_id: str | None = None,
    contract_expires_at: str | None = None,
) -> dict[str, Any]:
    """The host facts a registration carries (``scalar.wire.agent.HostFacts``)."""
    gpus, driver, cuda = nvml_gpus()
    fake = False
    wanted = fake_gpus or os.environ.get(FAKE_GPUS_ENV)
    if not gpus and wanted:
        gpus = fake_gpu_list(parse_fake_gpus(wanted), str(state_dir.resolve()))
        fake = True
    return {
        "hostname": hostname or socket.gethostname(),
        "gpus": gpus,
        "cpu_count": os.cpu_count() or 1,
        "ram_gb": ram_gb(),
        "disk_gb": round(shutil.disk_usage(state_dir).total / 1e9, 1),
        "driver_version": driver,
        "cuda_version": cuda,
        "instance_id": instance_id,
        "contract_expires_at": contract_expires_at,
        "fake_gpus": fake,
    }
