"""The points of a configured frontier (``report.frontiers``) and what is said under its figure.

A frontier plots, for the cells of one family (and optionally some sweeps), a utility metric ``y``
against a privacy quantity ``x`` (a metric, or a cell option ``param:<name>`` such as ε), one
curve per ``group_by`` value and data set. :func:`frontier_points` gives one point per cell with
its 95% half-widths; reference cells (``reference_groups``, the family's data-free cells, cells
without an x) are marked and drawn dashed. Under the figure, :func:`frontier_summary` fits the
log-log slope of each curve (least squares on the cell means, :func:`loglog_slope`) and reads each
curve at a marked x (:func:`y_at`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from tasks.report.families import log_scale
from tasks.report.figure_data import Axes, FrontierFigure, Label, Line, Series
from tasks.report.numbers import error_bars
from tasks.report.references import is_data_free_cell
from tasks.report.rows import Row, value
from tasks.report.style import cell_options, readable_title, short_cell
from tasks.report.tables import markdown_table
from veilbench.config import FrontierConfig

Point = dict[str, Any]


def group_name(params: dict[str, Any], group_by: str | list[str], fallback: str) -> str:
    """The curve a cell belongs to: its values of the ``group_by`` options joined by ``, ``
    (``fallback`` when it sets none of them)."""
    keys = [group_by] if isinstance(group_by, str) else group_by
    values = [params.get(k) for k in keys]
    if all(v is None for v in values):
        return fallback
    return ", ".join(str(v) for v in values)


def _point(r: Row, fr: FrontierConfig) -> Point | None:
    """The point of one cell row (None without a y value); a reference keeps its x for now."""
    y = value(r, fr.y)
    if y is None:
        return None
    group = group_name(r["params"], fr.group_by, str(r.get("method", r["cell"])))
    data_free = is_data_free_cell(fr.family, r["params"])
    listed = group in fr.reference_groups
    x = None if listed and not fr.x.startswith("param:") else value(r, fr.x)
    return {"sweep": r["sweep"], "cell": r["cell"], "dataset": r["dataset"], "group": group,
            "x": None if x is None else x[0], "x_ci95": 0.0 if x is None else x[1],
            "y": y[0], "y_ci95": y[1], "reference": data_free or listed or x is None, "data_free": data_free}


def frontier_points(rows: list[Row], fr: FrontierConfig) -> list[Point]:
    """The (x, y) points of one frontier. ``reference`` marks the cells drawn dashed: those of
    ``reference_groups``, the family's data-free cells (``data_free``: ``DATA_FREE`` of the family
    module) and cells without the x value. A reference keeps its x only when its cells (per group
    and dataset) take two or more x values, e.g. a data-free release run at each ε, and, for an x
    that is a metric, when its group is not in ``reference_groups`` (those are horizontal lines);
    otherwise ``x`` is None (a single reference cell's option, such as the clean reference's
    default ε, says nothing about the x axis)."""
    mine = [r for r in rows if r["family"] == fr.family and (not fr.sweeps or r["sweep"] in fr.sweeps)]
    pts = [p for r in mine if (p := _point(r, fr)) is not None]
    swept: dict[tuple[str, str], set[float]] = {}
    for p in pts:
        if p["reference"] and p["x"] is not None:
            swept.setdefault((p["group"], p["dataset"]), set()).add(p["x"])
    for p in pts:
        if p["reference"] and len(swept.get((p["group"], p["dataset"]), ())) < 2:
            p["x"], p["x_ci95"] = None, 0.0
    return pts


def curve_name(p: Point, datasets: set[str]) -> str:
    """The name of a point's curve: its group, with its data set when the figure shows several."""
    return p["group"] if len(datasets) == 1 else f"{p['group']} ({p['dataset']})"


def curves(points: list[Point], references: bool = True) -> dict[str, list[Point]]:
    """Curve name → its points sorted by x (one curve per group and dataset); reference points with
    an x are curves too unless ``references`` is False."""
    out: dict[str, list[Point]] = {}
    datasets = {p["dataset"] for p in points}
    for p in points:
        if p["x"] is not None and (references or not p.get("reference")):
            out.setdefault(curve_name(p, datasets), []).append(p)
    return {k: sorted(v, key=lambda p: p["x"]) for k, v in sorted(out.items())}


def loglog_slope(xs: list[float], ys: list[float]) -> tuple[float, float] | None:
    """Least-squares slope b of log y = a + b log x and its standard error (None with < 2 points
    or non-positive values; standard error 0 with exactly 2 points)."""
    import numpy as np

    x, y = np.asarray(xs, float), np.asarray(ys, float)
    if x.size < 2 or np.any(x <= 0) or np.any(y <= 0) or np.ptp(x) == 0:
        return None
    lx, ly = np.log(x), np.log(y)
    b, a = np.polyfit(lx, ly, 1)
    if x.size == 2:
        return float(b), 0.0
    resid = ly - (a + b * lx)
    se = math.sqrt(float(resid @ resid) / (x.size - 2) / float(((lx - lx.mean()) ** 2).sum()))
    return float(b), se


def y_at(curve: list[dict[str, Any]], x0: float) -> float | None:
    """y of a curve at ``x0`` by linear interpolation between the two points whose x bracket it
    (the first bracketing segment in x order); None when ``x0`` is outside the curve's x range."""
    for a, b in zip(curve, curve[1:], strict=False):
        lo, hi = sorted((a["x"], b["x"]))
        if lo <= x0 <= hi:
            if b["x"] == a["x"]:
                return (a["y"] + b["y"]) / 2
            t = (x0 - a["x"]) / (b["x"] - a["x"])
            return a["y"] + t * (b["y"] - a["y"])
    if len(curve) == 1 and curve[0]["x"] == x0:
        return curve[0]["y"]
    return None


def _slopes_table(named: dict[str, list[Point]], fr: FrontierConfig) -> list[str]:
    rows = []
    for name, c in named.items():
        fit = loglog_slope([p["x"] for p in c], [p["y"] for p in c])
        rows.append([name, str(len(c)), "n/a" if fit is None else f"{fit[0]:.3f} ± {fit[1]:.2g}"])
    return [f"Fitted log-log slope of {fr.y} against {fr.x} per curve (least squares on the cell means; ± standard error):",
            "", markdown_table(["curve", "points", "slope"], rows)]


def _mark_table(named: dict[str, list[Point]], fr: FrontierConfig) -> list[str]:
    rows = []
    for name, c in named.items():
        y0 = y_at(c, fr.mark_x)
        rows.append([name, "not reached" if y0 is None else f"{y0:.4g}"])
    if fr.paper_y is not None:
        rows.append([f"paper: {fr.paper_label or 'reported value'}", f"{fr.paper_y:.4g}"])
    label = fr.mark_label or f"{fr.x} = {fr.mark_x:g}"
    return [f"{fr.y} at {label} (linear interpolation between the neighbouring cells; 'not reached' when the "
            "curve does not span it):", "", markdown_table(["curve", fr.y], rows)]


def frontier_summary(points: list[Point], fr: FrontierConfig) -> list[str]:
    """Markdown under a figure: fitted log-log slopes and/or each curve's y at ``mark_x``."""
    named = curves(points)
    return [*(_slopes_table(named, fr) if fr.fit_loglog else []), *(_mark_table(named, fr) if fr.mark_x is not None else [])]


def swept_option(curve: list[Point]) -> str | None:
    """The one cell option that varies along a curve (read from its cells' names), when exactly one
    does and its values are numbers: a curve against a metric is drawn in that option's order."""
    options = [cell_options(p["cell"]) for p in curve]
    varying = [k for k in options[0] if len({o.get(k) for o in options}) > 1] if options else []
    if len(varying) != 1:
        return None
    try:
        [float(o[varying[0]]) for o in options]
    except (KeyError, ValueError):
        return None
    return varying[0]


# --- what the frontier figure draws ---------------------------------------------------------------

def flat_references(groups: dict[str, list[Point]], tolerance: float) -> list[Line]:
    """Horizontal reference lines of the reference points ``groups`` (curve name → points), lines
    whose y values are within ``tolerance`` of each other drawn once (four data-free cells at one
    accuracy are one line: ``random (data-free; 4 cells)``)."""
    flat = sorted(((p["y"], name, "data-free" if p.get("data_free") else "reference", p["cell"])
                   for name, g in groups.items() for p in g), key=lambda t: t[0])
    merged: list[list[Any]] = []
    for item in flat:
        if merged and item[0] - merged[-1][0][0] <= tolerance:
            merged[-1].append(item)
        else:
            merged.append([item])
    lines = []
    for cluster in merged:
        by_name: dict[tuple[str, str], list[str]] = {}
        for _, name, kind, cell in cluster:
            by_name.setdefault((name, kind), []).append(cell)
        parts = [f"{name} ({kind}" + (f"; {len(cells)} cells)" if len(cells) > 1 else ")")
                 for (name, kind), cells in by_name.items()]
        y = sum(c[0] for c in cluster) / len(cluster)
        lines.append(Line(", ".join(parts) + (f", y ≈ {y:.3g}" if len(cluster) > 1 else ""), "y", y))
    return lines


def _slope_label(name: str, points: list[Point], fr: FrontierConfig, kind: str = "") -> str:
    """A curve's legend label, with its fitted log-log slope when the frontier fits one."""
    fit = loglog_slope([p["x"] for p in points], [p["y"] for p in points]) if fr.fit_loglog else None
    inner = ", ".join(t for t in (kind, None if fit is None else f"slope {fit[0]:.2f}") if t)
    return f"{name} ({inner})" if inner else name


def _release_curves(points: list[Point], fr: FrontierConfig) -> tuple[list[Series], list[Label]]:
    """The releases' curves with their error bars, and the point labels of a curve against a metric
    (joined in the order of the one option its cells vary, :func:`swept_option`, each point labelled
    with that option's value)."""
    series, labels = [], []
    for name, g in curves(points, references=False).items():
        label = _slope_label(name, g, fr)
        option = None if fr.x.startswith("param:") else swept_option(g)
        if option is not None:  # joined in the option's order, not zig-zagging along the x metric
            g = sorted(g, key=lambda p, o=option: float(cell_options(p["cell"])[o]))
            labels += [(p["x"], p["y"], short_cell(p["cell"], drop=[k for k in cell_options(p["cell"]) if k != option]))
                       for p in g]
        xs, ys = [p["x"] for p in g], [p["y"] for p in g]
        series.append(Series(label, xs, ys, xerr=error_bars(fr.x, xs, [p["x_ci95"] for p in g]),
                             yerr=error_bars(fr.y, ys, [p["y_ci95"] for p in g])))
    return series, labels


def _reference_groups(points: list[Point]) -> dict[str, list[Point]]:
    """Curve name → the reference points of that curve."""
    datasets = {p["dataset"] for p in points}
    groups: dict[str, list[Point]] = {}
    for p in points:
        if p.get("reference", p["x"] is None):
            groups.setdefault(curve_name(p, datasets), []).append(p)
    return groups


def _references(points: list[Point], fr: FrontierConfig) -> tuple[list[Line], list[Line]]:
    """(dashed reference curves, horizontal reference lines): a reference group whose cells take two
    or more x values (a data-free release at each ε) is a curve against x; the rest are lines at
    their y, those at the same height drawn once (:func:`flat_references`)."""
    reference_curves, flat = [], {}
    for name, g in _reference_groups(points).items():
        kind = "data-free" if any(p.get("data_free") for p in g) else "reference"
        with_x = sorted((p for p in g if p["x"] is not None), key=lambda p: p["x"])
        swept = len({p["x"] for p in with_x}) >= 2
        if swept:
            reference_curves.append(Line(_slope_label(name, with_x, fr, kind), xs=[p["x"] for p in with_x],
                                         ys=[p["y"] for p in with_x]))
        flat[name] = [p for p in g if p["x"] is None] + ([] if swept else [p for p in g if p["x"] is not None])
    ys = [p["y"] for p in points]
    return reference_curves, flat_references(flat, 0.01 * ((max(ys) - min(ys)) if ys else 0.0))


def metric_reference_line(line: Mapping[str, Any]) -> Line:
    """A metric-level data-free reference (:func:`tasks.report.references.frontier_reference_lines`)
    as a line: a curve when it varies with x, else a line labelled with its value."""
    if "xs" in line:
        return Line(line["label"], line["axis"], line["value"], list(line["xs"]), list(line["ys"]))
    return Line(f"{line['label']} ({line['axis']} = {line['value']:.3g})", line["axis"], line["value"])


def frontier_figure(points: list[Point], fr: FrontierConfig,
                    reference_lines: Sequence[Mapping[str, Any]] = ()) -> FrontierFigure:
    """What the frontier figure of ``fr`` draws (:class:`~tasks.report.figure_data.FrontierFigure`):
    one curve per group (releases), the references (dashed: :func:`_references`), the metric-level
    data-free references ``reference_lines``, the marked x and the paper's value there, the axes
    named by the frontier (title: ``title``, else the family and the axes' labels) on a log x
    scale when ``log_x`` says so, by default when x is an option in the family's
    ``LOG_SCALE_OPTIONS`` (:func:`tasks.report.families.log_scale`)."""
    series, labels = _release_curves(points, fr)
    reference_curves, flat = _references(points, fr)
    x_label, y_label = fr.x_label or fr.x, fr.y_label or fr.y
    axes = Axes(x_label, y_label, fr.title or readable_title(fr.family, y_label, x_label),
                log_x=fr.log_x if fr.log_x is not None else log_scale(fr.family, fr.x), log_y=bool(fr.log_y))
    mark = None if fr.mark_x is None else Line(fr.mark_label or f"x = {fr.mark_x:g}", "x", fr.mark_x)
    paper = None if fr.paper_y is None else (fr.mark_x, fr.paper_y, f"paper: {fr.paper_label or fr.paper_y}")
    return FrontierFigure(axes, series, reference_curves, flat, [metric_reference_line(r) for r in reference_lines],
                          labels, mark, paper)
