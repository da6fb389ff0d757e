"""What each figure of the report draws, computed before drawing.

Each figure type has one builder that reads the cell rows (:func:`tasks.report.frontier.frontier_figure`,
:func:`tasks.report.pareto.pareto_figure`, :func:`tasks.report.crossfamily.crossfamily_figure`)
and one drawing function that only draws what it is given (:mod:`tasks.report.draw`). Error bars
are matplotlib's asymmetric ``[[below…], [above…]]``, already clipped to the metric's range
(:func:`tasks.report.numbers.error_bars`). Colours and markers are not data: the drawing functions
give them by order (:mod:`tasks.report.style`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: a point label: (x, y, text)
Label = tuple[float, float, str]


@dataclass(frozen=True)
class Series:
    """Points joined in order, with error bars (``xerr``/``yerr`` None: none on that axis)."""

    label: str
    xs: list[float]
    ys: list[float]
    xerr: list[list[float]] | None = None
    yerr: list[list[float]] | None = None


@dataclass(frozen=True)
class Line:
    """A dashed reference: a curve through ``xs``, ``ys`` when they are given, else a line across the
    axes at ``value``, vertical for ``axis="x"`` and horizontal for ``axis="y"``."""

    label: str
    axis: str = "y"
    value: float = 0.0
    xs: list[float] = field(default_factory=list)
    ys: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class Axes:
    """Axis labels, title and scales of one panel."""

    x_label: str
    y_label: str
    title: str
    log_x: bool = False
    log_y: bool = False


@dataclass(frozen=True)
class FrontierFigure:
    """A privacy–utility frontier: ``curves`` (the releases, with error bars), ``reference_curves``
    (references run at two or more x values), ``flat_references`` (the other references, horizontal),
    ``metric_references`` (metric-level data-free references, grey), ``labels`` (point labels),
    ``mark`` (a dotted vertical line at the marked x) and ``paper`` (the paper's value there)."""

    axes: Axes
    curves: list[Series]
    reference_curves: list[Line] = field(default_factory=list)
    flat_references: list[Line] = field(default_factory=list)
    metric_references: list[Line] = field(default_factory=list)
    labels: list[Label] = field(default_factory=list)
    mark: Line | None = None
    paper: Label | None = None


@dataclass(frozen=True)
class ParetoFigure:
    """A family's utility vs attacker: ``others`` (cells off the frontier, a grey scatter),
    ``front`` (the best cell at each privacy level), ``cell_references`` (reference cells' utility,
    horizontal), ``metric_references`` (grey), ``attacker_references`` (data-free attackers, vertical)
    and ``labels`` (the front's points)."""

    axes: Axes
    others: tuple[list[float], list[float]]
    front: Series | None
    cell_references: list[Line] = field(default_factory=list)
    metric_references: list[Line] = field(default_factory=list)
    attacker_references: list[Line] = field(default_factory=list)
    labels: list[Label] = field(default_factory=list)


@dataclass(frozen=True)
class FamilySeries:
    """One family's points in a cross-family panel; ``index`` is the family's place in the figure's
    legend order (its colour and marker)."""

    index: int
    series: Series


@dataclass(frozen=True)
class Panel:
    """One data set's panel of the cross-family figure; ``empty`` marks a panel without points."""

    axes: Axes
    families: list[FamilySeries]
    reference: Line | None
    x_limits: tuple[float, float]
    labels: list[Label] = field(default_factory=list)
    empty: bool = False


@dataclass(frozen=True)
class CrossFamilyFigure:
    """The cross-family figure: one panel per data set."""

    panels: list[Panel]
