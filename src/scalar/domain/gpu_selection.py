"""Choosing endpoint GPU groups (seed 004): by the size of the model to serve, and by a budget.

Prices are given, never fetched. The groups and their GPU types are in ``scalar.domain.gpus``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

from scalar.domain.errors import InvalidSpecError
from scalar.domain.gpus import GpuGroup, find_model
from scalar.domain.money import to_decimal, usd_text
from scalar.domain.reasons import Reason

DEFAULT_HEADROOM = 1.2


@dataclass(frozen=True, slots=True)
class GroupChoice:
    """A group a selection kept, ordered by the selection's preference, with the numbers behind it."""

    group: GpuGroup
    memory_gb: int
    price_per_gpu_hour: Decimal | None = None
    price_per_worker_hour: Decimal | None = None
    cheapest_model: str | None = None


@dataclass(frozen=True, slots=True)
class GpuSelection:
    """The kept groups (best first) and a reason for every group left out."""

    chosen: tuple[GroupChoice, ...]
    rejected: tuple[Reason, ...]

    @property
    def groups(self) -> list[GpuGroup]:
        return [c.group for c in self.chosen]


def _positive_int(value: int, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidSpecError(field, f"must be a whole number >= 1, got {value!r}")
    return value


def fit_gpu_groups_for_model(
    model_gb: float, *, headroom: float = DEFAULT_HEADROOM, gpu_count: int = 1
) -> GpuSelection:
    """Groups whose memory holds ``model_gb`` x ``headroom`` across ``gpu_count`` GPUs, tightest fit first.

    ``headroom`` (default 1.2: 20% for the CUDA context, activations and KV cache) multiplies the weights'
    size. Groups with equal memory are ordered by their oldest architecture first (usually the cheaper one:
    AMPERE_24 before ADA_24, AMPERE_80 before ADA_80_PRO, as the seed lists them), then in ``GpuGroup.all()``
    order.
    """
    if isinstance(model_gb, bool) or not math.isfinite(model_gb) or model_gb <= 0:
        raise InvalidSpecError("model_gb", f"must be a positive number of GB, got {model_gb!r}")
    if isinstance(headroom, bool) or not math.isfinite(headroom) or headroom < 1:
        raise InvalidSpecError("headroom", f"must be a factor >= 1.0, got {headroom!r}")
    _positive_int(gpu_count, "gpu_count")
    need_gb = model_gb * headroom
    order = GpuGroup.all()
    ranked = sorted(order, key=lambda g: (g.memory_gb, g.architectures[0].rank, order.index(g)))
    chosen: list[GroupChoice] = []
    rejected: list[Reason] = []
    for group in ranked:
        have_gb = group.memory_gb * gpu_count
        if have_gb >= need_gb:
            chosen.append(GroupChoice(group, group.memory_gb))
            continue
        rejected.append(
            Reason(
                "insufficient_gpu_memory",
                f"{group.value}: a {model_gb:g} GB model needs {need_gb:g} GB with {headroom:g}x headroom, "
                f"{gpu_count} x {group.memory_gb} GB GPUs have {have_gb} GB",
                resource=group.value,
                need=round(need_gb, 3),
                have=have_gb,
            )
        )
    return GpuSelection(tuple(chosen), tuple(rejected))


def select_gpu_for_model_size(
    model_gb: float, *, headroom: float = DEFAULT_HEADROOM, gpu_count: int = 1
) -> list[GpuGroup]:
    """The seed's call: groups that can hold the model, tightest fit first (see :func:`fit_gpu_groups_for_model`).

    Unlike the seed's bands, a model bigger than 80 GB gets only groups that hold it (HOPPER_141), and a model
    of 17-24 GB is not pushed to 48 GB groups when 24 GB or 32 GB ones hold it with the headroom.
    """
    return fit_gpu_groups_for_model(model_gb, headroom=headroom, gpu_count=gpu_count).groups


PriceMap = Mapping[GpuGroup, Decimal] | Mapping[str, Decimal] | Mapping[GpuGroup | str, Decimal]


def _group_prices(prices: PriceMap) -> tuple[dict[GpuGroup, tuple[Decimal, str | None]], list[Reason]]:
    """Cheapest price per group: a group key prices the whole group, a model key (canonical name, RunPod id
    or alias) prices that model. Keys that name no known model are reported, not guessed."""
    best: dict[GpuGroup, tuple[Decimal, str | None]] = {}
    unknown: list[Reason] = []
    for key, raw in prices.items():
        field = f"prices[{key}]"
        try:
            price = to_decimal(raw)
        except (TypeError, ArithmeticError):
            raise InvalidSpecError(field, f"is not a price, got {raw!r}") from None
        if not price.is_finite() or price < 0:
            raise InvalidSpecError(field, f"must be a price >= 0 in USD per GPU-hour, got {raw!r}")
        group: GpuGroup | None
        model: str | None = None
        if isinstance(key, GpuGroup):
            group = key
        elif key.strip().upper() in GpuGroup.__members__:
            group = GpuGroup[key.strip().upper()]
        else:
            found = find_model(key)
            group = None if found is None else found[1]
            model = None if found is None else found[0].name
        if group is GpuGroup.ANY:
            raise InvalidSpecError(field, "ANY has no price of its own", "price each group or GPU model")
        if group is None:
            unknown.append(
                Reason("unknown_gpu", f"{key!r} is not a GPU model of any group; its price is ignored", key)
            )
            continue
        if group not in best or price < best[group][0]:
            best[group] = (price, model)
    return best, unknown


def rank_gpu_groups_for_budget(
    budget_per_hour: Decimal | int | float | str, prices: PriceMap, *, gpu_count: int = 1
) -> GpuSelection:
    """Groups whose cheapest price for one worker (``gpu_count`` GPUs) is within ``budget_per_hour``,
    cheapest first (ties in ``GpuGroup.all()`` order). ``prices`` are USD per GPU-hour, given, not fetched."""
    try:
        budget = to_decimal(budget_per_hour)
    except (TypeError, ArithmeticError):
        raise InvalidSpecError("budget_per_hour", f"is not an amount, got {budget_per_hour!r}") from None
    if not budget.is_finite() or budget < 0:
        raise InvalidSpecError("budget_per_hour", f"must be >= 0 USD per hour, got {budget_per_hour!r}")
    _positive_int(gpu_count, "gpu_count")
    best, rejected = _group_prices(prices)
    order = GpuGroup.all()
    within: list[GroupChoice] = []
    for group in order:
        if group not in best:
            rejected.append(Reason("no_price", f"{group.value}: no price given", group.value))
            continue
        per_gpu, model = best[group]
        per_worker = per_gpu * gpu_count
        if per_worker <= budget:
            within.append(GroupChoice(group, group.memory_gb, per_gpu, per_worker, model))
            continue
        rejected.append(
            Reason(
                "over_budget",
                f"{group.value}: {gpu_count} GPU(s) cost {usd_text(per_worker)}/h at best, over the {usd_text(budget)}/h budget",
                resource=group.value,
                need=str(per_worker),
                limit=str(budget),
            )
        )
    within.sort(key=lambda c: (c.price_per_worker_hour, order.index(c.group)))
    return GpuSelection(tuple(within), tuple(rejected))


def select_gpu_for_budget(
    budget_per_hour: Decimal | int | float | str, prices: PriceMap, *, gpu_count: int = 1
) -> list[GpuGroup]:
    """The seed's call (left unimplemented there): groups within budget, cheapest first."""
    return rank_gpu_groups_for_budget(budget_per_hour, prices, gpu_count=gpu_count).groups
