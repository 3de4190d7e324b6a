"""Live prices: the running server collects every enabled real provider's offers in the background.

``real_providers(env)`` reads the six real clients' settings (SFCompute, Prime Intellect, RunPod, AWS, Azure,
GCP) from an environment mapping; none is enabled by default. ``LivePrices`` runs one thread per enabled
provider that calls ``list_offers(now)`` every ``interval_s``: one provider's failure or slowness never holds
up another (each has its own thread, its client's HTTP timeouts and a try/except around every fetch).

A successful fetch replaces the provider's best-offers cache (the cheapest offer per shape) and is handed to
``record`` (the control plane appends it to ``spot_prices``). A failed fetch keeps the last good offers,
records the error, and the provider shows as ``stale``; offers older than ``stale_after_s`` are stale too
(a fetch that hangs cannot make old prices look fresh).

Each fetch is judged with the catalog's anomaly rules (``scalar.providers.live_anomalies``): dropped prices
never become offers, untrusted ones stay listed with their flags but are left out of quotes and the market.

These offers are the market view (``GET /prices``, ``POST /quote``, ``GET /market``). Who the controller
buys from under each name is decided by ``scalar.runtime.live_sellers`` (``roles``: a real provider that can
buy replaces the built-in market's seller of its name).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from scalar.domain.offers import AWS, AZURE, GCP, PRIME, RUNPOD, SFCOMPUTE, Offer
from scalar.providers import aws, azure, gcp
from scalar.providers.base import Provider
from scalar.providers.catalog import CatalogAnomaly
from scalar.providers.config import settings_from_env
from scalar.providers.http import RetryPolicy
from scalar.providers.live_anomalies import LiveJudgement, judge_live_offers
from scalar.providers.primeintellect import client as prime_client
from scalar.providers.runpod import client as runpod_client
from scalar.providers.sfcompute import client as sfcompute_client

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 300.0
INTERVAL_ENV = "SCALAR_PRICES_INTERVAL_S"

OK, STALE, ERROR, DISABLED, PENDING = "ok", "stale", "error", "disabled", "pending"
Builder = Callable[[], Provider]
Record = Callable[[Sequence[Offer], datetime], None]


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class RealProvider:
    """One real provider as configured: ``build`` makes its client (``None`` when disabled)."""

    name: str
    enabled: bool
    disabled_reason: str | None
    build: Builder | None
    interval_s: float


def _interval(env: Mapping[str, str], name: str) -> float:
    for key in (f"SCALAR_{name.upper()}_PRICES_INTERVAL_S", INTERVAL_ENV):
        raw = (env.get(key) or "").strip()
        if raw:
            try:
                value = float(raw)
            except ValueError:
                raise ValueError(f"{key}={raw!r} is not a number of seconds, e.g. 300") from None
            if not value > 0:
                raise ValueError(f"{key}={raw!r} must be more than 0 seconds")
            return value
    return DEFAULT_INTERVAL_S


def real_providers(
    env: Mapping[str, str], *, retry: RetryPolicy | None = None, timeout_s: float | None = None
) -> list[RealProvider]:
    """The six real providers as ``env`` configures them (pass ``os.environ`` or a plain dict).

    ``retry``/``timeout_s`` override the HTTP clients' defaults (tests make failures fast). A provider whose
    settings are invalid is listed as disabled with the reason; nothing raises."""
    http: dict[str, Any] = {}
    if retry is not None:
        http["retry"] = retry
    if timeout_s is not None:
        http["timeout_s"] = timeout_s

    def simple(name: str, settings_of: Callable[[], Any], make: Callable[[Any], Provider]) -> RealProvider:
        try:
            settings = settings_of()
            interval = _interval(env, name)
        except ValueError as err:
            return RealProvider(name, False, f"{name} cannot work: {err}", None, DEFAULT_INTERVAL_S)
        if not settings.enabled:
            return RealProvider(name, False, settings.disabled_reason, None, interval)
        return RealProvider(name, True, None, lambda: make(settings), interval)

    aws_kwargs: dict[str, Any] = {}
    if retry is not None:
        aws_kwargs["max_attempts"] = retry.attempts
    if timeout_s is not None:
        aws_kwargs.update(connect_timeout_s=timeout_s, read_timeout_s=timeout_s)
    return [
        simple(
            SFCOMPUTE,
            lambda: settings_from_env(env, "sfcompute", sfcompute_client.DEFAULT_BASE_URL),
            lambda s: sfcompute_client.SFComputeProvider(s, **http),
        ),
        simple(
            PRIME,
            lambda: settings_from_env(env, "primeintellect", prime_client.DEFAULT_BASE_URL),
            lambda s: prime_client.PrimeIntellectProvider(s, **http),
        ),
        simple(
            RUNPOD,
            lambda: settings_from_env(
                env, "runpod", runpod_client.DEFAULT_BASE_URL, runpod_client.DEFAULT_DATA_URL
            ),
            lambda s: runpod_client.RunPodProvider(s, **http),
        ),
        simple(AWS, lambda: aws.aws_settings_from_env(env), lambda s: aws.AwsSpotPrices(s, **aws_kwargs)),
        simple(
            AZURE,
            lambda: azure.azure_settings_from_env(env),
            lambda s: azure.AzureRetailPrices.from_env(env, **http),
        ),
        simple(
            GCP,
            lambda: settings_from_env(env, GCP, gcp.DEFAULT_BASE_URL),
            lambda s: gcp.GcpBillingCatalog.from_env(env, **http),
        ),
    ]


@dataclass(frozen=True)
class ProviderStatus:
    """What ``scalar providers`` shows for one real provider."""

    name: str
    enabled: bool
    state: str  # ok | stale | error | disabled | pending (enabled, first fetch not done yet)
    disabled_reason: str | None
    last_success_at: datetime | None
    age_s: float | None  # seconds since the last successful fetch
    offer_count: int
    last_error: str | None
    last_error_at: datetime | None
    interval_s: float
    sells: str = "none"  # live (the controller buys through this client) | builtin | none
    sells_note: str = ""
    anomaly_count: int = 0  # flags on the last good fetch (dropped prices included)
    untrusted_count: int = 0
    dropped: tuple[CatalogAnomaly, ...] = ()  # prices of the last good fetch that became no offer, and why

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "enabled": self.enabled,
            "state": self.state,
            "disabled_reason": self.disabled_reason,
            "last_success_at": None if self.last_success_at is None else self.last_success_at.isoformat(),
            "age_s": None if self.age_s is None else round(self.age_s, 3),
            "offer_count": self.offer_count,
            "last_error": self.last_error,
            "last_error_at": None if self.last_error_at is None else self.last_error_at.isoformat(),
            "interval_s": self.interval_s,
            "sells": self.sells,
            "sells_note": self.sells_note,
            "anomaly_count": self.anomaly_count,
            "untrusted_count": self.untrusted_count,
            "dropped": [
                {"code": a.code, "offer": a.offer_keys()[0], "message": a.message} for a in self.dropped
            ],
        }


@dataclass(frozen=True)
class LiveOffer:
    """A collected offer with its freshness."""

    offer: Offer
    fetched_at: datetime
    age_s: float
    stale: bool
    flags: tuple[CatalogAnomaly, ...] = ()
    trusted: bool = True


@dataclass
class _Slot:
    spec: RealProvider
    client: Provider | None = None
    offers: tuple[Offer, ...] = ()
    judgement: LiveJudgement | None = None
    last_success_at: datetime | None = None
    last_error: str | None = None
    last_error_at: datetime | None = None
    failed_last: bool = False


def best_offers(offers: Sequence[Offer]) -> tuple[Offer, ...]:
    """The cheapest offer per shape (``Offer.key``), cheapest $/GPU-h first."""
    best: dict[str, Offer] = {}
    for offer in offers:
        seen = best.get(offer.key)
        if seen is None or offer.price_per_hour < seen.price_per_hour:
            best[offer.key] = offer
    return tuple(sorted(best.values(), key=_price_key))


def _price_key(offer: Offer) -> tuple[Any, ...]:
    per_gpu = offer.price_per_gpu_hour
    return (per_gpu is None, per_gpu if per_gpu is not None else offer.price_per_hour, offer.key)


class LivePrices:
    """Background collection of real providers' offers. ``fetch(name)`` runs one fetch (tests call it)."""

    def __init__(
        self,
        providers: Sequence[RealProvider],
        *,
        clock: Callable[[], datetime] = utc_now,
        record: Record | None = None,
        stale_factor: float = 3.0,
    ) -> None:
        self.clock = clock
        self.record = record
        self.stale_factor = stale_factor
        self._slots = {p.name: _Slot(p) for p in providers}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.roles: dict[
            str, dict[str, str]
        ] = {}  # name -> {"sells", "sells_note"} (runtime/live_sellers.py)

    @property
    def enabled(self) -> tuple[str, ...]:
        return tuple(n for n, s in self._slots.items() if s.spec.enabled)

    # ---- fetching ------------------------------------------------------------------------------------

    def fetch(self, name: str) -> bool:
        """Fetch one provider's offers now; ``True`` on success. Never raises for a provider's failure."""
        slot = self._slots[name]
        if not slot.spec.enabled or slot.spec.build is None:
            return False
        now = self.clock()
        try:
            if slot.client is None:
                slot.client = slot.spec.build()
            judgement = judge_live_offers(best_offers(list(slot.client.list_offers(now))))
            offers = judgement.offers
        except Exception as err:  # any failure of one provider is that provider's error, nothing more
            log.warning("collecting live prices from %s failed: %s", name, err)
            with self._lock:
                slot.last_error = str(err) or type(err).__name__
                slot.last_error_at = now
                slot.failed_last = True
            return False
        with self._lock:
            slot.offers = offers
            slot.judgement = judgement
            slot.last_success_at = now
            slot.failed_last = False
        if self.record is not None:
            try:
                self.record(offers, now)
            except Exception:
                log.warning("writing %s's prices to the history failed", name, exc_info=True)
        return True

    def fetch_all(self) -> dict[str, bool]:
        """Fetch every enabled provider once, one after the other (tests and one-shot use)."""
        return {name: self.fetch(name) for name in self.enabled}

    def start(self) -> None:
        """One daemon thread per enabled provider; no threads when none is enabled."""
        if self._threads:
            return
        self._stop.clear()
        for name in self.enabled:
            thread = threading.Thread(
                target=self._loop, args=(name,), name=f"scalar-prices-{name}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def _loop(self, name: str) -> None:
        interval = self._slots[name].spec.interval_s
        while not self._stop.is_set():
            self.fetch(name)
            self._stop.wait(interval)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the threads (a fetch in flight is abandoned after ``timeout_s``) and close the clients."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout_s)
        self._threads = []
        for slot in self._slots.values():
            close = getattr(slot.client, "close", None)
            if callable(close):
                try:
                    close()
                except Exception:
                    log.debug("closing %s failed", slot.spec.name, exc_info=True)
            slot.client = None

    # ---- reading -------------------------------------------------------------------------------------

    def _is_stale(self, slot: _Slot, now: datetime) -> bool:
        if slot.last_success_at is None:
            return False
        age = (now - slot.last_success_at).total_seconds()
        return slot.failed_last or age > self.stale_factor * slot.spec.interval_s

    def statuses(self) -> list[ProviderStatus]:
        now = self.clock()
        out = []
        with self._lock:
            for name in sorted(self._slots):
                slot = self._slots[name]
                spec = slot.spec
                age = None if slot.last_success_at is None else (now - slot.last_success_at).total_seconds()
                if not spec.enabled:
                    state = DISABLED
                elif slot.last_success_at is None:
                    state = ERROR if slot.last_error is not None else PENDING
                else:
                    state = STALE if self._is_stale(slot, now) else OK
                judged = slot.judgement
                role = self.roles.get(name, {})
                out.append(
                    ProviderStatus(
                        name=name,
                        enabled=spec.enabled,
                        state=state,
                        disabled_reason=spec.disabled_reason,
                        last_success_at=slot.last_success_at,
                        age_s=age,
                        offer_count=len(slot.offers),
                        last_error=slot.last_error,
                        last_error_at=slot.last_error_at,
                        interval_s=spec.interval_s,
                        sells=role.get("sells", "none"),
                        sells_note=role.get("sells_note", ""),
                        anomaly_count=0
                        if judged is None
                        else len(judged.dropped) + sum(len(f) for f in judged.flags.values()),
                        untrusted_count=0 if judged is None else len(judged.untrusted),
                        dropped=() if judged is None else judged.dropped,
                    )
                )
        return out

    def offers(self) -> list[LiveOffer]:
        """Every provider's cached best offers (last good ones, however old), with their freshness."""
        now = self.clock()
        out: list[LiveOffer] = []
        with self._lock:
            for name in sorted(self._slots):
                slot = self._slots[name]
                if slot.last_success_at is None:
                    continue
                age = (now - slot.last_success_at).total_seconds()
                stale = self._is_stale(slot, now)
                judged = slot.judgement
                for o in slot.offers:
                    flags = () if judged is None else judged.flags.get(o.key, ())
                    trusted = judged is None or judged.trusted(o)
                    out.append(LiveOffer(o, slot.last_success_at, age, stale, flags, trusted))
        return out
