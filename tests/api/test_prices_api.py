"""``GET /prices``, ``GET /providers``, ``POST /quote``, ``GET /market`` over a running control plane whose real
providers are faked on loopback with the sample payloads (one of them broken)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from scalar.api.app import create_app
from scalar.runtime import ControlPlane, load_settings
from tests.api.live_server import serve
from tests.api.real_control_plane import JobsOnly, opened_api
from tests.providers.fakeserver import FakeServer
from tests.runtime.live_fakes import LIVE, break_runpod, live_providers, serve_samples


def _wait_collected(http: httpx.Client, names: set[str], timeout_s: float = 20.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        states = {p["name"]: p for p in http.get("/providers").json()["providers"]}
        if all(states[n]["state"] not in {"pending"} for n in names):
            return states
        assert time.monotonic() < deadline, states
        time.sleep(0.1)


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, ControlPlane, FakeServer]]:
    tmp = tmp_path_factory.mktemp("prices-api")
    with FakeServer() as fake:
        serve_samples(fake)
        settings = load_settings(
            None,
            {
                "data_dir": tmp,
                "database_url": f"sqlite:///{Path(tmp) / 's.db'}",
                "tick_s": 0.2,
                "enabled": ("sfcompute",),
                "auth_required": False,
            },
            {},
        )
        cp = ControlPlane(settings, live_providers=live_providers(fake.url))
        cp.start()  # the running server collects the live prices itself
        try:
            with serve(create_app(cp)) as url, httpx.Client(base_url=url, timeout=30) as http:
                _wait_collected(http, set(LIVE))
                yield http, cp, fake
        finally:
            cp.stop()


def test_providers_lists_all_six_with_state(api: tuple[httpx.Client, ControlPlane, FakeServer]) -> None:
    http, _, _ = api
    body = http.get("/providers").json()["providers"]
    by_name = {p["name"]: p for p in body}
    assert set(by_name) == {"sfcompute", "prime", "runpod", "aws", "azure", "gcp"}
    for name in LIVE:
        assert by_name[name]["state"] == "ok" and by_name[name]["offer_count"] > 0
        assert by_name[name]["last_success_at"] is not None and by_name[name]["last_error"] is None
    assert by_name["gcp"]["state"] == "disabled" and "SCALAR_GCP_API_KEY" in by_name["gcp"]["disabled_reason"]


def test_prices_filter_and_sort(api: tuple[httpx.Client, ControlPlane, FakeServer]) -> None:
    http, _, _ = api
    rows = http.get("/prices", params={"source": "live"}).json()["offers"]
    assert {r["provider"] for r in rows} == set(LIVE)
    per_gpu = [r["price_per_gpu_hour"] for r in rows if r["price_per_gpu_hour"] is not None]
    assert per_gpu == sorted(per_gpu)
    query = {"gpu_model": "A100-80GB", "spot": "true", "provider": "azure", "source": "live"}
    spot = http.get("/prices", params=query).json()
    assert spot["count"] == len(spot["offers"]) > 0
    assert all(
        r["spot"] and r["provider"] == "azure" and r["gpu_model"] == "A100-80GB" for r in spot["offers"]
    )
    nc24 = next(r for r in spot["offers"] if r["instance_type"] == "Standard_NC24ads_A100_v4")
    assert nc24["price_per_gpu_hour"] == 0.444433 and nc24["stale"] is False
    down = http.get("/prices", params={"sort": "price_per_hour", "descending": "true"}).json()["offers"]
    assert [r["price_per_hour"] for r in down] == sorted((r["price_per_hour"] for r in down), reverse=True)
    bad = http.get("/prices", params={"sort": "colour"})
    assert bad.status_code == 422 and bad.headers["content-type"].startswith("application/problem+json")
    assert bad.json()["errors"][0]["field"] == "sort"


def test_quote_answers_from_live_offers(api: tuple[httpx.Client, ControlPlane, FakeServer]) -> None:
    http, _, _ = api
    # The built-in market sells only sfcompute here: Azure's 1-GPU A100-80GB spot ($0.444433/h) is the one
    # A100-80GB offer at most $0.50/h.
    body = {"gpuCount": 1, "gpuType": "A100-80GB", "maxPricePerHour": 0.5, "maxInterruptionRate": 1}
    answer = http.post("/quote", json=body)
    assert answer.status_code == 200, answer.text
    decision = answer.json()
    live = [
        r
        for r in http.get("/prices", params={"gpu_model": "A100-80GB"}).json()["offers"]
        if r["price_per_hour"] <= 0.5
    ]
    assert decision["pricePerHour"] == min(r["price_per_hour"] for r in live)
    assert decision["source"] == "live" and decision["stale"] is False
    assert decision["provider"] == "azure" and decision["instanceType"] == "Standard_NC24ads_A100_v4"


def test_quote_without_a_match_is_a_422_with_the_filter_counts(
    api: tuple[httpx.Client, ControlPlane, FakeServer],
) -> None:
    http, _, _ = api
    answer = http.post("/quote", json={"gpuCount": 1, "gpuType": "NOSUCHGPU"})
    assert answer.status_code == 422 and answer.headers["content-type"].startswith("application/problem+json")
    problem = answer.json()
    assert problem["type"] == "urn:scalar:problem:no-suitable-offer"
    gpu_type = next(e for e in problem["errors"] if e["field"] == "gpuType")
    total = len(http.get("/prices").json()["offers"])
    assert gpu_type["limit"] == total and sum(e["have"] for e in problem["errors"]) == total
    typo = http.post("/quote", json={"gpuCnt": 1})
    assert typo.status_code == 422 and typo.json()["errors"][0]["field"] == "gpuCnt"


def test_market_books_per_gpu_model(api: tuple[httpx.Client, ControlPlane, FakeServer]) -> None:
    http, _, _ = api
    books = http.get("/market").json()["gpu_models"]
    a100 = next(b for b in books if b["gpu_model"] == "A100-80GB")
    assert "azure" in a100["providers"]
    prices = [lv["price_per_gpu_hour"] for lv in a100["levels"]]
    assert prices == sorted(prices) and a100["levels"][-1]["cumulative_gpus"] == a100["total_gpus"]
    only = http.get("/market", params={"gpu_model": "H100"}).json()["gpu_models"]
    assert [b["gpu_model"] for b in only] == ["H100"] and "sfcompute" in only[0]["providers"]


def test_a_broken_provider_shows_stale_with_its_error_while_the_rest_work(
    api: tuple[httpx.Client, ControlPlane, FakeServer],
) -> None:
    http, cp, fake = api
    assert cp.live is not None
    break_runpod(fake)
    try:
        assert not cp.live.fetch("runpod") and cp.live.fetch("azure")
        states = {p["name"]: p for p in http.get("/providers").json()["providers"]}
        assert states["runpod"]["state"] == "stale" and "500" in states["runpod"]["last_error"]
        assert states["runpod"]["age_s"] >= 0 and states["runpod"]["offer_count"] > 0
        assert states["azure"]["state"] == "ok"
        runpod = http.get("/prices", params={"provider": "runpod"}).json()["offers"]
        assert runpod and all(r["stale"] for r in runpod)
    finally:
        serve_samples(fake)
        cp.live.fetch("runpod")


def test_a_control_plane_without_price_calls_has_no_price_routes(sqlite_url: str, tmp_path: Path) -> None:
    with opened_api(sqlite_url, tmp_path) as (full_url, cp), serve(create_app(JobsOnly(cp))) as url:
        assert httpx.get(full_url + "/prices").status_code == 200  # the same plane, all its calls
        assert httpx.get(url + "/prices").status_code == 404
        assert httpx.get(url + "/jobs").status_code == 200
