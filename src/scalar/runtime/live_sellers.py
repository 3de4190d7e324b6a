"""Which seller the control plane buys from under each provider name: a real client, or the built-in market.

The built-in market sells under the same names as the real providers (``sfcompute``, ``prime``, ...). The
rule (``docs/decisions/live-sellers.md``): **an enabled real provider whose client can buy replaces the
built-in market's seller of the same name** for everything the controller does with a seller: offers,
books, purchases, releases and node events. The built-in market then no longer sells under that name. A
real provider that only publishes prices (RunPod pods, AWS, Azure, GCP) does not replace anything: its
prices are collected and shown as ``live``, and the built-in market keeps selling under its name when
configured to.

Which real clients buy (``PURCHASABLE``):

- ``sfcompute``: limit buy orders (``POST /v0/orders`` with ``Idempotency-Key``), cancel of a resting order;
  with ``[providers.sfcompute] buy_via = "nodes"`` (``nodes_mode``), ``POST /v1/nodes`` with user data that
  starts the node agent under a join token bound to each node;
- ``prime``: pods (``POST /pods`` named after the idempotency key, ``DELETE /pods/{id}``).

Price-only (``PRICE_ONLY``, with the reason shown by ``GET /providers``): RunPod (pods are not bought yet;
serverless endpoints are), AWS, Azure and GCP (price APIs only; launching instances is not implemented).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from scalar.domain.offers import AWS, AZURE, GCP, PRIME, RUNPOD, SFCOMPUTE
from scalar.providers.base import Provider, ProviderError
from scalar.providers.bootstrap import AgentBootstrap
from scalar.providers.sfcompute import SFComputeProvider
from scalar.providers.sfcompute.nodes import NodesMode
from scalar.runtime.agents import AgentService
from scalar.runtime.feed import Source
from scalar.runtime.market_view import LiveBook
from scalar.runtime.prices import LiveOffer, RealProvider
from scalar.runtime.settings import Settings
from scalar.wire.agent import JoinTokenRequest

log = logging.getLogger(__name__)

PURCHASABLE = (SFCOMPUTE, PRIME)
PRICE_ONLY: dict[str, str] = {
    RUNPOD: "prices only: RunPod pods are not bought through Scalar yet (serverless endpoints are)",
    AWS: "prices only: Scalar reads EC2 spot prices; launching EC2 instances is not implemented",
    AZURE: "prices only: the Retail Prices API sells nothing; launching Azure VMs is not implemented",
    GCP: "prices only: the Cloud Billing Catalog sells nothing; launching GCE VMs is not implemented",
}
LIVE_SOURCE_PREFIX = "live-"  # node-event source names of real sellers (``feed:live-sfcompute`` cursors)

# What ``GET /providers`` says about who sells under a name.
SELLS_LIVE = "live"  # the real client: the controller buys here
SELLS_BUILTIN = "builtin"  # the built-in market sells under this name; the real provider gives prices only
SELLS_NONE = "none"  # nobody sells under this name in this process


@dataclass
class Sellers:
    """The outcome of the rule for one control plane.

    ``live``: the real clients the controller buys from, by name. ``builtin_names``: the names the built-in
    market keeps selling for. ``specs``: the real providers for price collection, those in ``live``
    sharing the very client the controller uses. ``notes``: why a provider sells where it does.
    """

    live: dict[str, Provider] = field(default_factory=dict)
    builtin_names: tuple[str, ...] = ()
    specs: list[RealProvider] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)

    def sells(self, name: str) -> str:
        if name in self.live:
            return SELLS_LIVE
        if name in self.builtin_names:
            return SELLS_BUILTIN
        return SELLS_NONE

    def roles(self) -> dict[str, dict[str, str]]:
        """Per real provider name: ``{"sells": live|builtin|none, "sells_note": why}``."""
        return {
            spec.name: {"sells": self.sells(spec.name), "sells_note": self.notes.get(spec.name, "")}
            for spec in self.specs
        }

    def sources(self) -> list[Source]:
        """One node-event source per real seller (its own cursor, ``feed:live-<name>``)."""
        return [Source(LIVE_SOURCE_PREFIX + n, p.events_since) for n, p in sorted(self.live.items())]

    def close(self) -> None:
        for name, client in self.live.items():
            close = getattr(client, "close", None)
            if callable(close):
                try:
                    close()
                except Exception:
                    log.debug("closing %s failed", name, exc_info=True)


def _shared(spec: RealProvider, client: Provider) -> RealProvider:
    return replace(spec, build=lambda: client)


def choose_sellers(specs: Sequence[RealProvider], builtin_enabled: Sequence[str]) -> Sellers:
    """Apply the rule: build the client of every enabled purchasable real provider (it replaces the
    built-in seller of its name); the built-in market keeps the other names of ``builtin_enabled``.

    A client that cannot be built (bad settings) is not a seller; the built-in market keeps the name and the
    reason is in ``notes`` (price collection reports the same error as the provider's state)."""
    sellers = Sellers()
    for spec in specs:
        if not spec.enabled or spec.build is None:
            sellers.specs.append(spec)
            continue
        if spec.name not in PURCHASABLE:
            sellers.specs.append(spec)
            sellers.notes[spec.name] = PRICE_ONLY.get(spec.name, "prices only")
            continue
        try:
            client = spec.build()
        except Exception as err:  # a bad configuration must not stop the control plane
            log.warning("cannot build the %s client to buy from: %s", spec.name, err)
            sellers.specs.append(spec)
            sellers.notes[spec.name] = f"not a seller: its client cannot be built ({err})"
            continue
        sellers.live[spec.name] = client
        sellers.specs.append(_shared(spec, client))
        sellers.notes[spec.name] = "the controller buys here (replaces the built-in market's seller)"
    sellers.builtin_names = tuple(n for n in builtin_enabled if n not in sellers.live)
    for name in builtin_enabled:
        if name not in sellers.live and name in sellers.notes and name in PRICE_ONLY:
            sellers.notes[name] += "; the built-in market sells under this name"
    return sellers


def with_agents(settings: Settings, sellers: Sellers) -> Settings:
    """Nodes bought from a real seller run work only through Scalar's node agent (the real clients refuse
    ``start_work``), so the real sellers join ``[controller].agent_providers``: their nodes are READY only
    once their agent registered, and no job is placed where it cannot start (a refused start would send
    the job back to PENDING, to be placed and refused again at once)."""
    config = settings.controller
    names = tuple(dict.fromkeys((*config.agent_providers, *sorted(sellers.live))))
    if names == config.agent_providers:
        return settings
    return replace(settings, controller=replace(config, agent_providers=names))


def with_market_clock(settings: Settings, names: Iterable[str]) -> Settings:
    """The providers the built-in market sells run on its clock (``time_scale`` market seconds per real
    second): the controller sizes their contracts in that time (``[controller].market_time_scales``; a
    value the file gives wins). Live sellers keep real time."""
    if settings.time_scale == 1.0:
        return settings
    config = settings.controller
    scales = {**{n: float(settings.time_scale) for n in names}, **dict(config.market_time_scales)}
    if scales == dict(config.market_time_scales):
        return settings
    return replace(settings, controller=replace(config, market_time_scales=scales))


def nodes_mode(settings: Settings, sellers: Sellers, agents: AgentService) -> None:
    """``[providers.sfcompute] buy_via = "nodes"``: the live SFCompute client buys through the nodes API, each
    node's user data starting the agent with a fresh join token bound to that node (made here: providers
    do not reach the agent tables). Without a live SFCompute client the setting has nothing to act on."""
    config = settings.providers.sfcompute
    if config is None or config.buy_via != "nodes":
        return
    client = sellers.live.get(SFCOMPUTE)
    if not isinstance(client, SFComputeProvider):
        log.warning(
            '[providers.sfcompute] buy_via = "nodes" has no effect: no live SFCompute client buys here '
            "(set SCALAR_SFCOMPUTE_API_KEY)"
        )
        return

    def join_token(node_id: str) -> str:
        request = JoinTokenRequest(provider=SFCOMPUTE, ttl_s=config.join_token_ttl_s, node_id=node_id)
        return agents.create_join_token(request).token

    agent = AgentBootstrap(
        controller_url=config.controller_url, join_token="", python=config.python, pip_spec=config.pip_spec
    )
    client.nodes = NodesMode(join_token, agent, config.image_id, config.zone, config.node_type)
    sellers.notes[SFCOMPUTE] += "; buys through the nodes API, whose nodes boot the agent"


def builtin_only(providers: Mapping[str, Provider], sellers: Sellers | None) -> dict[str, Provider]:
    """The providers that are the built-in market's (for the ``builtin`` rows of ``/prices``)."""
    live = sellers.live if sellers is not None else {}
    return {n: p for n, p in providers.items() if n not in live}


def live_books(sellers: Sellers | None, offers: Sequence[LiveOffer], now: datetime) -> list[LiveBook]:
    """The public books of the real sellers that publish one (SFCompute), for the instance types their live
    offers name. A book that cannot be read now is left out (the seller's best-ask offer stands in)."""
    if sellers is None:
        return []
    shapes = sorted({(lo.offer.provider, lo.offer.instance_type, lo.offer.gpu_model or "") for lo in offers})
    books = []
    for provider, instance_type, model in shapes:
        client = sellers.live.get(provider)
        if client is None or not model:
            continue
        try:
            book = client.orderbook(instance_type, now)
        except ProviderError as err:
            log.info("no live %s book for %s: %s", provider, instance_type, err)
            continue
        if book is not None:
            books.append(LiveBook(provider, model, book))
    return books
