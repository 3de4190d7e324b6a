"""RunPod serverless endpoints: the ``saveEndpoint`` input checked and shaped for the wire.

``EndpointInput`` fields (RunPod's names): ``name, gpuIds`` (comma string of GPU pools such as
``AMPERE_80,ADA_80_PRO``), ``allowedCudaVersions`` (comma string), ``gpuCount, workersMin, workersMax,
idleTimeout, scalerType`` (``QUEUE_DELAY`` or ``REQUEST_COUNT``), ``scalerValue, templateId,
networkVolumeId, locations, executionTimeoutMs``, plus ``id`` to update an existing endpoint. Lists are
accepted for the comma-string fields and joined.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scalar.domain.offers import RUNPOD
from scalar.providers.base import ProviderError

SCALER_TYPES = ("QUEUE_DELAY", "REQUEST_COUNT")
COMMA_FIELDS = ("gpuIds", "allowedCudaVersions", "locations")
INT_FIELDS = ("gpuCount", "workersMin", "workersMax", "idleTimeout", "scalerValue", "executionTimeoutMs")
STR_FIELDS = ("id", "name", "templateId", "networkVolumeId", "scalerType")
OTHER_FIELDS = ("instanceIds", "template", "workersStandby", "flashBootType")
ENDPOINT_FIELDS = frozenset(COMMA_FIELDS + INT_FIELDS + STR_FIELDS + OTHER_FIELDS)

SAVE_ENDPOINT_MUTATION = """mutation saveEndpoint($input: EndpointInput!) {
  saveEndpoint(input: $input) {
    id name gpuIds gpuCount allowedCudaVersions idleTimeout locations networkVolumeId
    scalerType scalerValue templateId workersMin workersMax executionTimeoutMs
  }
}"""

DELETE_ENDPOINT_MUTATION = """mutation deleteEndpoint($id: String!) {
  deleteEndpoint(id: $id)
}"""


def _bad(field: str, problem: str) -> ProviderError:
    return ProviderError(RUNPOD, f"saveEndpoint input: {field} {problem}", retryable=False)


def endpoint_input(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Check ``fields`` and return the ``EndpointInput`` variables; raises ``ProviderError`` naming a field."""
    unknown = sorted(set(fields) - ENDPOINT_FIELDS)
    if unknown:
        raise _bad(
            ", ".join(unknown), f"is not an EndpointInput field; known: {', '.join(sorted(ENDPOINT_FIELDS))}"
        )
    out: dict[str, Any] = {}
    for key, value in fields.items():
        if value is None:
            continue
        if key in COMMA_FIELDS:
            if isinstance(value, list | tuple):
                if not all(isinstance(v, str) and v and "," not in v for v in value):
                    raise _bad(key, "should be a list of non-empty names without commas")
                value = ",".join(value)
            elif not isinstance(value, str):
                raise _bad(key, f"should be a comma-separated string or a list, got {value!r}")
        elif key in INT_FIELDS:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise _bad(key, f"should be a whole number >= 0, got {value!r}")
        elif key in STR_FIELDS and (not isinstance(value, str) or not value):
            raise _bad(key, f"should be a non-empty string, got {value!r}")
        out[key] = value
    if "id" not in out:
        for required in ("name", "gpuIds"):
            if required not in out:
                raise _bad(required, "is required to create an endpoint (give id to update one)")
    scaler = out.get("scalerType")
    if scaler is not None and scaler not in SCALER_TYPES:
        raise _bad("scalerType", f"is {scaler!r}; use {' or '.join(SCALER_TYPES)}")
    low, high = out.get("workersMin"), out.get("workersMax")
    if low is not None and high is not None and low > high:
        raise _bad("workersMin", f"({low}) is above workersMax ({high})")
    return out


@dataclass(frozen=True, slots=True)
class EndpointHealth:
    """``GET {data_url}/{endpoint_id}/health``: worker and job counts by state."""

    workers: dict[str, int]
    jobs: dict[str, int]
