"""``ControlPlane``: the engine driven in real time, with a leader lease and an action executor.

INTERFACE CHANGES (for the API/CLI helper; the rest is as in /tmp/controlplane-interface.md):
- ``load_settings(config_path=None, overrides=None, env=None)``: all three arguments optional; ``overrides``
  keys are ``Settings`` field names (``data_dir``, ``host``, ``port``, ``time_scale``, ``market_seed``,
  ``demo``, ``database_url``, ``tick_s``...), ``None`` values ignored.
- ``Settings()`` is valid (every field has a default); extra fields: ``boot_failure_rate``,
  ``executor_interval_s``, ``executor_batch``, ``action_stale_after_s``, ``retry_backoff_s``,
  ``retry_backoff_max_s``, ``park_ttl_s``, ``lease_name``; ``providers`` is a ``ProvidersSettings``
  (``enabled`` built-in market providers, ``market_database_url``).
- ``ControlPlane.open()`` opens the store and the market without starting threads (a client process that
  only submits and reads); ``start()`` calls it. ``ControlPlane`` is a context manager (start/stop).
- ``ControlPlane.run_executor_once() -> int`` executes the claimable actions once (tests drive it).
- Job dicts also carry ``reason_code`` and ``preemptions``; ``cancel_job`` adds ``cancel_requested: true``.
- ``health()``: ``status`` (ok | starting | degraded) and ``problem`` (a code), ``role``, ``last_step_at``, and
  for admins ``database``, ``holder``, ``epoch``, ``backend``, ``lease_holder``, ``lease_expires_at``, ``error``.
- ``explain_job(job_id) -> list[str] | None``: the leader's explanation lines (``None`` on a follower or for
  an unknown job); ``story(entity_id)`` reads the stored decisions (any process).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

from scalar.domain.arbitrage import WorkloadRequirements, find_optimal_placement
from scalar.domain.offers import Offer
from scalar.domain.orderbook import analyze_orderbook
from scalar.domain.reasons import Reason
from scalar.engine import JobCancelRequested, JobSubmitted
from scalar.engine.codec import event_to_dict
from scalar.engine.validation import validate_job_spec
from scalar.providers.base import Provider, ProviderError
from scalar.providers.sim import BuiltinMarket
from scalar.runtime import auth as auth_mod
from scalar.runtime import budgets as budgets_mod
from scalar.runtime import preview as job_preview
from scalar.runtime import secrets as secrets_mod
from scalar.runtime import views_market
from scalar.runtime.agent_backend import AGENT_PROVIDER, AgentBackend, AgentNode
from scalar.runtime.agents import AgentService, allocated_ports
from scalar.runtime.endpoints.service import EndpointService
from scalar.runtime.feed import PriceCollector, Source
from scalar.runtime.jobs import ACCEPTED_REASON, new_job_id, spec_dict, spec_from_fields
from scalar.runtime.k8s_backend import KubernetesAgents, with_kubernetes_agents
from scalar.runtime.k8s_pods import KubernetesConfigError
from scalar.runtime.leader import PUBLISHED_OFFERS, Leader, decode_offers
from scalar.runtime.live_sellers import (
    Sellers,
    builtin_only,
    choose_sellers,
    live_books,
    nodes_mode,
    with_agents,
    with_market_clock,
)
from scalar.runtime.market_view import (
    SourcedOffer,
    aggregate_market,
    offer_row,
    quotable,
    quote_json,
    select_offers,
    sort_offers,
    sourced,
)
from scalar.runtime.prices import LivePrices, RealProvider, real_providers
from scalar.runtime.settings import Settings, SettingsError
from scalar.runtime.views import LEADER_WAIT_S, ClusterViews
from scalar.store import CANCEL, SUBMIT, NotLeaderError, Store
from scalar.wire.agent import JoinTokenRequest
from scalar.wire.orderbook import build_orderbook_response

log = logging.getLogger(__name__)


PUBLISHED_OFFERS_FRESH_S = (
    1.0  # how long an API replica reuses the leader's stored offers before reading again
)


def utc_now() -> datetime:
    return datetime.now(UTC)


class JobRejectedError(Exception):
    """A submission refused at once; ``reasons`` name the field or resource and how to fix it."""

    def __init__(self, reasons: list[Reason]) -> None:
        self.reasons = list(reasons)
        super().__init__("job refused: " + "; ".join(r.message for r in self.reasons))


class ControlPlane:
    """One control-plane process. Several may run against one database: exactly one leads (lease)."""

    def __init__(
        self,
        settings: Settings,
        *,
        clock: Callable[[], datetime] = utc_now,
        providers: Mapping[str, Provider] | None = None,
        live_env: Mapping[str, str] | None = None,
        live_providers: Sequence[RealProvider] | None = None,
    ) -> None:
        """``live_env`` (default ``os.environ``) configures the real providers whose prices are collected;
        ``live_providers`` gives them directly (tests)."""
        self.settings = settings
        self.clock = clock
        self._given_providers = providers
        self.store: Store | None = None
        self.market: BuiltinMarket | None = None
        self.providers: Mapping[str, Provider] = {}
        self._leader: Leader | None = None
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._open_lock = threading.Lock()
        self._offers_cache: tuple[float, tuple[Offer, ...]] | None = None
        self._live_env = live_env
        self._live_providers = live_providers
        self.live: LivePrices | None = None
        self._secret_box: secrets_mod.SecretBox | None = None
        self.agents = AgentService(lambda: self._opened()[0], settings, clock)  # node agents (docs/agent.md)
        self.sellers: Sellers | None = None  # who sells under each provider name (runtime/live_sellers.py)
        self._endpoints: EndpointService | None = None  # serverless endpoints (runtime/endpoints/)
        self.kubernetes: KubernetesAgents | None = (
            None  # [kubernetes]: agents as pods (runtime/k8s_backend.py)
        )

    # ---- lifecycle -----------------------------------------------------------------------------------

    def open(self) -> None:
        """Open (and migrate) the store and the market; no threads. Idempotent."""
        with self._open_lock:
            if self.store is not None:
                return
            s = self.settings
            specs = self._live_providers
            if specs is None:
                specs = real_providers(os.environ if self._live_env is None else self._live_env)
            store = Store.open(s.database_url)
            try:
                if self._given_providers is None:
                    # an enabled real provider that can buy replaces the built-in seller of its name
                    self.sellers = choose_sellers(specs, s.providers.enabled)
                    nodes_mode(s, self.sellers, self.agents)  # [providers.sfcompute] buy_via = "nodes"
                    specs = self.sellers.specs
                    self.settings = s = with_agents(s, self.sellers)  # real nodes run work via the agent
                    self.settings = s = with_market_clock(s, self.sellers.builtin_names)
                    market = BuiltinMarket(
                        s.market_database_url, s.market_config(), providers=self.sellers.builtin_names
                    )
                    self.market = market
                    self.providers = {**market.providers(), **self.sellers.live}
                    sources = [Source("builtin", market.events_since), *self.sellers.sources()]
                else:
                    self.providers = dict(self._given_providers)
                    # providers handed in run on the built-in market's clock (it and its test doubles)
                    self.settings = s = with_market_clock(s, self.providers)
                    sources = [Source(n, p.events_since) for n, p in sorted(self.providers.items())]
                if s.kubernetes is not None:  # bought nodes of these providers get an agent pod
                    self.settings = s = with_kubernetes_agents(s)
                    self.kubernetes = self._kubernetes_agents(s, store)
            except BaseException:
                store.close()
                raise
            # work on agent-backed nodes goes to their agents (runtime/agent_backend.py)
            executing = {**self.providers, AGENT_PROVIDER: AgentBackend(lambda: store)}
            self._leader = Leader(store, s, executing, sources, self.clock)
            budgets_mod.seed_limits(store, s.controller.budgets, self.clock())
            self.store = store
            self.live = LivePrices(specs, clock=self.clock, record=self._record_prices)
            if self.sellers is not None:
                self.live.roles = self.sellers.roles()

    def _kubernetes_agents(self, s: Settings, store: Store) -> KubernetesAgents:
        cfg = s.kubernetes
        assert cfg is not None

        def join_token(node: AgentNode) -> str:
            request = JoinTokenRequest(
                provider=node.provider, tier=node.tier, ttl_s=cfg.join_token_ttl_s, node_id=node.node_id
            )
            return str(self.agents.create_join_token(request)["token"])

        try:
            return KubernetesAgents.for_control_plane(s, lambda: store, join_token)
        except KubernetesConfigError as err:
            raise SettingsError("[kubernetes]", str(err)) from None

    def start(self) -> None:
        """Open the store (migrating it), the market, and start the leader and executor threads."""
        self.open()
        if self._threads:
            return
        self._stop.clear()
        self._threads = [
            threading.Thread(target=self._leader_loop, name="scalar-leader", daemon=True),
            threading.Thread(target=self._executor_loop, name="scalar-executor", daemon=True),
        ]
        if self.kubernetes is not None:  # only the leader creates and deletes agent pods
            self._threads.append(
                threading.Thread(
                    target=self.kubernetes.run,
                    args=(self._stop, lambda: self.is_leader),
                    name="scalar-kubernetes",
                    daemon=True,
                )
            )
        for thread in self._threads:
            thread.start()
        if self.live is not None and self.live.enabled:
            self.live.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the threads, give the lease up (a standby takes over at once), close. Safe to call twice."""
        self._stop.set()
        leader = self._leader
        if leader is not None:
            leader.actions_added.set()
        for thread in self._threads:
            thread.join(timeout_s)
        self._threads = []
        if self.live is not None:
            self.live.stop()
            self.live = None
        if self.sellers is not None:
            self.sellers.close()
            self.sellers = None
        if self.kubernetes is not None:
            self.kubernetes.close()
            self.kubernetes = None
        if leader is not None and self.store is not None:
            with leader.lock:
                if leader.fence is not None:
                    try:
                        self.store.release(self.settings.lease_name, self.settings.holder)
                    except Exception:  # the database may be gone; the lease then simply expires
                        log.warning("could not release the lease", exc_info=True)
                    leader.step_down()
        if leader is not None:
            leader.close()
        if self._endpoints is not None:
            self._endpoints.close()
        if self.market is not None:
            self.market.close()
            self.market = None
        if self.store is not None:
            self.store.close()
            self.store = None
        self._leader = None

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _opened(self) -> tuple[Store, Leader]:
        self.open()
        assert self.store is not None and self._leader is not None
        return self.store, self._leader

    # ---- the loops -----------------------------------------------------------------------------------

    def run_once(self) -> None:
        """One leader iteration at ``clock()``: acquire or renew the lease (rebuilding on a new epoch), then
        collect prices when due, poll node events, drain the inbox and step with a Tick."""
        _, leader = self._opened()
        now = self.clock()
        with leader.lock:
            try:
                if leader.acquire(now):
                    self.agents.check_leases(now, leader.epoch)
                    leader.tick(now)
            except NotLeaderError:
                pass
        if self.is_leader:
            self.endpoints.tick(now)

    @property
    def endpoints(self) -> EndpointService:
        """Serverless endpoints (``scalar.runtime.endpoints``): their workers are this plane's jobs."""
        if self._endpoints is None:
            self._endpoints = EndpointService(
                self,
                lambda: self._opened()[0],
                self.clock,
                seed=self.settings.market_seed or 0,
                allowed_handlers=self.settings.endpoint_handlers,
                max_request_retries=self.settings.endpoint_max_request_retries,
                webhook_allow_private=self.settings.endpoint_webhook_allow_private,
            )
        return self._endpoints

    def run_executor_once(self) -> int:
        """Claim and execute the actions due now; returns how many were claimed."""
        _, leader = self._opened()
        return leader.execute_once()

    def _leader_loop(self) -> None:
        s = self.settings
        period = min(s.tick_s, s.lease_renew_s)
        next_tick = 0.0
        while not self._stop.is_set():
            started = time.monotonic()
            leader = self._leader
            if leader is None:
                return
            try:
                now = self.clock()
                with leader.lock:
                    if leader.acquire(now) and started >= next_tick:
                        next_tick = started + s.tick_s
                        self.agents.check_leases(now, leader.epoch)
                        leader.tick(now)
                if self.is_leader:
                    self.endpoints.tick(now)
            except NotLeaderError:
                pass
            except Exception:
                log.exception("leader iteration failed; retrying")
                leader.step_down()
            self._stop.wait(max(0.01, period - (time.monotonic() - started)))

    def _executor_loop(self) -> None:
        while not self._stop.is_set():
            leader = self._leader
            if leader is None:
                return
            try:
                ran = leader.execute_once()
            except Exception:
                log.exception("executor pass failed; retrying")
                ran = 0
            if not ran:
                leader.actions_added.wait(self.settings.executor_interval_s)
                leader.actions_added.clear()

    # ---- state -------------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        leader = self._leader
        if leader is None or leader.fence is None or leader.lease_expires_at is None:
            return False
        return leader.lease_expires_at > self.clock()

    def health(self) -> dict[str, Any]:
        """``status`` ok | starting | degraded, ``problem`` (a code, unless ok: ``HEALTH_PROBLEMS``),
        ``role``, ``last_step_at``, and the details only admins see (``database``, ``holder``, ``epoch``,
        ``lease_holder``, ``lease_expires_at``, the driver's ``error``): the API shows each its part."""
        if self.store is None and self._open_lock.locked():  # another thread is opening (migrating) it
            return {
                "status": "starting",
                "problem": "not-open",
                "role": "follower",
                "holder": self.settings.holder,
            }
        try:
            store, leader = self._opened()
        except Exception as err:  # the database cannot be opened
            return {
                "status": "degraded",
                "problem": "database-unavailable",
                "error": _first_line(err),
                "role": "follower",
                "holder": self.settings.holder,
            }
        lease = None
        status, problem, error = "ok", None, None
        last_step_at = leader.last_step_at
        try:
            lease = store.read_lease(self.settings.lease_name)
            if last_step_at is None:  # a replica or a standby: the last step any leader committed
                with store.read() as tx:
                    last = tx.last_batch()
                last_step_at = None if last is None else last[1]
        except Exception as err:  # the database is down
            status, problem, error = "degraded", "database-unavailable", _first_line(err)
        now = self.clock()
        if (
            lease is not None
            and lease.expires_at is not None
            and not self.is_leader
            and (now - lease.expires_at).total_seconds() > self.settings.lease_ttl_s
        ):
            status, problem = "degraded", "no-leader"
        if status == "ok" and self._awaiting_first_step(leader, lease, now):
            status, problem = "starting", "first-step"
        return {
            "status": status,
            "problem": problem,
            "error": error,
            "role": "leader" if self.is_leader else "follower",
            "database": store.url,
            "backend": store.backend,
            "holder": self.settings.holder,
            "epoch": leader.epoch,
            "last_step_at": None if last_step_at is None else last_step_at.isoformat(),
            "lease_holder": None if lease is None else lease.holder,
            "lease_expires_at": None
            if lease is None or lease.expires_at is None
            else lease.expires_at.isoformat(),
        }

    def _awaiting_first_step(self, leader: Leader, lease: Any, now: datetime) -> bool:
        """Warm start: this process runs the controller loop and no step has finished yet, while no other
        process holds the lease (a follower of a live leader is ready at once). Until then ``/healthz``
        says ``starting`` (503), so nothing is sent to a controller still replaying its log."""
        if not self._threads or leader.last_step_at is not None:
            return False
        held_elsewhere = (
            lease is not None
            and lease.holder not in (None, self.settings.holder)
            and lease.expires_at is not None
            and lease.expires_at > now
        )
        return not held_elsewhere

    # ---- jobs ----------------------------------------------------------------------------------------

    def _validation_offers(self, now: datetime) -> tuple[Offer, ...]:
        """The offers a submission is judged on: the leader's (in its process, published after each step; in
        an API replica, stored with its last market step), else a recent collection of our own."""
        _, leader = self._opened()
        offers = leader.published_offers  # swapped in after each step: read without waiting for one
        if offers:
            return offers
        cached = self._offers_cache
        if cached is not None and time.monotonic() - cached[0] < PUBLISHED_OFFERS_FRESH_S:
            return cached[1]
        store, _ = self._opened()  # an API replica: the offers the leader stored with its last market step
        with store.read() as tx:
            offers = decode_offers(tx.get_state(PUBLISHED_OFFERS))
        if offers:
            self._offers_cache = (time.monotonic(), offers)
            return offers
        cached = self._offers_cache
        if cached is not None and time.monotonic() - cached[0] < self.settings.price_interval_s:
            return cached[1]
        collected, _, _ = PriceCollector(self.providers, self.settings.controller).collect(now)
        self._offers_cache = (time.monotonic(), collected)
        return collected

    def submit_job(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        """Validate and accept a job into the durable inbox (any process may); returns the job dict (state
        PENDING). Raises ``JobRejectedError`` with every reason, writing nothing."""
        store, _ = self._opened()
        now = self.clock()
        fields, sealing = secrets_mod.seal_job_fields(fields, self.secret_box)  # docs/security.md
        if sealing:
            raise JobRejectedError(sealing)
        spec, problems = spec_from_fields(fields, new_job_id(now), now)
        if spec is not None:
            problems = validate_job_spec(spec, self.settings.controller, self._validation_offers(now))
        if spec is None or problems:
            raise JobRejectedError(problems)
        job = spec_dict(spec, "PENDING", ACCEPTED_REASON, "accepted")
        with store.accept() as tx:
            tx.add_inbox(SUBMIT, spec.job_id, event_to_dict(JobSubmitted("inbox", spec)), now=now)
            tx.upsert_projection("jobs", spec.job_id, "PENDING", job, at=now)
        return job

    def cancel_job(self, job_id: str, tenant: str | None = None) -> dict[str, Any]:
        """Request cancellation (durable inbox); ``KeyError`` if the job is unknown (or, with ``tenant``,
        another tenant's)."""
        store, _ = self._opened()
        now = self.clock()
        with store.accept() as tx:
            row = tx.get_projection("jobs", job_id)
            if row is None or (tenant is not None and auth_mod.owner_of(row.data) != tenant):
                raise KeyError(job_id)
            tx.add_inbox(CANCEL, job_id, event_to_dict(JobCancelRequested("inbox", job_id)), now=now)
        return {**row.data, "cancel_requested": True}

    def get_job(self, job_id: str, tenant: str | None = None) -> dict[str, Any] | None:
        """The job, or ``None`` if unknown (or, with ``tenant``, another tenant's)."""
        store, _ = self._opened()
        with store.read() as tx:
            row = tx.get_projection("jobs", job_id)
            ports = None if row is None else allocated_ports(tx.conn, row.data)
        if row is None or (tenant is not None and auth_mod.owner_of(row.data) != tenant):
            return None
        return dict(row.data) if ports is None else {**row.data, "allocated_ports": ports}

    def list_jobs(
        self,
        state: str | None = None,
        limit: int = 100,
        offset: int = 0,
        tenant: str | None = None,
        newest_first: bool = False,
        after: str | None = None,
    ) -> list[dict[str, Any]]:
        """Jobs in submission order (ids sort by submission time; ``newest_first``: the other way),
        optionally only those in ``state`` (and, with ``tenant``, only that tenant's); ``after``: only the
        jobs past that id in this order (keyset paging, ``api/paging.py``)."""
        store, _ = self._opened()
        wanted = state.upper() if state else None
        with store.read() as tx:
            if tenant is not None:
                return auth_mod.list_jobs_of_tenant(tx, tenant, wanted, limit, offset, newest_first, after)
            rows = tx.list_projection(
                "jobs", wanted, limit=limit, offset=offset, descending=newest_first, after=after
            )
        return [dict(r.data) for r in rows]

    # ---- tokens and the audit log (runtime/auth.py; docs/security.md) ----------------------------------

    def secret_box(self) -> secrets_mod.SecretBox:
        """The key secret job env values are sealed with (``$SCALAR_SECRET_KEY`` or the data dir's)."""
        if self._secret_box is None:
            self._secret_box = secrets_mod.SecretBox.load(self.settings.data_dir, self._live_env)
        return self._secret_box

    @property
    def tokens(self) -> auth_mod.TokenService:
        return auth_mod.TokenService(lambda: self._opened()[0], self.clock)

    def authenticate(self, token: str) -> auth_mod.Principal | None:
        return self.tokens.authenticate(token)

    def create_token(
        self,
        tenant: str,
        role: str,
        name: str | None = None,
        *,
        actor: str = "(local)",
        expires_in: str | None = None,
    ) -> dict[str, Any]:
        return self.tokens.create(tenant, role, name, actor=actor, expires_in=expires_in)

    def list_tokens(self) -> list[dict[str, Any]]:
        return self.tokens.list_all()

    def revoke_token(self, token_id: str, *, actor: str = "(local)") -> dict[str, Any]:
        return self.tokens.revoke(token_id, actor=actor)

    def audit(
        self,
        tenant: str | None = None,
        action: str | None = None,
        after_id: int = 0,
        limit: int = 100,
        before_id: int | None = None,
    ) -> list[dict[str, Any]]:
        return self.tokens.audit(tenant, action, after_id, limit, before_id)

    def budgets(self) -> dict[str, Any]:
        """Spend limits and what is committed against them (``runtime.budgets``)."""
        store, _ = self._opened()
        return budgets_mod.get_limits(store, self.clock())

    def put_budgets(self, limits: Any, *, actor: str = "(local)") -> dict[str, Any]:
        """Replace every spend limit (``[]``: none), audit-logged; ``InvalidSpecError`` names a bad field."""
        store, _ = self._opened()
        return budgets_mod.put_limits(store, limits, self.clock(), actor=actor)

    def explain_job(self, job_id: str) -> list[str] | None:
        _, leader = self._opened()
        if not leader.lock.acquire(timeout=LEADER_WAIT_S):  # a step is being computed: never wait for it
            return None
        try:
            if leader.controller is None:
                return None
            explanation = leader.controller.explain(job_id)
        finally:
            leader.lock.release()
        return None if explanation is None else list(explanation.lines)

    def story(self, entity_id: str, limit: int | None = 100) -> list[dict[str, Any]]:
        store, _ = self._opened()
        with store.read() as tx:
            decisions = tx.story(entity_id, limit=limit)
        return [
            {"at": d.at.isoformat(), "code": d.code, "message": d.message, "data": d.data} for d in decisions
        ]

    # ---- cluster views (runtime/views.py, runtime/views_market.py): any process, from the store -------

    def _views(self) -> ClusterViews:
        store, leader = self._opened()
        return ClusterViews(store, leader, self.settings, self.clock)

    def explain(self, job_id: str) -> dict[str, Any] | None:
        return self._views().explain(job_id)

    def nodes(
        self,
        include_gone: bool = False,
        limit: int | None = None,
        after: str | None = None,
        descending: bool = False,
    ) -> dict[str, Any]:
        return self._views().nodes(include_gone, limit, after, descending)

    def blocks(
        self,
        status: str | None = None,
        limit: int | None = None,
        after: str | None = None,
        descending: bool = False,
    ) -> dict[str, Any]:
        return self._views().blocks(status, limit, after, descending)

    def autoscaler_status(self, all_groups: bool = False) -> dict[str, Any]:
        return views_market.autoscaler_status(self._views(), all_groups)

    def costs(self, points: int = 24) -> dict[str, Any]:
        return views_market.costs(self._views(), points)

    def metrics_snapshot(self) -> dict[str, Any]:
        return views_market.metrics_snapshot(self._views())

    def status(self) -> dict[str, Any]:
        return views_market.status_summary(self._views(), self.health())

    def preview_job(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        """What submitting ``fields`` would cost and whether it needs a purchase (runtime/preview.py); raises
        ``JobRejectedError`` as ``submit_job`` would. Writes nothing."""
        store, _ = self._opened()
        now = self.clock()
        offers = self._validation_offers(now)
        spec, problems = job_preview.checked_spec(fields, self.settings, offers, now)
        if spec is None or problems:
            raise JobRejectedError(problems)
        return job_preview.preview(store, self.settings, spec, now)

    # ---- node agents (runtime/agents.py, docs/agent.md) ----------------------------------------------

    def create_join_token(
        self, provider: str = "local", tier: str = "FAST", ttl_s: float = 3600.0, node_id: str | None = None
    ) -> dict[str, Any]:
        """A one-time token for ``scalar agent --join-token``: ``{token, provider, tier, node_id, ...}``."""
        request = JoinTokenRequest(provider=provider, tier=tier, ttl_s=ttl_s, node_id=node_id)
        return self.agents.create_join_token(request)

    # ---- the market ----------------------------------------------------------------------------------

    def orderbook(self, instance_type: str, node_count: int, gpus_per_node: int = 8) -> dict[str, Any]:
        """Seed 000's GET /orderbook response over the current book; ``KeyError`` for an unknown type."""
        self._opened()
        now = self.clock()
        for name in sorted(self.providers):
            try:
                book = self.providers[name].orderbook(instance_type, now)
            except ProviderError:
                continue
            if book is None:
                continue
            analysis = analyze_orderbook(book.asks, book.bids, node_count * gpus_per_node)
            response = build_orderbook_response(
                analysis, instance_type, node_count, gpus_per_node, book.observed_at
            )
            return response.model_dump(mode="json")
        raise KeyError(instance_type)

    # ---- live prices and one view of the market (runtime/prices.py, runtime/market_view.py) ----------

    def _record_prices(self, offers: Sequence[Offer], at: datetime) -> None:
        store = self.store
        if store is not None and offers:
            with store.write() as tx:
                tx.record_prices(offers, observed_at=at)

    def _live_prices(self) -> LivePrices:
        self._opened()
        assert self.live is not None
        return self.live

    def _all_offers(self) -> list[SourcedOffer]:
        """The built-in market's offers (read now) and the real providers' collected ones."""
        live = self._live_prices()
        now = self.clock()
        builtin: list[Offer] = []
        providers = builtin_only(self.providers, self.sellers)  # real sellers' offers are the live rows
        for name in sorted(providers):
            try:
                builtin.extend(providers[name].list_offers(now))
            except ProviderError as err:
                log.warning("listing %s's offers failed: %s", name, err)
        return sourced(builtin, live.offers(), now)

    def prices(
        self,
        gpu_model: str | None = None,
        provider: str | None = None,
        spot: bool | None = None,
        sort: str = "price_per_gpu_hour",
        descending: bool = False,
        source: str | None = None,
    ) -> list[dict[str, Any]]:
        """Every offer (built-in and live), filtered and sorted; ``ValueError`` for an unknown sort key."""
        kept = select_offers(
            self._all_offers(), gpu_model=gpu_model, provider=provider, spot=spot, source=source
        )
        return [offer_row(i) for i in sort_offers(kept, sort, descending)]

    def provider_status(self) -> list[dict[str, Any]]:
        """Each real provider: enabled (or why not), state, last successful fetch, offers, last error."""
        return [s.to_dict() for s in self._live_prices().statuses()]

    def quote(self, requirements: WorkloadRequirements, scorer: str = "default") -> dict[str, Any]:
        """Seed 002's placement over every offer; ``NoSuitableInstanceError`` (with counts) when none fits."""
        items = quotable(self._all_offers())  # untrusted (flagged) live prices are not quoted
        decision = find_optimal_placement(requirements, [i.offer for i in items], scorer=scorer)
        return quote_json(decision, items)

    def market_view(self, gpu_model: str | None = None) -> dict[str, Any]:
        """One ask book per GPU model across providers (built-in and live)."""
        items = select_offers(self._all_offers(), gpu_model=gpu_model)
        live = [lo for lo in self._live_prices().offers() if lo.offer in {i.offer for i in items}]
        return aggregate_market(items, live_books(self.sellers, live, self.clock()))


def _first_line(err: BaseException) -> str:
    """The first line of an error's text (a driver's error can span many), at most 500 characters."""
    return (str(err).splitlines() or [type(err).__name__])[0][:500]
