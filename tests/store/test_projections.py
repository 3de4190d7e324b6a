"""Projections (current state for queries) and the market data history."""

from __future__ import annotations

from decimal import Decimal

import pytest

from scalar.domain.offers import Offer
from scalar.store import Store, UnknownProjectionError
from tests.store.timeline import at


def test_upsert_get_list_and_delete(store: Store) -> None:
    with store.write() as tx:
        tx.upsert_projection("jobs", "j2", "PENDING", {"gpus": 8}, at=at(1))
        tx.upsert_projection("jobs", "j1", "PENDING", {"gpus": 4}, at=at(1))
        tx.upsert_projection("jobs", "j3", "RUNNING", {"gpus": 1}, parent_id="n1", at=at(1))
        tx.upsert_projection("jobs", "j1", "RUNNING", {"gpus": 4, "node": "n1"}, parent_id="n1", at=at(2))
    with store.read() as tx:
        j1 = tx.get_projection("jobs", "j1")
        assert j1 is not None
        assert (j1.state, j1.parent_id, j1.data, j1.updated_at) == (
            "RUNNING",
            "n1",
            {"gpus": 4, "node": "n1"},
            at(2),
        )
        assert [p.id for p in tx.list_projection("jobs")] == ["j1", "j2", "j3"]
        assert [p.id for p in tx.list_projection("jobs", "RUNNING")] == ["j1", "j3"]
        assert [p.id for p in tx.list_projection("jobs", parent_id="n1", limit=1, offset=1)] == ["j3"]
        assert tx.count_projection("jobs", "RUNNING") == 2
        assert tx.count_by_state("jobs") == {"PENDING": 1, "RUNNING": 2}
        assert tx.get_projection("nodes", "j1") is None
    with store.write() as tx:
        assert tx.delete_projection("jobs", "j2") is True
        assert tx.delete_projection("jobs", "j2") is False
        assert tx.clear_projection("jobs") == 2
        assert tx.count_projection("jobs") == 0


@pytest.mark.parametrize("table", ["jobs", "nodes", "blocks", "orders", "scale_groups"])
def test_every_projection_table_has_the_same_shape(sqlite_url: str, table: str) -> None:
    with Store.open(sqlite_url) as store:
        with store.write() as tx:
            tx.upsert_projection(table, "x", "READY", {"k": [1, 2]})
        with store.read() as tx:
            assert [(p.table, p.id, p.data) for p in tx.list_projection(table, "READY")] == [
                (table, "x", {"k": [1, 2]})
            ]


def test_an_unknown_projection_table_is_refused_with_the_valid_names(store: Store) -> None:
    valid = "use one of jobs, nodes, blocks, orders, scale_groups"
    with pytest.raises(UnknownProjectionError, match=valid), store.write() as tx:
        tx.upsert_projection("events", "x", None, {})


def offer(price: str, *, t: float, zone: str | None = "us-east-1a", spot: bool = True, **kw: object) -> Offer:
    fields: dict[str, object] = {
        "provider": "aws",
        "instance_type": "p5.48xlarge",
        "region": "us-east-1",
        "price_per_hour": Decimal(price),
        "gpu_model": "H100",
        "gpu_count": 8.0,
        "gpu_memory_gb": 80.0,
        "vcpu": 192.0,
        "memory_gb": 2048.0,
        "availability_zone": zone,
        "spot": spot,
        "interruption_rate": 0.05,
        "observed_at": at(t),
    }
    fields.update(kw)
    return Offer(**fields)  # type: ignore[arg-type]


def test_prices_are_exact_and_latest_prices_keeps_the_newest_per_shape(store: Store) -> None:
    exact = "12345678.123456789012"  # more digits than a float holds
    with store.write() as tx:
        tx.record_prices([offer("31.4641", t=0), offer("29.10", t=0, spot=False, interruption_rate=None)])
        tx.record_prices([offer(exact, t=60)])
        tx.record_prices([offer("1.00", t=30)])  # older than the newest: not the latest
        tx.record_prices(
            [offer("2.31", t=10, provider="sfcompute", instance_type="h100x8", region="us", zone=None)]
        )
    with store.read() as tx:
        latest = tx.latest_prices()
        aws = tx.latest_prices(provider="aws")
        earlier = tx.latest_prices(provider="aws", as_of=at(45))
        h200 = tx.latest_prices(gpu_model="H200")
    assert [(o.provider, o.spot, o.price_per_hour, o.observed_at) for o in latest] == [
        ("aws", False, Decimal("29.10"), at(0)),
        ("aws", True, Decimal(exact), at(60)),
        ("sfcompute", True, Decimal("2.31"), at(10)),
    ]
    assert str(latest[1].price_per_hour) == exact
    assert latest[2].availability_zone is None and latest[1].availability_zone == "us-east-1a"
    assert latest[0].interruption_rate is None and latest[1].interruption_rate == 0.05
    assert latest[1] == offer(exact, t=60)
    assert len(aws) == 2
    assert [o.price_per_hour for o in earlier if o.spot] == [Decimal("1.00")]
    assert h200 == []


def test_an_offer_without_an_observation_time_needs_one(store: Store) -> None:
    with pytest.raises(ValueError, match="observed_at"), store.write() as tx:
        tx.record_prices([offer("1", t=0, observed_at=None)])
    with store.write() as tx:
        assert tx.record_prices([offer("1", t=0, observed_at=None)], observed_at=at(5)) == 1
        assert tx.latest_prices()[0].observed_at == at(5)


def test_money_must_be_decimal(store: Store) -> None:
    with pytest.raises(Exception, match="Decimal"), store.write() as tx:
        tx.record_prices([offer("1", t=0, price_per_hour=2.31)])


def test_get_projections_reads_many_ids_at_once_by_id(store: Store) -> None:
    ids = [f"n{i:04d}" for i in range(1200)]  # more than one query's worth of ids
    with store.write() as tx:
        for i, node in enumerate(ids):
            tx.upsert_projection("nodes", node, "READY", {"index": i}, at=at(1))
    with store.read() as tx:
        wanted = [ids[1100], ids[3], "missing", ids[3], *ids[500:1000]]
        got = tx.get_projections("nodes", wanted)
    assert set(got) == {ids[1100], ids[3], *ids[500:1000]}  # the absent id left out, a repeat once
    assert got[ids[1100]].data == {"index": 1100} and got[ids[3]].state == "READY"
    assert all(got[n].data == {"index": int(n[1:])} for n in ids[500:1000])
