"""``EndpointService``: serverless endpoints over the control plane (seed 004, docs/endpoints.md).

Endpoints, requests and scaling decisions live in the store (``scalar.store.endpoints``); any process may
create endpoints and accept requests. The leader's ``tick(now)`` (``reconcile.py``) moves everything on:
it follows each worker's job, delivers queued requests to ready workers, completes, retries and times them
out, and applies the scaler's decision by submitting or cancelling worker jobs through the ControlPlane.

Tenancy (docs/security.md): an endpoint belongs to the tenant that created it (``endpoints.tenant``); its
worker jobs are that tenant's jobs, so ``/costs`` charges it. Every call takes ``tenant``: ``None`` (an
admin) sees every endpoint, a tenant sees only its own; another tenant's endpoint, and its requests, raise
the very errors of one that does not exist.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from scalar.domain.endpoint_scaling import RequestStatus, WorkerState
from scalar.domain.errors import InvalidSpecError
from scalar.runtime.endpoints import reconcile
from scalar.runtime.endpoints.agent_workers import LOAD_FAILED
from scalar.runtime.endpoints.local_workers import LocalWorkers
from scalar.runtime.endpoints.records import (
    MAX_STREAM_CHUNKS,
    TARGETS,
    health_counts,
    iso,
    request_status,
    scaling_out,
    worker_out,
)
from scalar.runtime.endpoints.webhooks import WebhookSender, target_problem
from scalar.store import Store
from scalar.store import endpoints as repo
from scalar.wire.endpoints import EndpointSpecFile, endpoint_to_json
from scalar.wire.endpoints_api import (
    MAX_WORKERS_SHOWN,
    EndpointOut,
    HealthOut,
    LatencyOut,
    LogLineOut,
    MetricsOut,
    PurgeOut,
    RequestStatusOut,
    RunAccepted,
    StartErrorOut,
    StreamChunk,
    StreamOut,
)

log = logging.getLogger(__name__)

DEFAULT_WORKER_DURATION_S = 3600.0
"""A worker job's expected duration: long, so the built-in market does not finish it on its own while it
serves (scale-down cancels it). Nodes expiring sooner than this are not used for workers."""


class JobsPort(Protocol):
    """The ControlPlane calls the endpoint service uses to run its workers as jobs."""

    def submit_job(self, fields: Mapping[str, Any]) -> dict[str, Any]: ...

    def cancel_job(self, job_id: str) -> dict[str, Any]: ...

    def get_job(self, job_id: str) -> dict[str, Any] | None: ...


class EndpointNotFoundError(KeyError):
    pass


class HandlerNotAllowedError(PermissionError):
    """A non-admin's endpoint names a ``handler`` outside ``[endpoints] handlers``."""

    def __init__(self, handler: str, allowed: Sequence[str]) -> None:
        self.handler = handler
        self.allowed = tuple(allowed)
        listed = ", ".join(self.allowed) if self.allowed else "none: the list is empty"
        self.fix = (
            f"use a handler in a module an admin allowed ([endpoints] handlers in scalar.toml: {listed}), "
            "or ask an admin to create the endpoint"
        )
        super().__init__(f"handler {handler!r} is not allowed for this token")


def handler_allowed(handler: str, allowed: Sequence[str]) -> bool:
    """Whether ``handler`` (``module:function``) matches an entry of ``allowed``: ``module:function`` matches
    itself only; ``pkg`` matches ``pkg`` and every module under it (``pkg.sub``); ``pkg.`` only modules under
    ``pkg``. ``subprocess`` allows ``subprocess:run``: list your own packages, never the standard library."""
    module, _, _ = handler.partition(":")
    for entry in allowed:
        if ":" in entry:
            if handler == entry:
                return True
        elif entry.endswith("."):
            if module.startswith(entry):
                return True
        elif module == entry or module.startswith(entry + "."):
            return True
    return False


class RequestNotFoundError(KeyError):
    pass


def visible(row: dict[str, Any] | None, tenant: str | None) -> dict[str, Any] | None:
    """``row`` if the caller may see it: ``tenant`` is ``None`` (an admin) or the endpoint's own."""
    if row is None or (tenant is not None and row["tenant"] != tenant):
        return None
    return row


def new_id(prefix: str, now: datetime) -> str:
    return f"{prefix}-{now.astimezone(UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"


def parse_spec(body: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """A spec body -> (normalized spec JSON, handler). Raises ``InvalidSpecError`` or pydantic's
    ``ValidationError`` naming the field."""
    spec_file = EndpointSpecFile.model_validate(dict(body))
    spec = spec_file.to_domain()
    return {**endpoint_to_json(spec), **spec_file.worker_fields()}, spec_file.handler_ref()


class EndpointService:
    def __init__(
        self,
        jobs: JobsPort,
        store: Callable[[], Store],
        clock: Callable[[], datetime],
        *,
        seed: int = 0,
        worker_duration_s: float = DEFAULT_WORKER_DURATION_S,
        refusal_backoff_s: float = 30.0,
        allowed_handlers: Sequence[str] = (),
        max_request_retries: int = 2,
        webhook_allow_private: bool = False,
    ) -> None:
        self.jobs = jobs
        self.allowed_handlers = tuple(allowed_handlers)  # [endpoints] handlers: what users may deploy
        self._store = store
        self.clock = clock
        self.rng = random.Random(seed)
        self.worker_duration_s = worker_duration_s
        self.refusal_backoff_s = refusal_backoff_s
        self.max_request_retries = max_request_retries
        self.webhook_allow_private = webhook_allow_private
        self.local = LocalWorkers(on_chunk=self.add_chunks)
        self.state = reconcile.TickMemory()
        self.webhooks = WebhookSender(self)

    @property
    def store(self) -> Store:
        return self._store()

    def close(self) -> None:
        self.local.close()
        self.webhooks.close()

    # ---- endpoints -----------------------------------------------------------------------------------

    def _check_handler(self, handler: str | None, admin: bool) -> None:
        """A handler is code the control plane's host runs: an admin's choice (docs/security.md)."""
        if handler is not None and not admin and not handler_allowed(handler, self.allowed_handlers):
            raise HandlerNotAllowedError(handler, self.allowed_handlers)

    def create(
        self,
        body: Mapping[str, Any],
        target: str | None = None,
        *,
        tenant: str = "default",
        admin: bool = False,
    ) -> EndpointOut:
        """Validate and store a new endpoint of ``tenant``; ``InvalidSpecError`` naming the field if it is
        not valid. Names are unique among a tenant's active endpoints. A ``handler`` must match
        ``[endpoints] handlers`` unless ``admin`` (``HandlerNotAllowedError``)."""
        spec, handler = parse_spec(body)
        self._check_handler(handler, admin)
        target = _target(target, handler, bool(spec.get("command")))
        now = self.clock()
        endpoint_id = new_id("ep", now)
        with self.store.write() as tx:
            if repo.find_active_by_name(tx.conn, spec["name"], tenant=tenant) is not None:
                raise InvalidSpecError(
                    "name",
                    f"an endpoint named {spec['name']!r} exists already",
                    "pick another name, or PATCH /endpoints/{id} to change the existing one",
                )
            repo.insert_endpoint(
                tx.conn,
                {
                    "id": endpoint_id,
                    "name": spec["name"],
                    "tenant": tenant,
                    "state": repo.ACTIVE,
                    "target": target,
                    "handler": handler,
                    "spec": spec,
                    "created_at": now,
                    "updated_at": now,
                },
            )
        found = self.get(endpoint_id)
        assert found is not None
        return found

    def update(
        self,
        endpoint_id: str,
        changes: Mapping[str, Any],
        *,
        tenant: str | None = None,
        admin: bool = False,
    ) -> EndpointOut:
        """Merge ``changes`` (spec fields) into the endpoint's spec and validate the result. A changed
        ``handler`` must match ``[endpoints] handlers`` unless ``admin`` (``HandlerNotAllowedError``)."""
        with self.store.read() as tx:
            row = visible(repo.get_endpoint(tx.conn, endpoint_id), tenant)
        if row is None or row["state"] != repo.ACTIVE:
            raise EndpointNotFoundError(endpoint_id)
        merged = dict(row["spec"])
        for api_field, dev_field in (("gpuIds", "gpus"), ("allowedCudaVersions", "cudaVersions")):
            if api_field in changes or dev_field in changes:
                merged.pop(api_field, None)
                merged.pop(dev_field, None)
        if "imageName" in changes and "template" not in changes:
            merged.pop("template", None)
        template = changes.get("template")
        if isinstance(template, Mapping):  # a new template's image, env and disk replace the stored ones
            for key in ("imageName", "env", "containerDiskInGb"):
                if template.get(key) is not None and key not in changes:
                    merged.pop(key, None)
        merged.update(changes)
        if row["handler"] is not None and "handler" not in changes:
            merged["handler"] = row["handler"]
        if merged.get("name") != row["name"]:
            raise InvalidSpecError("name", "cannot be changed", "create a new endpoint under the new name")
        spec, handler = parse_spec(merged)
        if handler != row["handler"]:
            self._check_handler(handler, admin)
        with self.store.write() as tx:
            repo.update_endpoint(
                tx.conn, endpoint_id, {"spec": spec, "handler": handler, "updated_at": self.clock()}
            )
        found = self.get(endpoint_id)
        assert found is not None
        return found

    def delete(self, endpoint_id: str, *, tenant: str | None = None) -> EndpointOut:
        """Delete: cancel the queued requests and every worker job; rows stay readable."""
        now = self.clock()
        with self.store.read() as tx:
            row = visible(repo.get_endpoint(tx.conn, endpoint_id), tenant)
            workers = repo.list_workers(
                tx.conn, endpoint_id, states=[s.value for s in WorkerState if s.active]
            )
        if row is None or row["state"] != repo.ACTIVE:
            raise EndpointNotFoundError(endpoint_id)
        for worker in workers:
            reconcile.cancel_worker_job(self, worker)
            self.local.stop(worker["id"])
        with self.store.write() as tx:
            for worker in workers:
                repo.update_worker(
                    tx.conn,
                    worker["id"],
                    {"state": WorkerState.STOPPING.value, "reason": "the endpoint was deleted"},
                )
            for status in (RequestStatus.IN_QUEUE, RequestStatus.IN_PROGRESS):
                for request in repo.requests_in(tx.conn, endpoint_id, status.value):
                    repo.update_request(
                        tx.conn,
                        request["id"],
                        {"status": "CANCELLED", "finished_at": now, "error": "the endpoint was deleted"},
                    )
            repo.update_endpoint(
                tx.conn, endpoint_id, {"state": repo.DELETED, "deleted_at": now, "updated_at": now}
            )
        found = self.get(endpoint_id)
        assert found is not None
        return found

    def get(
        self, endpoint_id: str, *, tenant: str | None = None, workers_limit: int = MAX_WORKERS_SHOWN
    ) -> EndpointOut | None:
        """The endpoint with its workers (the first ``workers_limit`` active ones), health, latency, cost
        and latest scaling decisions; ``None`` if there is none (or, with ``tenant``, another tenant's)."""
        now = self.clock()
        with self.store.read() as tx:
            row = visible(repo.get_endpoint(tx.conn, endpoint_id), tenant)
            if row is None:
                return None
            workers = repo.list_workers(tx.conn, endpoint_id)
            counts = repo.count_requests(tx.conn, endpoint_id)
            recent = repo.recent_requests(tx.conn, endpoint_id, 200)
            scaling = repo.list_scaling(tx.conn, endpoint_id, 20)
        return self._view(row, workers, counts, recent, scaling, now, workers_limit)

    def list_endpoints(
        self,
        include_deleted: bool = False,
        *,
        tenant: str | None = None,
        limit: int = 1000,
        offset: int = 0,
        workers_limit: int = MAX_WORKERS_SHOWN,
        after: tuple[datetime, str] | None = None,
        descending: bool = False,
    ) -> list[EndpointOut]:
        """A page of endpoints in creation order (only ``tenant``'s, unless it is ``None``); ``after``: past
        that ``(created_at, id)`` in this order (``descending``: the other way)."""
        with self.store.read() as tx:
            rows = repo.list_endpoints(
                tx.conn,
                include_deleted=include_deleted,
                tenant=tenant,
                limit=limit,
                offset=offset,
                after=after,
                descending=descending,
            )
        ids = [r["id"] for r in rows]
        return [e for i in ids if (e := self.get(i, workers_limit=workers_limit)) is not None]

    def _view(
        self,
        row: dict[str, Any],
        workers: list[dict[str, Any]],
        counts: dict[str, int],
        recent: list[dict[str, Any]],
        scaling: list[dict[str, Any]],
        now: datetime,
        workers_limit: int = MAX_WORKERS_SHOWN,
    ) -> EndpointOut:
        active = [w for w in workers if WorkerState(w["state"]).active]
        shown = max(0, min(workers_limit, MAX_WORKERS_SHOWN))
        health = health_counts(workers, counts, now)
        done = [r for r in recent if r["status"] == RequestStatus.COMPLETED.value and r["finished_at"]]
        latencies = sorted((r["finished_at"] - r["created_at"]).total_seconds() * 1000 for r in done)
        return EndpointOut(
            id=row["id"],
            name=row["name"],
            tenant=row["tenant"],
            state=row["state"],
            target=row["target"],
            handler=row["handler"],
            remote_id=row["remote_id"],
            spec=row["spec"],
            created_at=iso(row["created_at"]),
            updated_at=iso(row["updated_at"]),
            workers=[worker_out(w) for w in active[:shown]],
            workers_count=len(active),
            workers_truncated=len(active) > shown,
            health=health,
            latency_ms=LatencyOut(
                p50=_percentile(latencies, 0.5),
                p99=_percentile(latencies, 0.99),
                samples=len(latencies),
            ),
            cost=reconcile.cost_summary(self, workers, counts, now),
            no_workers_reason=reconcile.no_workers_reason(self, row, active, scaling),
            start_error=self._start_error(workers, scaling),
            scaling=[scaling_out(s) for s in scaling],
        )

    def _start_error(
        self, workers: list[dict[str, Any]], scaling: list[dict[str, Any]]
    ) -> StartErrorOut | None:
        """The latest worker that failed to start (its handler did not load, its process ended before it
        asked for a request), unless a worker became ready since."""
        failed = next((s for s in scaling if s["code"] == LOAD_FAILED), None)
        if failed is None:
            return None
        readies = [w["ready_at"] for w in workers if w["ready_at"] is not None and w["state"] != "lost"]
        if readies and max(readies) > failed["at"]:
            return None
        data = failed.get("data") or {}
        return StartErrorOut(
            at=failed["at"].isoformat(),
            worker_id=data.get("worker_id"),
            error=str(data.get("error") or failed["message"]),
            message=failed["message"],
            retry_after=(failed["at"] + timedelta(seconds=self.refusal_backoff_s)).isoformat(),
        )

    def logs(self, endpoint_id: str, limit: int = 100, *, tenant: str | None = None) -> list[LogLineOut]:
        """Scaling decisions, worker moves and requests, newest first."""
        with self.store.read() as tx:
            row = visible(repo.get_endpoint(tx.conn, endpoint_id), tenant)
            if row is None:
                raise EndpointNotFoundError(endpoint_id)
            scaling = repo.list_scaling(tx.conn, endpoint_id, limit)
            workers = repo.list_workers(tx.conn, endpoint_id)
        lines = [
            LogLineOut(at=iso(s["at"]), kind="scaling", code=s["code"], message=s["message"]) for s in scaling
        ]
        for w in workers:
            lines.append(
                LogLineOut(
                    at=iso(w["stopped_at"] or w["ready_at"] or w["started_at"] or w["created_at"]),
                    kind="worker",
                    code=w["state"],
                    message=f"worker {w['id']} ({w['gpu_group'] or 'no GPU yet'}): {w['state']}"
                    + (f": {w['reason']}" if w["reason"] else ""),
                )
            )
        lines.sort(key=lambda line: line.at or "", reverse=True)
        return lines[:limit]

    # ---- requests (RunPod's data plane) --------------------------------------------------------------

    def _active(self, endpoint_id: str, tenant: str | None = None) -> None:
        """The endpoint exists, is not deleted, and the caller may see it."""
        with self.store.read() as tx:
            row = visible(repo.get_endpoint(tx.conn, endpoint_id), tenant)
        if row is None or row["state"] != repo.ACTIVE:
            raise EndpointNotFoundError(endpoint_id)

    def _visible_endpoint(self, endpoint_id: str, tenant: str | None) -> None:
        """The endpoint exists (deleted or not: its requests stay readable) and the caller may see it."""
        with self.store.read() as tx:
            row = visible(repo.get_endpoint(tx.conn, endpoint_id), tenant)
        if row is None:
            raise EndpointNotFoundError(endpoint_id)

    def submit_request(
        self,
        endpoint_id: str,
        job_input: Any,
        *,
        tenant: str | None = None,
        webhook: str | None = None,
        execution_timeout_ms: int | None = None,
        ttl_ms: int | None = None,
    ) -> RunAccepted:
        """Store a request (durable) and return ``{id, status: IN_QUEUE}``. RunPod's options: ``webhook``
        (gets the final status; ``InvalidSpecError`` naming it for a private target unless allowed),
        ``execution_timeout_ms`` (``policy.executionTimeout``: replaces the endpoint's limit for this
        request) and ``ttl_ms`` (``policy.ttl``: the request ends TIMED_OUT if unfinished that long after
        it was submitted)."""
        self._active(endpoint_id, tenant)
        if webhook is not None:
            problem = target_problem(webhook, self.webhook_allow_private)
            if problem is not None:
                raise InvalidSpecError("webhook", problem, "give a public http(s) URL that accepts a POST")
        now = self.clock()
        request_id = new_id("req", now)
        with self.store.write() as tx:
            repo.insert_request(
                tx.conn,
                {
                    "id": request_id,
                    "endpoint_id": endpoint_id,
                    "status": RequestStatus.IN_QUEUE.value,
                    "input": job_input,
                    "created_at": now,
                    "webhook": webhook,
                    "execution_timeout_ms": execution_timeout_ms,
                    "expires_at": None if ttl_ms is None else now + timedelta(milliseconds=ttl_ms),
                },
            )
        return RunAccepted(id=request_id, status=RequestStatus.IN_QUEUE.value)

    def purge_queue(self, endpoint_id: str, *, tenant: str | None = None) -> PurgeOut:
        """RunPod's ``purge-queue``: every queued request is cancelled (those in progress run on)."""
        self._active(endpoint_id, tenant)
        now = self.clock()
        values = {
            "status": RequestStatus.CANCELLED.value,
            "finished_at": now,
            "error": "the queue was purged",
        }
        with self.store.write() as tx:
            removed = repo.purge_queued(tx.conn, endpoint_id, values)
        return PurgeOut(removed=removed, status="completed")

    def add_chunks(self, request_id: str, outputs: list[Any]) -> None:
        """Store what a streaming handler yielded for a request still in progress (a controller-run
        worker's chunks; an agent-run worker's come through ``AgentWorkerService.result``)."""
        with self.store.write() as tx:
            row = repo.get_request(tx.conn, request_id)
            if row is not None and row["status"] == RequestStatus.IN_PROGRESS.value:
                repo.add_chunks(tx.conn, request_id, outputs, self.clock(), MAX_STREAM_CHUNKS)

    def stream(self, endpoint_id: str, request_id: str, *, tenant: str | None = None) -> StreamOut:
        """RunPod's ``stream``: the request's status and the chunks not returned before, each once
        (``stream`` is always there, empty when nothing new came)."""
        self._visible_endpoint(endpoint_id, tenant)
        with self.store.write() as tx:
            row = repo.get_request(tx.conn, request_id)
            if row is None or row["endpoint_id"] != endpoint_id:
                raise RequestNotFoundError(request_id)
            chunks = repo.take_chunks(tx.conn, request_id)
        status = request_status(row, self.clock())
        return StreamOut(
            id=status.id,
            status=status.status,
            stream=[StreamChunk(output=chunk) for chunk in chunks],
            error=status.error,
            delayTime=status.delayTime,
            executionTime=status.executionTime,
            workerId=status.workerId,
        )

    def metrics(self, endpoint_id: str, *, tenant: str | None = None) -> MetricsOut:
        """What runpod-flash reads from ``/v2/{id}/metrics``: the health counts and the workers by id."""
        self._active(endpoint_id, tenant)
        now = self.clock()
        with self.store.read() as tx:
            workers = repo.list_workers(tx.conn, endpoint_id)
            counts = repo.count_requests(tx.conn, endpoint_id)
        health = health_counts(workers, counts, now)
        return MetricsOut(
            workers=health.workers,
            jobs=health.jobs,
            readyWorkers=[w["id"] for w in workers if w["state"] in ("idle", "busy")],
            initializingWorkers=[w["id"] for w in workers if w["state"] == "initializing"],
            throttledWorkers=[w["id"] for w in workers if w["state"] == "pending"],
        )

    def request_status(
        self, endpoint_id: str, request_id: str, *, tenant: str | None = None
    ) -> RequestStatusOut:
        """RunPod's status of a request; ``EndpointNotFoundError`` for an endpoint the caller cannot see,
        ``RequestNotFoundError`` for a request that is not the endpoint's."""
        self._visible_endpoint(endpoint_id, tenant)
        with self.store.read() as tx:
            row = repo.get_request(tx.conn, request_id)
        if row is None or row["endpoint_id"] != endpoint_id:
            raise RequestNotFoundError(request_id)
        return request_status(row, self.clock())

    def cancel_request(
        self, endpoint_id: str, request_id: str, *, tenant: str | None = None
    ) -> RequestStatusOut:
        """Cancel a queued or running request; a finished one stays as it is."""
        self._visible_endpoint(endpoint_id, tenant)
        now = self.clock()
        with self.store.write() as tx:
            row = repo.get_request(tx.conn, request_id)
            if row is None or row["endpoint_id"] != endpoint_id:
                raise RequestNotFoundError(request_id)
            if not RequestStatus(row["status"]).terminal:
                repo.update_request(
                    tx.conn, request_id, {"status": RequestStatus.CANCELLED.value, "finished_at": now}
                )
                row = repo.get_request(tx.conn, request_id)
                assert row is not None
        return request_status(row, now)

    def health(self, endpoint_id: str, *, tenant: str | None = None) -> HealthOut:
        self._active(endpoint_id, tenant)
        now = self.clock()
        with self.store.read() as tx:
            workers = repo.list_workers(tx.conn, endpoint_id)
            counts = repo.count_requests(tx.conn, endpoint_id)
        return health_counts(workers, counts, now)

    # ---- the leader's loop ---------------------------------------------------------------------------

    def tick(self, now: datetime | None = None) -> None:
        """One pass over every active endpoint (the leader calls it after each controller step). A failure
        is logged and retried on the next pass; it never costs the leader its lease."""
        at = self.clock() if now is None else now
        try:
            reconcile.tick(self, at)
            self.webhooks.deliver_due(at)
        except Exception:
            log.exception("endpoint tick failed; retrying on the next pass")


def _target(target: str | None, handler: str | None, command: bool = False) -> str:
    if target is None:
        return "local" if handler is not None or command else "builtin"
    if target not in TARGETS:
        raise InvalidSpecError("target", f"{target!r} is not a target", f"use one of {', '.join(TARGETS)}")
    if target == "local" and handler is None and not command:
        raise InvalidSpecError(
            "handler",
            "is required for target local",
            'set handler to "module:function", or command to a RunPod worker\'s argv, in the spec',
        )
    if target != "local" and command:
        raise InvalidSpecError(
            "command", f"runs on Scalar's own nodes, not target {target}", "use target local"
        )
    return target


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    index = min(len(values) - 1, max(0, round(q * (len(values) - 1))))
    return round(values[index], 1)
