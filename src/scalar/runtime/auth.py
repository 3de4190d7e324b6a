"""API tokens, principals and the audit log, over the store (docs/security.md).

A token reads ``scalar.<id>.<secret>``: ``id`` (``tok_`` + 16 hex digits) finds the row, the secret (256
random bits) proves it. Only the SHA-256 of the secret is stored, so a copy of the database yields no
usable token; SHA-256 (not a slow password hash) is enough for a random 256-bit secret. The secret is
compared with ``hmac.compare_digest``, and an unknown id costs the same comparison as a known one.

Every purchase and release the controller decides is attributed to the tenants of the jobs it serves
(``audit_actions``), in the transaction that stores the action; capacity bought for no job (a scale
group's ``min_slices``) is attributed to ``(system)``.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from scalar.engine.actions import Action, BuyCapacity, ReleaseBlock, ReleaseNodes
from scalar.engine.state import ClusterState
from scalar.store import Store, Tx
from scalar.store import auth as repo
from scalar.store import budget as ledger
from scalar.store.auth import AuditEntry, StoredAuditEntry, StoredToken
from scalar.store.schema_auth import ROLES
from scalar.wire.auth import AuditEntryOut, TokenCreated, TokenOut

DEFAULT_TENANT = "default"
SYSTEM_TENANT = "(system)"
CONTROLLER_ACTOR = "controller"
TOKEN_FILE_NAME = "admin.token"
TENANT_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
MAX_TOKEN_NAME = 200
_TOKEN_SHAPE = re.compile(r"^scalar\.(tok_[0-9a-f]{16})\.([A-Za-z0-9_-]{20,100})$")
_DUMMY_SHA256 = hashlib.sha256(b"scalar: no such token").hexdigest()
DEFAULT_TOKEN_LIFETIME = timedelta(days=90)
MAX_TOKEN_LIFETIME = timedelta(days=3650)
EXPIRES_IN_PATTERN = r"^(never|[1-9][0-9]{0,6}[smhd])$"
_EXPIRES_IN = re.compile(EXPIRES_IN_PATTERN)
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class AuthError(ValueError):
    """A bad tenant, role or name; the message says which and how to fix it."""

    def __init__(self, field: str, problem: str, fix: str) -> None:
        self.field = field
        self.problem = problem
        self.fix = fix
        super().__init__(f"{field}: {problem}; {fix}")


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the token's id, its tenant and role."""

    token_id: str
    tenant: str
    role: str

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


# When authentication is off (``scalar up --no-auth``, on loopback only), every request acts as this.
AUTH_OFF = Principal("(auth off)", DEFAULT_TENANT, "admin")


def sha256_hex(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def new_token() -> tuple[str, str, str]:
    """A fresh ``(token_id, secret, token)``."""
    token_id = "tok_" + secrets.token_hex(8)
    secret = secrets.token_urlsafe(32)
    return token_id, secret, f"scalar.{token_id}.{secret}"


def parse_token(token: str) -> tuple[str, str] | None:
    """``(token_id, secret)`` of a well-formed token, else ``None``."""
    match = _TOKEN_SHAPE.match(token.strip()) if len(token) <= 200 else None
    return None if match is None else (match.group(1), match.group(2))


def check_tenant(tenant: str) -> str:
    if not isinstance(tenant, str) or not TENANT_PATTERN.match(tenant):
        raise AuthError(
            "tenant",
            f"is not a tenant name, got {str(tenant)[:70]!r}",
            "use 1 to 64 lowercase letters, digits, '-' or '_', starting with a letter or digit",
        )
    return tenant


def check_role(role: str) -> str:
    if role not in ROLES:
        raise AuthError("role", f"is not a role, got {str(role)[:20]!r}", "use user or admin")
    return role


def parse_expires_in(text: str | None) -> timedelta | None:
    """A token's lifetime: ``None``/empty is the default (90 days), ``never`` is ``None`` (no expiry),
    ``30d``, ``12h``, ``45m``, ``3600s`` a duration of at most ten years."""
    if text is None or not str(text).strip():
        return DEFAULT_TOKEN_LIFETIME
    value = str(text).strip().lower()
    if not _EXPIRES_IN.match(value):
        raise AuthError(
            "expires_in",
            f"is not a lifetime, got {value[:20]!r}",
            "use never or a number followed by s, m, h or d (e.g. 30d, 12h)",
        )
    if value == "never":
        return None
    lifetime = timedelta(seconds=int(value[:-1]) * _UNIT_S[value[-1]])
    if lifetime > MAX_TOKEN_LIFETIME:
        raise AuthError("expires_in", "is longer than ten years", "use at most 3650d, or never")
    return lifetime


def token_out(token: StoredToken) -> TokenOut:
    """A token as the API shows it: never the secret, nor its hash."""
    return TokenOut(
        id=token.id,
        tenant=token.tenant,
        role=token.role,
        name=token.name,
        created_at=token.created_at.isoformat(),
        revoked_at=None if token.revoked_at is None else token.revoked_at.isoformat(),
        expires_at=None if token.expires_at is None else token.expires_at.isoformat(),
    )


def audit_out(entry: StoredAuditEntry) -> AuditEntryOut:
    return AuditEntryOut(
        id=entry.id,
        at=entry.at.isoformat(),
        tenant=entry.tenant,
        actor=entry.actor,
        action=entry.action,
        entity_id=entry.entity_id,
        data=entry.data or {},
    )


class TokenService:
    """Tokens and the audit log of one store."""

    def __init__(self, store: Callable[[], Store], clock: Callable[[], datetime]) -> None:
        self._store = store
        self._clock = clock

    def create(
        self,
        tenant: str,
        role: str,
        name: str | None = None,
        *,
        actor: str = "(local)",
        expires_in: str | None = None,
    ) -> TokenCreated:
        """A new token; the result's ``token`` is the only time the token is shown. ``expires_in``:
        see ``parse_expires_in`` (default 90 days; ``never`` for none)."""
        check_tenant(tenant)
        check_role(role)
        lifetime = parse_expires_in(expires_in)
        if name is not None and (len(name) > MAX_TOKEN_NAME or not name.isprintable()):
            raise AuthError(
                "name", "is too long or not printable", f"give at most {MAX_TOKEN_NAME} characters"
            )
        token_id, secret, token = new_token()
        now = self._clock()
        expires_at = None if lifetime is None else now + lifetime
        stored = StoredToken(token_id, tenant, role, name, sha256_hex(secret), now, None, expires_at)
        with self._store().write() as tx:
            repo.insert_token(tx.conn, stored)
            repo.add_audit(
                tx.conn, [AuditEntry(now, tenant, actor, "token.create", token_id, {"role": role})]
            )
        return TokenCreated(**token_out(stored).model_dump(), token=token)

    def authenticate(self, token: str) -> Principal | None:
        """The principal of a valid, unrevoked, unexpired token, else ``None`` (whatever was wrong)."""
        parsed = parse_token(token)
        token_id, secret = parsed if parsed is not None else ("", "")
        stored = None
        if parsed is not None:
            with self._store().read() as tx:
                stored = repo.get_token(tx.conn, token_id)
        expected = stored.secret_sha256 if stored is not None else _DUMMY_SHA256
        matches = hmac.compare_digest(sha256_hex(secret), expected)
        if stored is None or not matches or stored.revoked_at is not None:
            return None
        if stored.expires_at is not None and self._clock() >= stored.expires_at:
            return None
        return Principal(stored.id, stored.tenant, stored.role)

    def list_all(self) -> list[TokenOut]:
        with self._store().read() as tx:
            return [token_out(t) for t in repo.list_tokens(tx.conn)]

    def revoke(self, token_id: str, *, actor: str = "(local)") -> TokenOut:
        """Revoke a token (at once: the next request with it is refused); ``KeyError`` if unknown."""
        now = self._clock()
        with self._store().write() as tx:
            stored = repo.get_token(tx.conn, token_id)
            if stored is None:
                raise KeyError(token_id)
            if repo.revoke_token(tx.conn, token_id, at=now):
                repo.add_audit(tx.conn, [AuditEntry(now, stored.tenant, actor, "token.revoke", token_id)])
            stored = repo.get_token(tx.conn, token_id)
        assert stored is not None
        return token_out(stored)

    def foreign_job_ids(self, tenant: str, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` are other tenants' jobs."""
        with self._store().read() as tx:
            return repo.foreign_job_ids(tx.conn, tenant, ids)

    def other_tenants(self, tenant: str) -> set[str]:
        """Every tenant's name but ``tenant``'s: of the tokens and of the spend limits (budget scopes)."""
        with self._store().read() as tx:
            names = {t.tenant for t in repo.list_tokens(tx.conn)}
            names.update(row.scope for row in ledger.read_limits(tx.conn))
        return names - {tenant, GLOBAL_SCOPE}

    def audit(
        self,
        tenant: str | None = None,
        action: str | None = None,
        after_id: int = 0,
        limit: int = 100,
        before_id: int | None = None,
    ) -> list[AuditEntryOut]:
        """Audit rows past ``after_id`` in the order written; with ``before_id``: the rows before it,
        newest first (a page back)."""
        with self._store().read() as tx:
            rows = repo.list_audit(
                tx.conn, tenant=tenant, action=action, after_id=after_id, limit=limit, before_id=before_id
            )
        return [audit_out(r) for r in rows]


# ---- jobs by tenant ----------------------------------------------------------------------------------


def owner_of(job: dict[str, Any]) -> str:
    return str(job.get("tenant") or DEFAULT_TENANT)


def list_jobs_of_tenant(
    tx: Tx,
    tenant: str,
    state: str | None,
    limit: int,
    offset: int,
    newest_first: bool = False,
    after: str | None = None,
) -> list[dict[str, Any]]:
    rows = repo.list_jobs_of_tenant(
        tx.conn, tenant, state, limit=limit, offset=offset, descending=newest_first, after=after
    )
    return [dict(r.data) for r in rows]


# ---- what a tenant may see: one redaction step at the API's boundary ----------------------------------

OTHER_TENANT = "another tenant's job"
"""What a non-admin sees instead of another tenant's job id, wherever it appears in an answer (job ids in
``/nodes``, ``/blocks``, ``/autoscaler/status``, ``/status``, ``/costs``; ids inside reasons, explanations and
stories). Counts and GPU maps are kept: capacity stays visible."""
OTHER_TENANT_NAME = "another tenant"
"""What a non-admin sees instead of another tenant's name (``tenant team-b``, ``(team-b's)``, a ``tenant``
field)."""
JOB_ID_KEYS = frozenset({"job_id", "job_ids", "jobs", "for_jobs", "bought_for_jobs", "example", "subject"})
_JOB_ID_SUFFIXES = ("job_id", "job_ids", "task_id", "task_ids", "_jobs")
TENANT_KEYS = frozenset({"by_tenant", "tenants"})
SCOPED_LISTS = frozenset({"limits", "usage"})
"""Lists of per-scope rows (``GET /budgets``): a non-admin keeps the global rows and its own tenant's."""
GLOBAL_SCOPE = "global"
# A job id as the control plane makes them (runtime.jobs.new_job_id), found inside any text.
JOB_ID_IN_TEXT = re.compile(r"job-\d{8}T\d{6}-[0-9a-f]{6}")


def _candidate_ids(value: Any, under_id_key: bool, out: set[str]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _candidate_ids(item, key in JOB_ID_KEYS or str(key).endswith(_JOB_ID_SUFFIXES), out)
    elif isinstance(value, list):
        for item in value:
            _candidate_ids(item, under_id_key, out)
    elif isinstance(value, str):
        if under_id_key:
            out.add(value)
        out.update(JOB_ID_IN_TEXT.findall(value))


class _Redaction:
    def __init__(self, tenant: str, foreign_ids: set[str], foreign_tenants: set[str]) -> None:
        self.tenant = tenant
        self.foreign_ids = foreign_ids
        self.foreign_tenants = foreign_tenants
        self.ids: re.Pattern[str] | None = None
        if foreign_ids:
            alternatives = "|".join(re.escape(i) for i in sorted(foreign_ids, key=len, reverse=True))
            self.ids = re.compile(r"(?<![\w.-])(?:job )?(" + alternatives + r")(?![\w-])")
        self.names: re.Pattern[str] | None = None
        if foreign_tenants:
            alternatives = "|".join(re.escape(t) for t in sorted(foreign_tenants, key=len, reverse=True))
            self.names = re.compile(
                r"\btenant (?:" + alternatives + r")(?![\w-])|(?<=\()(?:" + alternatives + r")(?='s\))"
            )

    def text(self, value: str) -> str:
        if value in self.foreign_ids:
            return OTHER_TENANT
        if self.ids is not None:
            value = self.ids.sub(OTHER_TENANT, value)
        if self.names is not None:
            value = self.names.sub(OTHER_TENANT_NAME, value)
        return value

    def visible_row(self, item: Any) -> bool:
        scope = item.get("scope") if isinstance(item, dict) else None
        return scope is None or scope in (GLOBAL_SCOPE, self.tenant)

    def apply(self, value: Any) -> Any:
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, item in value.items():
                if key in TENANT_KEYS and isinstance(item, dict):
                    out[key] = {k: v for k, v in item.items() if k == self.tenant}
                elif key in TENANT_KEYS and isinstance(item, list):
                    out[key] = [r for r in item if not isinstance(r, dict) or r.get("tenant") == self.tenant]
                elif key == "tenant" and item in self.foreign_tenants:
                    out[key] = OTHER_TENANT_NAME
                elif key in SCOPED_LISTS and isinstance(item, list):
                    out[key] = [self.apply(r) for r in item if self.visible_row(r)]
                else:
                    out[key] = self.apply(item)
            return out
        if isinstance(value, list):
            return [self.apply(item) for item in value]
        if isinstance(value, str):
            return self.text(value)
        return value


def redact_view(
    payload: Any,
    tenant: str,
    foreign_of: Callable[[str, Sequence[str]], set[str]],
    other_tenants: Callable[[str], set[str]] | None = None,
) -> Any:
    """``payload`` as ``tenant`` (not an admin) may see it: every other tenant's job id (under a job id key,
    and wherever it appears in a string: reasons, explanations, stories) becomes ``another tenant's job``;
    another tenant's name (``tenant X``, ``(X's)``, a field holding it) becomes ``another tenant``;
    ``by_tenant`` and ``tenants`` keep only ``tenant``'s entry; per-scope rows (``limits``, ``usage``) keep
    the global and ``tenant``'s. ``foreign_of(tenant, ids)``: which ids are others' jobs;
    ``other_tenants(tenant)``: the other tenants' names. A pydantic model (or a list of them) is redacted as
    the JSON it is sent as and validated back into its class, so a typed answer cannot bypass this step.
    The input is not changed."""
    if isinstance(payload, BaseModel):  # a typed answer: redacted as the JSON it is sent as, then re-typed
        return type(payload).model_validate(
            redact_view(payload.model_dump(mode="json", by_alias=True), tenant, foreign_of, other_tenants)
        )
    if isinstance(payload, list) and any(isinstance(item, BaseModel) for item in payload):
        return [redact_view(item, tenant, foreign_of, other_tenants) for item in payload]
    candidates: set[str] = set()
    _candidate_ids(payload, False, candidates)
    foreign = foreign_of(tenant, sorted(candidates)) if candidates else set()
    names = other_tenants(tenant) if other_tenants is not None else set()
    return _Redaction(tenant, foreign, names - {tenant}).apply(payload)


# ---- the audit log of the controller's purchases and releases ------------------------------------------


def _tenants_of(jobs: Sequence[str], state: ClusterState) -> dict[str, list[str]]:
    by_tenant: dict[str, list[str]] = {}
    for job_id in jobs:
        rec = state.jobs.get(job_id)
        tenant = rec.spec.tenant if rec is not None else SYSTEM_TENANT
        by_tenant.setdefault(tenant, []).append(job_id)
    return by_tenant or {SYSTEM_TENANT: []}


def audit_entries(actions: Sequence[Action], state: ClusterState, now: datetime) -> list[AuditEntry]:
    """One row per purchase or release and tenant it serves (its jobs' tenants; ``(system)`` if none)."""
    entries: list[AuditEntry] = []
    for action in actions:
        if isinstance(action, BuyCapacity):
            request = action.request
            for tenant, jobs in sorted(_tenants_of(action.for_jobs, state).items()):
                data = {
                    "provider": request.provider,
                    "instance_type": request.instance_type,
                    "node_count": request.node_count,
                    "gpus_per_node": request.gpus_per_node,
                    "duration_s": request.duration_s,
                    "limit_price_per_gpu_hour": None
                    if request.limit_price_per_gpu_hour is None
                    else str(request.limit_price_per_gpu_hour),
                    "tier": str(request.tier),
                    "group": action.group,
                    "for_jobs": jobs,
                    "reason": action.reason.code,
                }
                entries.append(AuditEntry(now, tenant, CONTROLLER_ACTOR, "buy", action.action_id, data))
        elif isinstance(action, (ReleaseBlock, ReleaseNodes)):
            block = state.blocks.get(action.block_id)
            order = state.orders.get(block.order_key) if block is not None and block.order_key else None
            bought_for = order.for_jobs if order is not None else ()
            for tenant, served in sorted(_tenants_of(bought_for, state).items()):
                data = {
                    "provider": action.provider,
                    "block_id": action.block_id,
                    "why": action.why,
                    "bought_for_jobs": served,
                    "reason": action.reason.code,
                }
                if isinstance(action, ReleaseNodes):
                    data["node_ids"] = list(action.node_ids)
                entries.append(AuditEntry(now, tenant, CONTROLLER_ACTOR, "release", action.action_id, data))
    return entries


def audit_actions(
    tx: Tx, actions: Sequence[Action], state: ClusterState, now: datetime, batch_id: int | None
) -> None:
    """Write the audit rows of ``actions`` in ``tx`` (the transaction that stores the actions)."""
    repo.add_audit(tx.conn, audit_entries(actions, state, now), batch_id=batch_id)


# ---- the local admin token of ``scalar up`` -------------------------------------------------------------


def token_file(data_dir: Path) -> Path:
    return Path(data_dir) / TOKEN_FILE_NAME


def read_token_file(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text or None


def write_token_file(path: Path, token: str) -> None:
    """Write ``token`` readable by its owner only (0600), replacing any file there."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(token + "\n")
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def ensure_local_admin_token(service: TokenService, data_dir: Path) -> str | None:
    """The first start's admin token: created (tenant ``default``), written to ``<data_dir>/admin.token``
    (0600) and returned to be printed once. ``None`` when the file already holds a valid token."""
    path = token_file(data_dir)
    existing = read_token_file(path)
    if existing is not None and service.authenticate(existing) is not None:
        return None
    created = service.create(DEFAULT_TENANT, "admin", "local admin (scalar up)", expires_in="never")
    token = created.token
    write_token_file(path, token)
    return token


def is_loopback_only(host: str) -> bool:
    """Whether ``host`` names this machine's loopback only (``127.0.0.1``, ``::1``, ``localhost``), so
    no other machine can connect. ``0.0.0.0``, ``::`` and any other address are not."""
    import ipaddress
    import socket

    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    addresses = {info[4][0] for info in infos}
    return bool(addresses) and all(ipaddress.ip_address(str(a).split("%")[0]).is_loopback for a in addresses)
