"""A job's ordered GPU model preference, the node's price and its CUDA version (seed 004 on seed 001's packer).

A job that lists ``gpu_models`` takes, among the nodes that fit, the one whose model comes first in its
list, then the cheapest per GPU-hour, then the seed's best score. A job that lists ``cuda_versions`` lands
only on a node whose CUDA major.minor is one of them (or whose CUDA version is unknown). A job that lists
neither is placed exactly as before: the properties compare with the seed's ranking on random clusters.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalar.domain.errors import InvalidSpecError
from scalar.domain.packing import (
    CUDA_MISMATCH,
    GPU_MODEL_NOT_ALLOWED,
    HIGHER_PRICE,
    LESS_PREFERRED_MODEL,
    LOWER_SCORE,
    evaluate_node,
    schedule_job,
)
from scalar.domain.packing_model import Block, GpuSlot, Job, Node, cuda_major_minor
from scalar.domain.packing_score import SCORE_TIE_DIGITS
from scalar.domain.tier import Tier
from tests.domain.test_packing import NOW

MODELS = ["H100", "H200", "A100"]
CUDAS = ["12.4", "12.8", "12.1", "12.4.1", None]


def a_block(
    block_id: str,
    *,
    model: str | None = "H100",
    gpus: int = 8,
    per_gpu_hour: str = "2.00",
    cuda: str | None = None,
    provider: str = "sfcompute",
    hours: float = 24,
) -> Block:
    return Block(
        id=block_id,
        provider=provider,
        instance_type=f"{gpus}x{model}",
        gpus_per_node=gpus,
        vram_per_gpu_gb=80.0,
        cpu_per_node=128.0,
        ram_per_node_gb=1024.0,
        start_time=NOW - timedelta(hours=1),
        end_time=NOW + timedelta(hours=hours),
        cost_per_hour=Decimal(per_gpu_hour) * gpus,
        tier=Tier.FAST,
        gpu_model=model,
        cuda_version=cuda,
    )


def a_node(node_id: str, block: Block, held: int = 0) -> Node:
    """A node of ``block`` whose first ``held`` GPUs hold another job (which raises its packing score)."""
    slots = tuple(
        GpuSlot(i, block.vram_per_gpu_gb, block.vram_per_gpu_gb, job_id=f"other-{i}")
        if i < held
        else GpuSlot(i, block.vram_per_gpu_gb)
        for i in range(block.gpus_per_node)
    )
    return Node(node_id, block, block.tier, slots)


def a_job(**fields: object) -> Job:
    base: dict[str, object] = {
        "id": "worker-1",
        "tier": Tier.FAST,
        "gpu_count": 1,
        "vram_per_gpu_gb": 40.0,
        "cpu_cores": 4.0,
        "ram_gb": 16.0,
        "expected_duration_sec": 3600.0,
    }
    base.update(fields)
    return Job(**base)  # type: ignore[arg-type]


# ---- GPU model preference -------------------------------------------------------------------------------


def test_the_first_listed_model_wins_over_a_cheaper_better_scoring_node() -> None:
    # The H100 node is cheaper and fuller (a higher seed score); the job prefers H200, so it goes there.
    h100 = a_node("n-h100", a_block("b1", model="H100", per_gpu_hour="1.50"), held=7)
    h200 = a_node("n-h200", a_block("b2", model="H200", per_gpu_hour="3.10"))
    job = a_job(gpu_models=("H200", "H100"))

    decision = schedule_job(job, [h100, h200], NOW)

    assert decision.node_id == "n-h200"
    (rejection,) = decision.rejections
    assert rejection.reason.code == LESS_PREFERRED_MODEL
    assert (rejection.reason.have, rejection.reason.limit) == (2, 1)
    assert (
        "H100 is choice 2" in rejection.reason.message
        and "n-h200 has H200 (choice 1)" in rejection.reason.message
    )
    assert "H200 is choice 1 of 2 GPU models at $3.10/GPU-h" in decision.summary
    # the seed's score alone would have picked the H100 node
    assert schedule_job(replace(job, gpu_models=None), [h100, h200], NOW).node_id == "n-h100"


def test_the_next_model_is_used_when_the_first_has_no_room() -> None:
    # The seed's fallback example: H200 unavailable -> H100, then A100.
    full_h200 = a_node("n-h200", a_block("b1", model="H200"), held=8)
    h100 = a_node("n-h100", a_block("b2", model="H100", per_gpu_hour="2.50"))
    a100 = a_node("n-a100", a_block("b3", model="A100", per_gpu_hour="1.20"), held=4)
    job = a_job(gpu_models=("H200", "H100", "A100"))

    decision = schedule_job(job, [a100, full_h200, h100], NOW)

    assert decision.node_id == "n-h100"
    codes = {r.node_id: r.reason.code for r in decision.rejections}
    assert codes == {"n-h200": "insufficient_gpus", "n-a100": LESS_PREFERRED_MODEL}


def test_among_nodes_of_the_same_model_the_cheaper_wins_then_the_score() -> None:
    cheap = a_node("n-cheap", a_block("b1", per_gpu_hour="1.90"))
    dear_full = a_node("n-dear", a_block("b2", per_gpu_hour="2.40"), held=6)
    cheap_full = a_node("n-cheap-full", a_block("b3", per_gpu_hour="1.90"), held=6)
    job = a_job(gpu_models=("H100",))

    decision = schedule_job(job, [dear_full, cheap, cheap_full], NOW)

    assert decision.node_id == "n-cheap-full"  # cheapest price, then the better score
    reasons = {r.node_id: r.reason for r in decision.rejections}
    assert reasons["n-dear"].code == HIGHER_PRICE
    assert (reasons["n-dear"].have, reasons["n-dear"].limit) == ("2.40", "1.90")
    assert "costs $2.40/GPU-h, more than n-cheap-full's $1.90/GPU-h" in reasons["n-dear"].message
    assert reasons["n-cheap"].code == LOWER_SCORE
    assert decision.summary.endswith("; 1 node costs more per GPU-hour, 1 scored lower.")


def test_model_names_in_the_list_match_case_insensitively() -> None:
    job = a_job(gpu_models=("h200", "h100"))
    assert job.model_preference("H200") == 0
    assert job.model_preference("H100") == 1
    assert job.model_preference("A100") == 2  # not listed: after every listed model
    assert a_job().model_preference("A100") == 0


def test_price_per_gpu_hour_is_the_blocks_node_hour_cost_over_its_gpus() -> None:
    assert a_block("b", gpus=8, per_gpu_hour="2.25").price_per_gpu_hour == Decimal("2.25")
    cpu_only = replace(a_block("b", gpus=8), gpus_per_node=0, cost_per_hour=Decimal("0.50"))
    assert cpu_only.price_per_gpu_hour == Decimal("0.50")


# ---- CUDA versions -----------------------------------------------------------------------------------------


def test_a_job_with_cuda_versions_goes_only_to_a_matching_node() -> None:
    new = a_node("n-128", a_block("b1", cuda="12.8"), held=7)
    old = a_node("n-124", a_block("b2", cuda="12.4.1"))
    job = a_job(cuda_versions=("12.4", "12.1"))

    decision = schedule_job(job, [new, old], NOW)

    assert decision.node_id == "n-124"  # 12.4.1 is 12.4 in major.minor
    (rejection,) = decision.rejections
    assert rejection.reason.code == CUDA_MISMATCH
    assert rejection.reason.resource == "cuda_version"
    assert (rejection.reason.need, rejection.reason.have) == ("12.4,12.1", "12.8")
    assert rejection.reason.message == "CUDA 12.8 on this node is not a version the job allows (12.4,12.1)"


def test_no_matching_cuda_anywhere_says_so_and_asks_for_capacity() -> None:
    nodes = [a_node(f"n{i}", a_block(f"b{i}", cuda="12.8")) for i in range(3)]
    decision = schedule_job(a_job(cuda_versions=("12.4",)), nodes, NOW)

    assert not decision.placed
    assert decision.reason.code == "no_node_fits"
    assert "3 nodes have a CUDA version the job does not allow, none left" in decision.summary
    assert {r.reason.code for r in decision.rejections} == {CUDA_MISMATCH}


def test_a_node_of_unknown_cuda_version_is_accepted() -> None:
    unknown = a_node("n-unknown", a_block("b1", cuda=None))
    assert schedule_job(a_job(cuda_versions=("12.4",)), [unknown], NOW).node_id == "n-unknown"


def test_model_filter_runs_before_the_cuda_filter() -> None:
    node = a_node("n", a_block("b", model="A100", cuda="12.8"))
    evaluation = evaluate_node(a_job(gpu_models=("H100",), cuda_versions=("12.4",)), node, NOW)
    assert evaluation.reason is not None and evaluation.reason.code == GPU_MODEL_NOT_ALLOWED


@pytest.mark.parametrize(
    ("versions", "field"),
    [
        ((), "cuda_versions"),
        (("12",), "cuda_versions[0]"),
        (("12.4", "12.4.1"), "cuda_versions[1]"),
        (("twelve.four",), "cuda_versions[0]"),
        (tuple(f"12.{i}" for i in range(17)), "cuda_versions"),
    ],
)
def test_bad_cuda_versions_are_refused_naming_the_field(versions: tuple[str, ...], field: str) -> None:
    with pytest.raises(InvalidSpecError) as err:
        a_job(cuda_versions=versions)
    assert err.value.field == field


def test_a_block_with_an_unreadable_cuda_version_is_refused() -> None:
    with pytest.raises(InvalidSpecError) as err:
        a_block("b", cuda="latest")
    assert err.value.field == "cuda_version"


def test_cuda_major_minor_reads_what_agents_and_sellers_report() -> None:
    assert cuda_major_minor("12.4") == (12, 4)
    assert cuda_major_minor(" 12.10.2 ") == (12, 10)
    assert cuda_major_minor("12") is None
    assert cuda_major_minor(None) is None


# ---- properties ----------------------------------------------------------------------------------------------


@st.composite
def random_node(draw: st.DrawFn, node_id: str) -> Node:
    gpus = draw(st.sampled_from([1, 2, 4, 8]))
    block = replace(
        a_block(
            f"blk-{node_id}",
            model=draw(st.sampled_from([*MODELS, None])),
            gpus=gpus,
            per_gpu_hour=draw(st.sampled_from(["0", "1.20", "1.90", "2.40", "3.10"])),
            cuda=draw(st.sampled_from(CUDAS)),
            provider=draw(st.sampled_from(["prime", "sfcompute", "runpod"])),
            hours=draw(st.sampled_from([0.5, 2, 30])),
        ),
        vram_per_gpu_gb=draw(st.sampled_from([24.0, 80.0])),
    )
    return a_node(node_id, block, held=draw(st.integers(0, gpus)))


@st.composite
def random_cluster(draw: st.DrawFn) -> list[Node]:
    return [draw(random_node(f"n{i}")) for i in range(draw(st.integers(0, 7)))]


@st.composite
def random_job(draw: st.DrawFn, *, with_lists: bool) -> Job:
    models = cuda = None
    if with_lists:
        models = draw(st.one_of(st.none(), st.permutations(MODELS).flatmap(lambda p: st.just(tuple(p[:2])))))
        cuda = draw(
            st.one_of(st.none(), st.lists(st.sampled_from(["12.4", "12.8", "12.1"]), min_size=1, max_size=2))
        )
    return a_job(
        gpu_count=draw(st.sampled_from([0, 1, 2, 4])),
        vram_per_gpu_gb=draw(st.sampled_from([0.0, 20.0, 60.0])),
        expected_duration_sec=draw(st.sampled_from([600.0, 3 * 3600.0])),
        gpu_models=models,
        cuda_versions=None if cuda is None else tuple(cuda),
    )


def seed_choice(job: Job, nodes: list[Node]) -> str | None:
    """The node the seed's ranking (before preferences existed) picks: best score, then lowest id."""
    best: tuple[float, str] | None = None
    for node in nodes:
        evaluation = evaluate_node(job, node, NOW)
        if evaluation.reason is None:
            assert evaluation.score is not None
            key = (-round(evaluation.score.score, SCORE_TIE_DIGITS), node.id)
            best = key if best is None or key < best else best
    return None if best is None else best[1]


@settings(max_examples=300)
@given(nodes=random_cluster(), job=random_job(with_lists=True))
def test_never_placed_on_a_disallowed_model_or_cuda_version(nodes: list[Node], job: Job) -> None:
    decision = schedule_job(job, nodes, NOW)
    if not decision.placed:
        return
    (node,) = [n for n in nodes if n.id == decision.node_id]
    assert job.allows_model(node.gpu_model)
    if job.cuda_versions is not None and node.cuda_version is not None:
        assert cuda_major_minor(node.cuda_version) in {cuda_major_minor(v) for v in job.cuda_versions}


@settings(max_examples=300)
@given(nodes=random_cluster(), job=random_job(with_lists=True))
def test_no_node_that_fits_is_more_preferred_or_cheaper_than_the_chosen_one(
    nodes: list[Node], job: Job
) -> None:
    decision = schedule_job(job, nodes, NOW)
    if not decision.placed or job.gpu_models is None:
        return
    (chosen,) = [n for n in nodes if n.id == decision.node_id]
    rank = job.model_preference(chosen.gpu_model)
    for node in nodes:
        if evaluate_node(job, node, NOW).reason is not None:
            continue
        assert job.model_preference(node.gpu_model) >= rank
        if job.model_preference(node.gpu_model) == rank:
            assert node.block.price_per_gpu_hour >= chosen.block.price_per_gpu_hour


@settings(max_examples=300)
@given(nodes=random_cluster(), job=random_job(with_lists=False), data=st.data())
def test_jobs_without_the_lists_are_placed_as_before(
    nodes: list[Node], job: Job, data: st.DataObject
) -> None:
    decision = schedule_job(job, nodes, NOW)
    assert decision.node_id == seed_choice(job, nodes)
    # and neither the nodes' CUDA versions nor their prices change where such a job goes
    other_prices = [
        replace(
            n,
            block=replace(
                n.block,
                cuda_version=data.draw(st.sampled_from(CUDAS)),
                cost_per_hour=Decimal(data.draw(st.integers(0, 50))),
            ),
        )
        for n in nodes
    ]
    again = schedule_job(job, other_prices, NOW)
    assert (again.node_id, again.gpu_indices, again.reason) == (
        decision.node_id,
        decision.gpu_indices,
        decision.reason,
    )
    assert [r.reason.code for r in again.rejections] == [r.reason.code for r in decision.rejections]
