"""``PlaneCore``: one control-plane process's shared state and its life: the store, the market, the leader,
the threads, and the process's health.

Everything else of the control plane (``scalar.runtime.plane``'s other modules) reads the store, the
leader and the providers through this object: ``opened()`` opens them on first use (a client process that
only submits and reads never starts a thread), ``start()`` starts the leader and executor loops,
``stop()`` gives the lease up and closes everything. ``settings`` may be replaced by ``open()`` (the
sellers chosen, the market's clock), so the concerns read it here, never keep a copy.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from scalar.domain.offers import Offer
from scalar.providers.base import Provider
from scalar.providers.sim import BuiltinMarket
from scalar.runtime import budgets as budgets_mod
from scalar.runtime.agent_backend import AGENT_PROVIDER, AgentBackend, AgentNode
from scalar.runtime.agents import AgentService
from scalar.runtime.feed import Source
from scalar.runtime.k8s_backend import KubernetesAgents, with_kubernetes_agents
from scalar.runtime.k8s_pods import KubernetesConfigError
from scalar.runtime.leader import Leader
from scalar.runtime.live_sellers import (
    Sellers,
    choose_sellers,
    nodes_mode,
    with_agents,
    with_market_clock,
)
from scalar.runtime.prices import LivePrices, RealProvider, real_providers
from scalar.runtime.settings import Settings, SettingsError
from scalar.store import NotLeaderError, Store
from scalar.wire.agent import JoinTokenRequest
from scalar.wire.jobs import HealthDetailsOut

log = logging.getLogger("scalar.runtime.service")  # the logger these loops have always used


def utc_now() -> datetime:
    return datetime.now(UTC)


class PlaneCore:
    """The state every concern of one control-plane process shares, and its lifecycle. Several processes
    may run against one database: exactly one leads (lease)."""

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
        self.leader: Leader | None = None
        self.threads: list[threading.Thread] = []
        self.stop_event = threading.Event()
        self.open_lock = threading.Lock()
        self.live_env = live_env
        self._live_providers = live_providers
        self.live: LivePrices | None = None
        self.agents = AgentService(lambda: self.opened()[0], settings, clock)  # node agents (docs/agent.md)
        self.sellers: Sellers | None = None  # who sells under each provider name (runtime/live_sellers.py)
        self.kubernetes: KubernetesAgents | None = (
            None  # [kubernetes]: agents as pods (runtime/k8s_backend.py)
        )
        # What the owner runs with the core: after each leading iteration (endpoints' tick) and when the
        # core closes, before the market and the store (endpoints' threads).
        self.on_lead: Callable[[datetime], None] | None = None
        self.on_close: Callable[[], None] | None = None

    # ---- lifecycle -----------------------------------------------------------------------------------

    def open(self) -> None:
        """Open (and migrate) the store and the market; no threads. Idempotent."""
        with self.open_lock:
            if self.store is not None:
                return
            s = self.settings
            specs = self._live_providers
            if specs is None:
                specs = real_providers(os.environ if self.live_env is None else self.live_env)
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
            self.leader = Leader(store, s, executing, sources, self.clock)
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
            return self.agents.create_join_token(request).token

        try:
            return KubernetesAgents.for_control_plane(s, lambda: store, join_token)
        except KubernetesConfigError as err:
            raise SettingsError("[kubernetes]", str(err)) from None

    def start(self) -> None:
        """Open the store (migrating it), the market, and start the leader and executor threads."""
        self.open()
        if self.threads:
            return
        self.stop_event.clear()
        self.threads = [
            threading.Thread(target=self._leader_loop, name="scalar-leader", daemon=True),
            threading.Thread(target=self._executor_loop, name="scalar-executor", daemon=True),
        ]
        if self.kubernetes is not None:  # only the leader creates and deletes agent pods
            self.threads.append(
                threading.Thread(
                    target=self.kubernetes.run,
                    args=(self.stop_event, lambda: self.is_leader),
                    name="scalar-kubernetes",
                    daemon=True,
                )
            )
        for thread in self.threads:
            thread.start()
        if self.live is not None and self.live.enabled:
            self.live.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the threads, give the lease up (a standby takes over at once), close. Safe to call twice."""
        self.stop_event.set()
        leader = self.leader
        if leader is not None:
            leader.actions_added.set()
        for thread in self.threads:
            thread.join(timeout_s)
        self.threads = []
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
        if self.on_close is not None:
            self.on_close()
        if self.market is not None:
            self.market.close()
            self.market = None
        if self.store is not None:
            self.store.close()
            self.store = None
        self.leader = None

    def opened(self) -> tuple[Store, Leader]:
        """The store and the leader, opening them first if needed."""
        self.open()
        assert self.store is not None and self.leader is not None
        return self.store, self.leader

    # ---- the loops -----------------------------------------------------------------------------------

    def run_once(self) -> None:
        """One leader iteration at ``clock()``: acquire or renew the lease (rebuilding on a new epoch), then
        collect prices when due, poll node events, drain the inbox and step with a Tick."""
        _, leader = self.opened()
        now = self.clock()
        with leader.lock:
            try:
                if leader.acquire(now):
                    self.agents.check_leases(now, leader.epoch)
                    leader.tick(now)
            except NotLeaderError:
                pass
        if self.is_leader and self.on_lead is not None:
            self.on_lead(now)

    def run_executor_once(self) -> int:
        """Claim and execute the actions due now; returns how many were claimed."""
        _, leader = self.opened()
        return leader.execute_once()

    def _leader_loop(self) -> None:
        s = self.settings
        period = min(s.tick_s, s.lease_renew_s)
        next_tick = 0.0
        while not self.stop_event.is_set():
            started = time.monotonic()
            leader = self.leader
            if leader is None:
                return
            try:
                now = self.clock()
                with leader.lock:
                    if leader.acquire(now) and started >= next_tick:
                        next_tick = started + s.tick_s
                        self.agents.check_leases(now, leader.epoch)
                        leader.tick(now)
                if self.is_leader and self.on_lead is not None:
                    self.on_lead(now)
            except NotLeaderError:
                pass
            except Exception:
                log.exception("leader iteration failed; retrying")
                leader.step_down()
            self.stop_event.wait(max(0.01, period - (time.monotonic() - started)))

    def _executor_loop(self) -> None:
        while not self.stop_event.is_set():
            leader = self.leader
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

    # ---- live prices ---------------------------------------------------------------------------------

    def _record_prices(self, offers: Sequence[Offer], at: datetime) -> None:
        store = self.store
        if store is not None and offers:
            with store.write() as tx:
                tx.record_prices(offers, observed_at=at)

    def live_prices(self) -> LivePrices:
        """The real providers' price collection (``runtime/prices.py``), opening first if needed."""
        self.opened()
        assert self.live is not None
        return self.live

    # ---- state -------------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        leader = self.leader
        if leader is None or leader.fence is None or leader.lease_expires_at is None:
            return False
        return leader.lease_expires_at > self.clock()

    def health(self) -> HealthDetailsOut:
        """``status`` ok | starting | degraded, ``problem`` (a code, unless ok: ``HEALTH_PROBLEMS``),
        ``role``, ``last_step_at``, and the details only admins see (``database``, ``holder``, ``epoch``,
        ``lease_holder``, ``lease_expires_at``, the driver's ``error``): the API shows each its part."""
        if self.store is None and self.open_lock.locked():  # another thread is opening (migrating) it
            return HealthDetailsOut(
                status="starting", problem="not-open", role="follower", holder=self.settings.holder
            )
        try:
            store, leader = self.opened()
        except Exception as err:  # the database cannot be opened
            return HealthDetailsOut(
                status="degraded",
                problem="database-unavailable",
                error=_first_line(err),
                role="follower",
                holder=self.settings.holder,
            )
        lease = None
        status: Literal["ok", "starting", "degraded"] = "ok"
        problem: str | None = None
        error: str | None = None
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
        return HealthDetailsOut(
            status=status,
            problem=problem,
            error=error,
            role="leader" if self.is_leader else "follower",
            database=store.url,
            backend=store.backend,
            holder=self.settings.holder,
            epoch=leader.epoch,
            last_step_at=last_step_at,
            lease_holder=None if lease is None else lease.holder,
            lease_expires_at=None if lease is None else lease.expires_at,
        )

    def _awaiting_first_step(self, leader: Leader, lease: Any, now: datetime) -> bool:
        """Warm start: this process runs the controller loop and no step has finished yet, while no other
        process holds the lease (a follower of a live leader is ready at once). Until then ``/healthz``
        says ``starting`` (503), so nothing is sent to a controller still replaying its log."""
        if not self.threads or leader.last_step_at is not None:
            return False
        held_elsewhere = (
            lease is not None
            and lease.holder not in (None, self.settings.holder)
            and lease.expires_at is not None
            and lease.expires_at > now
        )
        return not held_elsewhere


def _first_line(err: BaseException) -> str:
    """The first line of an error's text (a driver's error can span many), at most 500 characters."""
    return (str(err).splitlines() or [type(err).__name__])[0][:500]
