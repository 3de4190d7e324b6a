"""``scalar quote``: which spot offer should this workload take? (seed 002's arbitrage).

With ``--prices FILE`` it decides offline over the file; without, it asks the running server's ``POST /quote``,
which decides over the built-in market's offers and the real providers' collected (live) ones.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

import typer

from scalar.api.client import ServerProblem, ServerUnreachable
from scalar.cli.errors import user_errors
from scalar.cli.inputs import parse_json_file
from scalar.cli.jobs import print_problem_and_exit, server_option
from scalar.cli.output import Col, explain, make_table, print_json, show, wide_option
from scalar.cli.prices import PricesClient, age_text, usd
from scalar.domain.arbitrage import (
    NoSuitableInstanceError,
    Placement,
    PlacementDecision,
    find_optimal_placement,
)
from scalar.domain.money import round_micros, usd_cents_plain, usd_exact
from scalar.wire.quote import PricesFile, RequirementsFile, decision_out

# A valid request that no offer satisfies is an answer, not a usage error: exit 1 (bad input exits 2).
NO_SUITABLE_INSTANCE = 1


class ScorerName(StrEnum):
    default = "default"
    seed = "seed"


COLUMNS = [
    Col("rank", "key"),
    Col("provider", "key"),
    Col("region", "key"),
    Col("availability_zone", "key", wide=True),
    Col("instance_type", "id"),
    Col("offer", "text"),  # GPUs, spot or on-demand
    Col("per_gpu_h", "num"),
    Col("per_h", "num", wide=True),
    Col("interruption_rate", "num", wide=True),
    Col("score", "num"),
]


def _offer(gpus: str | None, spot: bool) -> str:
    kind = "spot" if spot else "on-demand"
    return kind if gpus is None else f"{gpus} {kind}"


def _row(label: str, p: Placement) -> list[object]:
    o = p.offer
    per_gpu = p.price_per_gpu_hour
    return [
        label,
        o.provider,
        o.region,
        o.availability_zone,
        o.instance_type,
        _offer(f"{o.gpu_count:g} x {o.gpu_model}" if o.gpu_count > 0 else None, o.spot),
        None if per_gpu is None else usd_cents_plain(per_gpu),
        usd_exact(round_micros(o.price_per_hour)),
        None if o.interruption_rate is None else f"{o.interruption_rate:g}",
        f"{p.score:.2f}",
    ]


def _print_table(decision: PlacementDecision, wide: bool) -> None:
    rows = [_row("1 (chosen)", Placement(decision.offer, decision.score))]
    rows += [_row(str(i), a) for i, a in enumerate(decision.alternatives, start=2)]
    show(make_table(COLUMNS, rows, title=f"Placement ({decision.scorer} scorer)", wide=wide))
    for reason in decision.reasons:
        explain(f"- {reason.message}")


LIVE_COLUMNS = [
    Col("rank", "key"),
    Col("provider", "key"),
    Col("source", "key", wide=True),
    Col("region", "key"),
    Col("availability_zone", "key", wide=True),
    Col("instance_type", "id"),
    Col("per_gpu_h", "num"),
    Col("per_h", "num", wide=True),
    Col("score", "num"),
    Col("age", "key"),
]
NO_MATCH_TYPE = "urn:scalar:problem:no-suitable-offer"


def _live_row(label: str, p: Mapping[str, Any]) -> list[object]:
    age = age_text(p.get("ageSeconds")) if p.get("source") == "live" else "now"
    return [
        label,
        p.get("provider"),
        p.get("source"),
        p.get("region"),
        p.get("availabilityZone"),
        p.get("instanceType"),
        usd(p.get("pricePerGpuHour")),
        usd(p.get("pricePerHour")),
        f"{p.get('score', 0):.2f}",
        f"{age} (STALE)" if p.get("stale") else age,
    ]


def _print_live_table(decision: Mapping[str, Any], wide: bool) -> None:
    rows = [_live_row("1 (chosen)", decision)]
    rows += [_live_row(str(i), a) for i, a in enumerate(decision.get("alternatives", []), start=2)]
    title = f"Placement over live offers ({decision.get('scorer')} scorer)"
    show(make_table(LIVE_COLUMNS, rows, title=title, wide=wide))
    for reason in decision.get("reasons", []):
        explain(f"- {reason.get('message')}")


def _ask_server(server: str, body: Mapping[str, Any], scorer: str) -> dict[str, Any]:
    client = PricesClient(server)
    try:
        return client.quote(body, scorer)
    except ServerProblem as exc:
        if exc.problem.type == NO_MATCH_TYPE:
            for line in exc.problem.lines():
                sys.stderr.write(line + "\n")
            raise typer.Exit(NO_SUITABLE_INSTANCE) from None
        print_problem_and_exit(exc)
    except ServerUnreachable as exc:
        print_problem_and_exit(exc)
    finally:
        client.close()


def register(app: typer.Typer) -> None:
    @app.command("quote")
    @user_errors
    def quote(
        prices: Path | None = typer.Option(
            None,
            "--prices",
            help="PRICES.json: a list of seed 002 SpotPrice records. Omit it to quote live offers from "
            "the server (--server).",
        ),
        requirements: Path = typer.Option(
            ..., "--requirements", help="REQ.json: seed 002's WorkloadRequirements (camelCase)."
        ),
        scorer: ScorerName = typer.Option(
            ScorerName.default,
            "--scorer",
            help="default: $/GPU-hour on a fixed scale; seed: the seed's formula ($10/h price ceiling).",
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the decision as JSON."),
        server: str = server_option(),
        wide: bool = wide_option(),
    ) -> None:
        """Pick the best offer for a workload from a price list (or, without --prices, from the server's
        built-in and live offers), with the top 3 alternatives.

        Exits 1 when no offer fits (the message says which filter removed how many and what to relax),
        2 on unreadable or invalid input.
        """
        if prices is None:
            parsed = parse_json_file(requirements, RequirementsFile)
            answer = _ask_server(server, parsed.model_dump(exclude_unset=True), scorer.value)
            if as_json:
                print_json(answer)
            else:
                _print_live_table(answer, wide)
            return
        offers = parse_json_file(prices, PricesFile).to_offers()
        req = parse_json_file(requirements, RequirementsFile).to_requirements()
        try:
            decision = find_optimal_placement(req, offers, scorer=scorer.value)
        except NoSuitableInstanceError as exc:
            sys.stderr.write(f"error: {exc}\n")
            raise typer.Exit(NO_SUITABLE_INSTANCE) from None
        if as_json:
            print_json(decision_out(decision).model_dump(mode="json"))
        else:
            _print_table(decision, wide)
