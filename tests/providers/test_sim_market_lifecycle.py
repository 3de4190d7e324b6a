"""Nodes of the built-in market: boot milestones, job timers, expiry, release, boot failures, time scale."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from scalar.domain.gpus import relative_throughput
from scalar.domain.market import CapacityRequest, NodeEvent, NodeState, OrderState
from scalar.domain.tier import Tier
from scalar.providers.base import ProviderError
from scalar.providers.sim import BuiltinMarket, MarketConfig
from tests.providers.conftest_market import (
    T0,
    drain,
    market_url,
    open_market,
    open_sqlite_market,
    sfc_request,
)

__all__ = ["market_url", "open_market", "open_sqlite_market"]

Open = Callable[..., BuiltinMarket]
BOOT = [NodeState.REQUESTING, NodeState.BOOTING, NodeState.INITIALIZING, NodeState.READY]


def _states(events: list[NodeEvent]) -> dict[str, list[NodeState]]:
    by_node: dict[str, list[NodeState]] = defaultdict(list)
    for event in events:
        if event.state is not None:
            by_node[event.node_id].append(event.state)
    return dict(by_node)


def _ready_at(events: list[NodeEvent], node_id: str) -> object:
    return next(e.at for e in events if e.node_id == node_id and e.state is NodeState.READY)


def test_boot_milestones_arrive_once_in_order_however_often_the_caller_asks(open_market: Open) -> None:
    market = open_market(MarketConfig(seed=1))
    sfc = market.provider("sfcompute")
    order = sfc.buy(sfc_request(nodes=3), "boot", T0)
    assert order.block is not None
    until = T0 + timedelta(minutes=20)

    polled, cursor = drain(market, until, provider="sfcompute", step=timedelta(seconds=20))
    again, same_cursor = sfc.events_since(cursor, until)
    once, once_cursor = market.events_since(0, until)

    assert again == [] and same_cursor == cursor
    assert polled == once and cursor == once_cursor
    assert _states(polled) == {node_id: BOOT for node_id in order.block.node_ids}
    times = [event.at for event in polled]
    assert times == sorted(times)
    starts = {e.node_id: e.at for e in polled if e.state is NodeState.REQUESTING}
    for node_id in order.block.node_ids:
        took = _ready_at(polled, node_id) - order.block.start_time  # type: ignore[operator]
        assert timedelta(minutes=4) <= took <= timedelta(minutes=12)  # SFCompute-style: 4-12 minutes
        assert starts[node_id] == T0


def test_events_of_one_provider_stay_with_its_face(open_sqlite_market: Open) -> None:
    market = open_sqlite_market(MarketConfig(seed=1))
    faces = market.providers()
    faces["sfcompute"].buy(sfc_request(), "s", T0)
    offer = next(o for o in faces["runpod"].list_offers(T0) if not o.spot and o.gpu_count == 1)
    request = CapacityRequest("runpod", offer.instance_type, 1, 3600, None, Tier.FAST, gpus_per_node=1)
    pod = faces["runpod"].buy(request, "r", T0)
    assert pod.block is not None
    events, _ = faces["runpod"].events_since(0, T0 + timedelta(minutes=5))
    assert {e.node_id for e in events} == set(pod.block.node_ids)
    assert [e.state for e in events] == BOOT  # pods boot in under 3 minutes
    assert events[-1].at - pod.block.start_time <= timedelta(minutes=3)


def test_a_job_timer_succeeds_after_its_duration(open_market: Open) -> None:
    market = open_market(MarketConfig(seed=1))
    sfc = market.provider("sfcompute")
    order = sfc.buy(sfc_request(hours=4), "jobs", T0)
    assert order.block is not None
    node = order.block.node_ids[0]
    _, cursor = drain(market, T0 + timedelta(minutes=15), provider="sfcompute")
    start = T0 + timedelta(minutes=15)

    sfc.start_work(node, "job-1", 1800, start)
    sfc.start_work(node, "job-1", 1800, start + timedelta(seconds=1))  # asking twice starts it once
    events, cursor = sfc.events_since(cursor, start + timedelta(minutes=29))
    assert events == []
    events, cursor = sfc.events_since(cursor, start + timedelta(minutes=31))

    assert len(events) == 1
    done = events[0]
    assert (done.node_id, done.job_id, done.job_succeeded, done.state) == (node, "job-1", True, None)
    assert done.at == start + timedelta(seconds=1800)
    assert done.reason == "job job-1 finished after 30m00s"


def test_a_job_with_declared_work_runs_it_at_the_speed_of_the_node_it_got(open_sqlite_market: Open) -> None:
    market = open_sqlite_market(MarketConfig(seed=1))
    sfc = market.provider("sfcompute")
    order = sfc.buy(sfc_request(hours=4), "work", T0)
    assert order.block is not None and order.block.gpu_model == "H100"
    node = order.block.node_ids[0]
    _, cursor = drain(market, T0 + timedelta(minutes=15), provider="sfcompute")
    start = T0 + timedelta(minutes=15)
    h100 = relative_throughput("H100")  # 989 / 312 A100 TFLOPS
    assert h100 > 3

    market.declare_work("flex", 3600.0, "FLEX", T0)  # an A100-hour of batch work
    market.declare_work("fast", 1200.0, "fast", T0)  # a service: its wall time on any model
    sfc.start_work(node, "flex", 3600, start)  # the buyer's estimate does not decide the run time
    sfc.start_work(node, "fast", 1200, start)
    sfc.start_work(node, "plain", 900, start)  # never declared: runs what it is told
    sfc.start_work(node, "later", 3000, start)  # declared once running: re-timed from its start
    market.declare_work("later", 7200.0, "FLEX", start + timedelta(minutes=1))

    events, _ = sfc.events_since(cursor, start + timedelta(hours=2))
    ended = {e.job_id: e.at - start for e in events if e.job_id}
    assert all(e.job_succeeded for e in events if e.job_id)
    assert ended["flex"] == timedelta(seconds=round(3600 / h100, 6))
    assert ended["later"] == timedelta(seconds=round(7200 / h100, 6))
    assert ended["fast"] == timedelta(seconds=1200)
    assert ended["plain"] == timedelta(seconds=900)
    with pytest.raises(ProviderError, match="finite number"):
        market.declare_work("bad", float("nan"), "FLEX", start)


def test_stopped_work_never_reports(open_sqlite_market: Open) -> None:
    market = open_sqlite_market(MarketConfig(seed=1))
    sfc = market.provider("sfcompute")
    order = sfc.buy(sfc_request(), "stop", T0)
    assert order.block is not None
    node = order.block.node_ids[0]
    _, cursor = drain(market, T0 + timedelta(minutes=15))
    sfc.start_work(node, "job-2", 600, T0 + timedelta(minutes=15))
    sfc.stop_work(node, "job-2", T0 + timedelta(minutes=16))
    sfc.stop_work(node, "job-2", T0 + timedelta(minutes=17))  # already stopped: no-op
    events, _ = sfc.events_since(cursor, T0 + timedelta(hours=1))
    assert [e for e in events if e.job_id] == []
    with pytest.raises(ProviderError, match="never started") as caught:
        sfc.stop_work(node, "other", T0 + timedelta(hours=1))
    assert caught.value.retryable is False


def test_work_on_a_node_that_is_not_ready_or_not_yours_is_refused(open_market: Open) -> None:
    market = open_market(MarketConfig(seed=1))
    sfc = market.provider("sfcompute")
    order = sfc.buy(sfc_request(), "early", T0)
    assert order.block is not None
    node = order.block.node_ids[0]
    with pytest.raises(ProviderError, match="is requesting, not ready") as caught:
        sfc.start_work(node, "job", 60, T0 + timedelta(seconds=30))
    assert caught.value.retryable is False
    with pytest.raises(ProviderError, match="is booting, not ready"):
        sfc.start_work(node, "job", 60, T0 + timedelta(minutes=3, seconds=30))
    with pytest.raises(ProviderError, match="not a node aws sold"):
        market.provider("aws").start_work(node, "job", 60, T0 + timedelta(minutes=15))
    with pytest.raises(ProviderError, match="not a node sfcompute sold"):
        sfc.start_work("no-such-node", "job", 60, T0 + timedelta(minutes=15))
    sfc.start_work(node, "job", 60, T0 + timedelta(minutes=15))  # READY by now


def test_expiry_terminates_the_nodes_and_kills_running_work_with_a_reason(open_market: Open) -> None:
    market = open_market(MarketConfig(seed=6))
    sfc = market.provider("sfcompute")
    order = sfc.buy(sfc_request(nodes=2, hours=1), "short", T0)
    assert order.block is not None
    end = order.block.end_time
    assert end == T0 + timedelta(hours=1)  # 12:00 is a whole minute and 13:00 a whole hour
    node = order.block.node_ids[0]
    _, cursor = drain(market, T0 + timedelta(minutes=15))
    sfc.start_work(node, "long-job", 4 * 3600, T0 + timedelta(minutes=15))
    sfc.start_work(node, "short-job", 600, T0 + timedelta(minutes=15))

    events, _ = sfc.events_since(cursor, end + timedelta(minutes=1))

    short, killed, *terminated = events
    assert (short.job_id, short.job_succeeded) == ("short-job", True)
    assert (killed.job_id, killed.job_succeeded, killed.at) == ("long-job", None, end)
    assert killed.details["cause"] == "contract_ended"
    assert killed.reason == "job long-job killed after 45m00s of 4h00m: the node's contract ended"
    assert [(e.node_id, e.state, e.at) for e in terminated] == [
        (node_id, NodeState.TERMINATED, end) for node_id in order.block.node_ids
    ]
    assert terminated[0].details == {"cause": "contract_ended"}
    with pytest.raises(ProviderError, match="is terminated, not ready"):
        sfc.start_work(node, "late", 60, end + timedelta(minutes=2))


def test_release_terminates_now_and_resells_nothing_the_buyer_is_not_credited_for(open_market: Open) -> None:
    """A released block's nodes end at once; its remaining hours are not relisted behind the buyer's back
    (only a sell order resells a buyer's time, and credits it: engine/resale.py)."""
    market = open_market(MarketConfig(seed=6))
    sfc = market.provider("sfcompute")
    order = sfc.buy(sfc_request(nodes=2, hours=10), "release-me", T0)
    assert order.block is not None
    _, cursor = drain(market, T0 + timedelta(minutes=15))
    node = order.block.node_ids[1]
    sfc.start_work(node, "job", 3600, T0 + timedelta(minutes=15))
    at = T0 + timedelta(hours=2, minutes=30)
    before = sfc.orderbook("8xH100", at)
    assert before is not None

    sfc.release(order.block.block_id, at)
    sfc.release(order.block.block_id, at + timedelta(minutes=1))  # once is enough

    events, _ = sfc.events_since(cursor, at + timedelta(minutes=2))
    finished, *terminated = events
    assert (finished.job_id, finished.job_succeeded) == ("job", True)  # it ended before the release
    assert [(e.state, e.at) for e in terminated] == [(NodeState.TERMINATED, at)] * 2
    assert terminated[0].details == {"cause": "released"}
    after = sfc.orderbook("8xH100", at)
    assert after is not None
    assert after.asks == before.asks
    with pytest.raises(ProviderError, match="no block 'nope'"):
        sfc.release("nope", at)
    with pytest.raises(ProviderError, match="sold by aws"):
        market.provider("aws").release(order.block.block_id, at)


def test_release_of_a_running_job_kills_it(open_sqlite_market: Open) -> None:
    market = open_sqlite_market(MarketConfig(seed=6))
    sfc = market.provider("sfcompute")
    order = sfc.buy(sfc_request(hours=3), "release-job", T0)
    assert order.block is not None
    _, cursor = drain(market, T0 + timedelta(minutes=15))
    sfc.start_work(order.block.node_ids[0], "job", 7200, T0 + timedelta(minutes=15))
    sfc.release(order.block.block_id, T0 + timedelta(minutes=45))
    events, _ = sfc.events_since(cursor, T0 + timedelta(hours=1))
    assert [(e.job_id, e.job_succeeded, e.state) for e in events] == [
        ("job", None, None),
        (None, None, NodeState.TERMINATED),
    ]
    assert events[0].details == {"cause": "released", "outcome": "killed"}


def test_injected_boot_failures_fail_the_next_nodes_only(open_market: Open) -> None:
    market = open_market(MarketConfig(seed=1))
    sfc = market.provider("sfcompute")
    market.fail_next_boot(1, provider="sfcompute")
    first = sfc.buy(sfc_request(nodes=2), "fail-1", T0)
    second = sfc.buy(sfc_request(nodes=1), "fail-2", T0)
    assert first.block is not None and second.block is not None
    events, _ = drain(market, T0 + timedelta(minutes=20))
    states = _states(events)
    failed, healthy = first.block.node_ids
    assert states[failed] == [*BOOT[:3], NodeState.FAILED]
    assert states[healthy] == BOOT and states[second.block.node_ids[0]] == BOOT
    failure = next(e for e in events if e.state is NodeState.FAILED)
    assert failure.reason == "boot failed: the node did not pass its health check (injected (fail_next_boot))"
    assert failure.details == {"cause": "boot_failed"}
    with pytest.raises(ProviderError, match="is failed, not ready"):
        sfc.start_work(failed, "job", 60, T0 + timedelta(minutes=20))
    late, _ = market.events_since(0, T0 + timedelta(hours=6))
    assert [e.state for e in late if e.node_id == failed][-1] is NodeState.FAILED  # never terminates again


def test_a_boot_failure_rate_of_one_fails_every_boot(open_sqlite_market: Open) -> None:
    market = open_sqlite_market(MarketConfig(seed=1, boot_failure_rate=1.0))
    order = market.provider("sfcompute").buy(sfc_request(nodes=3), "all-fail", T0)
    assert order.state is OrderState.FILLED
    events, _ = drain(market, T0 + timedelta(minutes=20))
    assert [e.state for e in events if e.state in (NodeState.READY, NodeState.FAILED)] == [
        NodeState.FAILED
    ] * 3


def test_time_scale_divides_boot_delays_and_contract_lengths(open_market: Open, tmp_path: Path) -> None:
    real = open_market(MarketConfig(seed=13))
    fast = open_market(MarketConfig(seed=13, time_scale=60), url=f"sqlite:///{tmp_path}/fast.db")
    results = []
    for market, scale in ((real, 1), (fast, 60)):
        aws = market.provider("aws")
        offer = next(o for o in aws.list_offers(T0) if o.instance_type == "p5.48xlarge" and not o.spot)
        request = CapacityRequest(
            "aws", offer.instance_type, 1, 6 * 3600, None, Tier.FAST, region=offer.region
        )
        order = aws.buy(request, "scaled", T0)
        assert order.block is not None
        events, _ = drain(market, T0 + timedelta(minutes=15) / scale, provider="aws")
        results.append((order.block, events))
    (real_block, real_events), (fast_block, fast_events) = results
    assert real_block.end_time - real_block.start_time == timedelta(hours=6)
    assert fast_block.end_time - fast_block.start_time == timedelta(minutes=6)
    assert [e.state for e in real_events] == [e.state for e in fast_events] == BOOT
    for slow, quick in zip(real_events[1:], fast_events[1:], strict=True):
        assert abs((slow.at - T0) / 60 - (quick.at - T0)) <= timedelta(microseconds=2)
    sfc_fast = fast.provider("sfcompute").buy(
        sfc_request(hours=2), "scaled-sfc", T0 + timedelta(seconds=20.5)
    )
    assert sfc_fast.block is not None
    assert sfc_fast.block.start_time == T0 + timedelta(seconds=21)  # the next whole market minute (1 s)
    assert sfc_fast.block.end_time == T0 + timedelta(minutes=3)  # + 2 market hours (120 s), up to a 60 s hour
    assert "2.65 h billed" in (sfc_fast.reason or "")  # 159 s of a 60x market stand for 2.65 hours


def test_single_nodes_of_an_hourly_block_stop_alone(open_sqlite_market: Open) -> None:
    market = open_sqlite_market(MarketConfig(seed=6))
    aws = market.provider("aws")
    offer = min((o for o in aws.list_offers(T0) if not o.spot), key=lambda o: (o.gpu_count, o.key))
    request = CapacityRequest(
        "aws", offer.instance_type, 3, 4 * 3600, None, Tier.FAST,
        gpus_per_node=int(offer.gpu_count), region=offer.region,
    )  # fmt: skip
    order = aws.buy(request, "three", T0)
    assert order.block is not None
    first, second, third = order.block.node_ids
    _, cursor = drain(market, T0 + timedelta(minutes=15), provider="aws")
    aws.start_work(first, "stays", 7200, T0 + timedelta(minutes=15))
    aws.start_work(second, "killed", 7200, T0 + timedelta(minutes=15))
    at = T0 + timedelta(minutes=30)

    aws.release_nodes(order.block.block_id, [second, third], at)
    aws.release_nodes(order.block.block_id, [third], at + timedelta(minutes=1))  # already gone: fine

    events, _ = aws.events_since(cursor, at + timedelta(minutes=2))
    assert [(e.node_id, e.job_id, e.state, e.at) for e in events] == [
        (second, "killed", None, at),
        (second, None, NodeState.TERMINATED, at),
        (third, None, NodeState.TERMINATED, at),
    ]
    assert events[1].details == {"cause": "released"}
    # The first node runs on and finishes its job; the block is not released.
    later, _ = aws.events_since(cursor, T0 + timedelta(hours=2, minutes=16))
    assert (first, "stays", True) in [(e.node_id, e.job_id, e.job_succeeded) for e in later]
    with pytest.raises(ProviderError, match="nodes nope are not of block"):
        aws.release_nodes(order.block.block_id, ["nope"], at)
    with pytest.raises(ProviderError, match="sold by prime"):
        market.provider("prime").release_nodes(order.block.block_id, [first], at)


def test_a_block_paid_whole_loses_no_single_node(open_sqlite_market: Open) -> None:
    market = open_sqlite_market(MarketConfig(seed=6))
    sfc = market.provider("sfcompute")
    order = sfc.buy(sfc_request(nodes=2, hours=3), "whole", T0)
    assert order.block is not None
    with pytest.raises(ProviderError, match="a contract paid whole") as caught:
        sfc.release_nodes(order.block.block_id, [order.block.node_ids[0]], T0 + timedelta(minutes=20))
    assert caught.value.retryable is False
