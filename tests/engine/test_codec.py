"""Every event and action survives JSON and back unchanged (the runtime persists them)."""

from __future__ import annotations

import json
from datetime import UTC, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalar.domain.market import BlockGrant, CapacityRequest, NodeEvent, NodeState, Order, OrderState
from scalar.domain.offers import Offer
from scalar.domain.orderbook import BookOrder
from scalar.domain.reasons import Reason
from scalar.domain.tier import Tier
from scalar.engine import (
    BuyCapacity,
    JobCancelRequested,
    JobSpec,
    JobStarted,
    JobSubmitted,
    MarketBook,
    MarketObserved,
    NodeReported,
    OrderUpdated,
    ReleaseBlock,
    ReleaseNodes,
    StartWork,
    StopWork,
    Tick,
    WorkPlacement,
    action_from_dict,
    action_to_dict,
    event_from_dict,
    event_to_dict,
)
from scalar.engine.codec import CodecError
from tests.engine.builders import at, filled, market, sf_offer, spec, submit

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)
times = st.datetimes(timezones=st.sampled_from([UTC, timezone(timedelta(hours=2))]))
money = st.decimals(allow_nan=False, allow_infinity=False, places=4, min_value=-(10**6), max_value=10**6)
numbers = st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(-(10**6), 10**6))
scalars = st.one_of(st.none(), st.integers(), numbers, names)
reasons = st.builds(Reason, names, names, st.one_of(st.none(), names), scalars, scalars, scalars)
tiers = st.sampled_from(Tier)

offers = st.builds(
    Offer,
    provider=names,
    instance_type=names,
    region=names,
    price_per_hour=money,
    gpu_model=st.one_of(st.none(), names),
    gpu_count=numbers,
    gpu_memory_gb=numbers,
    vcpu=numbers,
    memory_gb=numbers,
    availability_zone=st.one_of(st.none(), names),
    spot=st.booleans(),
    interruption_rate=st.one_of(st.none(), numbers),
    observed_at=st.one_of(st.none(), times),
)
book_orders = st.builds(BookOrder, money, st.integers(0, 10**6), money)
requests = st.builds(
    CapacityRequest,
    provider=names,
    instance_type=names,
    node_count=st.integers(0, 100),
    duration_s=st.integers(0, 10**8),
    limit_price_per_gpu_hour=st.one_of(st.none(), money),
    tier=tiers,
    gpu_model=st.one_of(st.none(), names),
    gpus_per_node=st.integers(0, 16),
    spot=st.booleans(),
    region=st.one_of(st.none(), names),
)
grants = st.builds(
    BlockGrant,
    block_id=names,
    provider=names,
    instance_type=names,
    gpu_model=st.one_of(st.none(), names),
    gpus_per_node=st.integers(0, 16),
    vram_per_gpu_gb=numbers,
    cpu_per_node=numbers,
    ram_per_node_gb=numbers,
    start_time=times,
    end_time=times,
    price_per_gpu_hour=money,
    node_ids=st.lists(names, max_size=4).map(tuple),
    spot=st.booleans(),
    region=st.one_of(st.none(), names),
)
orders = st.builds(
    Order,
    names,
    names,
    st.sampled_from(OrderState),
    requests,
    st.one_of(st.none(), grants),
    st.one_of(st.none(), names),
)
node_events = st.builds(
    NodeEvent,
    node_id=names,
    block_id=names,
    at=times,
    state=st.one_of(st.none(), st.sampled_from(NodeState)),
    job_id=st.one_of(st.none(), names),
    job_succeeded=st.one_of(st.none(), st.booleans()),
    reason=st.one_of(st.none(), names),
    details=st.dictionaries(names, names, max_size=3),
)
specs = st.builds(
    JobSpec,
    job_id=names,
    tier=names,
    gpu_count=st.integers(-5, 64),
    vram_per_gpu_gb=numbers,
    cpu_cores=numbers,
    ram_gb=numbers,
    expected_duration_sec=numbers,
    priority=st.integers(-100, 100),
    name=st.one_of(st.none(), names),
    gpu_models=st.one_of(st.none(), st.lists(names, max_size=3).map(tuple)),
    share_gpu=st.booleans(),
    submitted_at=st.one_of(st.none(), times),
)
books = st.builds(
    MarketBook,
    st.lists(book_orders, max_size=3).map(tuple),
    st.lists(book_orders, max_size=3).map(tuple),
    names,
)

events = st.one_of(
    st.builds(JobSubmitted, names, specs),
    st.builds(JobCancelRequested, names, names),
    st.builds(
        MarketObserved,
        names,
        st.lists(offers, max_size=3).map(tuple),
        times,
        st.dictionaries(names, books, max_size=2),
        st.lists(names, max_size=2).map(tuple),
    ),
    st.builds(OrderUpdated, names, names, orders),
    st.builds(NodeReported, names, node_events),
    st.builds(JobStarted, names, names, names),
    st.builds(Tick, names),
)
placements = st.builds(WorkPlacement, names, st.lists(st.integers(0, 7), max_size=8).map(tuple))
actions = st.one_of(
    st.builds(BuyCapacity, names, reasons, names, requests, st.lists(names, max_size=3).map(tuple)),
    st.builds(
        StartWork,
        names,
        reasons,
        names,
        st.lists(placements, min_size=1, max_size=3).map(tuple),
        st.integers(0, 10**7),
    ),
    st.builds(StopWork, names, reasons, names, names, names),
    st.builds(ReleaseBlock, names, reasons, names, names, names),
    st.builds(
        ReleaseNodes, names, reasons, names, names, st.lists(names, min_size=1, max_size=3).map(tuple), names
    ),
)


def through_json(data: dict[str, object]) -> dict[str, object]:
    loaded = json.loads(json.dumps(data))
    assert isinstance(loaded, dict)
    return loaded


@given(events)
def test_every_event_round_trips_through_json(event: object) -> None:
    data = event_to_dict(event)  # type: ignore[arg-type]
    assert data["type"] == type(event).__name__
    back = event_from_dict(through_json(data))
    assert back == event
    assert json.dumps(event_to_dict(back)) == json.dumps(data)  # ints stay ints, "3.00" stays "3.00"


@given(actions)
def test_every_action_round_trips_through_json(action: object) -> None:
    data = action_to_dict(action)  # type: ignore[arg-type]
    back = action_from_dict(through_json(data))
    assert back == action
    assert json.dumps(action_to_dict(back)) == json.dumps(data)


def test_money_is_written_as_a_string_and_times_as_iso() -> None:
    from scalar.engine import Controller

    c = Controller()
    [buy] = c.step(at(0), [market(sf_offer()), *submit(spec("j", 4))])
    data = action_to_dict(buy)
    assert data["request"]["limit_price_per_gpu_hour"] == "2.20"  # type: ignore[index]
    update = filled(buy, at(30))
    assert event_to_dict(update)["order"]["block"]["start_time"] == "2026-03-01T12:00:30+00:00"  # type: ignore[index]


def test_a_bad_record_names_the_field() -> None:
    data = event_to_dict(filled_event())
    data["order"]["request"]["limit_price_per_gpu_hour"] = "lots"  # type: ignore[index]
    with pytest.raises(CodecError) as err:
        event_from_dict(data)
    assert err.value.field == "order.request.limit_price_per_gpu_hour"
    with pytest.raises(CodecError) as err:
        event_from_dict({"type": "Teleported", "stimulus_id": "x"})
    assert err.value.field == "type"
    with pytest.raises(CodecError) as err:
        event_from_dict({"type": "Tick"})
    assert err.value.field == "stimulus_id"


def filled_event() -> OrderUpdated:
    from scalar.engine import Controller

    c = Controller()
    [buy] = c.step(at(0), [market(sf_offer()), *submit(spec("j", 4))])
    return filled(buy, at(30))
