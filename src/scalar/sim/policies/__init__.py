"""Placement policies for the simulator, one module per family, looked up by name."""

from __future__ import annotations

from scalar.sim.policies.base import Policy, TieBreak
from scalar.sim.policies.best_fit import BestFit
from scalar.sim.policies.dotprod import DotProd
from scalar.sim.policies.fgd import FGD
from scalar.sim.policies.gpu_clustering import GpuClustering
from scalar.sim.policies.gpu_packing import GpuPacking
from scalar.sim.policies.k8s import K8sLeastAllocated, K8sMostAllocated
from scalar.sim.policies.random_fit import RandomFit
from scalar.sim.policies.scalar import ScalarListPolicy, ScalarPolicy
from scalar.sim.policies.seed import SeedPacking

POLICIES: dict[str, type[Policy]] = {
    cls.name: cls
    for cls in (
        ScalarPolicy,
        ScalarListPolicy,
        FGD,
        BestFit,
        GpuPacking,
        GpuClustering,
        DotProd,
        RandomFit,
        SeedPacking,
        K8sMostAllocated,
        K8sLeastAllocated,
    )
}
DEFAULT_POLICY = ScalarPolicy.name


def make_policy(name: str) -> Policy:
    """A fresh policy object for ``name``; raises ``KeyError`` naming the known policies."""
    try:
        return POLICIES[name]()
    except KeyError:
        raise KeyError(f"unknown policy {name!r}; known: {', '.join(POLICIES)}") from None


__all__ = ["DEFAULT_POLICY", "POLICIES", "Policy", "TieBreak", "make_policy"]
