"""Chart geometry for the dashboard, drawn as inline SVG by the templates (no chart library).

Pure functions from numbers to coordinates: ``depth_chart`` (an orderbook's cumulative asks and bids as
step lines) and ``line_chart`` (a series over time, e.g. spend). Everything is in SVG user units of a
``width`` x ``height`` view box with a margin for the axis labels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from scalar.domain.money import usd_axis

MARGIN_LEFT = 56.0
MARGIN_RIGHT = 12.0
MARGIN_TOP = 10.0
MARGIN_BOTTOM = 28.0


@dataclass(frozen=True)
class Tick:
    at: float
    label: str


@dataclass
class Chart:
    width: float
    height: float
    paths: dict[str, str] = field(default_factory=dict)
    x_ticks: list[Tick] = field(default_factory=list)
    y_ticks: list[Tick] = field(default_factory=list)
    markers: list[dict[str, float | str]] = field(default_factory=list)
    empty: bool = False

    @property
    def left(self) -> float:
        return MARGIN_LEFT

    @property
    def right(self) -> float:
        return self.width - MARGIN_RIGHT

    @property
    def top(self) -> float:
        return MARGIN_TOP

    @property
    def bottom(self) -> float:
        return self.height - MARGIN_BOTTOM


def _nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    if not high > low or not math.isfinite(high - low):
        return [low]
    raw = (high - low) / max(1, count)
    magnitude = 10 ** _floor_log10(raw)
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = _ceil_to(low, step)
    ticks: list[float] = []
    value = first
    while value <= high + step * 1e-9 and len(ticks) < 50:
        ticks.append(round(value, 10))
        value += step
    return ticks


def _floor_log10(value: float) -> int:
    return math.floor(math.log10(value)) if 0 < value < math.inf else 0


def _ceil_to(value: float, step: float) -> float:
    quotient = value / step
    whole = int(quotient)
    return (whole if whole >= quotient else whole + 1) * step


class _Scale:
    def __init__(self, low: float, high: float, start: float, end: float) -> None:
        self.low, self.high, self.start, self.end = low, high, start, end

    def __call__(self, value: float) -> float:
        if self.high == self.low:
            return (self.start + self.end) / 2
        return self.start + (value - self.low) / (self.high - self.low) * (self.end - self.start)


def depth_chart(
    asks: Sequence[tuple[float, float]],
    bids: Sequence[tuple[float, float]],
    optimal_price: float | None = None,
    required_gpus: float | None = None,
    width: float = 960,
    height: float = 260,
) -> Chart:
    """Asks (price, GPUs) cheapest first and bids (price, GPUs) dearest first, as cumulative step lines:
    x is the price ($/GPU-h), y the GPUs available at that price or better."""
    chart = Chart(width, height)
    if not asks and not bids:
        chart.empty = True
        return chart
    prices = [p for p, _ in asks] + [p for p, _ in bids]
    low, high = min(prices), max(prices)
    pad = (high - low) * 0.05 or max(abs(high) * 0.05, 0.01)
    low, high = low - pad, high + pad
    ask_total = sum(q for _, q in asks)
    bid_total = sum(q for _, q in bids)
    top = max(ask_total, bid_total, required_gpus or 0, 1)
    x = _Scale(low, high, chart.left, chart.right)
    y = _Scale(0, top * 1.05, chart.bottom, chart.top)
    chart.paths["asks"] = _steps(asks, x, y, toward=high)
    chart.paths["bids"] = _steps(bids, x, y, toward=low)
    chart.x_ticks = [Tick(x(t), usd_axis(t)) for t in _nice_ticks(low, high, 6)]
    chart.y_ticks = [Tick(y(t), f"{t:,.0f}") for t in _nice_ticks(0, top * 1.05, 4)]
    if optimal_price is not None:
        chart.markers.append({"x": x(optimal_price), "label": f"optimal {usd_axis(optimal_price)}"})
    if required_gpus:
        chart.markers.append({"y": y(required_gpus), "label": f"need {required_gpus:,.0f} GPUs"})
    return chart


def _steps(levels: Sequence[tuple[float, float]], x: _Scale, y: _Scale, toward: float) -> str:
    """A filled step area: the cumulative quantity rises at each level's price."""
    if not levels:
        return ""
    cumulative = 0.0
    first_x = x(levels[0][0])
    parts = [f"M{first_x:.1f},{y(0):.1f}"]
    for price, quantity in levels:
        px = x(price)
        parts.append(f"L{px:.1f},{y(cumulative):.1f}")
        cumulative += quantity
        parts.append(f"L{px:.1f},{y(cumulative):.1f}")
    end_x = x(toward)
    parts.append(f"L{end_x:.1f},{y(cumulative):.1f}")
    parts.append(f"L{end_x:.1f},{y(0):.1f}Z")
    return " ".join(parts)


def line_chart(
    points: Sequence[tuple[float, float]],
    x_labels: Sequence[tuple[float, str]] = (),
    width: float = 960,
    height: float = 260,
    money: bool = True,
) -> Chart:
    """``points`` (x, y) in order of x, e.g. (epoch seconds, cumulative $). ``x_labels``: (x, text)."""
    chart = Chart(width, height)
    if not points:
        chart.empty = True
        return chart
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    y_high = max(max(ys), 0.01) * 1.1
    x = _Scale(min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1, chart.left, chart.right)
    y = _Scale(0, y_high, chart.bottom, chart.top)
    line = " ".join(f"{'M' if i == 0 else 'L'}{x(px):.1f},{y(py):.1f}" for i, (px, py) in enumerate(points))
    chart.paths["line"] = line
    chart.paths["area"] = f"{line} L{x(xs[-1]):.1f},{y(0):.1f} L{x(xs[0]):.1f},{y(0):.1f}Z"
    chart.y_ticks = [Tick(y(t), usd_axis(t) if money else f"{t:,.0f}") for t in _nice_ticks(0, y_high, 4)]
    chart.x_ticks = [Tick(x(at), text) for at, text in x_labels]
    for px, py in points[-1:]:
        chart.markers.append({"x": x(px), "y": y(py), "label": usd_axis(py) if money else f"{py:,.0f}"})
    return chart
