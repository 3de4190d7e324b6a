"""The controller's configuration: scale groups, tiers and their price caps, contracts, timeouts.

``ControllerConfig`` is a frozen value with sensible defaults; every field is validated on construction and
an invalid one raises :class:`ConfigError` naming the key (``scale_groups[1].max_slices``).
``ControllerConfig.from_dict`` reads the plain-dict shape a TOML/YAML/JSON file parses into, refusing
unknown keys, and ``to_dict`` writes it back; both go through :class:`ControllerFile`, the pydantic model of
that shape (``engine/config_file.py``; the engine's values stay frozen dataclasses: docs/decisions/engine.md).

A :class:`ScaleGroupConfig` is a filter over offer shapes, not one group: every offer shape it matches
(provider x instance type x spot) becomes one scale group per tier it lists, each with the entry's
``min_slices``/``max_slices``/``slice_size``. When several entries match a shape, the first one wins.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from scalar.domain.consolidation import ConsolidationPolicy
from scalar.domain.contracts import DEFAULT_INTERRUPTION_PRIOR
from scalar.domain.errors import InvalidSpecError
from scalar.domain.procurement import (
    DEFAULT_FAST_MAX_WAIT_S,
    DEFAULT_FAST_RESTART_WAIT_S,
    DEFAULT_FLEX_MAX_REWORK,
    ProcurementPolicy,
)
from scalar.domain.tier import Tier
from scalar.engine.budget import BudgetLimit

DAY_S = 86_400
DEFAULT_CONTRACT_LENGTH_S = 7 * DAY_S
DEFAULT_FLEX_CAP = Decimal("10.0")


class ConfigError(InvalidSpecError):
    """An invalid configuration value; ``field`` is its dotted key (``tiers.FLEX.max_price_per_gpu_hour``)."""


def _positive(key: str, value: float, *, allow_zero: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(key, f"must be a number of seconds, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ConfigError(key, f"must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")


def _above_zero(key: str, value: float, unit: str, hint: str) -> None:
    """A number > 0, ``inf`` allowed (a limit or a prior that is off)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigError(key, f"must be a number of {unit} > 0, got {value!r}", hint)


def _count(key: str, value: int, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(key, f"must be a whole number >= {minimum}, got {value!r}")


def _names(key: str, values: tuple[str, ...]) -> None:
    if not isinstance(values, tuple):
        raise ConfigError(key, f"must be a list of names, got {values!r}")
    for i, value in enumerate(values):
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{key}[{i}]", f"must be a non-empty name, got {value!r}")


@dataclass(frozen=True, slots=True)
class TierConfig:
    """One tier's rules. ``max_price_per_gpu_hour`` ``None`` means uncapped (FAST's default)."""

    max_price_per_gpu_hour: Decimal | None = None


@dataclass(frozen=True, slots=True)
class ScaleGroupConfig:
    """Which offer shapes become scale groups, and their slice limits.

    Empty filters match everything; names compare case-insensitively. ``spot`` ``None`` matches spot and
    on-demand offers. ``slice_size`` is nodes per slice (a slice is bought, booted and counted together).
    ``contract_length_s`` overrides the controller's contract length for these groups.
    """

    name: str = "default"
    providers: tuple[str, ...] = ()
    instance_types: tuple[str, ...] = ()
    gpu_models: tuple[str, ...] = ()
    regions: tuple[str, ...] = ()
    tiers: tuple[Tier, ...] = (Tier.FAST, Tier.FLEX)
    spot: bool | None = None
    min_slices: int = 0
    max_slices: int = 4
    slice_size: int = 1
    contract_length_s: int | None = None

    def validate(self, key: str) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigError(f"{key}.name", "must be a non-empty name")
        for name in ("providers", "instance_types", "gpu_models", "regions"):
            _names(f"{key}.{name}", getattr(self, name))
        if not self.tiers:
            raise ConfigError(f"{key}.tiers", "must list at least one tier (FAST, FLEX)")
        for i, tier in enumerate(self.tiers):
            if not isinstance(tier, Tier):
                raise ConfigError(f"{key}.tiers[{i}]", f"unknown tier {tier!r}; use FAST or FLEX")
        if self.spot is not None and not isinstance(self.spot, bool):
            raise ConfigError(f"{key}.spot", f"must be true, false or unset, got {self.spot!r}")
        _count(f"{key}.min_slices", self.min_slices, 0)
        _count(f"{key}.max_slices", self.max_slices, 0)
        _count(f"{key}.slice_size", self.slice_size, 1)
        if self.min_slices > self.max_slices:
            raise ConfigError(
                f"{key}.min_slices",
                f"is {self.min_slices} but max_slices is {self.max_slices}",
                "make min_slices <= max_slices",
            )
        if self.contract_length_s is not None:
            _count(f"{key}.contract_length_s", self.contract_length_s, 1)

    def matches(
        self, provider: str, instance_type: str, gpu_model: str | None, region: str, spot: bool
    ) -> bool:
        def inside(value: str | None, allowed: tuple[str, ...]) -> bool:
            if not allowed:
                return True
            return value is not None and value.casefold() in {a.casefold() for a in allowed}

        return (
            inside(provider, self.providers)
            and inside(instance_type, self.instance_types)
            and inside(gpu_model, self.gpu_models)
            and inside(region, self.regions)
            and (self.spot is None or self.spot == spot)
        )


def _default_tiers() -> dict[Tier, TierConfig]:
    return {Tier.FAST: TierConfig(None), Tier.FLEX: TierConfig(DEFAULT_FLEX_CAP)}


SCALAR_SCORE = "scalar"
SEED_SCORE = "seed"
PACKING_SCORES = (SCALAR_SCORE, SEED_SCORE)


# A spot order's limit over the price last seen, as a fraction of it (the cost band's tolerance).
DEFAULT_SPOT_LIMIT_HEADROOM = 0.10
DEFAULT_FAST_SPARE_PER_SERVICES = 16


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    """Everything the controller decides with. Times in seconds.

    - ``contract_length_s``: how long an hourly seller's node is leased (default 7 days); a purchase made for
      a job longer than that lasts the job's duration + safety margin + request and boot timeouts instead.
      A block seller's contract (SFCompute) is sized to the demand forecast (engine/contract_sizing.py).
    - ``interruption_period_hours``: the hours a published spot interruption rate refers to (730: monthly).
    - ``market_time_scales``: per provider, market seconds per engine second (absent: 1). A request's
      ``duration_s`` is in its market's time (the built-in market at ``time_scale`` N runs contracts N times
      faster) while jobs' durations are in the engine's, so contract sizing and resale convert with it; the
      runtime sets it for the providers the built-in market sells from the top-level ``time_scale``.
    - ``request_timeout_s``: a purchase not filled by then fails and its group backs off (``backoff_s``).
    - ``boot_timeout_s``: a node not READY this long after its purchase filled fails, same backoff.
    - ``idle_release_s``: the longest an idle block is held before it is released (never below a group's
      ``min_slices``): a block paid whole (SFCompute) is held exactly this; a node billed for its running
      time less, from its billing unit and the arrival forecast (``domain.release.idle_hold``).
    - ``flex_batch_wait_s`` / ``flex_batch_gpus``: FLEX demand buys only when its oldest waiting job has
      waited ``flex_batch_wait_s`` or the waiting FLEX jobs need ``flex_batch_gpus`` GPUs (a node's worth).
    - ``safety_margin_s``: no job starts on a node that ends within its duration + this margin (seed 001).
    - ``reservation_s``: nodes bought for jobs are held for those jobs (other jobs may not take them) while
      their slice boots and for this long after it is READY, so a gang is never robbed of half its block.
    - ``max_demand_entries``: at most this many unplaced jobs (in queue order) are routed per step.
    - ``routing_memo``: routing remembers each group's verdict per demand shape (the fast path); ``False``
      routes every entry from scratch (the reference it must match: ``bench.load --compare``, tests).
    - ``pending_index``: the scheduler and the autoscaler read the pending jobs from the pending index
      (engine/pending_index.py: per-shape queues merged by order key, a failed shape's longer jobs never
      visited; the fast path); ``False`` sorts and visits every pending job each pass (the reference it must
      match decision for decision: tests/engine/test_incremental_equivalence.py).
    - ``interruption_prior``: the interruptions of evidence the published spot interruption rates count as
      against the preemptions seen on the spot nodes held (``domain.contracts.interruption_calibration``;
      default 5; ``inf``: spot risk is priced with the published rates only).
    - ``fast_max_wait_s``: a FAST job is placed where its expected downtime (the first boot when its host
      must be bought, a restart after each interruption expected over its run, at the seller's observed
      time to READY) stays within this, when any host can keep it there (default ``inf``: no limit; 600
      holds the FAST tier's ten-minute target at a price, measured in docs/decisions/procurement.md).
    - ``fast_restart_wait_s``: a FAST service back from an interruption restarts where it is expected back
      (a new node's boot at the seller's observed time to READY, then one per interruption expected over
      the rest of its run) within what is left of this many seconds of wait, its first wait and every
      restart counted; where no host can, where it is back soonest (default 600, the FAST tier's ten
      minutes; ``inf``: a restart is priced like a first run).
    - ``flex_max_rework``: a FLEX job is sent only where its expected rework (the work redone after spot
      interruptions, per unit of work: ``domain.contracts.rework_fraction``) stays within this, when any
      host keeps it there (default 1.0: expected done within twice its run; ``inf``: no limit, spot is used
      up to where its rework eats its discount).
    - ``spot_limit_headroom``: a spot purchase's limit price is the spot price last observed plus this
      fraction of it (default 0.10, the cost band's tolerance), never over the tier's cap: spot prices move
      between two observations of the market, and an order at exactly the old price is refused when they
      rose (its group then backs off). The seller charges its price at the fill. 0: the observed price.
    - ``fast_spare_per_services``: a spot group whose nodes host FAST services keeps one slice free per
      this many of them (those with an hour or more of expected run left), so that an interrupted service
      restarts on it at once instead of waiting for a new node's boot (engine/reserve.py; 0: none).
    - ``fast_preference_limit``: ``None`` (the default): a FAST job keeps the seed's size rule whenever the
      preferred provider can host it now. A number >= 1: a short FAST service on its first run leaves the
      preferred provider for another host more than this factor cheaper for it (engine/cost_band.py).
    - ``packing_score``: how a job's node is chosen among those that pass the packer's filters: ``"scalar"``
      (fragmentation, CPU/RAM stranding and the seed's expiry term, its prior learnt online from the jobs
      submitted so far; the policy ``scalar simulate fgd --policy scalar`` runs) or ``"seed"`` (seed 001's
      score).
    """

    scale_groups: tuple[ScaleGroupConfig, ...] = (ScaleGroupConfig(),)
    tiers: Mapping[Tier, TierConfig] = field(default_factory=_default_tiers)
    contract_length_s: int = DEFAULT_CONTRACT_LENGTH_S
    request_timeout_s: float = 600.0
    boot_timeout_s: float = 1800.0
    backoff_s: float = 300.0
    idle_release_s: float = 1800.0
    flex_batch_wait_s: float = 900.0
    flex_batch_gpus: int = 8
    safety_margin_s: float = 300.0
    reservation_s: float = 600.0
    max_demand_entries: int = 2000
    # Agents: a job requeued after its node was LOST runs at most this many attempts, then fails;
    # bought nodes of ``agent_providers`` are READY only once their agent registered.
    max_job_attempts: int = 3
    agent_providers: tuple[str, ...] = ()
    budgets: tuple[BudgetLimit, ...] = ()  # spend limits (engine/budget.py); replaced by BudgetsChanged
    routing_memo: bool = True
    pending_index: bool = True
    # The hours a published spot interruption rate is the probability of an interruption in (the Spot
    # Advisor's bands are monthly: 730); procurement prices spot risk with it (domain/contracts.py).
    interruption_period_hours: float = 730.0
    interruption_prior: float = DEFAULT_INTERRUPTION_PRIOR
    fast_max_wait_s: float = DEFAULT_FAST_MAX_WAIT_S
    fast_restart_wait_s: float = DEFAULT_FAST_RESTART_WAIT_S
    flex_max_rework: float = DEFAULT_FLEX_MAX_REWORK
    spot_limit_headroom: float = DEFAULT_SPOT_LIMIT_HEADROOM
    fast_spare_per_services: int = DEFAULT_FAST_SPARE_PER_SERVICES
    market_time_scales: Mapping[str, float] = field(default_factory=dict)
    packing_score: str = SCALAR_SCORE
    # Off by default: measured on Protocol B, it saves ~6% at a longer FAST wait (docs/decisions/procurement.md).
    fast_preference_limit: float | None = None
    # Restartable FLEX jobs leave expensive, underused contracts when that saves money (engine/consolidate.py).
    consolidation: ConsolidationPolicy = field(default_factory=ConsolidationPolicy)

    def __post_init__(self) -> None:
        if not isinstance(self.scale_groups, tuple):
            object.__setattr__(self, "scale_groups", tuple(self.scale_groups))
        for i, group in enumerate(self.scale_groups):
            if not isinstance(group, ScaleGroupConfig):
                raise ConfigError(f"scale_groups[{i}]", f"must be a scale group, got {group!r}")
            group.validate(f"scale_groups[{i}]")
        names = [g.name for g in self.scale_groups]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise ConfigError(
                    f"scale_groups[{i}].name", f"{name!r} is used twice", "give each a unique name"
                )
        tiers = dict(_default_tiers())
        for key, value in dict(self.tiers).items():
            if not isinstance(key, Tier):
                raise ConfigError(f"tiers.{key}", f"unknown tier {key!r}; use FAST or FLEX")
            if not isinstance(value, TierConfig):
                raise ConfigError(f"tiers.{key.value}", f"must be a tier config, got {value!r}")
            cap = value.max_price_per_gpu_hour
            if cap is not None and (not isinstance(cap, Decimal) or not cap.is_finite() or cap <= 0):
                raise ConfigError(
                    f"tiers.{key.value}.max_price_per_gpu_hour", f"must be a positive amount, got {cap!r}"
                )
            tiers[key] = value
        object.__setattr__(self, "tiers", tiers)
        _count("contract_length_s", self.contract_length_s, 1)
        for name in ("request_timeout_s", "boot_timeout_s", "safety_margin_s"):
            _positive(name, getattr(self, name))
        for name in ("backoff_s", "idle_release_s", "flex_batch_wait_s", "reservation_s"):
            _positive(name, getattr(self, name), allow_zero=True)
        _count("flex_batch_gpus", self.flex_batch_gpus, 1)
        _count("max_demand_entries", self.max_demand_entries, 1)
        _count("max_job_attempts", self.max_job_attempts, 1)
        period = self.interruption_period_hours
        if (
            isinstance(period, bool)
            or not isinstance(period, int | float)
            or not (math.isfinite(period) and period > 0)
        ):
            raise ConfigError(
                "interruption_period_hours",
                f"must be a number of hours > 0, got {period!r}",
                "use 730 for monthly interruption rates (the Spot Advisor's), 1 for hourly ones",
            )
        _above_zero(
            "interruption_prior",
            self.interruption_prior,
            "interruptions",
            "leave it out for 5; a larger number trusts the published rates longer, inf for them only",
        )
        _above_zero(
            "fast_max_wait_s",
            self.fast_max_wait_s,
            "seconds",
            "use 600 for the FAST tier's ten minutes (restarts included); leave it out for no limit",
        )
        _above_zero(
            "fast_restart_wait_s",
            self.fast_restart_wait_s,
            "seconds",
            "leave it out for 600 (the FAST tier's ten minutes); inf prices a restart like a first run",
        )
        if (
            isinstance(self.flex_max_rework, bool)
            or not isinstance(self.flex_max_rework, int | float)
            or not self.flex_max_rework >= 0
        ):
            raise ConfigError(
                "flex_max_rework",
                f"must be a number >= 0 (work redone per unit of work), got {self.flex_max_rework!r}",
                "leave it out for 1.0 (a FLEX job expected done within twice its run); inf for no limit",
            )
        if (
            isinstance(self.spot_limit_headroom, bool)
            or not isinstance(self.spot_limit_headroom, int | float)
            or not 0 <= self.spot_limit_headroom <= 1
        ):
            raise ConfigError(
                "spot_limit_headroom",
                f"must be a fraction from 0 to 1 of the observed spot price, got {self.spot_limit_headroom!r}",
                "leave it out for 0.10 (a spot order's limit 10% over the price last seen); 0 for the price itself",
            )
        per = self.fast_spare_per_services
        if isinstance(per, bool) or not isinstance(per, int) or per < 0:
            raise ConfigError(
                "fast_spare_per_services",
                f"must be a whole number >= 0 (FAST services per spare slice), got {per!r}",
                f"leave it out for {DEFAULT_FAST_SPARE_PER_SERVICES}; 0 keeps no spare",
            )
        limit = self.fast_preference_limit
        if limit is not None and (
            isinstance(limit, bool)
            or not isinstance(limit, int | float)
            or not (math.isfinite(limit) and limit >= 1)
        ):
            raise ConfigError(
                "fast_preference_limit",
                f"must be a number >= 1, got {limit!r}",
                "leave it out to keep FAST jobs with the preferred provider",
            )
        if not isinstance(self.market_time_scales, Mapping):
            raise ConfigError("market_time_scales", "must be a table of provider = number")
        for name, scale in self.market_time_scales.items():
            if (
                isinstance(scale, bool)
                or not isinstance(scale, int | float)
                or not (math.isfinite(scale) and scale > 0)
            ):
                raise ConfigError(
                    f"market_time_scales.{name}",
                    f"must be a number > 0, got {scale!r}",
                    "leave it out: the runtime sets it from the top-level time_scale (1 for real sellers)",
                )
        if not isinstance(self.agent_providers, tuple):
            object.__setattr__(self, "agent_providers", tuple(self.agent_providers))
        if not isinstance(self.routing_memo, bool):
            raise ConfigError("routing_memo", f"must be true or false, got {self.routing_memo!r}")
        if not isinstance(self.pending_index, bool):
            raise ConfigError("pending_index", f"must be true or false, got {self.pending_index!r}")
        if self.packing_score not in PACKING_SCORES:
            raise ConfigError(
                "packing_score",
                f"unknown packing score {self.packing_score!r}",
                f"use one of {', '.join(repr(s) for s in PACKING_SCORES)}",
            )

    def time_scale(self, provider: str) -> float:
        """Market seconds per engine second for ``provider`` (``market_time_scales``; 1 when absent)."""
        return float(self.market_time_scales.get(provider, 1.0))

    def cap_for(self, tier: Tier) -> Decimal | None:
        return self.tiers[tier].max_price_per_gpu_hour

    @property
    def procurement(self) -> ProcurementPolicy:
        """The one procurement policy the controller decides with: the seed's numbers, the tiers' caps."""
        return ProcurementPolicy(
            flex_max_price_per_gpu_hour=self.cap_for(Tier.FLEX),
            fast_max_price_per_gpu_hour=self.cap_for(Tier.FAST),
            interruption_period_hours=self.interruption_period_hours,
            interruption_prior=self.interruption_prior,
            fast_max_wait_s=float(self.fast_max_wait_s),
            fast_restart_wait_s=float(self.fast_restart_wait_s),
            flex_max_rework=float(self.flex_max_rework),
            fast_preference_limit=(
                None if self.fast_preference_limit is None else Decimal(str(self.fast_preference_limit))
            ),
            fast_spare_per_services=self.fast_spare_per_services,
        )

    # ---- plain dicts (the config file) ---------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ControllerConfig:
        """Read the config file's shape; unknown keys and bad values raise ``ConfigError`` naming the key."""
        from scalar.engine.config_file import read_config  # pydantic: loaded only where a file is read

        return read_config(data)

    def to_dict(self) -> dict[str, Any]:
        """The config file's shape of this config (``from_dict(c.to_dict()) == c``)."""
        from scalar.engine.config_file import ControllerFile

        return ControllerFile.of(self).model_dump()
