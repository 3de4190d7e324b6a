"""``scalar prices``, ``scalar providers`` and live ``scalar quote`` against a running server whose real
providers are faked on loopback (RunPod broken after a first good fetch)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from scalar.api.app import create_app
from scalar.runtime import ControlPlane, load_settings
from tests.api.live_server import serve
from tests.conftest import CliResult
from tests.providers.fakeserver import FakeServer
from tests.runtime.live_fakes import LIVE, break_runpod, live_providers, serve_samples


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("prices-cli")
    with FakeServer() as fake:
        serve_samples(fake)
        overrides = {
            "data_dir": tmp,
            "database_url": f"sqlite:///{tmp / 's.db'}",
            "enabled": ("sfcompute",),
            "auth_required": False,
        }
        cp = ControlPlane(load_settings(None, overrides, {}), live_providers=live_providers(fake.url))
        cp.start()
        try:
            assert cp.live is not None
            deadline = time.monotonic() + 20
            while {s.name: s.state for s in cp.live.statuses()}.get("runpod") != "ok":
                assert time.monotonic() < deadline, cp.live.statuses()
                time.sleep(0.1)
            break_runpod(fake)
            assert not cp.live.fetch("runpod")
            with serve(create_app(cp)) as url:
                yield url
        finally:
            cp.stop()


def test_providers_shows_states_errors_and_disabled_reasons(
    run_cli: Callable[..., CliResult], server_url: str
) -> None:
    result = run_cli("providers", "--server", server_url, "--json")
    assert result.returncode == 0, result.stderr
    by_name = {p["name"]: p for p in json.loads(result.stdout)["providers"]}
    assert by_name["runpod"]["state"] == "stale" and "500" in by_name["runpod"]["last_error"]
    assert {n: by_name[n]["state"] for n in LIVE if n != "runpod"} == dict.fromkeys(
        set(LIVE) - {"runpod"}, "ok"
    )
    assert by_name["aws"]["state"] == "disabled"
    table = run_cli("providers", "--server", server_url)
    assert table.returncode == 0, table.stderr
    lines = {line.split()[0]: line for line in table.stdout.splitlines() if line.split()}
    said = " ".join(table.stdout.split())  # LAST_ERROR wraps to fit the terminal
    assert "stale" in lines["runpod"] and "HTTP 500" in said
    assert "disabled" in lines["gcp"] and "SCALAR_GCP_API_KEY" in said


def test_prices_filters_and_sorts_by_price_per_gpu_hour(
    run_cli: Callable[..., CliResult], server_url: str
) -> None:
    result = run_cli(
        "prices",
        "--server",
        server_url,
        "--gpu-model",
        "A100-80GB",
        "--spot",
        "--provider",
        "azure",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["offers"]
    assert rows and all(
        r["spot"] and r["provider"] == "azure" and r["gpu_model"] == "A100-80GB" for r in rows
    )
    per_gpu = [r["price_per_gpu_hour"] for r in rows]
    assert per_gpu == sorted(per_gpu) and per_gpu[0] == 0.40403  # NC96ads spot: $1.61612/h for 4 GPUs
    on_demand = json.loads(run_cli("prices", "--server", server_url, "--on-demand", "--json").stdout)
    assert on_demand["offers"] and not any(r["spot"] for r in on_demand["offers"])


def test_prices_table_marks_the_stale_provider(run_cli: Callable[..., CliResult], server_url: str) -> None:
    result = run_cli("prices", "--server", server_url, "--provider", "runpod", "--wide")
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if line.split()[:1] == ["runpod"]]
    assert rows and all("STALE" in line for line in rows)
    fresh = run_cli("prices", "--server", server_url, "--provider", "azure", "--sort", "price_per_hour")
    assert "STALE" not in fresh.stdout and "$0.4444" in fresh.stdout


def test_live_quote_picks_from_live_offers(
    run_cli: Callable[..., CliResult], server_url: str, tmp_path: Path
) -> None:
    req = tmp_path / "req.json"
    req.write_text(json.dumps({"gpuCount": 1, "gpuType": "A100-80GB", "maxPricePerHour": 0.5}))
    result = run_cli("quote", "--requirements", req, "--server", server_url, "--json")
    assert result.returncode == 0, result.stderr
    decision = json.loads(result.stdout)
    assert (decision["provider"], decision["instanceType"], decision["source"]) == (
        "azure",
        "Standard_NC24ads_A100_v4",
        "live",
    )
    assert decision["pricePerHour"] == 0.444433
    table = run_cli("quote", "--requirements", req, "--server", server_url)
    assert table.returncode == 0 and "Standard_NC24ads_A100_v4" in table.stdout and "live" in table.stdout


def test_live_quote_without_a_match_exits_1_with_the_filter_counts(
    run_cli: Callable[..., CliResult], server_url: str, tmp_path: Path
) -> None:
    req = tmp_path / "req.json"
    req.write_text(json.dumps({"gpuCount": 1, "gpuType": "NOSUCHGPU"}))
    result = run_cli("quote", "--requirements", req, "--server", server_url)
    assert result.returncode == 1
    assert "gpuType" in result.stderr and "removed" in result.stderr and "Traceback" not in result.stderr


def test_live_quote_bad_input_and_no_server(run_cli: Callable[..., CliResult], tmp_path: Path) -> None:
    req = tmp_path / "req.json"
    req.write_text(json.dumps({"gpuCount": "one"}))
    bad = run_cli("quote", "--requirements", req, "--server", "http://127.0.0.1:9")
    assert bad.returncode == 2 and "req.json" in bad.stderr and "gpuCount" in bad.stderr
    assert "Traceback" not in bad.stderr
    req.write_text(json.dumps({"gpuCount": 1}))
    down = run_cli("quote", "--requirements", req, "--server", "http://127.0.0.1:9")
    assert down.returncode == 1 and "cannot reach" in down.stderr and "Traceback" not in down.stderr
    prices = run_cli("prices", "--server", "http://127.0.0.1:9")
    assert prices.returncode == 1 and "cannot reach" in prices.stderr
