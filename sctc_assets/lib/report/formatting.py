"""Numbers as the report prints them, and matplotlib figures made without pyplot (no global state, Agg)."""

from __future__ import annotations

import math
from typing import Any

from sctc_assets.lib.report.document import Cell
from sctc_assets.lib.report.intervals import Interval


def number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def is_missing(value: Any) -> bool:
    return math.isnan(number(value))


def fixed(value: Any, digits: int = 1, *, signed: bool = False) -> str:
    value = number(value)
    if math.isnan(value):
        return "–"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def interval_text(interval: Interval | None, digits: int = 1) -> str:
    if interval is None or not interval.finite:
        return ""
    return f"[{interval.low:.{digits}f}, {interval.high:.{digits}f}]"


def stars(mark: Any) -> str:
    """Significance marks as the tables hold them ('***', 'NS', ''), with 'NS' kept."""
    return mark if isinstance(mark, str) else ""


def value_cell(value: Any, interval: Interval | None = None, *, digits: int = 1, signed: bool = False,
               mark: str = "", suffix: str = "", note: str = "") -> Cell:
    """`12.3 ***` over `[10.1, 14.6]`, sorting on the value; the tooltip names the interval's method."""
    text = fixed(value, digits, signed=signed)
    if text != "–" and suffix:
        text += suffix
    ci = interval_text(interval, digits)
    tooltip = "; ".join(part for part in ((f"95 % CI: {interval.method}" if ci else ""), note) if part)
    return Cell(" ".join(part for part in (text, stars(mark)) if part),
                sort=None if is_missing(value) else number(value), title=tooltip, detail=ci)


def not_run(text: str = "not run") -> Cell:
    return Cell(text, sort=None, css="not-run")


def new_figure(width: float, height: float, *, margins: tuple[float, float, float, float],
               wspace: float = 0.25, **subplots: Any):
    """A Figure and its axes, drawn by Agg without pyplot's figure registry, with fixed margins in inches (left,
    right, top, bottom): the same room for labels and legends at any width, and no layout solver to pay for at
    every save (it doubled the drawing time of a report)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height))
    axes = figure.subplots(**subplots) if subplots else figure.subplots()
    left, right, top, bottom = margins
    figure.subplots_adjust(left=left / width, right=1 - right / width, top=1 - top / height, bottom=bottom / height,
                           wspace=wspace)
    return figure, axes


def keep_text_inside(figure, pad: float = 0.08) -> None:
    """Grow the figure where any of its text (a long model name rotated under its bars, a legend, a title) reaches
    past its edges, keeping every axes' size and place in inches: the fixed margins of `new_figure` suit the usual
    labels, and a longer one must widen the picture, not be cut by it. `pad`: inches of room left beyond it."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    width, height = figure.get_size_inches()
    box = figure.get_tightbbox(FigureCanvasAgg(figure).get_renderer())  # inches, every artist's extent
    left, bottom = (pad - low if low < 0 else 0.0 for low in (box.x0, box.y0))
    right, top = (high - size + pad if high > size else 0.0 for high, size in ((box.x1, width), (box.y1, height)))
    if not (left or bottom or right or top):
        return
    grown_width, grown_height = width + left + right, height + bottom + top
    for axes in figure.axes:
        place = axes.get_position()
        axes.set_position([(place.x0 * width + left) / grown_width, (place.y0 * height + bottom) / grown_height,
                           place.width * width / grown_width, place.height * height / grown_height])
    figure.set_size_inches(grown_width, grown_height)
