"""Print the packaged catalog's summary as Markdown: ``python -m scalar.providers.catalog``.

docs/prices.md embeds this output (offer counts, anomaly counts, reference prices), so the numbers in
the documentation are the ones the code computes.
"""

from __future__ import annotations

import sys
from collections import Counter

from scalar.providers.catalog.catalog import Catalog
from scalar.providers.catalog.loader import load_catalog

REFERENCE_MODELS = ("H100", "H200")


def _offer_table(catalog: Catalog) -> list[str]:
    lines = ["| provider | on-demand offers | spot offers | untrusted offers |", "|---|---|---|---|"]
    for provider in catalog.providers:
        offers = catalog.by_provider(provider)
        spot = sum(offer.spot for offer in offers)
        untrusted = sum(not catalog.is_trusted(offer) for offer in offers)
        lines.append(f"| {provider} | {len(offers) - spot} | {spot} | {untrusted} |")
    return lines


def _anomaly_table(catalog: Catalog) -> list[str]:
    actions: dict[str, Counter[str]] = {}
    providers: dict[str, Counter[str]] = {}
    for anomaly in catalog.anomalies:
        actions.setdefault(anomaly.code, Counter())[anomaly.action] += 1
        providers.setdefault(anomaly.code, Counter())[anomaly.provider] += 1
    lines = ["| code | flags | action | providers |", "|---|---|---|---|"]
    for code, count in catalog.anomaly_counts().items():
        action = ", ".join(sorted(actions[code]))
        where = ", ".join(f"{provider} {n}" for provider, n in sorted(providers[code].items()))
        lines.append(f"| `{code}` | {count} | {action} | {where} |")
    return lines


def _reference_table(catalog: Catalog) -> list[str]:
    lines = [
        "| GPU | kind | GPUs per offer | reference $/GPU-h | providers' medians $/GPU-h (offers) |",
        "|---|---|---|---|---|",
    ]
    for model in REFERENCE_MODELS:
        for spot in (False, True):
            for minimum in (0.0, 8.0):
                value = catalog.reference_price_per_gpu_hour(model, spot, min_gpu_count=minimum)
                medians = catalog.provider_medians(model, spot, min_gpu_count=minimum)
                counts = Counter(
                    o.provider for o in catalog.reference_offers(model, spot, min_gpu_count=minimum)
                )
                detail = ", ".join(f"{p} {m} ({counts[p]})" for p, m in medians.items())
                kind = "spot" if spot else "on-demand"
                size = "8+" if minimum else "any"
                lines.append(f"| {model} | {kind} | {size} | {value} | {detail} |")
    return lines


def render(catalog: Catalog) -> str:
    sections = [
        f"{len(catalog.offers)} offers ({len(catalog.trusted_offers())} trusted), "
        f"{len(catalog.anomalies)} anomaly flags, {len(catalog.specs)} instance specs.",
        "",
        *_offer_table(catalog),
        "",
        *_anomaly_table(catalog),
        "",
        *_reference_table(catalog),
    ]
    return "\n".join(sections) + "\n"


def main() -> int:
    sys.stdout.write(render(load_catalog()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
