"""Endpoint workers run by node agents (docs/endpoints.md "Workers on agent nodes").

A local endpoint's worker whose job can go to a READY agent-backed node with room is submitted as a job with
a command (``worker_job_fields``): the agent runs ``python -m scalar.agent.endpoint_worker`` as an ordinary
assignment, with the GPUs the packer chose in ``CUDA_VISIBLE_DEVICES``. That process dials the controller
(``AgentWorkerService``, routes in ``scalar.api.routes_agent``):

- ``next``: a long poll; the first call marks the worker ready (its handler is loaded), later ones hand it
  the request the endpoint tick delivered to it (``IN_PROGRESS`` with its worker id);
- ``result``: the handler's output or error, recorded only if the request is still in progress on this
  worker at this delivery and the call comes from the job's current attempt (fencing);
- ``failed``: the handler could not be loaded: the worker is lost with that message, and the endpoint's
  waiting requests fail with it (as a controller-run worker's requests do).

A RunPod worker (an endpoint spec's ``command``, ``runpod_worker_job_fields``) is such a job too: the
launcher (``endpoint_worker --exec``) sets its ``RUNPOD_*`` variables and execs it, and its calls arrive
through RunPod's worker protocol (``scalar.api.routes_runpod_worker``), mapped onto the same ``take``,
``result`` (with ``stream`` chunks and ``stop_pod``) and ``stopped_requests``.

The request path is the endpoint tick's, unchanged: a request on a worker whose job ends (process killed,
node lost) goes back to the queue and is delivered again; ``executionTimeoutMs`` times it out.
The credential: a random token in the worker job's env as a *secret* value (sealed in the store, opened only
in the agent's heartbeat reply), checked against the job's sealed copy.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from scalar.domain.endpoint_scaling import RequestStatus, WorkerState, check_worker_move
from scalar.domain.gpus import canonical_gpu_model
from scalar.domain.packing_model import cuda_major_minor
from scalar.runtime.agents import AgentError
from scalar.runtime.endpoints.records import MAX_STREAM_CHUNKS
from scalar.runtime.secrets import SecretBox, SecretError, is_sealed
from scalar.store import Store
from scalar.store import agents as agents_repo
from scalar.store import endpoints as repo
from scalar.wire.endpoint_workers import DeliveredRequest, NextReply

WORKER_TOKEN_ENV = "SCALAR_WORKER_TOKEN"
LOAD_FAILED = "worker_failed"  # the scaling record of a handler that could not be loaded
WORKER_MODULE = "scalar.agent.endpoint_worker"
# The agent exports its own interpreter as SCALAR_PYTHON, so the worker runs with the scalar it shipped with.
_LAUNCH = 'exec "${SCALAR_PYTHON:-python3}" -m ' + WORKER_MODULE + ' "$@"'
LIVE_JOB_STATES = ("SCHEDULED", "RUNNING")


class AgentWorkerError(AgentError):
    """A refused worker call: ``status`` (HTTP), ``code``, the message and what to do."""


# ---------------------------------------------------------------------------------------------- placing


def worker_command(endpoint_id: str, worker_id: str, handler: str, flags: Sequence[str] = ()) -> list[str]:
    return [
        "sh",
        "-c",
        _LAUNCH,
        "scalar-endpoint-worker",
        "--endpoint",
        endpoint_id,
        "--worker",
        worker_id,
        "--handler",
        handler,
        *flags,
    ]


def runpod_worker_command(endpoint_id: str, worker_id: str, command: Sequence[str]) -> list[str]:
    """A RunPod worker's job command: the launcher sets the ``RUNPOD_*`` variables from the agent's
    ``SCALAR_CONTROLLER_URL``, the worker's token and the job's attempt, then execs ``command``."""
    return [
        "sh",
        "-c",
        _LAUNCH,
        "scalar-runpod-worker",
        "--endpoint",
        endpoint_id,
        "--worker",
        worker_id,
        "--exec",
        "--",
        *command,
    ]


def runpod_worker_job_fields(
    endpoint_id: str,
    worker_id: str,
    command: Sequence[str],
    env: Mapping[str, str],
    workdir: str | None,
) -> dict[str, Any]:
    """A RunPod worker's job: its command through the launcher, the spec's env (the job-env checks apply),
    its workdir, and its credential (``RUNPOD_AI_API_KEY`` is this token)."""
    fields: dict[str, Any] = {
        "command": runpod_worker_command(endpoint_id, worker_id, command),
        "env": {
            **dict(env),
            WORKER_TOKEN_ENV: {"value": "swt_" + secrets.token_urlsafe(24), "secret": True},
        },
    }
    if workdir:
        fields["workdir"] = workdir
    return fields


def new_worker_id() -> str:
    return f"wk-{uuid.uuid4().hex[:16]}"


def worker_job_fields(
    endpoint_id: str,
    worker_id: str,
    handler: str,
    flags: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """What a worker job run by an agent adds to the worker job's fields: its command, the endpoint's
    declared ``env`` (the job-env checks apply) and its credential."""
    return {
        "command": worker_command(endpoint_id, worker_id, handler, flags),
        "env": {
            **dict(env or {}),
            WORKER_TOKEN_ENV: {"value": "swt_" + secrets.token_urlsafe(24), "secret": True},
        },
    }


def _cuda_allowed(node_cuda: Any, allowed: Sequence[str] | None) -> bool:
    """A node's CUDA version (major.minor of it) is one the worker allows; unknown is accepted (as the
    packer does)."""
    have = cuda_major_minor(None if node_cuda is None else str(node_cuda))
    if not allowed or have is None:
        return True
    return have in {cuda_major_minor(str(v)) for v in allowed}


def agent_room(
    store: Store, models: Sequence[str], gpu_count: int, cuda_versions: Sequence[str] | None = None
) -> dict[str, int]:
    """Free GPUs of the READY agent-backed nodes (lease ready, not draining) whose GPU model and CUDA
    version a worker accepts: where a worker job with a command can be placed now."""
    wanted = {canonical_gpu_model(m) for m in models}
    room: dict[str, int] = {}
    with store.read() as tx:
        for agent in agents_repo.list_agents(tx.conn):
            if agent.lease_state != "ready" or agent.drain:
                continue
            node = tx.get_projection("nodes", agent.node_id)
            if node is None or str(node.data.get("state")).upper() != "READY":
                continue
            model = node.data.get("gpu_model")
            if wanted and (model is None or canonical_gpu_model(str(model)) not in wanted):
                continue
            if "FAST" not in str(node.data.get("tier", "")).upper():
                continue  # worker jobs are FAST
            if not _cuda_allowed(node.data.get("cuda_version"), cuda_versions):
                continue
            free = int(node.data.get("gpus_free") or 0)
            if free >= gpu_count:
                room[agent.node_id] = free
    return room


def take_room(room: dict[str, int], gpu_count: int) -> bool:
    """Take ``gpu_count`` GPUs of one node in ``room`` for a worker; False when none has them."""
    for node_id, free in sorted(room.items()):
        if free >= gpu_count:
            room[node_id] = free - gpu_count
            return True
    return False


def recent_load_failure(store: Store, endpoint_id: str, now: datetime, backoff_s: float) -> str | None:
    """The message of a worker start failure (its handler did not load, or its process ended before it
    asked for a request) less than ``backoff_s`` ago: no new worker is started until then (no crash loop)."""
    with store.read() as tx:
        latest = repo.list_scaling(tx.conn, endpoint_id, 20)
    failed = next((s for s in latest if s["code"] == LOAD_FAILED), None)
    if failed is None or now >= failed["at"] + timedelta(seconds=backoff_s):
        return None
    return str(failed["message"])


# ---------------------------------------------------------------------------------------------- serving


@dataclass(frozen=True)
class CallingWorker:
    """A worker whose process called with its credential: its row's state and its job as it is now."""

    id: str
    state: str
    reason: str | None
    served: int
    ready_at: datetime | None
    job: Mapping[str, Any]


class AgentWorkerService:
    """The controller's side of the worker process's calls. ``store``, ``clock`` and ``box`` are the
    control plane's (``box`` opens the sealed worker token)."""

    def __init__(
        self, store: Callable[[], Store], clock: Callable[[], datetime], box: Callable[[], SecretBox]
    ) -> None:
        self._store = store
        self.clock = clock
        self._box = box

    def _worker(self, tx: Any, endpoint_id: str, worker_id: str, token: str) -> CallingWorker:
        worker = repo.get_worker(tx.conn, worker_id)
        if worker is None or worker["endpoint_id"] != endpoint_id:
            raise AgentWorkerError(
                404,
                "not-found",
                f"no worker {worker_id} of endpoint {endpoint_id}",
                "the worker's job was not started by this controller; stop it",
            )
        job = None if worker["job_id"] is None else tx.get_projection("jobs", worker["job_id"])
        sealed = ((job.data.get("env") if job is not None else None) or {}).get(WORKER_TOKEN_ENV)
        expected = None
        if is_sealed(sealed):
            try:
                expected = self._box().open(str(sealed))
            except SecretError:
                expected = None
        if expected is None or not secrets.compare_digest(expected.encode(), token.encode()):
            raise AgentWorkerError(
                401,
                "worker-token-invalid",
                f"wrong worker token for worker {worker_id}",
                f"the agent passes the token in ${WORKER_TOKEN_ENV}; run the worker only as its assignment",
            )
        return CallingWorker(
            id=worker["id"],
            state=worker["state"],
            reason=worker["reason"],
            served=int(worker["served"] or 0),
            ready_at=worker["ready_at"],
            job=job.data if job is not None else {},
        )

    @staticmethod
    def _fenced(worker: CallingWorker, attempt: int) -> str | None:
        """Why calls from this attempt are no longer the worker's, or None."""
        job = worker.job
        current = int(job.get("preemptions") or 0) + 1
        if job.get("state") not in LIVE_JOB_STATES or attempt != current:
            return (
                f"attempt {attempt} of job {job.get('id')} is stale (the job is {job.get('state')}, attempt "
                f"{current})"
            )
        if not WorkerState(worker.state).active:
            return f"worker {worker.id} is {worker.state}: {worker.reason}"
        return None

    def authenticate(self, endpoint_id: str, worker_id: str, token: str) -> None:
        with self._store().read() as tx:
            self._worker(tx, endpoint_id, worker_id, token)

    def take(
        self,
        endpoint_id: str,
        worker_id: str,
        token: str,
        attempt: int,
        skip: frozenset[tuple[str, int]] = frozenset(),
    ) -> NextReply:
        """One look for the worker: ``stop`` with the reason, the ``request`` delivered to it, or neither
        (nothing yet). The first look once the worker's job runs marks it ready (the process loaded its
        handler before calling)."""
        store = self._store()
        with store.read() as tx:
            worker = self._worker(tx, endpoint_id, worker_id, token)
            running = repo.requests_in(tx.conn, endpoint_id, RequestStatus.IN_PROGRESS.value)
        why = self._fenced(worker, attempt)
        if why is not None:
            return NextReply(stop=True, reason=why)
        if worker.state == WorkerState.INITIALIZING.value and worker.ready_at is None:
            now = self.clock()
            with store.write() as tx:
                again = repo.get_worker(tx.conn, worker_id)
                if again is not None and again["state"] == WorkerState.INITIALIZING.value:
                    if again["ready_at"] is None:
                        repo.update_worker(
                            tx.conn,
                            worker_id,
                            {"ready_at": now, "reason": f"its handler is loaded on {again['node_id']}"},
                        )
            return NextReply()
        mine = [r for r in running if r["worker_id"] == worker_id and (r["id"], r["attempts"]) not in skip]
        if not mine:
            return NextReply()
        req = mine[0]
        return NextReply(request=DeliveredRequest(id=req["id"], input=req["input"], delivery=req["attempts"]))

    def result(
        self,
        endpoint_id: str,
        worker_id: str,
        token: str,
        attempt: int,
        request_id: str,
        delivery: int | None,
        output: Any,
        error: str | None,
        *,
        stream: Sequence[Any] = (),
        final: bool = True,
        stop_pod: bool = False,
    ) -> tuple[bool, str | None]:
        """Record the handler's answer if the request is still this worker's at this delivery: with
        ``final`` false, chunks a streaming handler yielded (``stream``); else the output or the error.
        ``stop_pod`` (RunPod's ``refresh_worker``): the worker stops after this request, a fresh one starts."""
        now = self.clock()
        with self._store().write() as tx:
            worker = self._worker(tx, endpoint_id, worker_id, token)
            req = repo.get_request(tx.conn, request_id)
            if req is None or req["endpoint_id"] != endpoint_id:
                return False, f"no request {request_id} on endpoint {endpoint_id}"
            if delivery is None:  # RunPod's protocol names no delivery: the one the request is at
                delivery = int(req["attempts"])
            ours = req["worker_id"] == worker_id and req["attempts"] == delivery
            if ours and RequestStatus(req["status"]).terminal:
                return True, f"already recorded: {req['status']}"
            why = self._fenced(worker, attempt)
            if why is None and not (ours and req["status"] == RequestStatus.IN_PROGRESS.value):
                why = (
                    f"request {request_id} is {req['status']} on {req['worker_id'] or 'no worker'} at delivery "
                    f"{req['attempts']}, not delivery {delivery} on {worker_id}"
                )
            if why is not None:
                return False, f"ignored (fenced): {why}"
            if not final:
                if repo.add_chunks(tx.conn, request_id, list(stream), now, MAX_STREAM_CHUNKS) < 0:
                    return False, f"the stream of {request_id} holds {MAX_STREAM_CHUNKS} chunks already"
                return True, None
            values: dict[str, Any] = {"finished_at": now}
            if error is None:
                values.update(status=RequestStatus.COMPLETED.value, output=output, error=None)
            else:
                values.update(status=RequestStatus.FAILED.value, output=output, error=error)
            if not repo.update_request_if(tx.conn, request_id, RequestStatus.IN_PROGRESS.value, values):
                return False, f"request {request_id} is no longer in progress"
            changes: dict[str, Any] = {"served": worker.served + 1}
            if stop_pod and WorkerState(worker.state).active:
                check_worker_move(WorkerState(worker.state), WorkerState.STOPPING)
                changes.update(
                    state=WorkerState.STOPPING.value,
                    reason=f"refresh_worker after request {request_id}: a fresh worker replaces it",
                )
            repo.update_worker(tx.conn, worker_id, changes)
        return True, None

    def stopped_requests(
        self, endpoint_id: str, worker_id: str, token: str, attempt: int, since: datetime
    ) -> list[str]:
        """Requests delivered to this worker that were cancelled or timed out since ``since``: the ones
        its process should stop (RunPod's ``job-stop``)."""
        with self._store().read() as tx:
            self._worker(tx, endpoint_id, worker_id, token)
            rows = repo.requests_of_worker(
                tx.conn, worker_id, [RequestStatus.CANCELLED.value, RequestStatus.TIMED_OUT.value], since
            )
        return [r["id"] for r in rows]

    def failed(self, endpoint_id: str, worker_id: str, token: str, attempt: int, error: str) -> str:
        """The handler could not be loaded: the worker is lost with the message; the endpoint's waiting
        requests fail with it. Returns what was recorded."""
        now = self.clock()
        message = f"the handler could not be loaded: {error}"
        with self._store().write() as tx:
            worker = self._worker(tx, endpoint_id, worker_id, token)
            why = self._fenced(worker, attempt)
            if why is not None:
                return f"ignored (fenced): {why}"
            check_worker_move(WorkerState(worker.state), WorkerState.LOST)
            repo.update_worker(
                tx.conn,
                worker_id,
                {"state": WorkerState.LOST.value, "stopped_at": now, "reason": f"lost: {message}"},
            )
            repo.record_scaling(
                tx.conn,
                endpoint_id,
                now,
                {
                    "action": "hold",
                    "code": LOAD_FAILED,
                    "message": f"worker {worker_id} failed: {message}",
                    "workers_before": 0,
                    "workers_target": 0,
                    "data": {"worker_id": worker_id, "error": error},
                },
            )
            for status in (RequestStatus.IN_QUEUE, RequestStatus.IN_PROGRESS):
                for req in repo.requests_in(tx.conn, endpoint_id, status.value):
                    if status is RequestStatus.IN_PROGRESS and req["worker_id"] != worker_id:
                        continue
                    repo.update_request_if(
                        tx.conn,
                        req["id"],
                        status.value,
                        {"status": RequestStatus.FAILED.value, "error": message, "finished_at": now},
                    )
        return message
