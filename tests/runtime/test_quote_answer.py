"""The quote as a typed answer: ``QuoteOut`` and ``SourcedQuoteOut`` dump the JSON the quote has always been
(key order, ints kept ints, ``pricePerGpuHour`` absent for an offer without GPUs, null for an unlisted offer)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal

from scalar.domain.arbitrage import WorkloadRequirements, find_optimal_placement
from scalar.domain.offers import Offer
from scalar.runtime.market_view import SourcedOffer, quote_json
from scalar.wire.quote import SourcedQuoteOut, decision_out

NOW = datetime(2026, 1, 1, tzinfo=UTC)
PLACEMENT_KEYS = ["provider", "region", "availabilityZone", "instanceType", "pricePerHour", "score"]
DECISION_KEYS = ["alternatives", "scorer", "considered", "removedBy", "regionFallback", "reasons"]
SOURCE_KEYS = ["source", "stale", "ageSeconds"]


def offer(instance_type: str, price: str, gpus: float) -> Offer:
    return Offer(
        provider="acme",
        instance_type=instance_type,
        region="eu",
        price_per_hour=Decimal(price),
        gpu_model="H100" if gpus else None,
        gpu_count=gpus,
        vcpu=8,
        memory_gb=32,
    )


OFFERS = [offer("cpu-8", "2", 0), offer("gpu-1", "3.5", 1), offer("gpu-2", "6", 2)]


def test_the_offline_decision_keeps_its_shape_and_numbers() -> None:
    decision = find_optimal_placement(WorkloadRequirements(min_cpu=4), OFFERS)
    out = decision_out(decision).model_dump(mode="json")
    assert list(out) == PLACEMENT_KEYS + DECISION_KEYS  # the CPU offer: no pricePerGpuHour key
    assert out["instanceType"] == "cpu-8" and out["pricePerHour"] == 2
    assert isinstance(out["pricePerHour"], int)
    by_type = {a["instanceType"]: a for a in out["alternatives"]}
    assert list(by_type["gpu-1"]) == [*PLACEMENT_KEYS, "pricePerGpuHour"]
    assert by_type["gpu-1"]["pricePerHour"] == 3.5 and isinstance(by_type["gpu-2"]["pricePerGpuHour"], int)
    assert all(list(f) == ["filter", "rule", "removed"] for f in out["removedBy"])
    assert all(list(r) == ["code", "resource", "need", "have", "limit", "message"] for r in out["reasons"])


def test_the_sourced_quote_adds_where_each_offer_came_from() -> None:
    decision = find_optimal_placement(WorkloadRequirements(gpu_count=1), OFFERS)
    items = [SourcedOffer(OFFERS[1], "live", NOW, 12.34567, True)]  # gpu-2 is not listed: nulls
    answer = quote_json(decision, items)
    out = answer.model_dump(mode="json")
    assert list(out) == [*PLACEMENT_KEYS, "pricePerGpuHour", *DECISION_KEYS, *SOURCE_KEYS]
    assert (out["source"], out["stale"], out["ageSeconds"]) == ("live", True, 12.346)
    (alt,) = out["alternatives"]
    assert list(alt) == [*PLACEMENT_KEYS, "pricePerGpuHour", *SOURCE_KEYS]
    assert alt["instanceType"] == "gpu-2"
    assert (alt["source"], alt["stale"], alt["ageSeconds"]) == (None, None, None)
    assert SourcedQuoteOut.model_validate_json(json.dumps(out)) == answer
