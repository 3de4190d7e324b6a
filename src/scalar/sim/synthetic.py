"""A seeded synthetic GPU cluster and pod list in the Alibaba v2023 trace format.

Shapes mimic the openb trace: 8-GPU nodes with about 12 cores per GPU, CPU-rich 2-GPU nodes, CPU-poor
small nodes; pods that are CPU-only, share one GPU (gpu_milli < 1000), or take 1, 2, 4 or 8 whole GPUs,
some restricted to GPU models. Same seed, same trace.
"""

from __future__ import annotations

import numpy as np

from scalar.sim.traces import GPU_MILLI, NodeSpec, PodSpec

# (gpus, cpu_milli, memory_mib, model, weight)
NODE_TYPES = (
    (8, 96_000, 393_216, "G2", 0.45),
    (2, 104_000, 524_288, "T4", 0.30),
    (2, 16_000, 122_880, "P100", 0.10),
    (4, 32_000, 131_072, "V100M16", 0.08),
    (8, 128_000, 786_432, "G3", 0.07),
)
SHARE_MILLI = (810, 470, 320, 650, 230, 460, 160, 550, 590, 220, 370, 110, 50)
SHARE_WEIGHTS = (35, 24, 11, 8, 5, 4, 2.5, 2.5, 2.5, 2, 1.5, 1, 1)


def generate(
    seed: int, n_nodes: int = 40, n_pods: int = 300, *, spec_share: float = 0.1
) -> tuple[list[NodeSpec], list[PodSpec]]:
    """``n_nodes`` nodes and ``n_pods`` pods drawn with ``numpy.random.default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    weights = np.array([t[4] for t in NODE_TYPES])
    kinds = rng.choice(len(NODE_TYPES), size=n_nodes, p=weights / weights.sum())
    nodes = []
    for i, k in enumerate(kinds):
        gpus, cpu, mem, model, _ = NODE_TYPES[int(k)]
        nodes.append(NodeSpec(f"node-{i:04d}", cpu, mem, gpus, model))
    models = sorted({n.model for n in nodes})
    share_p = np.array(SHARE_WEIGHTS) / sum(SHARE_WEIGHTS)
    pods = []
    for i in range(n_pods):
        kind = rng.random()
        spec: tuple[str, ...] = ()
        if kind < 0.13:
            num, milli = 0, 0
            cpu = int(rng.choice([8_000, 12_500, 16_000, 32_000]))
            mem = int(rng.choice([16_384, 32_768, 65_536]))
        elif kind < 0.51:
            num, milli = 1, int(rng.choice(SHARE_MILLI, p=share_p))
            cpu = int(rng.choice([3_152, 4_000, 8_000, 11_908]))
            mem = int(rng.choice([5_120, 14_336, 29_696, 47_104]))
        else:
            num = int(rng.choice([1, 2, 4, 8], p=[0.94, 0.02, 0.02, 0.02]))
            milli = GPU_MILLI
            cpu = num * int(rng.choice([3_152, 9_810, 11_300, 12_000]))
            mem = num * int(rng.choice([5_120, 40_960, 49_152]))
        if num > 0 and rng.random() < spec_share:
            size = int(rng.integers(1, len(models) + 1))
            spec = tuple(sorted(rng.choice(models, size=size, replace=False).tolist()))
        pods.append(PodSpec(f"pod-{i:05d}", cpu, mem, num, milli, spec))
    return nodes, pods
