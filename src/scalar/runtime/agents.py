"""The controller's side of the agent protocol (docs/agent.md).

- ``AgentService``: join tokens, registration (refusing an incompatible agent), heartbeats (the reply carries
  the desired state: assignments to run, assignments to stop, drain), log chunks by byte offset, and the
  heartbeat leases (READY -> SUSPECT -> LOST, and back to READY when an agent calls again).
- ``AgentBackend`` (``scalar.runtime.agent_backend``): the "provider" the executor calls for work on
  agent-backed nodes: a start becomes an assignment row the node's agent picks up at its next heartbeat.

Everything the engine must hear (a host registered, an attempt's outcome, a lease move) becomes one inbox row
in the same transaction as the table change that caused it, so each is stepped exactly once, by the leader.
Every request is idempotent: a report repeated changes nothing, a log chunk already stored is not stored
twice, a start executed twice creates one assignment.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import secrets
import threading
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, Literal

from scalar import __version__
from scalar.domain.market import NodeEvent, NodeState
from scalar.domain.packing_model import cuda_major_minor
from scalar.engine.codec import event_to_dict
from scalar.engine.events import (
    AgentRegistered,
    AssignmentReported,
    Event,
    HostRegistered,
    HostRemoveRequested,
    NodeReported,
)
from scalar.runtime.secrets import SecretBox, open_env
from scalar.runtime.settings import Settings
from scalar.store import Store
from scalar.store import agents as repo
from scalar.store.auth import AuditEntry, add_audit
from scalar.wire.agent import (
    PROTOCOL,
    AgentOut,
    Assignment,
    AssignmentReport,
    Heartbeat,
    HeartbeatReply,
    JobLogsOut,
    JoinTokenOut,
    JoinTokenRequest,
    LogChunk,
    NodeRemoveOut,
    RegisterReply,
    RegisterRequest,
)

INBOX_KIND = "agent"
TERMINAL_REPORTS = ("exited", "failed_to_start")
LIVE_JOB_STATES = ("SCHEDULED", "RUNNING")
MAX_LOG_READ_BYTES = 1_000_000
LOG_PRUNE_EVERY_S = 60.0  # how often the leader applies [logs] max_bytes_per_tenant and retention_s
REMOVED = "removed"  # the lease state of a removed host's agent: its token is refused (410) from then on
ENDED_NODE_STATES = ("terminated", "failed")
AUDIT_TENANT = "(system)"  # a node serves every tenant


class AgentError(Exception):
    """A refused agent request: ``status`` (HTTP), ``code`` (the problem type) and what to do."""

    def __init__(self, status: int, code: str, message: str, fix: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.fix = fix


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "host"


def _model_name(facts: Mapping[str, Any]) -> str | None:
    gpus = facts.get("gpus") or []
    return str(gpus[0]["model"]) if gpus else None


def _fact_version(value: Any, *, cuda: bool = False) -> str | None:
    """A version the agent reported, or None when it reported none (or, for CUDA, none we can read:
    an unreadable CUDA version counts as unknown, which the packer accepts; docs/endpoints.md)."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    if cuda and cuda_major_minor(text) is None:
        return None
    return text


def incompatible(version: str, protocol: int) -> str | None:
    """Why an agent of this version cannot talk to us, or None."""
    if protocol != PROTOCOL:
        return (
            f"agent protocol {protocol} (version {version}) is not supported by this controller; run scalar "
            f"agent version {__version__} (protocol {PROTOCOL})"
        )
    return None


class AgentService:
    """One control plane's agent endpoint. ``store``, ``settings`` and ``clock`` are the control plane's."""

    def __init__(self, store: Callable[[], Store], settings: Settings, clock: Callable[[], datetime]) -> None:
        self._store = store
        self.settings = settings
        self.clock = clock
        self._leading: tuple[int | None, datetime] | None = None
        self._lock = threading.Lock()
        self._box: SecretBox | None = None
        self._pruned_at: datetime | None = None

    def store(self) -> Store:
        return self._store()

    def secret_box(self) -> SecretBox:
        """The key that opens secret env values (loaded on first use)."""
        if self._box is None:
            self._box = SecretBox.load(self.settings.data_dir)
        return self._box

    def _deliverable(self, spec: Mapping[str, Any], *, with_env: bool = True) -> Assignment:
        """The stored assignment with its secret env values opened: only the agent's copy carries them
        (the stored spec, the API, logs and the audit log keep them sealed). ``with_env`` False: an
        assignment the agent reports it has started needs no environment again, so none is sent."""
        env = open_env(spec.get("env"), self.secret_box()) if with_env else {}
        return Assignment.model_validate({**spec, "env": env})

    # ---- join tokens ---------------------------------------------------------------------------------

    def create_join_token(self, request: JoinTokenRequest) -> JoinTokenOut:
        now = self.clock()
        token = "sjt_" + secrets.token_urlsafe(24)
        expires = now + timedelta(seconds=request.ttl_s)
        row = repo.JoinToken(
            sha256(token),
            request.provider,
            request.tier.upper(),
            request.node_id,
            now,
            expires,
            None,
            None,
            request.price_per_gpu_hour,
        )
        with self._store().write() as tx:
            repo.add_join_token(tx.conn, row)
        return JoinTokenOut(
            token=token,
            provider=row.provider,
            tier=row.tier,
            node_id=row.node_id,
            expires_at=expires,
            price_per_gpu_hour=row.price_per_gpu_hour,
        )

    # ---- registration --------------------------------------------------------------------------------

    def register(self, request: RegisterRequest) -> RegisterReply:
        why = incompatible(request.version, request.protocol)
        if why is not None:
            raise AgentError(
                409, "agent-version", why, f"install scalar {__version__} on the node and restart it"
            )
        now = self.clock()
        facts = request.facts.model_dump(mode="json")
        with self._store().write() as tx:
            if request.join_token is None:
                node_id, token = self._reregister(tx.conn, request, facts, now)
            else:
                node_id, token = self._join(tx, request.join_token, facts, request.version, now)
        s = self.settings
        return RegisterReply(
            node_id=node_id,
            node_token=token,
            heartbeat_s=s.agent_heartbeat_s,
            suspect_after_s=s.agent_suspect_after_s,
            lost_after_s=s.agent_lost_after_s,
            controller_version=__version__,
            protocol=PROTOCOL,
        )

    def _reregister(
        self, conn: Any, request: RegisterRequest, facts: dict[str, Any], now: datetime
    ) -> tuple[str, str]:
        if request.node_id is None or request.node_token is None:
            raise AgentError(
                401, "join-token-missing", "registration needs a join token", "pass --join-token TOKEN"
            )
        agent = self._authenticate(conn, request.node_id, request.node_token)
        kept = {k: agent.facts[k] for k in ("block_id", "removal") if k in agent.facts}
        repo.update_agent(
            conn, agent.node_id, facts={**facts, **kept}, version=request.version, last_seen_at=now
        )
        return agent.node_id, request.node_token

    def _join(
        self, tx: Any, join_token: str, facts: dict[str, Any], version: str, now: datetime
    ) -> tuple[str, str]:
        conn = tx.conn
        token = repo.get_join_token(conn, sha256(join_token))
        if token is None:
            raise AgentError(
                401, "join-token-invalid", "unknown join token", "create one with `scalar join-token`"
            )
        if token.used_at is not None:
            raise AgentError(
                401,
                "join-token-used",
                f"this join token was already used by {token.used_by}",
                "join tokens are single-use: create a new one with `scalar join-token`",
            )
        if token.expires_at <= now:
            raise AgentError(
                401,
                "join-token-expired",
                f"this join token expired at {token.expires_at.isoformat()}",
                "create a new one with `scalar join-token`",
            )
        node_id = token.node_id or f"node-{_slug(str(facts['hostname']))}-{secrets.token_hex(3)}"
        if repo.get_agent(conn, node_id) is not None:
            raise AgentError(
                409, "node-registered", f"node {node_id} already has an agent", "restart that agent"
            )
        node_token = "snt_" + secrets.token_urlsafe(24)
        event: Event
        if token.node_id is None:
            block_id = f"byo-{node_id}"
            facts = {**facts, "block_id": block_id}
            event = self._host_event(
                node_id, block_id, token.provider, token.tier, facts, token.price_per_gpu_hour
            )
        else:
            event = AgentRegistered("inbox", node_id)
        repo.spend_join_token(conn, token.token_sha256, node_id, now)
        repo.add_agent(
            conn,
            repo.AgentRow(
                node_id,
                sha256(node_token),
                token.provider,
                str(facts["hostname"]),
                version,
                facts,
                now,
                now,
                0,
                "ready",
                False,
            ),
        )
        tx.add_inbox(INBOX_KIND, node_id, event_to_dict(event), now=now)
        return node_id, node_token

    @staticmethod
    def _host_event(
        node_id: str,
        block_id: str,
        provider: str,
        tier: str,
        facts: Mapping[str, Any],
        price_per_gpu_hour: Decimal = Decimal(0),
    ) -> HostRegistered:
        gpus = facts.get("gpus") or []
        model = _model_name(facts)
        vram = min((float(g["memory_gb"]) for g in gpus), default=0.0)
        expires = facts.get("contract_expires_at")
        return HostRegistered(
            "inbox",
            node_id=node_id,
            block_id=block_id,
            provider=provider,
            instance_type=f"{len(gpus)}x{model}" if gpus else "cpu",
            gpu_model=model,
            gpu_count=len(gpus),
            vram_per_gpu_gb=vram,
            cpu_cores=float(facts.get("cpu_count") or 0),
            ram_gb=float(facts.get("ram_gb") or 0.0),
            tier=tier,
            end_time=None if not expires else datetime.fromisoformat(str(expires)),
            cuda_version=_fact_version(facts.get("cuda_version"), cuda=True),
            driver_version=_fact_version(facts.get("driver_version")),
            price_per_gpu_hour=price_per_gpu_hour,
        )

    def _authenticate(
        self, conn: Any, node_id: str, node_token: str, *, allow_removed: bool = False
    ) -> repo.AgentRow:
        agent = repo.get_agent(conn, node_id)
        if agent is None or not secrets.compare_digest(agent.token_sha256, sha256(node_token)):
            raise AgentError(
                401,
                "node-token-invalid",
                f"unknown node {node_id} or wrong node token",
                "register again with a new join token (remove the agent's state dir first)",
            )
        if agent.lease_state == REMOVED and not allow_removed:
            raise _removed(node_id)
        return agent

    def node_token_valid(self, node_id: str, node_token: str) -> bool:
        """Whether ``node_token`` is ``node_id``'s (a removed node's too: its call then gets its 410), by a
        read: the API checks this before any write transaction, so a bogus call costs no write lock."""
        with self._store().read() as tx:
            try:
                self._authenticate(tx.conn, node_id, node_token, allow_removed=True)
            except AgentError:
                return False
        return True

    # ---- heartbeats ----------------------------------------------------------------------------------

    def heartbeat(self, beat: Heartbeat) -> HeartbeatReply:
        now = self.clock()
        with self._store().write() as tx:
            agent = self._authenticate(tx.conn, beat.node_id, beat.node_token)
            retired = self._retire(tx, agent, now)
            if not retired:
                return self._beat(tx, agent, beat, now)
        raise _removed(beat.node_id)  # after the commit: the agent's token is refused from now on

    def _beat(self, tx: Any, agent: repo.AgentRow, beat: Heartbeat, now: datetime) -> HeartbeatReply:
        conn = tx.conn
        repo.update_agent(conn, agent.node_id, last_seen_at=now, last_seq=max(agent.last_seq, beat.seq))
        if agent.lease_state != "ready" and repo.set_lease_state(
            conn, agent.node_id, agent.lease_state, "ready"
        ):
            self._node_event(
                tx,
                agent.node_id,
                NodeState.READY,
                f"its agent called again after {agent.lease_state}: rejoined",
                now,
            )
        rows = {r.assignment_id: r for r in repo.node_assignments(conn, agent.node_id)}
        reported = {r.assignment_id: r for r in beat.assignments}
        cancel: list[str] = []
        for report in beat.assignments:
            row = rows.get(report.assignment_id)
            if row is None:
                cancel.append(report.assignment_id)  # not ours (or long gone): stop it
                continue
            self._record_report(tx, row, report, now)
        desired: list[Assignment] = []
        for row in rows.values():
            current = self._is_current(tx, row)
            if not current and not row.cancel_requested:
                repo.update_assignment(conn, row.assignment_id, cancel_requested=True, updated_at=now)
            seen = reported.get(row.assignment_id)
            done = (seen is not None and seen.state in TERMINAL_REPORTS) or row.state in TERMINAL_REPORTS
            if current and not row.cancel_requested:
                if not done:
                    desired.append(self._deliverable(row.spec, with_env=seen is None))
            elif seen is not None and not done:
                cancel.append(row.assignment_id)
        return HeartbeatReply(
            seq=beat.seq,
            heartbeat_s=self.settings.agent_heartbeat_s,
            assignments=desired,
            cancel=cancel,
            # a host being removed starts what was placed on it before (the engine places nothing new)
            drain=agent.drain and "removal" not in agent.facts,
        )

    @staticmethod
    def _is_current(tx: Any, row: repo.AssignmentRow) -> bool:
        """The attempt is the job's current one, on this node, and the job still runs (fencing by attempt)."""
        job = tx.get_projection("jobs", row.job_id)
        if job is None:
            return False
        data = job.data
        on_node = any(p.get("node_id") == row.node_id for p in data.get("placements") or [])
        return bool(
            data.get("state") in LIVE_JOB_STATES
            and on_node
            and int(data.get("preemptions") or 0) + 1 == row.attempt
        )

    def _record_report(
        self, tx: Any, row: repo.AssignmentRow, report: AssignmentReport, now: datetime
    ) -> None:
        body = report.model_dump(mode="json")
        if not body.get("ports"):
            body.pop("ports", None)  # stored as before for an assignment without ports
        if row.state == report.state:
            if row.report != body:  # usage and log size move; the state did not
                repo.update_assignment(tx.conn, row.assignment_id, report=body, updated_at=now)
            return
        if row.state in TERMINAL_REPORTS:
            return  # an outcome is final; a late "running" after "exited" changes nothing
        repo.update_assignment(tx.conn, row.assignment_id, state=report.state, report=body, updated_at=now)
        outcome, reason = _outcome(report)
        if outcome is None:
            return
        event = AssignmentReported("inbox", row.node_id, row.job_id, row.attempt, outcome, reason)
        tx.add_inbox(INBOX_KIND, row.job_id, event_to_dict(event), now=now)

    def _node_event(self, tx: Any, node_id: str, state: NodeState, why: str, now: datetime) -> None:
        event = NodeReported(
            "inbox", NodeEvent(node_id=node_id, block_id="", at=now, state=state, reason=why)
        )
        tx.add_inbox(INBOX_KIND, node_id, event_to_dict(event), now=now)

    # ---- leases (the leader calls this before each tick) ---------------------------------------------

    def check_leases(self, now: datetime, epoch: int | None) -> int:
        """(With the stored job output's bounds applied when due: ``prune_logs``.) Move agents that missed their lease: READY -> SUSPECT after ``agent_suspect_after_s``, then LOST
        after ``agent_lost_after_s``. A new leader counts from when it started leading (agents could not
        reach a controller that was down). Returns how many moved."""
        with self._lock:
            if self._leading is None or self._leading[0] != epoch:
                self._leading = (epoch, now)
            since = self._leading[1]
            due = self._pruned_at is None or (now - self._pruned_at).total_seconds() >= LOG_PRUNE_EVERY_S
            if due:
                self._pruned_at = now
        if due:
            self.prune_logs(now)
        s = self.settings
        moved = 0
        with self._store().read() as tx:  # most ticks nobody is late: no write transaction then
            agents = repo.list_agents(tx.conn)
        if not any(
            (
                (now - max(a.last_seen_at, since)).total_seconds() >= s.agent_suspect_after_s
                and a.lease_state in ("ready", "suspect")
            )
            or ("removal" in a.facts and a.lease_state != REMOVED)
            for a in agents
        ):
            return 0
        with self._store().write() as tx:
            for agent in repo.list_agents(tx.conn):
                if agent.lease_state == REMOVED or self._retire(tx, agent, now):
                    continue  # a removed host is not lost: its block has ended
                quiet_s = (now - max(agent.last_seen_at, since)).total_seconds()
                target = None
                if quiet_s >= s.agent_lost_after_s and agent.lease_state in ("ready", "suspect"):
                    target = "lost"
                elif quiet_s >= s.agent_suspect_after_s and agent.lease_state == "ready":
                    target = "suspect"
                if target is None or not repo.set_lease_state(
                    tx.conn, agent.node_id, agent.lease_state, target
                ):
                    continue
                if target == "lost" and agent.lease_state == "ready":
                    self._node_event(
                        tx, agent.node_id, NodeState.SUSPECT, f"no heartbeat for {quiet_s:g} s", now
                    )
                why = (
                    f"no heartbeat for {quiet_s:g} s (lease: suspect after {s.agent_suspect_after_s:g} s, "
                    f"lost after {s.agent_lost_after_s:g} s)"
                )
                self._node_event(tx, agent.node_id, NodeState(target), why, now)
                moved += 1
        return moved

    # ---- removing a user-owned host (``scalar node remove``) -------------------------------------------

    def remove_node(self, node_id: str, *, force: bool, actor: str) -> NodeRemoveOut:
        """Drain a user-owned host, then end its block and refuse its agent's token (410, the agent exits).

        Nothing new is placed on it; its jobs finish, or with ``force`` are requeued as when the node is lost.
        A node Scalar bought is refused (409); an unknown one is 404. Asking again is harmless (and may add
        ``force``). Audit-logged as ``node.remove``."""
        now = self.clock()
        with self._store().write() as tx:
            conn = tx.conn
            agent = repo.get_agent(conn, node_id)
            node = tx.get_projection("nodes", node_id)
            if agent is None and node is None:
                raise AgentError(
                    404, "not-found", f"no node {node_id}", "list nodes with `scalar nodes` (or GET /agents)"
                )
            if agent is None or "block_id" not in agent.facts:
                block = node.data.get("block_id") if node is not None else None
                raise AgentError(
                    409,
                    "node-not-removable",
                    f"node {node_id} is part of block {block or '?'} that Scalar bought; only a host you added "
                    "(`scalar node add`, or a join token without --node-id) can be removed",
                    "release the block instead: Scalar releases a bought block once it is idle "
                    "([controller].idle_release_s) or at its contract end; cancel its jobs to let it go idle",
                )
            block_id = str(agent.facts["block_id"])
            jobs = [str(j) for j in (node.data.get("jobs") or [])] if node is not None else []
            state: Literal["removing", "removed"] = "removed" if agent.lease_state == REMOVED else "removing"
            if state != REMOVED:
                before = agent.facts.get("removal") or {}
                removal = {
                    "requested_at": str(before.get("requested_at") or now.isoformat()),
                    "force": bool(force or before.get("force")),
                    "actor": actor,
                }
                repo.update_agent(conn, node_id, facts={**agent.facts, "removal": removal}, drain=True)
                event = HostRemoveRequested("inbox", node_id, force=bool(force), actor=actor)
                tx.add_inbox(INBOX_KIND, node_id, event_to_dict(event), now=now)
                data = {"block_id": block_id, "force": bool(force), "jobs": jobs, "provider": agent.provider}
                add_audit(conn, [AuditEntry(now, AUDIT_TENANT, actor, "node.remove", node_id, data)])
        then = (
            "its block has ended and its agent's token is refused"
            if state == REMOVED
            else "its jobs are requeued, then its block ends"
            if force and jobs
            else "its jobs may finish, then its block ends"
            if jobs
            else "its block ends at the next step"
        )
        return NodeRemoveOut(
            node_id=node_id,
            block_id=block_id,
            force=bool(force),
            state=state,
            jobs=jobs,
            message=f"node {node_id}: nothing new is placed on it; {then}",
        )

    def _retire(self, tx: Any, agent: repo.AgentRow, now: datetime) -> bool:
        """A host being removed whose node has ended: refuse its agent's token from now on (True)."""
        removal = agent.facts.get("removal")
        if not removal or agent.lease_state == REMOVED:
            return False
        node = tx.get_projection("nodes", agent.node_id)
        if node is None or node.state not in ENDED_NODE_STATES:
            return False
        if not repo.set_lease_state(tx.conn, agent.node_id, agent.lease_state, REMOVED):
            return False
        data = {"block_id": agent.facts.get("block_id"), "node_state": node.state}
        actor = str(removal.get("actor") or "controller")
        add_audit(tx.conn, [AuditEntry(now, AUDIT_TENANT, actor, "node.removed", agent.node_id, data)])
        return True

    # ---- logs ----------------------------------------------------------------------------------------

    def ship_log(self, chunk: LogChunk) -> int:
        try:
            data = base64.b64decode(chunk.data_b64, validate=True)
        except (binascii.Error, ValueError):
            raise AgentError(
                422, "invalid-request", "data_b64 is not base64", "send the bytes base64-encoded"
            ) from None
        now = self.clock()
        with self._store().write() as tx:
            # a removed host's agent may still ship the output of what it ran (its last words)
            agent = self._authenticate(tx.conn, chunk.node_id, chunk.node_token, allow_removed=True)
            row = repo.get_assignment(tx.conn, chunk.assignment_id)
            if row is None or row.node_id != agent.node_id:
                raise AgentError(
                    404,
                    "not-found",
                    f"no assignment {chunk.assignment_id} on node {agent.node_id}",
                    "ship only your own",
                )
            stored = repo.log_length(tx.conn, row.assignment_id)
            if chunk.offset > stored:
                raise AgentError(
                    409,
                    "log-gap",
                    f"chunk at offset {chunk.offset}; {stored} bytes are stored (expected_offset {stored})",
                    f"send from offset {stored}",
                )
            fresh = data[stored - chunk.offset :]
            if fresh:
                repo.add_log_chunk(tx.conn, row.assignment_id, row.job_id, row.attempt, stored, fresh, now)
            return stored + len(fresh)

    def prune_logs(self, now: datetime) -> list[str]:
        """Apply ``[logs]``: delete the output of finished jobs older than ``retention_s``, then, for each
        tenant storing more than ``max_bytes_per_tenant``, its oldest finished jobs' output until it fits.
        A running job's output is never deleted. Returns the jobs whose output went."""
        with self._store().write() as tx:
            stored = repo.stored_logs(tx.conn)
            doomed = logs_to_prune(
                stored,
                now,
                max_bytes_per_tenant=self.settings.logs_max_bytes_per_tenant,
                retention_s=self.settings.logs_retention_s,
            )
            if doomed:
                repo.delete_job_logs(tx.conn, doomed)
        return doomed

    def job_logs(self, job_id: str, offset: int, attempt: int | None) -> JobLogsOut | None:
        """The job's output from ``offset`` on (its latest attempt unless ``attempt``); None: no such job."""
        with self._store().read() as tx:
            job = tx.get_projection("jobs", job_id)
            if job is None:
                return None
            rows = repo.job_assignments(tx.conn, job_id)
            if attempt is not None:
                rows = [r for r in rows if r.attempt == attempt]
            row = rows[-1] if rows else None
            data = (
                b"" if row is None else repo.read_log(tx.conn, row.assignment_id, offset, MAX_LOG_READ_BYTES)
            )
            # finished: the job has ended and everything its agent wrote has been shipped and read
            finished = job.data.get("state") not in ("PENDING", "SCHEDULED", "RUNNING")
            if row is not None:
                shipped = (row.report or {}).get("log_bytes")
                if shipped is not None and offset + len(data) < int(shipped):
                    finished = False
        return JobLogsOut(
            job_id=job_id,
            attempt=None if row is None else row.attempt,
            offset=offset,
            next_offset=offset + len(data),
            data=data.decode("utf-8", errors="replace"),
            finished=finished,
        )

    def agents(self) -> list[AgentOut]:
        with self._store().read() as tx:
            rows = repo.list_agents(tx.conn)
        return [
            AgentOut(
                node_id=a.node_id,
                provider=a.provider,
                hostname=a.hostname,
                version=a.version,
                lease_state=a.lease_state,
                last_seen_at=a.last_seen_at.isoformat(),
                last_seq=a.last_seq,
                facts=a.facts,
            )
            for a in rows
        ]


def allocated_ports(conn: Any, job: Mapping[str, Any]) -> list[int] | None:
    """The TCP ports the agent allocated for the job's current attempt, as its heartbeats reported them
    (kept in the assignment's report); None for a job without ports or before its agent reported them."""
    if not job.get("ports") or not job.get("id"):
        return None
    attempt = int(job.get("preemptions") or 0) + 1
    for row in repo.job_assignments(conn, str(job["id"])):
        ports = (row.report or {}).get("ports")
        if row.attempt == attempt and ports:
            return [int(p) for p in ports]
    return None


def _removed(node_id: str) -> AgentError:
    return AgentError(
        410,
        "node-removed",
        f"node {node_id} was removed (`scalar node remove`): its block has ended and its token is revoked",
        "nothing to do: the agent stops; to add the host again, run `scalar node add` (or a new join token "
        "with a fresh --state-dir)",
    )


def _outcome(report: AssignmentReport) -> tuple[str | None, str | None]:
    if report.state == "running":
        return "running", None
    if report.state == "failed_to_start":
        return "failed", f"could not start: {report.error or 'no reason given'}"
    if report.state == "exited":
        if report.oom:
            return "failed", "OOM: killed for exceeding its memory limit"
        if report.signal is not None:
            return "failed", f"killed by signal {report.signal}"
        if report.exit_code == 0:
            return "succeeded", None
        return "failed", f"exited with code {report.exit_code}"
    return None, None


def logs_to_prune(
    stored: list[repo.StoredLog], now: datetime, *, max_bytes_per_tenant: int, retention_s: float
) -> list[str]:
    """The jobs whose stored output goes: every finished job's whose newest chunk is older than
    ``retention_s``; then, per tenant over ``max_bytes_per_tenant``, finished jobs' output from the
    oldest (newest chunk first received) on, until the tenant's total fits. Running jobs are kept."""
    cutoff = now - timedelta(seconds=retention_s)
    doomed = [log.job_id for log in stored if log.finished and log.last_at < cutoff]
    gone = set(doomed)
    by_tenant: dict[str, list[repo.StoredLog]] = {}
    for log in stored:
        if log.job_id not in gone:
            by_tenant.setdefault(log.tenant, []).append(log)
    for logs in by_tenant.values():
        total = sum(log.size_bytes for log in logs)
        for log in sorted((x for x in logs if x.finished), key=lambda x: (x.last_at, x.job_id)):
            if total <= max_bytes_per_tenant:
                break
            doomed.append(log.job_id)
            total -= log.size_bytes
    return doomed
