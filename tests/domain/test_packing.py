"""Seed 001's bin packing, read like the seed: build the nodes, place the job, check the decision and why.

The nodes are the seed's shape unless said otherwise: 8 GPUs x 80 GB, 64 CPU cores, 512 GB RAM, on a
Prime Intellect block that ends in 10 hours.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from scalar.domain.errors import InvalidSpecError
from scalar.domain.gpus import relative_throughput
from scalar.domain.packing import (
    BIN_PACK_SAFETY_MARGIN_SEC,
    EXPIRES_TOO_SOON,
    GPU_MODEL_NOT_ALLOWED,
    INSUFFICIENT_CPU,
    INSUFFICIENT_GPUS,
    INSUFFICIENT_RAM,
    LARGER_THAN_ANY_NODE,
    LOWER_SCORE,
    NO_NODE_FITS,
    NO_NODES,
    TIER_MISMATCH,
    PlacementDecision,
    PlacementKind,
    expected_run_s,
    schedule_job,
)
from scalar.domain.packing_apply import PlacementConflictError, apply_placement, book_job, release_job
from scalar.domain.packing_model import Block, GpuSlot, Job, Node, order_pending
from scalar.domain.packing_score import (
    expiry_penalty,
    fit_gpus,
    fragmentation,
    provider_bonus,
    provider_hint,
    utilization_after,
)
from scalar.domain.tier import Tier

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
HOUR = 3600.0


# --- builders -------------------------------------------------------------------------------------------


def block(
    provider: str = "prime",
    *,
    seconds_left: float = 10 * HOUR,
    tier: Tier = Tier.FAST,
    gpus: int = 8,
    vram_gb: float = 80.0,
    cpu: float = 64,
    ram_gb: float = 512.0,
    gpu_model: str | None = "H100",
    id: str = "blk",
) -> Block:
    return Block(
        id=id,
        provider=provider,
        instance_type=f"{gpus}x{gpu_model}",
        gpus_per_node=gpus,
        vram_per_gpu_gb=vram_gb,
        cpu_per_node=cpu,
        ram_per_node_gb=ram_gb,
        start_time=NOW - timedelta(hours=1),
        end_time=NOW + timedelta(seconds=seconds_left),
        cost_per_hour=Decimal("16.00"),
        tier=tier,
        gpu_model=gpu_model,
    )


def node(
    id: str,
    blk: Block | None = None,
    *,
    held: Mapping[int, float] | None = None,
    shared: Mapping[int, tuple[float, tuple[str, ...]]] | None = None,
    unowned: Mapping[int, float] | None = None,
    cpu_used: float = 0.0,
    ram_used_gb: float = 0.0,
    tier: Tier | None = None,
) -> Node:
    """A node of ``blk``. ``held``: GPUs held alone (index -> VRAM used); ``shared``: shared GPUs
    (index -> (VRAM used, job ids)); ``unowned``: VRAM used with no job on the GPU (the seed's Node A, GPU 2)."""
    blk = blk or block()
    held, shared, unowned = held or {}, shared or {}, unowned or {}
    slots = []
    for i in range(blk.gpus_per_node):
        if i in held:
            slots.append(GpuSlot(i, blk.vram_per_gpu_gb, held[i], job_id=f"other-{i}"))
        elif i in shared:
            used, jobs = shared[i]
            slots.append(GpuSlot(i, blk.vram_per_gpu_gb, used, job_ids=jobs))
        else:
            slots.append(GpuSlot(i, blk.vram_per_gpu_gb, unowned.get(i, 0.0)))
    return Node(
        id=id,
        block=blk,
        tier=blk.tier if tier is None else tier,
        gpu_slots=tuple(slots),
        cpu_used=cpu_used,
        ram_used_gb=ram_used_gb,
    )


def job(
    gpus: int = 2,
    vram_gb: float = 40.0,
    *,
    tier: Tier = Tier.FAST,
    cpu: float = 8,
    ram_gb: float = 64.0,
    duration_s: float = HOUR,
    share: bool = False,
    models: tuple[str, ...] | None = None,
    id: str = "job-1",
    priority: int = 0,
    submitted_at: datetime | None = None,
) -> Job:
    return Job(
        id=id,
        tier=tier,
        gpu_count=gpus,
        vram_per_gpu_gb=vram_gb,
        cpu_cores=cpu,
        ram_gb=ram_gb,
        expected_duration_sec=duration_s,
        priority=priority,
        gpu_models=models,
        share_gpu=share,
        submitted_at=submitted_at,
    )


def only_reason(decision: PlacementDecision, node_id: str) -> str:
    (rejection,) = [r for r in decision.rejections if r.node_id == node_id]
    return rejection.reason.code


# --- the seed's worked examples ---------------------------------------------------------------------------


def test_example_1_empty_node_scores_0145_and_takes_gpus_0_1() -> None:
    decision = schedule_job(job(gpus=2, vram_gb=40), [node("node-a")], NOW)

    assert decision.kind is PlacementKind.EXISTING_NODE
    assert decision.node_id == "node-a"
    assert decision.gpu_indices == (0, 1)
    assert decision.provider == "prime"
    assert decision.score is not None
    assert decision.score.utilization == pytest.approx(80 / 640)
    assert decision.score.fragmentation == 0.0
    assert decision.score.expiry_penalty == 0.0
    assert decision.score.provider_bonus == 0.1
    assert decision.score.score == pytest.approx(0.145)
    assert decision.rejections == ()


def test_example_3_empty_node_scores_0145_not_0225_the_code_wins() -> None:
    # Example 3 shows the same kind of node (12.5% after placement, Prime, small job) at 0.225 = 0.125 + 0.1,
    # i.e. the provider bonus added without its 0.2 weight. The seed's code weights it: 0.125 + 0.2 * 0.1.
    decision = schedule_job(job(gpus=4, vram_gb=20), [node("node-a")], NOW)

    assert decision.score is not None
    assert decision.score.score == pytest.approx(0.145)
    assert decision.score.score != pytest.approx(0.225)


def test_example_3_multi_node_choice_picks_the_fullest_node() -> None:
    empty = node("node-a")
    half = node("node-b", held={4: 80, 5: 80, 6: 80, 7: 80})  # 50% of 640 GB used
    # 75% used yet 4 GPUs hold no job: the only way the seed's own filter admits a 4-GPU job here.
    three_quarters = node("node-c", held={4: 80, 5: 80, 6: 80, 7: 80}, unowned={0: 40, 1: 40, 2: 40, 3: 40})
    four_by_20 = job(gpus=4, vram_gb=20)

    decision = schedule_job(four_by_20, [empty, half, three_quarters], NOW)

    assert decision.node_id == "node-c"
    assert decision.gpu_indices == (0, 1, 2, 3)
    assert decision.score is not None
    assert decision.score.utilization == pytest.approx(0.875)
    assert decision.score.score == pytest.approx(0.875 + 0.02)
    scores = {r.node_id: r.score for r in decision.rejections}
    assert scores == {"node-a": pytest.approx(0.145), "node-b": pytest.approx(0.645)}
    for rejection in decision.rejections:
        assert rejection.reason.code == LOWER_SCORE
        assert rejection.reason.limit == pytest.approx(0.895)
        assert "node-c" in rejection.reason.message


def test_example_3_with_gpu_sharing_the_shared_gpus_take_a_sharing_job_only() -> None:
    inference = {i: (40.0, (f"inf-{i}",)) for i in range(4)}
    three_quarters = node("node-c", held={4: 80, 5: 80, 6: 80, 7: 80}, shared=inference)
    half = node("node-b", held={4: 80, 5: 80, 6: 80, 7: 80})

    sharing = schedule_job(job(gpus=4, vram_gb=20, share=True), [half, three_quarters], NOW)
    exclusive = schedule_job(job(gpus=4, vram_gb=20), [half, three_quarters], NOW)

    assert sharing.node_id == "node-c"
    assert exclusive.node_id == "node-b"
    assert only_reason(exclusive, "node-c") == INSUFFICIENT_GPUS


def test_example_2_fragmentation_prefers_the_contiguous_node_and_measures_0_75_not_1_0() -> None:
    # The seed says [0, 2, 4, 6] has fragmentation 1.0 ("average gap"); its code divides the summed gaps
    # (3) by the number of GPUs (4): 0.75. The code wins, so node A scores 0.5 - 0.5 * 0.75 = 0.125, not 0.0.
    sf = block("sfcompute")  # no provider bonus for a 4-GPU job, as the example's scores assume
    fragmented = node("node-a", sf, held={1: 40, 3: 40, 5: 40, 7: 40})
    contiguous = node("node-b", sf, held={4: 40, 5: 40, 6: 40, 7: 40})

    decision = schedule_job(job(gpus=4, vram_gb=40), [fragmented, contiguous], NOW)

    assert decision.node_id == "node-b"
    assert decision.gpu_indices == (0, 1, 2, 3)
    assert decision.score is not None
    assert decision.score.utilization == pytest.approx(0.5)
    assert decision.score.score == pytest.approx(0.5)
    (loser,) = decision.rejections
    assert loser.score == pytest.approx(0.5 - 0.5 * 0.75)
    assert fragmentation([0, 2, 4, 6]) == 0.75
    assert fragmentation([0, 1, 2, 3]) == 0.0


def test_the_filter_visual_finds_seven_gpus_not_six_and_picks_the_contiguous_four() -> None:
    # The seed: "Result: 6 GPUs available (0,1,3,4,5,6,7)" lists seven. GPU 2 has 40 GB free for a 60 GB ask.
    node_a = node("node-a", unowned={2: 40})
    four_by_60 = job(gpus=4, vram_gb=60)

    fit = fit_gpus(four_by_60, node_a)
    decision = schedule_job(four_by_60, [node_a], NOW)

    assert fit.usable == 7
    assert fit.too_small == 1
    # The seed's first-N pick (0, 1, 3, 4) has a gap; the most contiguous set of four has none.
    assert decision.gpu_indices == (3, 4, 5, 6)
    assert decision.score is not None and decision.score.fragmentation == 0.0


def test_utilization_example_two_gpus_used_plus_4x40_is_half() -> None:
    partly_used = node("node-a", held={0: 80, 1: 80})

    decision = schedule_job(job(gpus=4, vram_gb=40), [partly_used], NOW)

    assert decision.gpu_indices == (2, 3, 4, 5)
    assert decision.score is not None
    assert decision.score.utilization == pytest.approx(320 / 640)


def test_utilization_is_capped_at_one_and_zero_without_vram() -> None:
    assert utilization_after(640, 600, job(gpus=1, vram_gb=80)) == 1.0
    assert utilization_after(0, 0, job(gpus=0, vram_gb=0)) == 0.0


def test_expiry_penalty_example_is_0_75_but_such_a_node_is_filtered_out() -> None:
    assert expiry_penalty(1800, 3600) == pytest.approx(0.75)
    assert expiry_penalty(7200, 3600) == 0.0

    decision = schedule_job(job(duration_s=3600), [node("soon", block(seconds_left=1800))], NOW)

    assert decision.kind is PlacementKind.REQUEST_MORE_CAPACITY
    assert only_reason(decision, "soon") == EXPIRES_TOO_SOON


def test_expiry_penalty_lowers_the_score_of_a_node_ending_within_twice_the_duration() -> None:
    soon = node("soon", block(seconds_left=1.5 * HOUR))

    decision = schedule_job(job(duration_s=HOUR), [soon], NOW)

    assert decision.score is not None
    assert decision.score.expiry_penalty == pytest.approx(0.25)
    assert decision.score.score == pytest.approx(0.125 - 0.3 * 0.25 + 0.02)


# --- filters, one at a time ---------------------------------------------------------------------------------


def test_partly_used_node_takes_the_job_on_its_free_gpus() -> None:
    partly = node("node-a", held={0: 80, 1: 80, 2: 80}, cpu_used=24, ram_used_gb=200)

    decision = schedule_job(job(gpus=2, vram_gb=40), [partly], NOW)

    assert decision.gpu_indices == (3, 4)


def test_tier_mismatch_fast_job_on_flex_nodes_requests_capacity() -> None:
    flex = node("flex", block(tier=Tier.FLEX))

    decision = schedule_job(job(tier=Tier.FAST), [flex], NOW)

    assert decision.kind is PlacementKind.REQUEST_MORE_CAPACITY
    (rejection,) = decision.rejections
    assert rejection.reason.code == TIER_MISMATCH
    assert (rejection.reason.need, rejection.reason.have) == ("FAST", "FLEX")


def test_a_flex_job_that_fits_nowhere_is_queued_for_flex() -> None:
    decision = schedule_job(job(tier=Tier.FLEX), [node("fast")], NOW)

    assert decision.kind is PlacementKind.QUEUE_FOR_FLEX
    assert decision.tier is Tier.FLEX
    assert only_reason(decision, "fast") == TIER_MISMATCH


def test_the_nodes_own_tier_is_what_the_filter_reads() -> None:
    lent = node("lent", block(tier=Tier.FAST), tier=Tier.FLEX)

    assert schedule_job(job(tier=Tier.FLEX), [lent], NOW).node_id == "lent"


def test_insufficient_cpu() -> None:
    busy = node("busy", cpu_used=60)

    decision = schedule_job(job(cpu=8), [busy], NOW)

    reason = decision.rejections[0].reason
    assert reason.code == INSUFFICIENT_CPU
    assert (reason.need, reason.have, reason.limit) == (8, 4, 64)
    assert "needs 8 free CPU cores, has 4 of 64" in reason.message


def test_cpu_exactly_used_up_still_fits() -> None:
    assert schedule_job(job(cpu=4), [node("n", cpu_used=60)], NOW).node_id == "n"


def test_insufficient_ram() -> None:
    decision = schedule_job(job(ram_gb=64), [node("busy", ram_used_gb=480)], NOW)

    reason = decision.rejections[0].reason
    assert reason.code == INSUFFICIENT_RAM
    assert (reason.need, reason.have, reason.limit) == (64, 32, 512)


def test_insufficient_gpu_count_says_how_many_gpus_qualify() -> None:
    six_held = node("six-held", held={i: 80 for i in range(6)})

    decision = schedule_job(job(gpus=4, vram_gb=60), [six_held], NOW)

    reason = decision.rejections[0].reason
    assert reason.code == INSUFFICIENT_GPUS
    assert (reason.need, reason.have, reason.limit) == (4, 2, 8)
    assert "6 held by other jobs" in reason.message


def test_insufficient_vram_no_gpu_has_100_gb() -> None:
    decision = schedule_job(job(gpus=1, vram_gb=100), [node("n")], NOW)

    reason = decision.rejections[0].reason
    assert decision.kind is PlacementKind.REQUEST_MORE_CAPACITY
    assert reason.code == INSUFFICIENT_GPUS
    assert reason.have == 0
    assert "8 with too little VRAM free" in reason.message


def test_a_job_larger_than_every_node_says_so_and_hints_sfcompute() -> None:
    decision = schedule_job(job(gpus=10, vram_gb=80), [node("a"), node("b")], NOW)

    assert decision.kind is PlacementKind.REQUEST_MORE_CAPACITY
    assert decision.provider == "sfcompute"
    assert decision.reason.code == LARGER_THAN_ANY_NODE
    assert (decision.reason.need, decision.reason.have) == (10, 8)
    assert "no node has 10 GPUs (the largest has 8)" in decision.summary
    assert [r.reason.code for r in decision.rejections] == [INSUFFICIENT_GPUS, INSUFFICIENT_GPUS]


@pytest.mark.parametrize(
    ("seconds_left", "placed"),
    [
        (HOUR + BIN_PACK_SAFETY_MARGIN_SEC, True),  # equal passes
        (HOUR + BIN_PACK_SAFETY_MARGIN_SEC - 1, False),  # one second short
        (HOUR + BIN_PACK_SAFETY_MARGIN_SEC + 1, True),
    ],
)
def test_expiry_safety_margin_boundary(seconds_left: float, placed: bool) -> None:
    decision = schedule_job(job(duration_s=HOUR), [node("n", block(seconds_left=seconds_left))], NOW)

    assert decision.placed is placed
    if not placed:
        reason = decision.rejections[0].reason
        assert reason.code == EXPIRES_TOO_SOON
        assert (reason.need, reason.have, reason.limit) == (HOUR + 300, seconds_left, 300)


def test_an_expired_node_is_rejected() -> None:
    decision = schedule_job(job(), [node("gone", block(seconds_left=-60))], NOW)

    assert decision.rejections[0].reason.code == EXPIRES_TOO_SOON
    assert "has expired" in decision.rejections[0].reason.message


@pytest.mark.parametrize("model", ["V100", "A100", "H100"])
def test_a_flex_node_must_outlive_the_run_on_its_gpus_not_the_work(model: str) -> None:
    # Ten A100-hours of FLEX work run 10 / throughput hours on the node's GPUs: the lease must outlive that.
    rate = relative_throughput(model)
    work = job(tier=Tier.FLEX, duration_s=10 * HOUR)
    need = 10 * HOUR / rate + BIN_PACK_SAFETY_MARGIN_SEC
    lease = block(tier=Tier.FLEX, gpu_model=model, seconds_left=need + 1)
    short = replace(lease, end_time=lease.end_time - timedelta(seconds=2))
    assert expected_run_s(work, node("n", lease)) == pytest.approx(10 * HOUR / rate)

    assert schedule_job(work, [node("n", lease)], NOW).placed
    decision = schedule_job(work, [node("n", short)], NOW)
    reason = decision.rejections[0].reason
    assert reason.code == EXPIRES_TOO_SOON
    assert reason.need == pytest.approx(need)
    assert (f"on its {model}" in reason.message) is (model != "A100")


def test_a_fast_service_needs_its_own_duration_whatever_the_gpu() -> None:
    service = job(tier=Tier.FAST, duration_s=10 * HOUR)
    v100 = node("n", block(gpu_model="V100", seconds_left=10 * HOUR + BIN_PACK_SAFETY_MARGIN_SEC))
    assert expected_run_s(service, v100) == 10 * HOUR
    assert schedule_job(service, [v100], NOW).placed


def test_filters_run_in_the_seeds_order_the_first_failure_is_the_reason() -> None:
    everything_wrong = node("n", block(tier=Tier.FLEX, seconds_left=60), cpu_used=64, ram_used_gb=512)

    assert only_reason(schedule_job(job(), [everything_wrong], NOW), "n") == TIER_MISMATCH
    expiring_and_full = node("n", block(seconds_left=60), cpu_used=64)
    assert only_reason(schedule_job(job(), [expiring_and_full], NOW), "n") == EXPIRES_TOO_SOON
    no_cpu_no_ram = node("n", cpu_used=64, ram_used_gb=512)
    assert only_reason(schedule_job(job(), [no_cpu_no_ram], NOW), "n") == INSUFFICIENT_CPU


# --- beyond the seed: models, sharing, contiguity, ties -------------------------------------------------


def test_gpu_model_filter_honours_the_jobs_allowed_models() -> None:
    a100 = node("a100", block(gpu_model="A100-80GB"))
    h100 = node("h100", block(gpu_model="H100"))
    unknown = node("unknown", block(gpu_model=None))

    decision = schedule_job(job(models=("h100",)), [a100, unknown, h100], NOW)

    assert decision.node_id == "h100"
    assert only_reason(decision, "a100") == GPU_MODEL_NOT_ALLOWED
    assert only_reason(decision, "unknown") == GPU_MODEL_NOT_ALLOWED
    assert schedule_job(job(), [unknown], NOW).node_id == "unknown"


def test_a_sharing_job_fills_the_tightest_shared_gpu() -> None:
    mixed = node("n", shared={3: (40.0, ("inf-a",)), 5: (60.0, ("inf-b", "inf-c"))})

    decision = schedule_job(job(gpus=1, vram_gb=20, share=True, id="inf-d"), [mixed], NOW)

    assert decision.gpu_indices == (5,)  # 20 GB left on GPU 5 exactly fits, GPUs 0-2 stay whole
    booked = apply_placement([mixed], decision, job(gpus=1, vram_gb=20, share=True, id="inf-d"))
    slot = booked[0].slot(5)
    assert slot is not None
    assert slot.job_ids == ("inf-b", "inf-c", "inf-d")
    assert slot.vram_used_gb == 80.0


def test_a_non_sharing_job_never_lands_on_a_shared_gpu() -> None:
    all_shared = node("n", shared={i: (10.0, (f"inf-{i}",)) for i in range(8)})

    decision = schedule_job(job(gpus=1, vram_gb=20), [all_shared], NOW)

    assert not decision.placed
    assert decision.rejections[0].reason.have == 0


def test_a_sharing_job_never_lands_on_a_gpu_held_alone() -> None:
    held = node("n", held={i: 10.0 for i in range(8)})

    assert not schedule_job(job(gpus=1, vram_gb=20, share=True), [held], NOW).placed


def test_a_sharing_job_asking_a_whole_gpu_needs_an_unoccupied_one() -> None:
    one_shared = node("n", block(gpus=2), shared={0: (0.0, ("inf-a",))})
    whole = job(gpus=1, vram_gb=80, share=True, id="big")

    decision = schedule_job(whole, [one_shared], NOW)

    assert decision.gpu_indices == (1,)
    booked = apply_placement([one_shared], decision, whole)[0].slot(1)
    assert booked is not None and booked.job_id == "big"  # held alone: nothing else fits beside it


def test_sharing_never_overcommits_vram() -> None:
    nearly_full = node("n", block(gpus=1), shared={0: (70.0, ("inf-a",))})

    assert not schedule_job(job(gpus=1, vram_gb=20, share=True), [nearly_full], NOW).placed
    assert schedule_job(job(gpus=1, vram_gb=10, share=True), [nearly_full], NOW).placed


def test_contiguous_pick_beats_the_first_n() -> None:
    # Free: 0, 2, 3, 4, 6. First three (0, 2, 3) leave a gap; (2, 3, 4) is contiguous.
    gappy = node("n", held={1: 80, 5: 80, 7: 80})

    decision = schedule_job(job(gpus=3, vram_gb=40), [gappy], NOW)

    assert decision.gpu_indices == (2, 3, 4)
    assert decision.score is not None and decision.score.fragmentation == 0.0


def test_contiguous_pick_ties_go_to_the_lowest_indices() -> None:
    assert schedule_job(job(gpus=2), [node("n", held={2: 80, 3: 80})], NOW).gpu_indices == (0, 1)


def test_equal_scores_go_to_the_lowest_node_id_whatever_the_input_order() -> None:
    twins = [node("node-b"), node("node-a")]

    first = schedule_job(job(), twins, NOW)
    second = schedule_job(job(), list(reversed(twins)), NOW)

    assert first.node_id == second.node_id == "node-a"
    assert "equal" in first.rejections[0].reason.message


def test_provider_bonus_and_hint_follow_the_8_gpu_line() -> None:
    assert provider_bonus("sfcompute", 8) == 0.2
    assert provider_bonus("prime", 8) == 0.0
    assert provider_bonus("prime", 7) == 0.1
    assert provider_bonus("sfcompute", 7) == 0.0
    assert provider_hint(7) == "prime"
    assert provider_hint(8) == "sfcompute"


def test_an_8_gpu_job_prefers_sfcompute_by_the_weighted_004() -> None:
    sf = node("sf", block("sfcompute"))
    prime = node("prime", block("prime"))

    decision = schedule_job(job(gpus=8, vram_gb=80), [prime, sf], NOW)

    assert decision.node_id == "sf"
    assert decision.score is not None
    assert decision.score.score == pytest.approx(1.0 + 0.04)
    assert decision.rejections[0].score == pytest.approx(1.0)


def test_a_cpu_only_job_takes_no_gpu() -> None:
    decision = schedule_job(job(gpus=0, vram_gb=0), [node("n", held={i: 80 for i in range(8)})], NOW)

    assert decision.placed
    assert decision.gpu_indices == ()


# --- the decision's sentence -------------------------------------------------------------------------------


def test_summary_counts_why_no_node_fits() -> None:
    full = [node(f"full-{i:02d}", held={g: 80 for g in range(8)}) for i in range(12)]
    expiring = [node(f"soon-{i}", block(seconds_left=HOUR)) for i in range(3)]

    decision = schedule_job(job(gpus=4, vram_gb=60, duration_s=2 * HOUR), [*full, *expiring], NOW)

    assert decision.reason.code == NO_NODE_FITS
    assert decision.summary == (
        "FAST job job-1 needs 4x60 GB GPUs: 12 nodes lack 4 GPUs with 60 GB free, "
        "3 expire within 2h05m, none left; request more capacity (provider hint: prime)."
    )
    assert len(decision.rejections) == 15


def test_no_nodes_at_all() -> None:
    decision = schedule_job(job(tier=Tier.FLEX), [], NOW)

    assert decision.kind is PlacementKind.QUEUE_FOR_FLEX
    assert decision.reason.code == NO_NODES
    assert decision.provider == "prime"


def test_every_node_not_chosen_gets_exactly_one_reason() -> None:
    nodes = [
        node("chosen"),
        node("flex", block(tier=Tier.FLEX)),
        node("soon", block(seconds_left=60)),
        node("cpu", cpu_used=64),
        node("ram", ram_used_gb=512),
        node("gpus", held={i: 80 for i in range(8)}),
        node("model", block(gpu_model="A100")),
        node("worse", block("sfcompute")),  # no Prime bonus: 0.125 against 0.145
    ]

    decision = schedule_job(job(models=("H100",)), nodes, NOW)

    assert decision.node_id == "chosen"
    assert [r.node_id for r in decision.rejections] == [n.id for n in nodes if n.id != "chosen"]
    assert {r.node_id: r.reason.code for r in decision.rejections} == {
        "flex": TIER_MISMATCH,
        "soon": EXPIRES_TOO_SOON,
        "cpu": INSUFFICIENT_CPU,
        "ram": INSUFFICIENT_RAM,
        "gpus": INSUFFICIENT_GPUS,
        "model": GPU_MODEL_NOT_ALLOWED,
        "worse": LOWER_SCORE,
    }


# --- job order, booking, validation ----------------------------------------------------------------------


def test_order_pending_higher_priority_first_then_arrival_then_input_order() -> None:
    t0 = NOW
    late_high = job(id="late-high", priority=5, submitted_at=t0 + timedelta(minutes=5))
    early_high = job(id="early-high", priority=5, submitted_at=t0)
    low = job(id="low", priority=1, submitted_at=t0 - timedelta(hours=1))
    undated_a = job(id="undated-a", priority=5)
    undated_b = job(id="undated-b", priority=5)

    ordered = order_pending([low, undated_a, late_high, undated_b, early_high])

    assert [j.id for j in ordered] == ["early-high", "late-high", "undated-a", "undated-b", "low"]


def test_apply_placement_books_gpus_cpu_ram_and_refuses_a_second_booking() -> None:
    nodes = (node("a"), node("b", held={0: 80}))
    four = job(gpus=4, vram_gb=60, cpu=16, ram_gb=128)
    decision = schedule_job(four, nodes, NOW)

    booked = apply_placement(nodes, decision, four)

    target = next(n for n in booked if n.id == decision.node_id)
    assert [s.index for s in target.gpu_slots if s.job_id == "job-1"] == list(decision.gpu_indices)
    assert all(s.vram_used_gb == 60 for s in target.gpu_slots if s.job_id == "job-1")
    assert (target.cpu_used, target.ram_used_gb) == (16, 128)
    with pytest.raises(PlacementConflictError, match="already booked"):
        apply_placement(booked, decision, four)
    other = job(gpus=4, vram_gb=60, id="job-2")
    with pytest.raises(PlacementConflictError, match="already held by job job-1"):
        apply_placement(booked, replace(decision, job_id="job-2"), other)
    assert release_job(target, four) == next(n for n in nodes if n.id == decision.node_id)


def test_apply_placement_of_a_non_placement_changes_nothing_and_checks_the_job() -> None:
    nodes = (node("flex", block(tier=Tier.FLEX)),)
    decision = schedule_job(job(), nodes, NOW)

    assert apply_placement(nodes, decision, job()) == nodes
    with pytest.raises(PlacementConflictError, match="not job other"):
        apply_placement(nodes, decision, job(id="other"))


def test_booking_refuses_overcommitting_cpu_and_unknown_gpus() -> None:
    with pytest.raises(PlacementConflictError, match="CPU"):
        book_job(node("n", cpu_used=60), job(cpu=8), (0, 1))
    with pytest.raises(PlacementConflictError, match="no GPU with index 9"):
        book_job(node("n"), job(), (0, 9))
    with pytest.raises(PlacementConflictError, match="repeat"):
        book_job(node("n"), job(), (0, 0))


def test_now_without_a_time_zone_is_refused() -> None:
    with pytest.raises(InvalidSpecError, match="now"):
        schedule_job(job(), [node("n")], datetime(2025, 6, 1, 12))


def test_node_validation_names_the_field() -> None:
    blk = block()
    with pytest.raises(InvalidSpecError, match=r"gpu_slots\[1\]\.index.*twice"):
        Node("n", blk, Tier.FAST, (GpuSlot(0, 80), GpuSlot(0, 80)))
    with pytest.raises(InvalidSpecError, match="vram_used_gb"):
        GpuSlot(0, 80, 90)
    with pytest.raises(InvalidSpecError, match="not both"):
        GpuSlot(0, 80, 10, job_id="a", job_ids=("b",))
    with pytest.raises(InvalidSpecError, match="cpu_used"):
        node("n", cpu_used=65)
    with pytest.raises(InvalidSpecError, match="outside"):
        Node("n", blk, Tier.FAST, (GpuSlot(8, 80),))
    with pytest.raises(InvalidSpecError, match="gpu_models"):
        job(models=())


def test_duplicate_node_ids_are_refused() -> None:
    with pytest.raises(InvalidSpecError, match="appears twice"):
        schedule_job(job(), [node("n"), node("n")], NOW)


def test_slots_are_kept_in_index_order() -> None:
    shuffled = Node("n", block(gpus=3), Tier.FAST, (GpuSlot(2, 80), GpuSlot(0, 80), GpuSlot(1, 80)))

    assert [s.index for s in shuffled.gpu_slots] == [0, 1, 2]
    assert Node.empty("e", block(gpus=3)).gpu_slots == shuffled.gpu_slots
