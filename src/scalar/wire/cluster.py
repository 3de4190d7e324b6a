"""CLUSTER.json and JOB.json (seed 001's field names) -> packing values; a placement decision -> JSON.

CLUSTER.json::

    {"blocks": [{id, provider, instance_type, gpus_per_node, vram_per_gpu_gb, cpu_per_node,
                 ram_per_node_gb, start_time, end_time, cost_per_hour, tier, gpu_model?}],
     "nodes":  [{id, block_id, tier?, cpu_used, ram_used_gb,
                 gpu_slots?: [{index, vram_total_gb, vram_used_gb, job_id? | job_ids?}]}]}

JOB.json::

    {id, tier, gpu_count, vram_per_gpu_gb, cpu_cores, ram_gb, expected_duration_sec, priority,
     gpu_models?, share_gpu?, submitted_at?}

Times are ISO 8601 with a time zone (``Z`` or ``+00:00``); a time without one is an error. A node without
``tier`` takes its block's; a node without ``gpu_slots`` has all of its block's GPUs free. Unknown fields
are errors (they are usually typos).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    field_validator,
)

from scalar.domain.errors import InvalidSpecError
from scalar.domain.money import to_decimal
from scalar.domain.packing import NodeRejection, PlacementDecision
from scalar.domain.packing_model import Block, GpuSlot, Job, Node
from scalar.domain.tier import Tier


def _parse_tier(value: object) -> Tier:
    if isinstance(value, Tier):
        return value
    if not isinstance(value, str):
        raise ValueError(f"must be FAST or FLEX, got {value!r}")
    return Tier.parse(value)


TierField = Annotated[Tier, BeforeValidator(_parse_tier)]
Amount = Annotated[StrictFloat, Field(ge=0)]
Count = Annotated[StrictInt, Field(ge=0)]
Id = Annotated[StrictStr, Field(min_length=1)]


class _Schema(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)


class BlockIn(_Schema):
    id: Id
    provider: Id
    instance_type: StrictStr
    gpus_per_node: Count
    vram_per_gpu_gb: Amount
    cpu_per_node: Amount
    ram_per_node_gb: Amount
    start_time: AwareDatetime
    end_time: AwareDatetime
    cost_per_hour: Amount
    tier: TierField
    gpu_model: StrictStr | None = None

    @field_validator("provider")
    @classmethod
    def _lower(cls, value: str) -> str:
        return value.strip().lower()

    def to_domain(self) -> Block:
        return Block(
            id=self.id,
            provider=self.provider,
            instance_type=self.instance_type,
            gpus_per_node=self.gpus_per_node,
            vram_per_gpu_gb=self.vram_per_gpu_gb,
            cpu_per_node=self.cpu_per_node,
            ram_per_node_gb=self.ram_per_node_gb,
            start_time=self.start_time,
            end_time=self.end_time,
            cost_per_hour=to_decimal(self.cost_per_hour),
            tier=self.tier,
            gpu_model=self.gpu_model,
        )


class GpuSlotIn(_Schema):
    index: Count
    vram_total_gb: Amount
    vram_used_gb: Amount = 0.0
    job_id: Id | None = None
    job_ids: list[Id] | None = None

    def to_domain(self) -> GpuSlot:
        return GpuSlot(
            index=self.index,
            vram_total_gb=self.vram_total_gb,
            vram_used_gb=self.vram_used_gb,
            job_id=self.job_id,
            job_ids=tuple(self.job_ids or ()),
        )


class NodeIn(_Schema):
    id: Id
    block_id: Id
    tier: TierField | None = None
    cpu_used: Amount = 0.0
    ram_used_gb: Amount = 0.0
    gpu_slots: list[GpuSlotIn] | None = None


class ClusterFile(_Schema):
    blocks: list[BlockIn]
    nodes: list[NodeIn]

    def to_nodes(self) -> tuple[Node, ...]:
        """The cluster's nodes, each carrying its block. Raises ``InvalidSpecError`` naming the field."""
        blocks: dict[str, Block] = {}
        for i, block_in in enumerate(self.blocks):
            if block_in.id in blocks:
                raise InvalidSpecError(f"blocks[{i}].id", f"block id {block_in.id!r} appears twice")
            try:
                blocks[block_in.id] = block_in.to_domain()
            except InvalidSpecError as exc:
                raise _under(f"blocks[{i}]", exc) from None
        nodes: list[Node] = []
        seen: set[str] = set()
        for i, node_in in enumerate(self.nodes):
            where = f"nodes[{i}]"
            if node_in.id in seen:
                raise InvalidSpecError(f"{where}.id", f"node id {node_in.id!r} appears twice")
            seen.add(node_in.id)
            block = blocks.get(node_in.block_id)
            if block is None:
                known = ", ".join(sorted(blocks)) or "none"
                raise InvalidSpecError(
                    f"{where}.block_id",
                    f"no block has id {node_in.block_id!r} (blocks: {known})",
                    "add the block to 'blocks' or fix the id",
                )
            try:
                nodes.append(_node(node_in, block))
            except InvalidSpecError as exc:
                raise _under(where, exc) from None
        return tuple(nodes)


def _node(node_in: NodeIn, block: Block) -> Node:
    tier = block.tier if node_in.tier is None else node_in.tier
    if node_in.gpu_slots is None:
        slots = Node.empty(node_in.id, block).gpu_slots
    else:
        built: list[GpuSlot] = []
        for j, slot in enumerate(node_in.gpu_slots):
            try:
                built.append(slot.to_domain())
            except InvalidSpecError as exc:
                raise _under(f"gpu_slots[{j}]", exc) from None
        slots = tuple(built)
    return Node(
        id=node_in.id,
        block=block,
        tier=tier,
        gpu_slots=slots,
        cpu_used=node_in.cpu_used,
        ram_used_gb=node_in.ram_used_gb,
    )


def _under(prefix: str, exc: InvalidSpecError) -> InvalidSpecError:
    """The same error with its field path placed under ``prefix`` (``nodes[2]`` + ``cpu_used``)."""
    return InvalidSpecError(f"{prefix}.{exc.field}", exc.problem, exc.hint)


class JobFile(_Schema):
    id: Id
    tier: TierField
    gpu_count: Count
    vram_per_gpu_gb: Amount
    cpu_cores: Amount
    ram_gb: Amount
    expected_duration_sec: Amount
    priority: StrictInt = 0
    gpu_models: list[Id] | None = None
    share_gpu: StrictBool = False
    submitted_at: AwareDatetime | None = None

    def to_domain(self) -> Job:
        return Job(
            id=self.id,
            tier=self.tier,
            gpu_count=self.gpu_count,
            vram_per_gpu_gb=self.vram_per_gpu_gb,
            cpu_cores=self.cpu_cores,
            ram_gb=self.ram_gb,
            expected_duration_sec=self.expected_duration_sec,
            priority=self.priority,
            gpu_models=None if self.gpu_models is None else tuple(self.gpu_models),
            share_gpu=self.share_gpu,
            submitted_at=self.submitted_at,
        )


def _score(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def rejection_to_json(rejection: NodeRejection) -> dict[str, Any]:
    return {"node_id": rejection.node_id, **rejection.reason.to_dict()}


def placement_to_json(decision: PlacementDecision) -> dict[str, Any]:
    """``{kind, node_id, gpu_indices, job_id, tier, provider, score, score_terms, summary, reason, reasons}``.

    Scores are rounded to 6 decimals. ``reasons`` has one entry per node not chosen.
    """
    terms = decision.score
    return {
        "kind": decision.kind.value,
        "node_id": decision.node_id,
        "gpu_indices": list(decision.gpu_indices),
        "job_id": decision.job_id,
        "tier": decision.tier.value,
        "provider": decision.provider,
        "score": _score(None if terms is None else terms.score),
        "score_terms": None
        if terms is None
        else {
            "utilization": _score(terms.utilization),
            "fragmentation": _score(terms.fragmentation),
            "expiry_penalty": _score(terms.expiry_penalty),
            "provider_bonus": _score(terms.provider_bonus),
        },
        "summary": decision.summary,
        "reason": decision.reason.to_dict(),
        "reasons": [rejection_to_json(r) for r in decision.rejections],
    }
