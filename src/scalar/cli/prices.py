"""``scalar prices``: every offer the running server knows (built-in and live), by $/GPU-hour, with freshness.

Also holds ``PricesClient``: the API client with the market-view calls (``scalar providers`` and the live mode
of ``scalar quote`` use it too).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any, TypeVar

import typer
from rich.measure import Measurement
from rich.table import Table

from scalar.api.client import ScalarClient, ServerProblem, ServerUnreachable
from scalar.cli.errors import user_errors
from scalar.cli.jobs import print_problem_and_exit, server_option
from scalar.cli.output import console, make_table, print_json

T = TypeVar("T")

COLUMNS = [
    "provider",
    "source",
    "region",
    "instance_type",
    "gpus",
    "kind",
    "price_per_gpu_hour",
    "price_per_hour",
    "interruption_rate",
    "age",
    "fresh",
    "flags",
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


def print_wide(table: Table) -> None:
    """Print ``table``; to a file or a pipe whole rows, never truncated or wrapped."""
    out = console()
    if not out.is_terminal:
        out.width = max(out.width, Measurement.get(out, out.options.update_width(1000), table).maximum)
    out.print(table)


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
    return f"${value:,.2f}" if value >= 1 else f"${value:.4f}"


def _row(r: Mapping[str, Any]) -> list[Any]:
    gpus = f"{r['gpu_count']:g} x {r['gpu_model']}" if r.get("gpu_count") and r.get("gpu_model") else None
    rate = r.get("interruption_rate")
    return [
        r["provider"],
        r["source"],
        r["region"],
        r["instance_type"],
        gpus,
        "spot" if r["spot"] else "on-demand",
        usd(r.get("price_per_gpu_hour")),
        usd(r.get("price_per_hour")),
        None if rate is None else f"{rate:g}",
        age_text(r.get("age_s")) if r["source"] == "live" else "now",
        "STALE" if r.get("stale") else "ok",
        ", ".join(f["code"] for f in r.get("flags") or ())
        + ("" if r.get("trusted", True) else " (not quoted)"),
    ]


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
        print_wide(make_table(COLUMNS, rows, title=f"Prices ({body['count']} offers, USD)"))
