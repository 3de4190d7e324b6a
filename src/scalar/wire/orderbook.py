"""Seed 000's orderbook on the wire: the BOOK.json input and the GET /orderbook response.

``OrderbookFile`` parses a book (``{"instance_type", "asks": [...], "bids": [...]}``) into domain
``BookOrder`` values; ``build_orderbook_response`` turns an ``OrderbookAnalysis`` into the seed's
response shape (prices as JSON numbers), plus ``insufficient_liquidity``, the fill estimate and the
scores that explain the choice. The CLI prints it; the HTTP API returns the same model.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StrictInt, StrictStr

from scalar.domain.money import round_micros, to_decimal, to_json_number
from scalar.domain.orderbook import BookOrder, LevelScore, OrderbookAnalysis
from scalar.domain.reasons import Reason
from scalar.domain.timefmt import iso_z

JsonNumber = float | int


# ---------------------------------------------------------------------------------------------- input


class BookOrderIn(BaseModel):
    """One ask or bid in BOOK.json. ``price`` is USD per GPU-hour."""

    model_config = ConfigDict(extra="forbid")

    price: float = Field(gt=0, strict=True, allow_inf_nan=False, description="USD per GPU-hour")
    quantity_gpus: StrictInt = Field(ge=0, description="whole GPUs offered (asks) or wanted (bids)")
    duration_hours: float = Field(gt=0, strict=True, allow_inf_nan=False, description="hours")

    def to_domain(self) -> BookOrder:
        return BookOrder(
            price_per_gpu_hour=to_decimal(self.price),
            quantity_gpus=self.quantity_gpus,
            duration_hours=to_decimal(self.duration_hours),
        )


class OrderbookFile(BaseModel):
    """BOOK.json: one instance type's asks and bids, with an optional ``last_updated`` time."""

    model_config = ConfigDict(extra="forbid")

    instance_type: StrictStr = Field(min_length=1, description='e.g. "8xH100"')
    asks: list[BookOrderIn]
    bids: list[BookOrderIn] = Field(default_factory=list)
    last_updated: AwareDatetime | None = Field(
        default=None, description="ISO 8601 time with a zone, e.g. 2025-01-09T12:00:00Z"
    )

    def ask_orders(self) -> tuple[BookOrder, ...]:
        return tuple(a.to_domain() for a in self.asks)

    def bid_orders(self) -> tuple[BookOrder, ...]:
        return tuple(b.to_domain() for b in self.bids)


# --------------------------------------------------------------------------------------------- output


class AskOut(BaseModel):
    price: JsonNumber
    quantity_gpus: int
    duration_hours: JsonNumber
    cumulative_quantity: int


class BidOut(BaseModel):
    price: JsonNumber
    quantity_gpus: int
    duration_hours: JsonNumber


class MetadataOut(BaseModel):
    required_gpus: int
    node_count: int
    gpus_per_node: int


class SlippageOut(BaseModel):
    per_gpu_hour: JsonNumber
    fraction: JsonNumber


class FillOut(BaseModel):
    """Taking ``required_gpus`` from the cheapest ask up: prices in USD per GPU-hour, rounded to 1e-6."""

    vwap: JsonNumber
    worst_price: JsonNumber
    best_price: JsonNumber
    filled_gpus: int
    required_gpus: int
    levels_touched: int
    cost_per_hour: JsonNumber
    slippage: SlippageOut


class ScoreOut(BaseModel):
    """One level the seed's formula scored: the unweighted terms and the weighted total (float)."""

    index: int
    price: JsonNumber
    cumulative_quantity: int
    level_quantity: int
    depth_score: float
    price_score: float
    liquidity_score: float
    score: float
    optimal: bool


class ReasonOut(BaseModel):
    code: str
    resource: str | None = None
    need: JsonNumber | str | None = None
    have: JsonNumber | str | None = None
    limit: JsonNumber | str | None = None
    message: str


class OrderbookResponse(BaseModel):
    """The seed's GET /orderbook response, plus ``insufficient_liquidity``, ``fill`` and the explanation."""

    instance_type: str
    asks: list[AskOut]
    bids: list[BidOut]
    optimal_price: JsonNumber | None
    optimal_index: int | None
    spread: JsonNumber | None
    total_ask_liquidity: int
    total_bid_liquidity: int
    last_updated: str
    metadata: MetadataOut
    insufficient_liquidity: bool
    min_viable_index: int | None
    fill: FillOut | None
    scores: list[ScoreOut]
    reason: ReasonOut
    warnings: list[ReasonOut]


def format_timestamp(moment: datetime) -> str:
    """ISO 8601 in UTC with a ``Z``: ``2025-01-09T12:00:00Z``."""
    if moment.tzinfo is None:
        raise ValueError("last_updated needs a time zone")
    return iso_z(moment)


def _money(value: Decimal) -> JsonNumber:
    return to_json_number(value)


def _rounded(value: Decimal) -> JsonNumber:
    return to_json_number(round_micros(value))


def _reason(reason: Reason) -> ReasonOut:
    return ReasonOut.model_validate(reason.to_dict())


def _score(level: LevelScore, optimal_index: int | None) -> ScoreOut:
    return ScoreOut(
        index=level.index,
        price=_money(level.price_per_gpu_hour),
        cumulative_quantity=level.cumulative_quantity,
        level_quantity=level.level_quantity,
        depth_score=level.depth_score,
        price_score=level.price_score,
        liquidity_score=level.liquidity_score,
        score=level.score,
        optimal=level.index == optimal_index,
    )


def build_orderbook_response(
    analysis: OrderbookAnalysis,
    instance_type: str,
    node_count: int,
    gpus_per_node: int,
    last_updated: datetime,
) -> OrderbookResponse:
    """Serialise a decision. ``analysis.required_gpus`` must equal ``node_count * gpus_per_node``."""
    if analysis.required_gpus != node_count * gpus_per_node:
        raise ValueError(
            f"analysis was made for {analysis.required_gpus} GPUs, not {node_count} x {gpus_per_node}"
        )
    fill = analysis.fill
    fill_out = (
        None
        if fill is None
        else FillOut(
            vwap=_rounded(fill.vwap_per_gpu_hour),
            worst_price=_money(fill.worst_price_per_gpu_hour),
            best_price=_money(fill.best_price_per_gpu_hour),
            filled_gpus=fill.filled_gpus,
            required_gpus=fill.required_gpus,
            levels_touched=fill.levels_touched,
            cost_per_hour=_money(fill.cost_per_hour),
            slippage=SlippageOut(
                per_gpu_hour=_rounded(fill.slippage_per_gpu_hour),
                fraction=_rounded(fill.slippage_fraction),
            ),
        )
    )
    return OrderbookResponse(
        instance_type=instance_type,
        asks=[
            AskOut(
                price=_money(level.price_per_gpu_hour),
                quantity_gpus=level.quantity_gpus,
                duration_hours=_money(level.duration_hours),
                cumulative_quantity=level.cumulative_quantity,
            )
            for level in analysis.asks
        ],
        bids=[
            BidOut(
                price=_money(bid.price_per_gpu_hour),
                quantity_gpus=bid.quantity_gpus,
                duration_hours=_money(bid.duration_hours),
            )
            for bid in analysis.bids
        ],
        optimal_price=(
            None
            if analysis.optimal_price_per_gpu_hour is None
            else _money(analysis.optimal_price_per_gpu_hour)
        ),
        optimal_index=analysis.optimal_index,
        spread=None if analysis.spread_per_gpu_hour is None else _money(analysis.spread_per_gpu_hour),
        total_ask_liquidity=analysis.total_ask_liquidity,
        total_bid_liquidity=analysis.total_bid_liquidity,
        last_updated=format_timestamp(last_updated),
        metadata=MetadataOut(
            required_gpus=analysis.required_gpus, node_count=node_count, gpus_per_node=gpus_per_node
        ),
        insufficient_liquidity=analysis.insufficient_liquidity,
        min_viable_index=analysis.min_viable_index,
        fill=fill_out,
        scores=[_score(level, analysis.optimal_index) for level in analysis.scores],
        reason=_reason(analysis.reason),
        warnings=[_reason(w) for w in analysis.warnings],
    )
