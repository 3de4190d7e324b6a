"""Live prices: the collector reads real providers (faked on loopback), keeps last good prices when one
breaks, writes history, and the control plane answers prices, quotes and the market over them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from scalar.domain.arbitrage import NoSuitableInstanceError, WorkloadRequirements
from scalar.runtime import ControlPlane, load_settings
from scalar.runtime.prices import LivePrices, real_providers
from tests.providers.fakeserver import FakeServer, Reply
from tests.runtime.helpers import Clock
from tests.runtime.live_fakes import LIVE, break_runpod, live_providers, serve_samples


@pytest.fixture(scope="module")
def shared_server() -> Iterator[FakeServer]:
    with FakeServer() as fake:
        yield fake


@pytest.fixture
def server(shared_server: FakeServer) -> FakeServer:
    shared_server.requests.clear()
    shared_server._routes.clear()
    serve_samples(shared_server)
    return shared_server


def by_state(live: LivePrices) -> dict[str, str]:
    return {s.name: s.state for s in live.statuses()}


def test_nothing_is_enabled_without_configuration() -> None:
    specs = real_providers({})
    assert [(p.name, p.enabled) for p in specs] == [
        (n, False) for n in ("sfcompute", "prime", "runpod", "aws", "azure", "gcp")
    ]
    reasons = [p.disabled_reason or "" for p in specs]
    assert all(("SCALAR_" in r or "AWS_" in r) and "enable" in r for r in reasons), reasons
    live = LivePrices(specs)
    live.start()  # no provider enabled: no thread, nothing fetched
    assert live._threads == [] and set(by_state(live).values()) == {"disabled"}
    live.stop()


def test_a_bad_setting_is_listed_with_its_reason_not_raised() -> None:
    specs = {
        p.name: p for p in real_providers({"SCALAR_PRICES_INTERVAL_S": "soon", "SCALAR_AZURE_ENABLED": "1"})
    }
    assert not specs["azure"].enabled
    assert "SCALAR_PRICES_INTERVAL_S" in (specs["azure"].disabled_reason or "")


def test_collects_normalized_offers_from_several_providers(server: FakeServer) -> None:
    clock = Clock()
    live = LivePrices(live_providers(server.url), clock=clock)
    assert live.fetch_all() == dict.fromkeys(LIVE, True)
    states = by_state(live)
    assert {n: states[n] for n in LIVE} == dict.fromkeys(LIVE, "ok")
    assert states["aws"] == states["gcp"] == "disabled"
    offers = {(lo.offer.provider, lo.offer.instance_type, lo.offer.spot): lo for lo in live.offers()}
    assert {p for p, _, _ in offers} == set(LIVE)
    sfc = offers[("sfcompute", "8xH100", False)].offer
    assert (sfc.price_per_hour, sfc.price_per_gpu_hour, sfc.gpu_count) == (Decimal("15.2"), Decimal("1.9"), 8)
    nc24_spot = [lo.offer for lo in live.offers() if lo.offer.instance_type == "Standard_NC24ads_A100_v4"]
    assert {(o.spot, o.price_per_gpu_hour) for o in nc24_spot} >= {(True, Decimal("0.444433"))}
    counts = {s.name: s.offer_count for s in live.statuses()}
    assert all(counts[n] == sum(1 for lo in live.offers() if lo.offer.provider == n) > 0 for n in LIVE)
    assert not any(lo.stale for lo in live.offers())


def test_a_broken_provider_keeps_its_last_prices_marked_stale_with_error_and_age(server: FakeServer) -> None:
    clock = Clock()
    live = LivePrices(live_providers(server.url), clock=clock)
    live.fetch_all()
    runpod_before = [lo.offer for lo in live.offers() if lo.offer.provider == "runpod"]
    fetched_at = clock.now
    clock.advance(90)
    break_runpod(server)
    results = live.fetch_all()
    assert results == {**dict.fromkeys(LIVE, True), "runpod": False}
    status = {s.name: s for s in live.statuses()}
    runpod = status["runpod"]
    assert runpod.state == "stale" and "500" in (runpod.last_error or "")
    assert runpod.last_success_at == fetched_at and runpod.age_s == 90
    assert runpod.offer_count == len(runpod_before) > 0
    assert {n: status[n].state for n in LIVE if n != "runpod"} == dict.fromkeys(set(LIVE) - {"runpod"}, "ok")
    kept = [lo for lo in live.offers() if lo.offer.provider == "runpod"]
    assert [lo.offer for lo in kept] == runpod_before and all(lo.stale and lo.age_s == 90 for lo in kept)
    assert not any(lo.stale for lo in live.offers() if lo.offer.provider != "runpod")
    # It comes back: fresh again, the error still on record.
    serve_samples(server)
    assert live.fetch("runpod")
    assert by_state(live)["runpod"] == "ok"


def test_never_fetched_is_an_error_and_old_prices_go_stale(server: FakeServer) -> None:
    clock = Clock()
    break_runpod(server)
    live = LivePrices(live_providers(server.url, SCALAR_PRICES_INTERVAL_S="60"), clock=clock)
    live.fetch_all()
    assert by_state(live)["runpod"] == "error" and by_state(live)["sfcompute"] == "ok"
    clock.advance(181)  # more than 3 intervals without a fetch
    assert by_state(live)["sfcompute"] == "stale"


def test_a_slow_provider_does_not_hold_up_the_others(server: FakeServer) -> None:
    server.route("POST", "/graphql", Reply.text("{}", 200, delay_s=3.0))
    live = LivePrices(live_providers(server.url, SCALAR_PRICES_INTERVAL_S="0.2"))
    live.start()
    try:
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline and by_state(live)["sfcompute"] != "ok":
            time.sleep(0.05)
        states = by_state(live)
        assert states["runpod"] == "pending"
        assert {n: states[n] for n in ("azure", "prime", "sfcompute")} == dict.fromkeys(
            ("azure", "prime", "sfcompute"), "ok"
        )
    finally:
        live.stop(timeout_s=0.1)


@pytest.fixture
def control_plane(server: FakeServer, tmp_path: Path) -> Iterator[ControlPlane]:
    settings = load_settings(None, {"data_dir": tmp_path, "database_url": f"sqlite:///{tmp_path}/s.db"}, {})
    cp = ControlPlane(settings, live_providers=live_providers(server.url))
    cp.open()
    assert cp.live is not None
    cp.live.fetch_all()
    try:
        yield cp
    finally:
        cp.stop()


def test_history_rows_are_written_for_every_fetch(control_plane: ControlPlane) -> None:
    assert control_plane.store is not None and control_plane.live is not None
    with control_plane.store.read() as tx:
        rows = tx.latest_prices()
    assert {o.provider for o in rows} == set(LIVE)
    sfc = [o for o in rows if o.provider == "sfcompute"]
    live_sfc = {
        (lo.offer.instance_type, lo.offer.price_per_hour)
        for lo in control_plane.live.offers()
        if lo.offer.provider == "sfcompute"
    }
    assert {(o.instance_type, o.price_per_hour) for o in sfc} == live_sfc
    assert ("8xH100", Decimal("15.2")) in live_sfc
    with control_plane.store.read() as tx:
        assert len(tx.latest_prices(provider="azure")) == sum(
            1 for lo in control_plane.live.offers() if lo.offer.provider == "azure"
        )


def test_prices_combine_builtin_and_live_offers_with_source_and_filters(control_plane: ControlPlane) -> None:
    rows = control_plane.prices()
    assert {r["source"] for r in rows} == {"builtin", "live"}
    per_gpu = [r["price_per_gpu_hour"] for r in rows if r["price_per_gpu_hour"] is not None]
    assert per_gpu == sorted(per_gpu)
    live_a100 = control_plane.prices(gpu_model="a100-80gb", source="live", spot=True)
    assert live_a100 and all(r["gpu_model"] == "A100-80GB" and r["spot"] for r in live_a100)
    assert {r["provider"] for r in control_plane.prices(provider="RunPod")} == {"runpod"}
    with pytest.raises(ValueError, match="sort by one of"):
        control_plane.prices(sort="colour")


def test_quote_picks_the_cheapest_live_offer_and_tags_it(control_plane: ControlPlane) -> None:
    req = WorkloadRequirements(gpu_count=1, gpu_type="A100-80GB", max_interruption_rate=1.0)
    decision = control_plane.quote(req)
    candidates = [
        r for r in control_plane.prices(gpu_model="A100-80GB") if r["gpu_count"] >= 1 and r["vcpu"] >= 0
    ]
    assert decision["source"] in {"builtin", "live"} and decision["stale"] is False
    assert decision["pricePerGpuHour"] <= max(r["price_per_gpu_hour"] for r in candidates)
    assert all(a["source"] in {"builtin", "live"} for a in decision["alternatives"])
    with pytest.raises(NoSuitableInstanceError):
        control_plane.quote(WorkloadRequirements(gpu_count=1, gpu_type="NOSUCHGPU"))


def test_market_aggregates_one_book_per_gpu_model(control_plane: ControlPlane) -> None:
    market = control_plane.market_view()
    rows = control_plane.prices()
    for book in market["gpu_models"]:
        mine = [
            r for r in rows if r["gpu_model"] == book["gpu_model"] and r["price_per_gpu_hour"] is not None
        ]
        prices = [lv["price_per_gpu_hour"] for lv in book["levels"]]
        assert prices == sorted(prices) and book["best_price_per_gpu_hour"] == prices[0]
        assert book["total_gpus"] == pytest.approx(sum(r["gpu_count"] for r in mine))
        assert set(book["providers"]) == {r["provider"] for r in mine}
    a100 = control_plane.market_view(gpu_model="A100-80GB")["gpu_models"]
    assert [b["gpu_model"] for b in a100] == ["A100-80GB"]
