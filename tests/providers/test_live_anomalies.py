"""The catalog's anomaly rules applied to a live fetch: flagged, explained, dropped or left out of quotes."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal

from scalar.domain.offers import Offer
from scalar.providers.catalog.records import CatalogAnomaly
from scalar.providers.live_anomalies import judge_live_offers
from scalar.runtime.market_view import offer_row, quotable, sourced
from scalar.runtime.prices import LivePrices, RealProvider
from tests.runtime.helpers import Clock


def offer(
    instance_type: str, price: str, *, spot: bool = False, gpus: float = 8, zone: str | None = None
) -> Offer:
    return Offer(
        provider="azure",
        instance_type=instance_type,
        region="eastus",
        price_per_hour=Decimal(price),
        gpu_model="H100",
        gpu_count=gpus,
        availability_zone=zone,
        spot=spot,
    )


def codes(flags: Sequence[CatalogAnomaly]) -> list[str]:
    return [f.code for f in flags]


def test_spot_equal_to_on_demand_is_dropped_with_its_reason() -> None:
    # Azure publishes the H100 v5 sizes' spot price equal to on-demand: no spot discount, no spot offer.
    od, sp = (
        offer("Standard_NC40ads_H100_v5", "6.98", gpus=1),
        offer("Standard_NC40ads_H100_v5", "6.98", spot=True, gpus=1),
    )
    judged = judge_live_offers([od, sp])
    assert judged.offers == (od,)
    (flag,) = judged.dropped
    assert (flag.code, flag.action, flag.spot) == ("spot_not_discounted", "dropped", True)
    assert "6.98" in flag.message and "not a spot discount" in flag.message


def test_spot_above_on_demand_drops_spot_and_distrusts_on_demand() -> None:
    od, sp = offer("x", "0.43", gpus=1), offer("x", "0.86", spot=True, gpus=1)
    judged = judge_live_offers([od, sp])
    assert judged.offers == (od,) and codes(judged.dropped) == ["spot_above_on_demand"]
    assert codes(judged.flags[od.key]) == ["on_demand_doubtful"] and not judged.trusted(od)
    assert "2.00x" in judged.dropped[0].message


def test_price_outliers_are_untrusted_and_an_unusual_gpu_count_is_kept() -> None:
    # Per GPU: 2.00, 2.10, 2.20 and 5.00 (8 GPUs each); median 2.15 -> 5.00 is above 2x.
    group = [offer(f"t{i}", str(Decimal(p) * 8)) for i, p in enumerate(("2.00", "2.10", "2.20", "5.00"))]
    odd = offer("twelve", "24", gpus=12)
    judged = judge_live_offers([*group, odd])
    assert codes(judged.flags[group[3].key]) == ["price_outlier_high"] and not judged.trusted(group[3])
    assert all(judged.trusted(o) for o in group[:3])
    assert codes(judged.flags[odd.key]) == ["gpu_count_unusual"] and judged.trusted(odd)
    assert "median" in judged.flags[group[3].key][0].message


def test_non_positive_prices_are_dropped() -> None:
    judged = judge_live_offers([offer("free", "0")])
    assert judged.offers == () and codes(judged.dropped) == ["non_positive_price"]


class Listed:
    name = "azure"

    def __init__(self, offers: list[Offer]) -> None:
        self.offers = offers

    def list_offers(self, now: datetime) -> list[Offer]:
        return self.offers


def test_the_collector_keeps_flags_and_quotes_leave_untrusted_offers_out() -> None:
    od, sp = offer("x", "0.43", gpus=1), offer("x", "0.86", spot=True, gpus=1)
    fine = offer("y", "2.0", gpus=1)
    client = Listed([od, sp, fine])
    live = LivePrices([RealProvider("azure", True, None, lambda: client, 300.0)], clock=Clock())  # type: ignore[arg-type,return-value]
    assert live.fetch("azure")
    got = {lo.offer.key: lo for lo in live.offers()}
    assert set(got) == {od.key, fine.key}  # the spot price above on-demand never became an offer
    assert not got[od.key].trusted and codes(got[od.key].flags) == ["on_demand_doubtful"]
    (status,) = live.statuses()
    assert (status.anomaly_count, status.untrusted_count) == (2, 1)
    assert [d["code"] for d in status.to_dict()["dropped"]] == ["spot_above_on_demand"]
    rows = sourced([], live.offers(), Clock().now)
    assert [i.offer for i in quotable(rows)] == [fine]
    shown = {r.instance_type: r for r in map(offer_row, rows)}  # GET /prices lists both, with the flags
    doubtful = shown[od.instance_type]
    assert not doubtful.trusted and [f.code for f in doubtful.flags] == ["on_demand_doubtful"]
    assert doubtful.flags[0].action and doubtful.flags[0].message
    assert shown[fine.instance_type].trusted and shown[fine.instance_type].flags == []
