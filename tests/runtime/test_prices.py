"""Live prices: the collector reads real providers (faked on loopback), keeps last good prices when one
breaks, writes history, and the control plane answers prices, quotes and the market over them."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from scalar.api.app import create_app
from scalar.domain.arbitrage import NoSuitableInstanceError, WorkloadRequirements
from scalar.runtime import ControlPlane, load_settings
from scalar.runtime.prices import LivePrices, real_providers
from tests.api.live_server import serve
from tests.conftest import CliResult
from tests.providers.fakeserver import FakeServer, Reply
from tests.runtime.helpers import Clock
from tests.runtime.live_fakes import (
    ALL_LIVE,
    LIVE,
    all_live_providers,
    break_gcp,
    break_runpod,
    live_providers,
    serve_samples,
)


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
        fast = ("azure", "prime", "sfcompute")
        while time.monotonic() < deadline and any(by_state(live)[n] != "ok" for n in fast):
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
    assert {r.source for r in rows} == {"builtin", "live"}
    per_gpu = [r.price_per_gpu_hour for r in rows if r.price_per_gpu_hour is not None]
    assert per_gpu == sorted(per_gpu)
    live_a100 = control_plane.prices(gpu_model="a100-80gb", source="live", spot=True)
    assert live_a100 and all(r.gpu_model == "A100-80GB" and r.spot for r in live_a100)
    assert {r.provider for r in control_plane.prices(provider="RunPod")} == {"runpod"}
    with pytest.raises(ValueError, match="sort by one of"):
        control_plane.prices(sort="colour")


def test_quote_picks_the_cheapest_live_offer_and_tags_it(control_plane: ControlPlane) -> None:
    req = WorkloadRequirements(gpu_count=1, gpu_type="A100-80GB", max_interruption_rate=1.0)
    decision = control_plane.quote(req)
    candidates = [r for r in control_plane.prices(gpu_model="A100-80GB") if r.gpu_count >= 1 and r.vcpu >= 0]
    assert decision.source in {"builtin", "live"} and decision.stale is False
    assert decision.pricePerGpuHour is not None
    assert decision.pricePerGpuHour <= max(r.price_per_gpu_hour or 0 for r in candidates)
    assert all(a.source in {"builtin", "live"} for a in decision.alternatives)
    with pytest.raises(NoSuitableInstanceError):
        control_plane.quote(WorkloadRequirements(gpu_count=1, gpu_type="NOSUCHGPU"))


def test_market_aggregates_one_book_per_gpu_model(control_plane: ControlPlane) -> None:
    market = control_plane.market_view()
    rows = control_plane.prices()
    # SFCompute's live books (the replay serves the depth sample, 4 + 16 nodes, for 8xH100 and 8xH200) stand
    # in for its best-ask offers.
    sfcompute_book_gpus = {"H100": 160.0, "H200": 160.0}
    for book in market.gpu_models:
        mine = [
            r
            for r in rows
            if r.gpu_model == book.gpu_model and r.price_per_gpu_hour is not None and r.trusted
        ]
        deep = book.gpu_model in sfcompute_book_gpus
        offered = [r for r in mine if not (deep and r.provider == "sfcompute")]
        prices = [lv.price_per_gpu_hour for lv in book.levels]
        assert prices == sorted(prices) and book.best_price_per_gpu_hour == prices[0]
        expected = sum(r.gpu_count for r in offered) + sfcompute_book_gpus.get(book.gpu_model, 0.0)
        assert book.total_gpus == pytest.approx(expected)
        assert set(book.providers) == {r.provider for r in mine}
    a100 = control_plane.market_view(gpu_model="A100-80GB").gpu_models
    assert [b.gpu_model for b in a100] == ["A100-80GB"]


# ---- all six providers end to end: real sockets, the server collecting, the CLI reading through the API --


@pytest.fixture(scope="module")
def six(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, ControlPlane]]:
    """A running control plane collecting all six real providers from one loopback replay server (AWS via
    botocore speaking EC2's query/XML protocol, GCP's Cloud Billing Catalog), then GCP broken."""
    tmp = tmp_path_factory.mktemp("six")
    with FakeServer() as fake:
        serve_samples(fake)
        overrides = {
            "data_dir": tmp,
            "database_url": f"sqlite:///{tmp / 's.db'}",
            "enabled": ("runpod",),
            "auth_required": False,
        }
        specs = all_live_providers(fake.url, SCALAR_PRICES_INTERVAL_S="3600")
        cp = ControlPlane(load_settings(None, overrides, {}), live_providers=specs)
        cp.start()  # the running server collects the prices itself, one thread per provider
        try:
            assert cp.live is not None
            deadline = time.monotonic() + 30
            while set(by_state(cp.live).values()) != {"ok"}:
                assert time.monotonic() < deadline, cp.live.statuses()
                time.sleep(0.1)
            break_gcp(fake)
            assert not cp.live.fetch("gcp")
            with serve(create_app(cp)) as url:
                yield url, cp
        finally:
            cp.stop()


def _json(result: CliResult) -> Any:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_six_providers_each_show_their_state_and_the_broken_one_its_error(
    run_cli: Callable[..., CliResult], six: tuple[str, ControlPlane]
) -> None:
    url, _ = six
    by_name = {p["name"]: p for p in _json(run_cli("providers", "--server", url, "--json"))["providers"]}
    assert set(by_name) == set(ALL_LIVE)
    assert {n: by_name[n]["state"] for n in ALL_LIVE} == {**dict.fromkeys(ALL_LIVE, "ok"), "gcp": "stale"}
    gcp = by_name["gcp"]
    assert "503" in gcp["last_error"] and gcp["offer_count"] == 10 and gcp["last_success_at"]
    assert all(
        by_name[n]["offer_count"] > 0 and by_name[n]["last_error"] is None for n in set(ALL_LIVE) - {"gcp"}
    )
    # Who sells under each name: the real SFCompute and Prime clients; the rest give prices only.
    assert {n: by_name[n]["sells"] for n in ALL_LIVE} == {
        "sfcompute": "live",
        "prime": "live",
        "runpod": "builtin",
        "aws": "none",
        "azure": "none",
        "gcp": "none",
    }
    table = run_cli("providers", "--server", url)
    assert table.returncode == 0 and "stale" in table.stdout and "HTTP 503" in table.stdout


def test_prices_are_normalized_from_all_six_providers(
    run_cli: Callable[..., CliResult], six: tuple[str, ControlPlane]
) -> None:
    url, _ = six
    rows = _json(run_cli("prices", "--server", url, "--source", "live", "--json"))["offers"]
    assert {r["provider"] for r in rows} == set(ALL_LIVE)
    by = {
        (r["provider"], r["instance_type"], r["availability_zone"], r["region"], r["spot"]): r for r in rows
    }
    # AWS, page 1 of DescribeSpotPriceHistory: p5.48xlarge in use1-az2 at $19.2531/h for 8 H100s.
    p5 = by[("aws", "p5.48xlarge", "use1-az2", "us-east-1", True)]
    assert (p5["price_per_hour"], p5["price_per_gpu_hour"], p5["gpu_model"], p5["gpu_count"]) == (
        19.2531,
        2.406638,  # 19.2531 / 8 = 2.4066375, to the micro-dollar
        "H100",
        8,
    )
    assert p5["interruption_rate"] == 0.25 and p5["vcpu"] == 192  # Spot Advisor bucket >20%; catalog specs
    # AWS, page 2 (reached with page 1's NextToken): p4d.24xlarge in use1-az4 at $8.1203/h.
    assert by[("aws", "p4d.24xlarge", "use1-az4", "us-east-1", True)]["price_per_gpu_hour"] == 1.015038
    # GCP: a3-highgpu-8g in us-east4 = 8 x 9.79655 + 208 x 0.02527 + 1872 x 0.002265 = 87.86864/h.
    a3 = by[("gcp", "a3-highgpu-8g", None, "us-east4", False)]
    assert (a3["price_per_hour"], a3["price_per_gpu_hour"], a3["stale"]) == (87.86864, 10.98358, True)
    # The others as before: SFCompute $15.20/node-h = $1.90/GPU-h; Azure NC24ads spot $0.444433/GPU-h.
    assert by[("sfcompute", "8xH100", None, "us", False)]["price_per_gpu_hour"] == 1.9
    nc24 = [r for r in rows if r["instance_type"] == "Standard_NC24ads_A100_v4" and r["spot"]]
    assert [r["price_per_gpu_hour"] for r in nc24] == [0.444433]
    assert {r["provider"] for r in rows if r["stale"]} == {"gcp"}
    table = run_cli("prices", "--server", url, "--provider", "gcp")
    assert table.returncode == 0 and all(
        "STALE" in line for line in table.stdout.splitlines() if " gcp " in line
    )


def test_quote_picks_across_the_six_and_skips_nothing_fresh(
    run_cli: Callable[..., CliResult], six: tuple[str, ControlPlane], tmp_path: Path
) -> None:
    url, _ = six
    req = tmp_path / "req.json"
    req.write_text(json.dumps({"gpuCount": 8, "gpuType": "A100", "maxInterruptionRate": 0.2}))
    decision = _json(run_cli("quote", "--requirements", req, "--server", url, "--json"))
    # A100 x8: AWS p4d.24xlarge spot in use1-az4 at $8.1203/h (1.015 /GPU-h, interruption 0.125) beats
    # GCP's a2-highgpu-8g spot at $13.247448/h and a2-megagpu-16g.
    assert (decision["provider"], decision["instanceType"], decision["source"]) == (
        "aws",
        "p4d.24xlarge",
        "live",
    )
    assert decision["pricePerHour"] == 8.1203 and decision["stale"] is False
    assert {a["provider"] for a in decision["alternatives"]} <= {"aws", "gcp"}
    h100 = tmp_path / "h100.json"
    h100.write_text(json.dumps({"gpuCount": 8, "gpuType": "H100", "maxInterruptionRate": 0.0}))
    on_demand = _json(run_cli("quote", "--requirements", h100, "--server", url, "--json"))
    assert (on_demand["provider"], on_demand["pricePerGpuHour"]) == ("sfcompute", 1.9)


# ---- SFCompute's live book in /orderbook and /market; anomaly flags on live prices -------------------------


def test_orderbook_analyzes_sfcompute_live_book_by_scalar_name_or_ticker(
    control_plane: ControlPlane, server: FakeServer
) -> None:
    assert control_plane.sellers is not None and control_plane.sellers.sells("sfcompute") == "live"
    book = control_plane.orderbook("8xH100", 2)
    # The depth sample: asks 4 nodes at $15.20/node-h and 16 at $16.00 -> $1.90 and $2.00 per GPU-hour.
    assert [(a.price, a.quantity_gpus) for a in book.asks][:2] == [
        (1.9, 32),
        (2.0, 128),
    ]
    assert book.instance_type == "8xH100" and book.optimal_price == 1.9
    depth = [r for r in server.requests if r.path == "/preview/v2/orderbook/depth"]
    assert depth and depth[-1].param("requirements") == "accelerator:H100"
    by_ticker = control_plane.orderbook("h100i", 2)
    assert by_ticker.asks == book.asks


def test_market_shows_sfcompute_book_levels_instead_of_its_best_ask(control_plane: ControlPlane) -> None:
    (h100,) = control_plane.market_view(gpu_model="H100").gpu_models
    sfc = {lv.price_per_gpu_hour: lv for lv in h100.levels if "sfcompute" in lv.providers}
    others = [
        r
        for r in control_plane.prices(gpu_model="H100")
        if r.provider != "sfcompute" and r.trusted and r.price_per_gpu_hour in (1.9, 2.0)
    ]
    # Depth levels: 4 nodes (32 GPUs) at $1.90 and 16 nodes (128 GPUs) at $2.00, plus any other offer there.
    for price, gpus in ((1.9, 32), (2.0, 128)):
        expected = gpus + sum(r.gpu_count for r in others if r.price_per_gpu_hour == price)
        assert sfc[price].quantity_gpus == expected
    assert set(sfc) == {1.9, 2.0}
