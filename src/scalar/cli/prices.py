"""``scalar prices``: every offer the running server knows (built-in and live), by $/GPU-hour, with freshness.

Also holds ``PricesClient``: the API client with the market-view calls (``scalar providers`` and the live mode
of ``scalar quote`` use it too).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any, TypeVar

import typer

from scalar.api.client import ScalarClient, ServerProblem, ServerUnreachable
from scalar.cli.errors import user_errors
from scalar.cli.jobs import print_problem_and_exit, server_option
from scalar.cli.output import Col, make_table, print_json, say, show, wide_option
from scalar.domain.money import usd_price

T = TypeVar("T")

COLUMNS = [
    Col("provider", "key"),
    Col("source", "key", wide=True),
    Col("region", "key", wide=True),
    Col("instance_type", "id"),
    Col("per_gpu_h", "num"),
    Col("per_h", "num", wide=True),
    Col("offer", "text", floor=9),  # GPUs, spot or on-demand, STALE (see --wide's FRESH and AGE)
    Col("interruption_rate", "num", wide=True),
    Col("age", "key", wide=True),
    Col("fresh", "key", wide=True),
    Col("flags", "text", wide=True),
]


class Source(StrEnum):
    builtin = "builtin"
    live = "live"


class PricesClient(ScalarClient):
    """``ScalarClient`` plus ``GET /prices``, ``GET /providers``, ``POST /quote`` and ``GET /market``."""

    def prices(self, **params: Any) -> dict[str, Any]:
        query = {k: v for k, v in params.items() if v is not None}
        result: dict[str, Any] = self._call("GET", "/prices", params=query)
        return result

    def providers(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "/providers")
        return result

    def quote(self, requirements: Mapping[str, Any], scorer: str = "default") -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "POST", "/quote", json=dict(requirements), params={"scorer": scorer}
        )
        return result


def call_prices(server: str, call: Callable[[PricesClient], T]) -> T:
    """Run ``call`` against the server; server errors print as ``scalar jobs`` prints them, then exit."""
    client = PricesClient(server)
    try:
        return call(client)
    except (ServerProblem, ServerUnreachable) as exc:
        print_problem_and_exit(exc)
    finally:
        client.close()


class SortKey(StrEnum):
    price = "price"
    price_per_hour = "price_per_hour"
    provider = "provider"
    gpu_model = "gpu_model"
    age = "age"


SORT_PARAM = {
    SortKey.price: "price_per_gpu_hour",
    SortKey.price_per_hour: "price_per_hour",
    SortKey.provider: "provider",
    SortKey.gpu_model: "gpu_model",
    SortKey.age: "age_s",
}


def age_text(seconds: Any) -> str | None:
    """``42s``, ``5m``, ``3h``, ``2d``: how old a price is."""
    if not isinstance(seconds, int | float):
        return None
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def usd(value: Any) -> str | None:
    """Dollars: cents from $1 up, 4 decimals below (spot GPUs can cost $0.4444/h)."""
    if not isinstance(value, int | float):
        return None
    return usd_price(value)


def _row(r: Mapping[str, Any]) -> list[Any]:
    gpus = f"{r['gpu_count']:g} x {r['gpu_model']}" if r.get("gpu_count") and r.get("gpu_model") else None
    kind = "spot" if r["spot"] else "on-demand"
    rate = r.get("interruption_rate")
    return [
        r["provider"],
        r["source"],
        r["region"],
        r["instance_type"],
        usd(r.get("price_per_gpu_hour")),
        usd(r.get("price_per_hour")),
        " ".join(p for p in (gpus, kind, "STALE" if r.get("stale") else None) if p),
        None if rate is None else f"{rate:g}",
        age_text(r.get("age_s")) if r["source"] == "live" else "now",
        "STALE" if r.get("stale") else "ok",
        (
            ", ".join(f["code"] for f in r.get("flags") or ())
            + ("" if r.get("trusted", True) else " (not quoted)")
        )
        or None,
    ]


FILTERS = {
    "gpu_model": "--gpu-model",
    "provider": "--provider",
    "spot": "--spot/--on-demand",
    "source": "--source",
}


def _no_offers_hint(server: str, params: Mapping[str, Any]) -> str:
    """Why no offer matched, and the values that would (from the unfiltered list)."""
    given = {k: v for k, v in params.items() if k in FILTERS and v is not None}
    if not given:
        return "no offers yet: the server has not collected any prices (`scalar providers` says why)"
    offers = call_prices(server, lambda client: client.prices())["offers"]
    said = " ".join(f"{FILTERS[k]} {v}" for k, v in given.items() if k in ("gpu_model", "provider"))
    parts = [f"no offers match {said or 'these filters'}"]
    if "gpu_model" in given:
        models = sorted({str(o["gpu_model"]) for o in offers if o.get("gpu_model")})
        parts.append(f"known GPU models: {', '.join(models) or 'none yet'}")
    if "provider" in given:
        providers = sorted({str(o["provider"]) for o in offers})
        parts.append(f"providers with offers: {', '.join(providers) or 'none yet'}")
    if "gpu_model" not in given and "provider" not in given:
        parts.append("drop --spot/--on-demand or --source to see every offer")
    hint = "; ".join(parts)
    if "gpu_model" in given:
        models = sorted({str(o["gpu_model"]) for o in offers if o.get("gpu_model")})
        close = difflib.get_close_matches(str(given["gpu_model"]), models, n=1, cutoff=0.0)
        if close:
            hint += f"; try `scalar prices --gpu-model {close[0]}`"
    return hint


def register(app: typer.Typer) -> None:
    @app.command("prices")
    @user_errors
    def prices(
        gpu_model: str | None = typer.Option(None, "--gpu-model", help='Only this GPU model, e.g. "H100".'),
        provider: str | None = typer.Option(None, "--provider", help='Only this provider, e.g. "runpod".'),
        spot: bool | None = typer.Option(
            None, "--spot/--on-demand", help="Only spot, or only on-demand offers (default: both)."
        ),
        source: Source | None = typer.Option(
            None, "--source", help="Only built-in market offers, or only live (real providers') offers."
        ),
        sort: SortKey = typer.Option(SortKey.price, "--sort", help="Sort key (price: $/GPU-hour)."),
        descending: bool = typer.Option(False, "--desc", help="Sort descending."),
        server: str = server_option(),
        as_json: bool = typer.Option(False, "--json", help="Print the GET /prices response as JSON."),
        wide: bool = wide_option(),
    ) -> None:
        """Offers of the built-in market and of the real providers the server collects, cheapest first.

        Live offers show their age; STALE ones are a provider's last good prices kept after a failed fetch
        (`scalar providers` shows why). FLAGS are the catalog's anomaly rules applied to the live fetch;
        a flagged, untrusted offer is listed but not quoted."""
        params = {
            "gpu_model": gpu_model,
            "provider": provider,
            "spot": None if spot is None else str(spot).lower(),
            "source": None if source is None else source.value,
            "sort": SORT_PARAM[sort],
            "descending": str(descending).lower(),
        }
        body = call_prices(server, lambda client: client.prices(**params))
        if as_json:
            print_json(body)
            return
        rows = [_row(r) for r in body["offers"]]
        if not rows:
            say(_no_offers_hint(server, params))
            return
        show(make_table(COLUMNS, rows, title=f"Prices ({body['count']} offers, USD)", wide=wide))
