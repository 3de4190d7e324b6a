"""The endpoint service's tick: follow worker jobs, deliver and finish requests, scale (docs/endpoints.md).

Per endpoint, one pass reads the store, asks the ControlPlane about each worker's job, decides everything
in memory, submits or cancels worker jobs, then writes all changes in one transaction. Request updates are
conditional on the status the pass saw, so an API cancellation made meanwhile is never overwritten.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from scalar.domain.endpoint_scaling import (
    DEFAULT_WORK_S,
    RequestStatus,
    ScaleAction,
    ScaleDecision,
    ScalingInput,
    WorkerState,
    WorkerView,
    check_worker_move,
    cold_start_s,
    decide_scale,
    service_time_s,
)
from scalar.domain.endpoints import ServerlessEndpoint, fleet_cuda_versions
from scalar.domain.gpus import GpuGroup, group_of_model
from scalar.runtime.endpoints import agent_workers
from scalar.runtime.endpoints.local_workers import Finished
from scalar.runtime.endpoints.records import handler_flags, spec_from_row, worker_command
from scalar.store import endpoints as repo
from scalar.wire.endpoints_api import EndpointCostOut

if TYPE_CHECKING:
    from scalar.runtime.endpoints.service import EndpointService

JOB_WAITING = ("PENDING", "SCHEDULED")
ACTIVE_STATES = [s.value for s in WorkerState if s.active] + [WorkerState.STOPPING.value]


@dataclass
class TickMemory:
    """What the leader remembers between ticks (nothing here is needed for correctness after a restart)."""

    last_code: dict[str, str] = field(default_factory=dict)
    refused_until: dict[str, datetime] = field(default_factory=dict)


@dataclass
class _Pass:
    """The changes one tick makes to one endpoint, written together at the end."""

    workers: dict[str, dict[str, Any]] = field(default_factory=dict)
    new_workers: list[dict[str, Any]] = field(default_factory=list)
    requests: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    scaling: list[dict[str, Any]] = field(default_factory=list)
    local_starts: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    agent_room: dict[str, int] | None = None  # free GPUs on agent nodes not claimed yet (agent_workers.py)
    flags: list[str] = field(default_factory=list)  # the handler process's flags (handlerConfig)
    env: dict[str, str] = field(default_factory=dict)  # the handler's declared environment (spec env)


def worker_gpu_models(spec: ServerlessEndpoint) -> list[str]:
    """The GPU models a worker accepts, in the spec's group preference order (canonical names: any spelling
    of a model compares equal to them, ``scalar.domain.gpus``)."""
    models: list[str] = []
    for group in spec.gpus:
        for name in group.model_names:
            if name not in models:
                models.append(name)
    return models


def _parse(at: Any) -> datetime | None:
    return None if at is None else datetime.fromisoformat(str(at))


def _move(p: _Pass, worker: dict[str, Any], new: WorkerState, **values: Any) -> None:
    old = WorkerState(p.workers.get(worker["id"], {}).get("state", worker["state"]))
    check_worker_move(old, new)
    p.workers.setdefault(worker["id"], {}).update({"state": new.value, **values})
    worker.update({"state": new.value, **values})


def cancel_worker_job(svc: EndpointService, worker: dict[str, Any]) -> None:
    if worker["job_id"] is None:
        return
    with contextlib.suppress(KeyError):
        svc.jobs.cancel_job(worker["job_id"])


def tick(svc: EndpointService, now: datetime) -> None:
    with svc.store.read() as tx:
        rows = repo.list_endpoints(tx.conn, include_deleted=True)
    local_done = {f.request_id: f for f in svc.local.finished()}
    for row in rows:
        if row["state"] == repo.ACTIVE:
            _tick_endpoint(svc, row, now, local_done)
        else:
            _finish_stopping(svc, row["id"], now)


def _finish_stopping(svc: EndpointService, endpoint_id: str, now: datetime) -> None:
    with svc.store.read() as tx:
        stopping = repo.list_workers(tx.conn, endpoint_id, states=[WorkerState.STOPPING.value])
    done = [w for w in stopping if _job_state(svc, w) not in (*JOB_WAITING, "RUNNING")]
    if done:
        with svc.store.write() as tx:
            for w in done:
                repo.update_worker(tx.conn, w["id"], {"state": WorkerState.STOPPED.value, "stopped_at": now})


def _job_state(svc: EndpointService, worker: dict[str, Any]) -> str | None:
    job = svc.jobs.get_job(worker["job_id"]) if worker["job_id"] else None
    return None if job is None else str(job["state"])


def _node_facts(svc: EndpointService, job: dict[str, Any]) -> tuple[str | None, str | None, Decimal | None]:
    """(node id, GPU model, price per GPU-hour) of the node the worker's job runs on."""
    placements = job.get("placements") or []
    if not placements:
        return None, None, None
    node_id = placements[0]["node_id"]
    with svc.store.read() as tx:
        node = tx.get_projection("nodes", node_id)
        block = None if node is None else tx.get_projection("blocks", str(node.data.get("block_id")))
    model = None if node is None else node.data.get("gpu_model")
    price = None if block is None else block.data.get("price_per_gpu_hour")
    return node_id, None if model is None else str(model), None if price is None else Decimal(str(price))


def _sync_worker(
    svc: EndpointService, spec: ServerlessEndpoint, p: _Pass, w: dict[str, Any], now: datetime
) -> None:
    job = svc.jobs.get_job(w["job_id"]) if w["job_id"] else None
    job_state = None if job is None else str(job["state"])
    state = WorkerState(w["state"])
    w["_on_agent"] = bool(job is not None and job.get("command"))  # run by a node agent (agent_workers.py)
    w["_unplaced"] = job_state == "PENDING"
    if state is WorkerState.STOPPING:
        if job_state not in (*JOB_WAITING, "RUNNING"):
            _move(p, w, WorkerState.STOPPED, stopped_at=now)
        elif str(w["reason"] or "").startswith("refresh_worker") and w["_on_agent"]:
            cancel_worker_job(svc, w)  # a RunPod worker does not exit on its own after stopPod
        return
    if job is not None and job_state == "RUNNING":
        if state is WorkerState.PENDING:
            node_id, model, price = _node_facts(svc, job)
            group = group_of_model(model) if model else None
            group = group if group is not None and group in spec.gpus else spec.gpus[0]
            started = _parse(job.get("started_at")) or now
            ready: datetime | None = started + timedelta(seconds=cold_start_s(group))
            why = f"cold start {cold_start_s(group):g} s on {model or group.value} ({group.value})"
            if w["_on_agent"]:  # ready when its process has loaded the handler and calls in
                ready, why = None, f"starting on agent node {node_id}: ready once its handler is loaded"
            _move(
                p,
                w,
                WorkerState.INITIALIZING,
                node_id=node_id,
                gpu_model=model,
                gpu_group=group.value,
                price_per_gpu_hour=price,
                started_at=started,
                ready_at=ready,
                reason=why,
            )
            state = WorkerState.INITIALIZING
        if state is WorkerState.INITIALIZING and w["ready_at"] is not None and now >= w["ready_at"]:
            _move(p, w, WorkerState.IDLE, idle_since=w["ready_at"], reason="ready")
        return
    if job is not None and job_state in JOB_WAITING and state is WorkerState.PENDING:
        why = f"its job {job['id']} is {job_state}: {job.get('reason')}"
        if why != w["reason"]:
            p.workers.setdefault(w["id"], {})["reason"] = why
            w["reason"] = why
        return
    # The job ended (or was preempted back to the queue) without the scaler asking: the worker is lost.
    why = "its job is gone" if job is None else f"its job {job['id']} is {job_state}: {job.get('reason')}"
    if job is not None and job_state in JOB_WAITING:
        cancel_worker_job(svc, w)
    svc.local.stop(w["id"])
    never_ready = state is WorkerState.INITIALIZING and w["ready_at"] is None
    _move(p, w, WorkerState.LOST, stopped_at=now, reason=f"lost: {why}")
    if never_ready and w["_on_agent"] and job_state not in JOB_WAITING:
        # its process ended before it ever asked for a request: a start failure, backed off (no crash loop)
        p.scaling.append(
            {
                "action": "hold",
                "code": agent_workers.LOAD_FAILED,
                "message": f"worker {w['id']} failed to start: {why} (no new worker for "
                f"{svc.refusal_backoff_s:g} s)",
                "workers_before": 0,
                "workers_target": 0,
                "data": {"worker_id": w["id"], "error": why},
            }
        )


def _cuda(spec: ServerlessEndpoint) -> list[str] | None:
    """The worker job's CUDA versions: at or above the spec's lowest, on Scalar's own fleet."""
    return [v.value for v in fleet_cuda_versions(spec.cuda_versions)] or None


def _move_to_agents(
    svc: EndpointService, spec: ServerlessEndpoint, p: _Pass, workers: dict[str, dict[str, Any]]
) -> None:
    """A local endpoint's room on agent nodes: their free GPUs less those claimed by its agent-run workers
    not placed yet. A reservation worker still waiting is replaced by one there when the room has it."""
    unplaced = [w for w in workers.values() if w["state"] == WorkerState.PENDING.value and w["_unplaced"]]
    if not unplaced:
        return  # nothing claims agent room: _start_workers reads it afresh
    room = agent_workers.agent_room(svc.store, worker_gpu_models(spec), spec.gpu_count, _cuda(spec))
    for w in unplaced:
        if w["_on_agent"]:
            agent_workers.take_room(room, spec.gpu_count)
    trial = dict(room)  # the replacements take the room itself (in _start_workers)
    for w in unplaced:
        if not w["_on_agent"] and agent_workers.take_room(trial, spec.gpu_count):
            cancel_worker_job(svc, w)
            _move(p, w, WorkerState.STOPPING, reason="replaced by a worker on a node agent with room")
    p.agent_room = room


def _sim_output(req: dict[str, Any], group: GpuGroup, service_s: float) -> dict[str, Any]:
    return {"echo": req["input"], "gpu_group": group.value, "service_s": round(service_s, 3)}


def _work_s(job_input: Any) -> float:
    if isinstance(job_input, dict):
        value = job_input.get("work_s")
        if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value <= 86_400:
            return float(value)
    return DEFAULT_WORK_S


_TTL_ERROR = "the request outlived its policy.ttl: it expired before it finished"


def _lost_values(svc: EndpointService, req: dict[str, Any], why: str, now: datetime) -> dict[str, Any]:
    """A request whose worker died under it goes back to the queue, at most ``max_request_retries`` times;
    then it FAILS with the reason (a request that crashes every worker it reaches cannot loop forever)."""
    if req["retries"] >= svc.max_request_retries:
        return {
            "status": RequestStatus.FAILED.value,
            "finished_at": now,
            "error": f"{why}; not retried again: it was retried {req['retries']} time(s), the limit "
            f"([endpoints] max_request_retries = {svc.max_request_retries})",
        }
    return {
        "status": RequestStatus.IN_QUEUE.value,
        "worker_id": None,
        "started_at": None,
        "run_until": None,
        "retries": req["retries"] + 1,
        "error": f"retrying: {why}",
    }


def _expire_queued(p: _Pass, queued: list[dict[str, Any]], now: datetime) -> list[dict[str, Any]]:
    """Queued requests past their ``policy.ttl`` end TIMED_OUT; returns the others."""
    keep: list[dict[str, Any]] = []
    for req in queued:
        if req.get("expires_at") is not None and req["expires_at"] <= now:
            values = {"status": RequestStatus.TIMED_OUT.value, "finished_at": now, "error": _TTL_ERROR}
            p.requests.append((req["id"], RequestStatus.IN_QUEUE.value, values))
        else:
            keep.append(req)
    return keep


def _finish_requests(
    svc: EndpointService,
    spec: ServerlessEndpoint,
    p: _Pass,
    workers: dict[str, dict[str, Any]],
    running: list[dict[str, Any]],
    local_done: dict[str, Finished],
    now: datetime,
) -> set[str]:
    """Complete, fail, time out or requeue the running requests; returns the workers still busy."""
    busy: set[str] = set()
    for req in running:
        worker = workers.get(req["worker_id"] or "")
        done = local_done.pop(req["id"], None)
        lost_why: str | None = None
        if worker is None or not WorkerState(worker["state"]).active:
            lost_why = f"worker {req['worker_id']} was lost during attempt {req['attempts']}" + (
                f" ({worker['reason']})" if worker is not None and worker.get("reason") else ""
            )
        elif done is not None and done.lost:
            lost_why = f"its handler process died during attempt {req['attempts']} ({done.error})"
        if lost_why is not None:
            p.requests.append(
                (req["id"], RequestStatus.IN_PROGRESS.value, _lost_values(svc, req, lost_why, now))
            )
            continue
        assert worker is not None
        finished_at: datetime | None = None
        values: dict[str, Any] = {}
        timeout_ms = req.get("execution_timeout_ms") or spec.execution_timeout_ms
        timeout_s = timeout_ms / 1000
        expired = req.get("expires_at") is not None and req["expires_at"] <= now
        if done is not None:
            finished_at = now
            if done.error is None:
                values = {"status": RequestStatus.COMPLETED.value, "output": done.output, "error": None}
            else:
                values = {"status": RequestStatus.FAILED.value, "output": done.output, "error": done.error}
        elif req["run_until"] is not None and req["run_until"] <= now:
            finished_at = req["run_until"]
            group = GpuGroup(worker["gpu_group"]) if worker["gpu_group"] else spec.gpus[0]
            service_s = (req["run_until"] - req["started_at"]).total_seconds()
            values = {
                "status": RequestStatus.COMPLETED.value,
                "output": _sim_output(req, group, service_s),
                "error": None,
            }
        elif expired or (timeout_s > 0 and req["started_at"] + timedelta(seconds=timeout_s) <= now):
            finished_at = now
            source = (
                f"policy.executionTimeout {timeout_ms}"
                if req.get("execution_timeout_ms")
                else f"executionTimeoutMs {spec.execution_timeout_ms}"
            )
            error = _TTL_ERROR if expired else f"execution took longer than {source}"
            values = {"status": RequestStatus.TIMED_OUT.value, "error": error}
            svc.local.stop(worker["id"])
            if worker.get("_on_agent"):  # its process still runs the handler: stop the worker's job
                cancel_worker_job(svc, worker)
                _move(p, worker, WorkerState.STOPPING, reason=f"request {req['id']} timed out")
        if finished_at is None:
            busy.add(worker["id"])
            continue
        p.requests.append(
            (req["id"], RequestStatus.IN_PROGRESS.value, {**values, "finished_at": finished_at})
        )
        served = p.workers.setdefault(worker["id"], {}).get("served", worker["served"]) + 1
        p.workers[worker["id"]]["served"] = served
        worker["served"] = served
        worker["_freed_at"] = max(finished_at, worker.get("_freed_at") or finished_at)
    return busy


def _dispatch(
    svc: EndpointService,
    row: dict[str, Any],
    p: _Pass,
    workers: dict[str, dict[str, Any]],
    busy: set[str],
    queued: list[dict[str, Any]],
    now: datetime,
) -> list[dict[str, Any]]:
    """Settle idle/busy, hand the oldest queued requests to the longest-idle workers; returns the rest."""
    for w in workers.values():
        state = WorkerState(w["state"])
        if state is WorkerState.BUSY and w["id"] not in busy:
            _move(p, w, WorkerState.IDLE, idle_since=w.get("_freed_at") or now)
        elif state is WorkerState.IDLE and w["id"] in busy:
            _move(p, w, WorkerState.BUSY)
    idle = sorted(
        (w for w in workers.values() if w["state"] == WorkerState.IDLE.value),
        key=lambda w: (w["idle_since"] or now, w["id"]),
    )
    real = row["target"] == "local"  # a handler or a worker command serves it (not the modeled time)
    handler = row["handler"] if real else None
    rest = list(queued)
    while idle and rest:
        worker, req = idle.pop(0), rest.pop(0)
        values: dict[str, Any] = {
            "status": RequestStatus.IN_PROGRESS.value,
            "worker_id": worker["id"],
            "started_at": now,
            "attempts": req["attempts"] + 1,
            "run_until": None,
        }
        if not real:
            group = GpuGroup(worker["gpu_group"]) if worker["gpu_group"] else GpuGroup.AMPERE_48
            service_s = service_time_s(group, svc.rng, _work_s(req["input"]))
            values["run_until"] = now + timedelta(seconds=service_s)
        elif handler is not None and not worker.get("_on_agent"):  # an agent-run worker takes it itself
            p.local_starts.append((worker["id"], handler, {"id": req["id"], "input": req["input"]}))
        p.requests.append((req["id"], RequestStatus.IN_QUEUE.value, values))
        _move(p, worker, WorkerState.BUSY)
    return rest


def _scale(
    svc: EndpointService,
    row: dict[str, Any],
    spec: ServerlessEndpoint,
    p: _Pass,
    workers: dict[str, dict[str, Any]],
    queued: list[dict[str, Any]],
    in_progress: int,
    now: datetime,
) -> None:
    views = tuple(
        WorkerView(
            w["id"],
            WorkerState(w["state"]),
            (now - w["idle_since"]).total_seconds() if w["state"] == "idle" and w["idle_since"] else 0.0,
        )
        for w in workers.values()
        if WorkerState(w["state"]).active
    )
    oldest = (now - queued[0]["created_at"]).total_seconds() if queued else None
    decision = decide_scale(spec, ScalingInput(len(queued), in_progress, oldest, views))
    endpoint_id = row["id"]
    started = 0
    if decision.start > 0:
        refused_until = svc.state.refused_until.get(endpoint_id)
        if refused_until is None or now >= refused_until:
            started = _start_workers(svc, row, spec, p, decision, now)
        else:
            return
    for worker_id in decision.stop:
        worker = workers[worker_id]
        cancel_worker_job(svc, worker)
        svc.local.stop(worker_id)
        _move(p, worker, WorkerState.STOPPING, reason=f"scaled down: {decision.reason.code}")
    if decision.start > 0 and started == 0:
        return
    if decision.action is ScaleAction.HOLD and svc.state.last_code.get(endpoint_id) == decision.reason.code:
        return
    svc.state.last_code[endpoint_id] = decision.reason.code
    p.scaling.append(_scaling_row(decision, decision.reason.code, decision.reason.message))


def _scaling_row(decision: ScaleDecision, code: str, message: str) -> dict[str, Any]:
    return {
        "action": decision.action.value,
        "code": code,
        "message": message,
        "workers_before": decision.workers_before,
        "workers_target": decision.target,
        "data": {"reason": decision.reason.to_dict(), "stop": list(decision.stop), "start": decision.start},
    }


def _start_workers(
    svc: EndpointService,
    row: dict[str, Any],
    spec: ServerlessEndpoint,
    p: _Pass,
    decision: ScaleDecision,
    now: datetime,
) -> int:
    fields = {
        "tier": "FAST",
        "gpu_count": spec.gpu_count,
        "gpu_models": worker_gpu_models(spec),  # the spec's groups, in its preference order
        **({"cuda_versions": cuda} if (cuda := _cuda(spec)) else {}),
        "expected_duration_sec": svc.worker_duration_s,
        "name": f"{spec.name}-worker",
        "endpoint_id": row["id"],
        "tenant": row.get("tenant") or "default",  # the endpoint's owner: /costs and budgets charge it
    }
    started = 0
    # A local endpoint's worker runs on a node agent when a READY agent-backed node has room for it.
    handler = row["handler"] if row["target"] == "local" else None
    command = worker_command(row)  # a RunPod worker: always a job run by a node agent
    failed_now = any(s["code"] == agent_workers.LOAD_FAILED for s in p.scaling)
    if (handler is not None or command is not None) and (
        failed_now or agent_workers.recent_load_failure(svc.store, row["id"], now, svc.refusal_backoff_s)
    ):
        return 0  # its handler could not be loaded just now: wait before starting another worker
    room = {} if handler is None else p.agent_room
    if room is None:
        room = agent_workers.agent_room(svc.store, worker_gpu_models(spec), spec.gpu_count, _cuda(spec))
    for _ in range(decision.start):
        agent_worker_id = None
        submit = fields
        if command is not None:
            agent_worker_id = agent_workers.new_worker_id()
            extra = agent_workers.runpod_worker_job_fields(
                row["id"], agent_worker_id, command, row["spec"].get("env") or {}, row["spec"].get("workdir")
            )
            submit = {**fields, **extra}
        elif handler is not None and agent_workers.take_room(room, spec.gpu_count):
            agent_worker_id = agent_workers.new_worker_id()
            extra = agent_workers.worker_job_fields(row["id"], agent_worker_id, handler, p.flags, p.env)
            submit = {**fields, **extra}
        try:
            job = svc.jobs.submit_job(submit)
        except Exception as exc:
            reasons = getattr(exc, "reasons", None)
            if reasons is None:
                raise
            text = "; ".join(r.message for r in reasons)
            message = (
                f"cannot start a worker on {', '.join(g.value for g in spec.gpus)}: {text} "
                f"(the scaler wanted {decision.target}; retrying in {svc.refusal_backoff_s:g} s)"
            )
            svc.state.refused_until[row["id"]] = now + timedelta(seconds=svc.refusal_backoff_s)
            if svc.state.last_code.get(row["id"]) != "worker_refused":
                svc.state.last_code[row["id"]] = "worker_refused"
                p.scaling.append(_scaling_row(decision, "worker_refused", message))
            break
        started += 1
        worker_id = agent_worker_id or f"wk-{job['id'].removeprefix('job-')}"
        p.new_workers.append(
            {
                "id": worker_id,
                "endpoint_id": row["id"],
                "job_id": job["id"],
                "state": WorkerState.PENDING.value,
                "gpu_count": spec.gpu_count,
                "reason": f"its job {job['id']} was submitted: {decision.reason.code}"
                + (" (to run on a node agent)" if agent_worker_id else ""),
                "created_at": now,
            }
        )
    return started


def _tick_endpoint(
    svc: EndpointService, row: dict[str, Any], now: datetime, local_done: dict[str, Finished]
) -> None:
    spec = spec_from_row(row)
    endpoint_id = row["id"]
    with svc.store.read() as tx:
        worker_rows = repo.list_workers(tx.conn, endpoint_id, states=ACTIVE_STATES)
        running = repo.requests_in(tx.conn, endpoint_id, RequestStatus.IN_PROGRESS.value)
        queued = repo.requests_in(tx.conn, endpoint_id, RequestStatus.IN_QUEUE.value)
    p = _Pass(flags=handler_flags(row), env=dict(row["spec"].get("env") or {}))
    workers = {w["id"]: w for w in worker_rows}
    for w in worker_rows:
        _sync_worker(svc, spec, p, w, now)
    if row["target"] == "local":
        _move_to_agents(svc, spec, p, workers)
    busy = _finish_requests(svc, spec, p, workers, running, local_done, now)
    requeued = [
        r for r in running if any(u[0] == r["id"] and u[2]["status"] == "IN_QUEUE" for u in p.requests)
    ]
    for r in requeued:
        r.update(status="IN_QUEUE", retries=r["retries"] + 1)
    queued = _expire_queued(p, queued, now)
    still_queued = sorted([*requeued, *queued], key=lambda r: (r["created_at"], r["id"]))
    rest = _dispatch(svc, row, p, workers, busy, still_queued, now)
    dispatched = len(still_queued) - len(rest)
    _scale(svc, row, spec, p, workers, rest, len(busy) + dispatched, now)
    _write(svc, endpoint_id, p, requeued, now)


def _write(
    svc: EndpointService, endpoint_id: str, p: _Pass, requeued: list[dict[str, Any]], now: datetime
) -> None:
    if not (p.workers or p.new_workers or p.requests or p.scaling):
        return
    requeued_ids = {r["id"] for r in requeued}
    started_local: list[tuple[str, str, dict[str, Any]]] = []
    with svc.store.write() as tx:
        for worker_id, values in p.workers.items():
            repo.update_worker(tx.conn, worker_id, values)
        for values in p.new_workers:
            repo.insert_worker(tx.conn, values)
        merged: dict[str, tuple[str, dict[str, Any]]] = {}
        for request_id, expect, values in p.requests:
            if request_id in merged and request_id in requeued_ids:
                first_expect, first_values = merged[request_id]
                merged[request_id] = (first_expect, {**first_values, **values})
            else:
                merged[request_id] = (expect, values)
        for request_id, (expect, values) in merged.items():
            ok = repo.update_request_if(tx.conn, request_id, expect, values)
            if ok and values.get("status") == RequestStatus.IN_PROGRESS.value:
                started_local.extend(s for s in p.local_starts if s[2]["id"] == request_id)
        for values in p.scaling:
            repo.record_scaling(tx.conn, endpoint_id, now, values)
    for worker_id, handler, job in started_local:
        svc.local.start(worker_id, handler, job["id"], job, p.flags, p.env)


# ---------------------------------------------------------------------------------------------- views


def cost_summary(
    svc: EndpointService, workers: list[dict[str, Any]], counts: dict[str, int], now: datetime
) -> EndpointCostOut:
    """Worker-hours and their cost (the node's price per GPU-hour times the worker's GPUs), exact."""
    seconds = 0.0
    cost = Decimal(0)
    for w in workers:
        if w["started_at"] is None:
            continue
        end = w["stopped_at"] or now
        held = max(0.0, (end - w["started_at"]).total_seconds())
        seconds += held
        if w["price_per_gpu_hour"] is not None:
            cost += Decimal(str(held)) / Decimal(3600) * w["gpu_count"] * w["price_per_gpu_hour"]
    completed = counts.get(RequestStatus.COMPLETED.value, 0)
    cost = cost.quantize(Decimal("0.000001"))
    per_1000 = None if completed == 0 else (cost * 1000 / completed).quantize(Decimal("0.0001"))
    return EndpointCostOut(
        worker_hours=round(seconds / 3600, 4),
        cost_usd=str(cost),
        cost_per_1000_requests_usd=None if per_1000 is None else str(per_1000),
    )


def no_workers_reason(
    svc: EndpointService, row: dict[str, Any], active: list[dict[str, Any]], scaling: list[dict[str, Any]]
) -> str | None:
    """Why the endpoint has no serving worker, or ``None`` when it has one."""
    serving = [w for w in active if w["state"] in ("initializing", "idle", "busy")]
    if serving:
        return None
    pending = [w for w in active if w["state"] == WorkerState.PENDING.value]
    if pending:
        return f"{len(pending)} worker(s) wait for GPUs: {pending[0]['reason']}"
    if scaling and scaling[0]["code"] == "worker_refused":
        return str(scaling[0]["message"])
    return "no worker: no request is waiting (workersMin 0 scales to zero)"
