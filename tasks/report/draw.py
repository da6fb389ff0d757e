"""The report's figures, one drawing function per figure type.

Each function takes what its figure shows, computed beforehand (:mod:`tasks.report.figure_data`),
and returns a matplotlib Figure (not saved: :func:`tasks.report.layout.save_figure`). It loads no
data and knows no family; it gives colours and markers by order (:mod:`tasks.report.style`):
curves take the palette's colours in turn and distinct markers, references follow them dashed
(:func:`tasks.report.style.reference_colour`), metric-level data-free references are grey.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from tasks.report.figure_data import Axes, CrossFamilyFigure, FrontierFigure, Label, Line, Panel, ParetoFigure
from tasks.report.layout import dodge, place_labels
from tasks.report.style import (
    METRIC_REFERENCE_GREYS,
    REFERENCE_STYLE,
    colour,
    legend_outside,
    marker,
    reference_colour,
    short_log_ticks,
)


def _figure(rows: int = 1, size: tuple[float, float] = (6.4, 4.2)) -> tuple[Any, Any]:
    """A figure with ``rows`` axes stacked (an array of shape (rows, 1))."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(rows, 1, figsize=size, dpi=120, squeeze=False)


def _reference(ax: Any, line: Line, color: str) -> Any:
    """Draw one dashed reference: a curve through its points, or a line across the axes."""
    if line.xs:
        return ax.plot(line.xs, line.ys, color=color, marker=".", label=line.label, **REFERENCE_STYLE)[0]
    draw = ax.axvline if line.axis == "x" else ax.axhline
    return draw(line.value, color=color, label=line.label, **REFERENCE_STYLE)


#: An x-axis label longer than this is wrapped: one line of it then fits under the axes' width.
X_LABEL_WIDTH = 90


def _name_axes(ax: Any, axes: Axes) -> None:
    ax.set_xlabel("\n".join(textwrap.wrap(axes.x_label, X_LABEL_WIDTH)) if axes.x_label else axes.x_label, fontsize=8)
    ax.set_ylabel(axes.y_label, fontsize=8)
    ax.set_title(axes.title, fontsize=9)
    ax.grid(True, alpha=0.3)


def _labels(ax: Any, labels: Sequence[Label], fontsize: float = 7) -> None:
    if labels:
        place_labels(ax, [x for x, _, _ in labels], [y for _, y, _ in labels], [t for _, _, t in labels],
                     fontsize=fontsize)


def _frontier_scales(ax: Any, axes: Axes) -> None:
    """Log scales as the axes say; a short log x axis labelled at 1, 2, 5 × 10ᵏ."""
    if axes.log_x:
        ax.set_xscale("log")
    if axes.log_y:
        ax.set_yscale("log")
    if axes.log_x:
        short_log_ticks(ax.xaxis)


def _mark(ax: Any, mark: Line | None, paper: Label | None) -> None:
    """The marked x as a dotted line and the paper's value there as a labelled star."""
    if mark is not None:
        ax.axvline(mark.value, linestyle=":", color="0.3", label=mark.label)
    if paper is not None:
        x, y, label = paper
        ax.plot([x], [y], marker="*", markersize=14, color="k", linestyle="none", zorder=5, label=label)
        ax.annotate("paper", (x, y), textcoords="offset points", xytext=(7, -3), fontsize=8)


def draw_frontier(fig_data: FrontierFigure) -> Any:
    """One privacy–utility figure: each curve with its error bars (palette colour and marker by
    order), the reference curves and horizontal reference lines dashed in the next colours, the
    metric-level references grey, the marked x and the paper's star, the legend outside the axes;
    curves whose markers would coincide drawn side by side (:func:`tasks.report.layout.dodge`)
    and the point labels placed where they overlap nothing."""
    fig, axs = _figure()
    ax = axs[0, 0]
    series: list[list[Any]] = []
    for i, s in enumerate(fig_data.curves):
        bars = ax.errorbar(s.xs, s.ys, yerr=s.yerr, xerr=s.xerr, marker=marker(i), color=colour(i), capsize=3,
                           label=s.label)
        series.append([bars.lines[0], *bars.lines[1], *bars.lines[2]])
    j = len(fig_data.curves)
    for line in fig_data.reference_curves:
        series.append([_reference(ax, line, reference_colour(j))])
        j += 1
    for line in fig_data.flat_references:
        _reference(ax, line, reference_colour(j))
        j += 1
    for line in fig_data.metric_references:  # neutral greys: never a curve's colour
        _reference(ax, line, METRIC_REFERENCE_GREYS[line.axis])
    _mark(ax, fig_data.mark, fig_data.paper)
    _frontier_scales(ax, fig_data.axes)
    _name_axes(ax, fig_data.axes)
    ax.margins(x=0.06)
    legend_outside(ax, fontsize=7)
    dodge(ax, series)
    _labels(ax, fig_data.labels, fontsize=6)
    return fig


def draw_pareto(fig_data: ParetoFigure) -> Any:
    """A family's utility vs attacker: the other cells as small grey points above the front (a cell
    as good as a front point shows inside its marker), the front with its error bars, the reference
    cells' utility as horizontal and the data-free attackers as vertical dashed lines, the
    metric-level references grey, the legend outside and the front's points labelled."""
    fig, axs = _figure()
    ax = axs[0, 0]
    xs, ys = fig_data.others
    if xs:
        ax.scatter(xs, ys, color="0.55", s=12, label="other cells", zorder=4)
    front = fig_data.front
    if front is not None:
        ax.errorbar(front.xs, front.ys, yerr=front.yerr, color=colour(0), marker=marker(0), capsize=3,
                    label=front.label, zorder=3)
    for i, line in enumerate(fig_data.cell_references, start=1):
        _reference(ax, line, reference_colour(i))
    for line in fig_data.metric_references:
        _reference(ax, line, METRIC_REFERENCE_GREYS[line.axis])
    for i, line in enumerate(fig_data.attacker_references, start=1 + len(fig_data.cell_references)):
        _reference(ax, line, reference_colour(i))
    _name_axes(ax, fig_data.axes)
    ax.margins(x=0.08, y=0.08)
    legend_outside(ax)
    _labels(ax, fig_data.labels)
    return fig


def _panel(ax: Any, panel: Panel) -> None:
    """One data set of the cross-family figure: each family's points with open markers (points at
    one place show every family's outline), the reference line, fixed limits, labels."""
    for f in panel.families:
        s = f.series
        ax.errorbar(s.xs, s.ys, xerr=s.xerr, yerr=s.yerr, fmt=marker(f.index), color=colour(f.index), capsize=3,
                    label=s.label, markersize=7, markerfacecolor="none", markeredgewidth=1.4, elinewidth=0.8)
    if panel.reference is not None:
        _reference(ax, panel.reference, "0.3")
    if panel.empty:
        ax.text(0.5, 0.5, "no cell emitted the cross-family arrays", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlim(*panel.x_limits)
    ax.set_ylim(0.0, 1.05)
    _name_axes(ax, panel.axes)
    legend_outside(ax)
    place_labels(ax, [x for x, _, _ in panel.labels], [y for _, y, _ in panel.labels], [t for _, _, t in panel.labels])


def draw_crossfamily(fig_data: CrossFamilyFigure) -> Any:
    """The cross-family figure: one panel per data set, stacked (:func:`_panel`)."""
    n = len(fig_data.panels)
    fig, axs = _figure(n, (7.0, 4.8 * n))
    for ax, panel in zip(axs[:, 0], fig_data.panels, strict=True):
        _panel(ax, panel)
    return fig
