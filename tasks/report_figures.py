"""Figure conventions of the report: colour-blind safe colours, legends outside the data, point
labels that never overlap, and saving with the whole of every label inside the image.

* Colours: the Okabe–Ito palette (Okabe & Ito 2008, "Color Universal Design"), distinguishable
  under the common colour-vision deficiencies; curves also differ by marker.
* References are dashed (:data:`REFERENCE_STYLE`); metric-level data-free references are grey
  (:data:`METRIC_REFERENCE_GREYS`).
* Legends sit to the right of the axes (:func:`legend_outside`), never over plotted points.
* Point labels (:func:`place_labels`) are placed greedily: for each label the first of a few
  offsets around its point whose text box (in display pixels, from the Agg renderer) overlaps
  neither an earlier label nor the axes' edge is kept; a label with no free offset is dropped
  (the point is still in the tables).
* A log axis spanning under two decades is labelled at 1, 2, 5 × 10ᵏ in plain numbers
  (:func:`short_log_ticks`), not at every minor tick.
* :func:`save_figure` writes with ``bbox_inches="tight"``, so axis labels are never cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: Okabe–Ito: blue, vermillion, bluish green, orange, reddish purple, sky blue, yellow, black
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#E69F00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
#: dashed reference lines (data-free and other references)
REFERENCE_STYLE = {"linestyle": "--", "linewidth": 1.2}
#: colours of the metric-level data-free references (vertical: an x metric's; horizontal: a y
#: metric's), greys outside the palette so that no reference shares a curve's colour
METRIC_REFERENCE_GREYS = {"x": "0.15", "y": "0.5"}


def colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def marker(i: int) -> str:
    return MARKERS[i % len(MARKERS)]


def legend_outside(ax: Any, **kw: Any) -> Any:
    """Put ``ax``'s legend to the right of the axes (outside the plotted area); None without entries."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return None
    return ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
                     fontsize=kw.pop("fontsize", 8), frameon=False, **kw)


_OFFSETS = ((5, 5), (5, -11), (-5, 5), (-5, -11), (8, -3), (-8, -3), (0, 10), (0, -14), (12, 12), (-12, -16))


def place_labels(ax: Any, xs: Sequence[float], ys: Sequence[float], texts: Sequence[str], fontsize: float = 7) -> list[Any]:
    """Annotate points with ``texts`` so that no two labels overlap and each stays inside the axes;
    returns the annotations kept (see the module docstring)."""
    fig = ax.figure
    fig.canvas.draw()  # final axis limits before measuring
    renderer = fig.canvas.get_renderer()
    axes_box = ax.get_window_extent(renderer)
    kept: list[Any] = []
    boxes: list[Any] = []
    for x, y, text in zip(xs, ys, texts, strict=True):
        for dx, dy in _OFFSETS:
            ha = "left" if dx >= 0 else "right"
            ann = ax.annotate(text, (x, y), textcoords="offset points", xytext=(dx, dy), fontsize=fontsize, ha=ha,
                              va="bottom", annotation_clip=True)
            box = ann.get_window_extent(renderer)
            inside = (box.x0 >= axes_box.x0 and box.x1 <= axes_box.x1 and box.y0 >= axes_box.y0
                      and box.y1 <= axes_box.y1)
            if inside and not any(box.overlaps(b) for b in boxes):
                kept.append(ann)
                boxes.append(box)
                break
            ann.remove()
    return kept


def short_log_ticks(axis: Any, decades: float = 2.0) -> None:
    """On a log ``axis`` (``ax.xaxis``) spanning fewer than ``decades`` decades, label ticks at 1, 2
    and 5 × 10ᵏ as plain numbers (``2``, ``5``, ``10``, ``20``) and leave the minor ticks unlabelled:
    matplotlib's default there labels every minor tick as ``2×10⁰``, ``3×10⁰``, …, which overlap."""
    import math

    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    lo, hi = sorted(axis.get_view_interval())
    if lo <= 0 or math.log10(hi / lo) >= decades:
        return
    axis.set_major_locator(LogLocator(base=10.0, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def layout(fig: Any) -> dict[str, list[Any]]:
    """Display-pixel boxes of a drawn figure, for checks: ``axes`` (each axes' plotting area),
    ``legends`` (each axes legend, as ``(axes index, box)``), ``labels`` (every annotation's text)
    and ``xlabels`` (each axes' x-axis label, a string)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    out: dict[str, list[Any]] = {"axes": [], "legends": [], "labels": [], "xlabels": []}
    for i, ax in enumerate(fig.axes):
        out["axes"].append(ax.get_window_extent(renderer))
        out["xlabels"].append(ax.get_xlabel())
        if (leg := ax.get_legend()) is not None:
            out["legends"].append((i, leg.get_window_extent(renderer)))
        out["labels"] += [t.get_window_extent(renderer) for t in ax.texts if t.get_visible() and t.get_text()]
    return out


def save_figure(fig: Any, path: Path) -> dict[str, list[Any]]:
    """Write a matplotlib figure as PNG atomically (temporary file, then rename), with every label
    inside the image (``bbox_inches="tight"``), and close it; returns its :func:`layout`."""
    import matplotlib.pyplot as plt

    boxes = layout(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, bbox_inches="tight", pad_inches=0.1)
    plt.close(fig)
    tmp.replace(path)
    return boxes
