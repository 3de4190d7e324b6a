"""``ControlPlane``: one control-plane process (the engine driven in real time, with a leader lease and an
action executor), as the API, the CLI and the tests see it.

It is a facade over one object per concern (``scalar.runtime.plane``): ``core`` (``PlaneCore``: the
shared state and the process's life), ``job_service``, ``cluster``, ``market_service`` and ``access``, plus
the node agents' ``AgentService`` and the serverless ``EndpointService``. Composition rather than mixins:
each concern gets only the core (and what else it needs, by name) and can be built and tested alone
(tests/runtime/test_plane_concerns.py), while no concern can reach into another's state; the price is one
delegating line per call here, which is also the one list of everything a control plane offers.

- ``ControlPlane.open()`` opens the store and the market without starting threads (a client process that
  only submits and reads); ``start()`` calls it. ``ControlPlane`` is a context manager (start/stop).
- ``run_once()`` is one leader iteration and ``run_executor_once() -> int`` executes the claimable actions
  once (tests drive both on an injected clock).
- ``health() -> HealthDetailsOut``: ``status`` (ok | starting | degraded) and ``problem`` (a code), ``role``,
  ``last_step_at``, and for admins ``database``, ``holder``, ``epoch``, ``backend``, ``lease_holder``, ``lease_expires_at``,
  ``error``.
- ``explain_job(job_id) -> list[str] | None``: the leader's explanation lines (``None`` on a follower or for
  an unknown job); ``explain(job_id)`` is the full view from the store; ``story(entity_id)`` reads the
  stored decisions (any process).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any

from scalar.domain.arbitrage import WorkloadRequirements
from scalar.providers.base import Provider
from scalar.providers.sim import BuiltinMarket
from scalar.runtime import auth as auth_mod
from scalar.runtime import secrets as secrets_mod
from scalar.runtime.agents import AgentService
from scalar.runtime.endpoints.service import EndpointService
from scalar.runtime.k8s_backend import KubernetesAgents
from scalar.runtime.live_sellers import Sellers
from scalar.runtime.plane.access import AccessService
from scalar.runtime.plane.cluster import ClusterService
from scalar.runtime.plane.core import PlaneCore, utc_now
from scalar.runtime.plane.jobs import JobRejectedError, JobService
from scalar.runtime.plane.market import MarketService
from scalar.runtime.prices import LivePrices, RealProvider
from scalar.runtime.settings import Settings
from scalar.runtime.views_market import MetricsSnapshot
from scalar.store import Decision, Store
from scalar.wire.agent import JoinTokenOut, JoinTokenRequest
from scalar.wire.auth import AuditEntryOut, TokenCreated, TokenOut
from scalar.wire.budgets import BudgetsOut
from scalar.wire.jobs import HealthDetailsOut, JobOut
from scalar.wire.market import MarketOut, OfferRowOut
from scalar.wire.orderbook import OrderbookResponse
from scalar.wire.providers import ProviderStatusOut
from scalar.wire.quote import SourcedQuoteOut
from scalar.wire.views import (
    AutoscalerOut,
    BlocksOut,
    CostsOut,
    ExplanationOut,
    NodesOut,
    PreviewOut,
    StatusOut,
)

__all__ = ["ControlPlane", "JobRejectedError"]


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
        self.core = PlaneCore(
            settings, clock=clock, providers=providers, live_env=live_env, live_providers=live_providers
        )
        self.access = AccessService(self.core)
        self.job_service = JobService(self.core, self.access.secret_box)
        self.cluster = ClusterService(self.core)
        self.market_service = MarketService(self.core)
        self._endpoints: EndpointService | None = None  # serverless endpoints (runtime/endpoints/)
        self.core.on_lead = lambda now: self.endpoints.tick(now)
        self.core.on_close = self._close_endpoints

    # ---- the shared state (PlaneCore) ----------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        return self.core.settings

    @property
    def clock(self) -> Callable[[], datetime]:
        return self.core.clock

    @property
    def store(self) -> Store | None:
        return self.core.store

    @property
    def market(self) -> BuiltinMarket | None:
        return self.core.market

    @property
    def providers(self) -> Mapping[str, Provider]:
        return self.core.providers

    @property
    def live(self) -> LivePrices | None:
        return self.core.live

    @property
    def sellers(self) -> Sellers | None:
        """Who sells under each provider name (runtime/live_sellers.py)."""
        return self.core.sellers

    @property
    def kubernetes(self) -> KubernetesAgents | None:
        """[kubernetes]: agents as pods (runtime/k8s_backend.py)."""
        return self.core.kubernetes

    @property
    def agents(self) -> AgentService:
        """Node agents (runtime/agents.py, docs/agent.md)."""
        return self.core.agents

    # ---- lifecycle -----------------------------------------------------------------------------------

    def open(self) -> None:
        """Open (and migrate) the store and the market; no threads. Idempotent."""
        self.core.open()

    def start(self) -> None:
        """Open the store (migrating it), the market, and start the leader and executor threads."""
        self.core.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the threads, give the lease up (a standby takes over at once), close. Safe to call twice."""
        self.core.stop(timeout_s)

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def run_once(self) -> None:
        """One leader iteration at ``clock()``: acquire or renew the lease (rebuilding on a new epoch), then
        collect prices when due, poll node events, drain the inbox and step with a Tick."""
        self.core.run_once()

    def run_executor_once(self) -> int:
        """Claim and execute the actions due now; returns how many were claimed."""
        return self.core.run_executor_once()

    @property
    def is_leader(self) -> bool:
        return self.core.is_leader

    def health(self) -> HealthDetailsOut:
        return self.core.health()

    @property
    def endpoints(self) -> EndpointService:
        """Serverless endpoints (``scalar.runtime.endpoints``): their workers are this plane's jobs."""
        if self._endpoints is None:
            s = self.settings
            self._endpoints = EndpointService(
                self.job_service.documents(),
                lambda: self.core.opened()[0],
                self.clock,
                seed=s.market_seed or 0,
                allowed_handlers=s.endpoint_handlers,
                max_request_retries=s.endpoint_max_request_retries,
                webhook_allow_private=s.endpoint_webhook_allow_private,
            )
        return self._endpoints

    def _close_endpoints(self) -> None:
        if self._endpoints is not None:
            self._endpoints.close()

    # ---- jobs (plane/jobs.py) ------------------------------------------------------------------------

    def submit_job(self, fields: Mapping[str, Any]) -> JobOut:
        return self.job_service.submit_job(fields)

    def cancel_job(self, job_id: str, tenant: str | None = None) -> JobOut:
        return self.job_service.cancel_job(job_id, tenant)

    def get_job(self, job_id: str, tenant: str | None = None) -> JobOut | None:
        return self.job_service.get_job(job_id, tenant)

    def list_jobs(
        self,
        state: str | None = None,
        limit: int = 100,
        offset: int = 0,
        tenant: str | None = None,
        newest_first: bool = False,
        after: str | None = None,
    ) -> list[JobOut]:
        return self.job_service.list_jobs(state, limit, offset, tenant, newest_first, after)

    def preview_job(self, fields: Mapping[str, Any]) -> PreviewOut:
        return self.job_service.preview_job(fields)

    def explain_job(self, job_id: str) -> list[str] | None:
        return self.job_service.explain_job(job_id)

    def story(self, entity_id: str, limit: int | None = 100) -> list[Decision]:
        return self.job_service.story(entity_id, limit)

    # ---- tokens, the audit log, secrets, budgets (plane/access.py) -----------------------------------

    def secret_box(self) -> secrets_mod.SecretBox:
        return self.access.secret_box()

    @property
    def tokens(self) -> auth_mod.TokenService:
        return self.access.tokens

    def authenticate(self, token: str) -> auth_mod.Principal | None:
        return self.access.authenticate(token)

    def create_token(
        self,
        tenant: str,
        role: str,
        name: str | None = None,
        *,
        actor: str = "(local)",
        expires_in: str | None = None,
    ) -> TokenCreated:
        return self.access.create_token(tenant, role, name, actor=actor, expires_in=expires_in)

    def list_tokens(self) -> list[TokenOut]:
        return self.access.list_tokens()

    def revoke_token(self, token_id: str, *, actor: str = "(local)") -> TokenOut:
        return self.access.revoke_token(token_id, actor=actor)

    def audit(
        self,
        tenant: str | None = None,
        action: str | None = None,
        after_id: int = 0,
        limit: int = 100,
        before_id: int | None = None,
    ) -> list[AuditEntryOut]:
        return self.access.audit(tenant, action, after_id, limit, before_id)

    def budgets(self) -> BudgetsOut:
        return self.access.budgets()

    def put_budgets(self, limits: Any, *, actor: str = "(local)") -> BudgetsOut:
        return self.access.put_budgets(limits, actor=actor)

    # ---- cluster views (plane/cluster.py): any process, from the store -------------------------------

    def explain(self, job_id: str) -> ExplanationOut | None:
        return self.cluster.explain(job_id)

    def nodes(
        self,
        include_gone: bool = False,
        limit: int | None = None,
        after: str | None = None,
        descending: bool = False,
    ) -> NodesOut:
        return self.cluster.nodes(include_gone, limit, after, descending)

    def blocks(
        self,
        status: str | None = None,
        limit: int | None = None,
        after: str | None = None,
        descending: bool = False,
    ) -> BlocksOut:
        return self.cluster.blocks(status, limit, after, descending)

    def autoscaler_status(self, all_groups: bool = False) -> AutoscalerOut:
        return self.cluster.autoscaler_status(all_groups)

    def costs(self, points: int = 24) -> CostsOut:
        return self.cluster.costs(points)

    def metrics_snapshot(self) -> MetricsSnapshot:
        return self.cluster.metrics_snapshot()

    def status(self) -> StatusOut:
        return self.cluster.status()

    # ---- node agents (runtime/agents.py, docs/agent.md) ----------------------------------------------

    def create_join_token(
        self, provider: str = "local", tier: str = "FAST", ttl_s: float = 3600.0, node_id: str | None = None
    ) -> JoinTokenOut:
        """A one-time token for ``scalar agent --join-token`` (``token``, ``provider``, ``tier``, ...)."""
        request = JoinTokenRequest(provider=provider, tier=tier, ttl_s=ttl_s, node_id=node_id)
        return self.agents.create_join_token(request)

    # ---- the market (plane/market.py) ----------------------------------------------------------------

    def orderbook(self, instance_type: str, node_count: int, gpus_per_node: int = 8) -> OrderbookResponse:
        return self.market_service.orderbook(instance_type, node_count, gpus_per_node)

    def prices(
        self,
        gpu_model: str | None = None,
        provider: str | None = None,
        spot: bool | None = None,
        sort: str = "price_per_gpu_hour",
        descending: bool = False,
        source: str | None = None,
    ) -> list[OfferRowOut]:
        return self.market_service.prices(gpu_model, provider, spot, sort, descending, source)

    def provider_status(self) -> list[ProviderStatusOut]:
        return self.market_service.provider_status()

    def quote(self, requirements: WorkloadRequirements, scorer: str = "default") -> SourcedQuoteOut:
        return self.market_service.quote(requirements, scorer)

    def market_view(self, gpu_model: str | None = None) -> MarketOut:
        return self.market_service.market_view(gpu_model)
