"""Jobs at the control plane's edge: submitted fields -> ``JobSpec``, and the engine's records -> job dicts.

The job dict is the JSON shape the API and CLI show (``docs/decisions/runtime.md``)::

    {id, name, state, reason, reason_code, tier, gpu_count, vram_per_gpu_gb, cpu_cores, ram_gb,
     expected_duration_sec, priority, gpu_models, cuda_versions, share_gpu, restartable, submitted_at, started_at, finished_at,
     placements: [{node_id, gpu_indices}], placement_history: [{node_id, gpu_indices, from, to}],
     preemptions}
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from scalar.domain.reasons import Reason
from scalar.engine.events import JobSpec
from scalar.engine.queries import job_view
from scalar.engine.state import JobRecord
from scalar.wire.jobs import MAX_PORTS

JOB_FIELDS = (
    "tier",
    "gpu_count",
    "vram_per_gpu_gb",
    "cpu_cores",
    "ram_gb",
    "expected_duration_sec",
    "priority",
    "name",
    "gpu_models",
    "cuda_versions",
    "share_gpu",
    "restartable",
    "tenant",
    "endpoint_id",
    "command",
    "env",
    "workdir",
    "ports",
)
REQUIRED_FIELDS = ("tier", "gpu_count")
ACCEPTED_REASON = "accepted; waiting for the controller to pick it up"


def new_job_id(now: datetime) -> str:
    """``job-20260101T120000-3fa2c1``: ids sort by submission time (listings come out in that order)."""
    return f"job-{now.astimezone(UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


def spec_from_fields(
    fields: Mapping[str, Any], job_id: str, now: datetime
) -> tuple[JobSpec | None, list[Reason]]:
    """The spec the fields describe, or the reasons they cannot describe one (unknown or missing fields).

    Values are taken as given; ``validate_job_spec`` judges them (negative GPUs, unknown tier...)."""
    if not isinstance(fields, Mapping):
        return None, [
            Reason("invalid_job", f"a job must be an object of fields, got {type(fields).__name__}")
        ]
    problems: list[Reason] = []
    for key in fields:
        if key not in JOB_FIELDS:
            problems.append(
                Reason("unknown_field", f"unknown field {key!r}; use {', '.join(JOB_FIELDS)}", str(key))
            )
    for key in REQUIRED_FIELDS:
        if fields.get(key) is None:
            problems.append(Reason("missing_field", f"{key} is required", key))
    if problems:
        return None, problems
    kwargs: dict[str, Any] = {k: v for k, v in fields.items() if v is not None}
    models = kwargs.get("gpu_models")
    if isinstance(models, str):
        kwargs["gpu_models"] = (models,)
    elif isinstance(models, list | tuple):
        kwargs["gpu_models"] = tuple(models)
    versions = kwargs.get("cuda_versions")
    if isinstance(versions, str):
        kwargs["cuda_versions"] = (versions,)
    elif isinstance(versions, list | tuple):
        kwargs["cuda_versions"] = tuple(versions)
    problems += _command_fields(kwargs)
    if problems:
        return None, problems
    name = kwargs.get("name")
    if name is not None and not isinstance(name, str):
        problems.append(Reason("invalid_name", f"name must be a string, got {name!r}", "name"))
        return None, problems
    return JobSpec(job_id=job_id, submitted_at=now, **kwargs), []


def _command_fields(kwargs: dict[str, Any]) -> list[Reason]:
    """``command`` (argv), ``env`` and ``workdir`` into the spec's shapes, or what is wrong."""
    problems: list[Reason] = []
    command = kwargs.get("command")
    if command is not None:
        if isinstance(command, str) or not isinstance(command, list | tuple) or not command:
            problems.append(
                Reason("invalid_command", "command must be a non-empty list of strings (argv)", "command")
            )
        elif not all(isinstance(a, str) for a in command):
            problems.append(
                Reason("invalid_command", "every argument of command must be a string", "command")
            )
        else:
            kwargs["command"] = tuple(command)
    env = kwargs.get("env")
    if env is not None:
        if not isinstance(env, Mapping) or not all(
            isinstance(k, str) and k and isinstance(v, str) for k, v in env.items()
        ):
            problems.append(
                Reason("invalid_env", 'env must be an object of strings, e.g. {"SEED": "1"}', "env")
            )
        else:
            kwargs["env"] = tuple(sorted(env.items()))
    workdir = kwargs.get("workdir")
    if workdir is not None and (not isinstance(workdir, str) or not workdir):
        problems.append(Reason("invalid_workdir", "workdir must be a directory path", "workdir"))
    if (env is not None or workdir is not None) and command is None and not problems:
        problems.append(Reason("missing_command", "env and workdir need a command to run", "command"))
    ports = kwargs.get("ports")
    if ports is not None:
        if isinstance(ports, bool) or not isinstance(ports, int) or not 0 <= ports <= MAX_PORTS:
            problems.append(
                Reason("invalid_ports", f"ports must be a whole number from 0 to {MAX_PORTS}", "ports")
            )
        elif ports and command is None:
            problems.append(
                Reason(
                    "missing_command",
                    "ports are allocated for a command: add a command, or leave ports out",
                    "ports",
                )
            )
    return problems


def _run_fields(spec: JobSpec) -> dict[str, Any]:
    """What the job runs: ``command`` is None for a pure reservation."""
    out: dict[str, Any] = {
        "command": None if spec.command is None else list(spec.command),
        "env": dict(spec.env) if spec.env else None,
        "workdir": spec.workdir,
    }
    if spec.ports:  # the allocated numbers come from the agent (runtime/agents.py, allocated_ports)
        out["ports"] = spec.ports
    return out


def spec_dict(spec: JobSpec, state: str, reason: str | None, reason_code: str | None) -> dict[str, Any]:
    """A job dict for a spec the controller has not seen yet (accepted into the inbox)."""
    return {
        "id": spec.job_id,
        "name": spec.name,
        "state": state,
        "reason": reason,
        "reason_code": reason_code,
        "tier": str(spec.tier).upper(),
        "gpu_count": spec.gpu_count,
        "vram_per_gpu_gb": spec.vram_per_gpu_gb,
        "cpu_cores": spec.cpu_cores,
        "ram_gb": spec.ram_gb,
        "expected_duration_sec": spec.expected_duration_sec,
        "priority": spec.priority,
        "gpu_models": None if spec.gpu_models is None else list(spec.gpu_models),
        "cuda_versions": None if spec.cuda_versions is None else list(spec.cuda_versions),
        "share_gpu": spec.share_gpu,
        "restartable": spec.restartable,
        "submitted_at": _iso(spec.submitted_at),
        "started_at": None,
        "finished_at": None,
        "placements": [],
        "placement_history": [],
        "preemptions": 0,
        "tenant": spec.tenant,
        "endpoint_id": spec.endpoint_id,
        **_run_fields(spec),
    }


def job_dict(rec: JobRecord) -> dict[str, Any]:
    """The job dict of a job the controller holds."""
    view = job_view(rec)
    spec = rec.spec
    return {
        "id": view.job_id,
        "name": view.name,
        "state": view.state.value,
        "reason": None if view.reason is None else view.reason.message,
        "reason_code": None if view.reason is None else view.reason.code,
        "tier": view.tier,
        "gpu_count": view.gpu_count,
        "vram_per_gpu_gb": view.vram_per_gpu_gb,
        "cpu_cores": view.cpu_cores,
        "ram_gb": view.ram_gb,
        "expected_duration_sec": view.expected_duration_sec,
        "priority": view.priority,
        "gpu_models": None if spec.gpu_models is None else list(spec.gpu_models),
        "cuda_versions": None if spec.cuda_versions is None else list(spec.cuda_versions),
        "share_gpu": spec.share_gpu,
        "restartable": spec.restartable,
        "submitted_at": _iso(view.submitted_at),
        "started_at": _iso(view.started_at),
        "finished_at": _iso(view.finished_at),
        "placements": [{"node_id": p.node_id, "gpu_indices": list(p.gpu_indices)} for p in view.placements],
        "placement_history": [
            {
                "node_id": s.node_id,
                "gpu_indices": list(s.gpu_indices),
                "from": _iso(s.since),
                "to": _iso(s.until),
            }
            for s in view.placement_history
        ],
        "preemptions": view.preemptions,
        "tenant": spec.tenant,
        "endpoint_id": spec.endpoint_id,
        **_run_fields(spec),
    }
