"""Prime Intellect pods and pod statuses read into values, and a pod's status as a node state."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from scalar.domain.market import NodeState
from scalar.providers.catalog import GPU_MEMORY_GB
from scalar.providers.payload import Fields
from scalar.providers.primeintellect.listings import gpu_model_of

BOOTING_STATUSES = frozenset({"PENDING", "PROVISIONING", "CREATING", "STARTING"})
RUNNING_STATUSES = frozenset({"ACTIVE", "RUNNING"})
FAILED_STATUSES = frozenset({"ERROR", "FAILED"})
ENDED_STATUSES = frozenset({"TERMINATED", "TERMINATING", "STOPPED", "STOPPING", "DELETED"})


@dataclass(frozen=True, slots=True)
class PrimePod:
    """A pod as ``GET /pods``, ``GET /pods/{id}`` and ``POST /pods`` answer it (the fields Scalar uses)."""

    pod_id: str
    name: str | None
    gpu_name: str
    gpu_count: int
    status: str
    created_at: datetime | None
    provider_type: str | None
    price_per_hour: Decimal | None
    is_spot: bool

    @property
    def gpu_model(self) -> str | None:
        return gpu_model_of(self.gpu_name)[0]

    @property
    def vram_per_gpu_gb(self) -> float:
        model, vram = gpu_model_of(self.gpu_name)
        if vram is not None:
            return vram
        return GPU_MEMORY_GB.get(model or "", 0.0)

    @property
    def instance_label(self) -> str:
        """``<provider>__<N>x<gpuName>``: the pod's shape when the instance type it was bought as is lost."""
        return f"{self.provider_type or 'prime'}__{self.gpu_count}x{self.gpu_name}"


def read_pod(pod: Fields) -> PrimePod:
    count = pod.integer("gpuCount")
    if count < 1:
        raise pod.error("gpuCount", f"should be at least 1, got {count}")
    return PrimePod(
        pod_id=pod.text("id"),
        name=pod.opt_text("name"),
        gpu_name=pod.text("gpuName"),
        gpu_count=count,
        status=pod.text("status"),
        created_at=pod.opt_time("createdAt"),
        provider_type=pod.opt_text("providerType"),
        price_per_hour=pod.opt_decimal("priceHr"),
        is_spot=pod.flag("isSpot", default=False),
    )


@dataclass(frozen=True, slots=True)
class PodStatus:
    """A row of ``GET /pods/status``."""

    pod_id: str
    status: str
    installation_progress: int | None
    installation_failure: str | None
    ssh_connection: str | None

    def details(self) -> dict[str, str]:
        out = {"status": self.status}
        if self.installation_progress is not None:
            out["installation_progress"] = str(self.installation_progress)
        if self.installation_failure:
            out["installation_failure"] = self.installation_failure
        if self.ssh_connection:
            out["ssh"] = self.ssh_connection
        return out


def read_pod_status(row: Fields) -> PodStatus:
    ssh = row.raw("sshConnection", optional=True)
    if isinstance(ssh, list):  # the API wraps it in a list at times ([null] when unset)
        ssh = next((s for s in ssh if isinstance(s, str)), None)
    if ssh is not None and not isinstance(ssh, str):
        raise row.error("sshConnection", "should be a string or a list of strings")
    return PodStatus(
        pod_id=row.text("podId"),
        status=row.text("status"),
        installation_progress=row.opt_integer("installationProgress"),
        installation_failure=row.opt_text("installationFailure"),
        ssh_connection=ssh,
    )


def node_state(status: PodStatus) -> NodeState | None:
    """The node state a pod status means; ``None`` for a status Scalar does not know (no move)."""
    name = status.status.upper()
    if name in FAILED_STATUSES:
        return NodeState.FAILED
    if name in ENDED_STATUSES:
        return NodeState.TERMINATED
    if name in BOOTING_STATUSES:
        return NodeState.BOOTING
    if name in RUNNING_STATUSES:
        if status.installation_failure:
            return NodeState.FAILED
        if status.installation_progress is not None and status.installation_progress < 100:
            return NodeState.INITIALIZING
        return NodeState.READY
    return None
