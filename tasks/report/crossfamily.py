"""Cross-family section of ``reports/index.md``: one linkage attack and one utility for every family.

From the report's cell rows (:func:`tasks.report.rows.load_cell_metrics`) that carry the metrics of
:func:`veilbench.crossfamily.crossfamily_metrics` (``xfam_linkage_rate`` and
``xfam_utility_balanced_accuracy``), writes under ``reports_dir``

* ``tables/crossfamily.md`` and ``tables/crossfamily.csv``: one row per cell (family, sweep, cell,
  dataset, linkage rate ± 95% CI, chance, utility ± 95% CI; the CSV adds the relative
  reconstruction error and the number of leaked pairs);
* ``figures/crossfamily.png``: shared axes for every family, x = the attacker's advantage over the
  data-free control (``xfam_linkage_advantage``) when the cells report it, else the linkage rate,
  y = utility balanced accuracy; one Okabe–Ito colour and open marker per family (points at one place
  show every family's outline: none hides another), CI error bars, the
  chance linkage as a dashed data-free reference, one panel per dataset, the legend outside the
  axes, and only each family's Pareto points labelled (short cell names, never overlapping each
  other or a marker: :func:`tasks.report.layout.place_labels`; figure data: :func:`crossfamily_figure`);
* ``plots/crossfamily.json``: the plotted points, for ``dvc plots``;

and returns the markdown lines for ``index.md``. The files are written even when no cell emitted
the arrays (empty table, a figure saying so) so that they can be declared as stage outputs.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tasks.report.draw import draw_crossfamily
from tasks.report.figure_data import Axes, CrossFamilyFigure, FamilySeries, Line, Panel, Series
from tasks.report.layout import save_figure
from tasks.report.numbers import error_bars, fmt_stats
from tasks.report.style import short_cell
from tasks.report.tables import markdown_table
from veilbench.crossfamily import DEFAULT_LEAK_FRACTION, THREAT_MODEL, UTILITY
from veilbench.io import atomic_write_text, write_json

LINKAGE = "xfam_linkage_rate"
ADVANTAGE = "xfam_linkage_advantage"
UTILITY_METRIC = "xfam_utility_balanced_accuracy"
HEADER = ["family", "sweep", "cell", "linkage rate", "chance", "attacked / leaked rows", "utility (balanced acc.)"]
CSV_COLUMNS = ["point", "family", "sweep", "cell", "dataset", "method", "linkage_rate", "linkage_rate_ci95",
               "linkage_advantage", "linkage_advantage_ci95",
               "chance", "relative_error", "relative_error_ci95", "leaked_pairs", "attacked_rows", "utility_balanced_accuracy",
               "utility_balanced_accuracy_ci95", "n_seeds"]
X_LABEL = "record-linkage rate (fraction of attacked records linked to their source, 0–1)"
X_LABEL_ADVANTAGE = "attacker advantage over the data-free control, (linkage − control) / (1 − control)"
Y_LABEL = "utility: balanced accuracy on held-out records (0–1)"


def _stat(row: dict[str, Any], metric: str, key: str = "mean") -> float:
    s = row["summary"].get(metric)
    return float(s[key]) if s is not None else math.nan


def _finite_or_none(v: float) -> float | None:
    return v if math.isfinite(v) else None


def crossfamily_points(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One point per cell that has both cross-family metrics, numbered per dataset, ordered by
    (dataset, family, input order)."""
    kept = [r for r in rows if math.isfinite(_stat(r, LINKAGE)) and math.isfinite(_stat(r, UTILITY_METRIC))]
    kept.sort(key=lambda r: (r["dataset"], r["family"]))  # stable: keeps the sweeps' cell order
    points, counter = [], {}
    for r in kept:
        counter[r["dataset"]] = counter.get(r["dataset"], 0) + 1
        points.append({
            "point": counter[r["dataset"]], "family": r["family"], "sweep": r["sweep"], "cell": r["cell"],
            "dataset": r["dataset"], "method": r.get("method", ""),
            "x": _stat(r, LINKAGE), "x_ci95": _stat(r, LINKAGE, "ci95"),
            "advantage": _finite_or_none(_stat(r, ADVANTAGE)), "advantage_ci95": _finite_or_none(_stat(r, ADVANTAGE, "ci95")),
            "chance": _stat(r, "xfam_linkage_chance"),
            "relative_error": _stat(r, "xfam_relative_error"),
            "relative_error_ci95": _stat(r, "xfam_relative_error", "ci95"),
            "leaked_pairs": _stat(r, "xfam_leaked_pairs"),
            "attacked_rows": _stat(r, "xfam_attacked_rows"),
            "y": _stat(r, UTILITY_METRIC), "y_ci95": _stat(r, UTILITY_METRIC, "ci95"),
            "n_seeds": int(r["summary"][LINKAGE].get("n", 1)),
        })
    return points


def _pm(metric: str, mean: float, ci: float, n: int) -> str:
    return fmt_stats(metric, {"mean": mean, "ci95": ci, "n": n})


def _has_advantage(points: list[dict[str, Any]]) -> bool:
    return any(p.get("advantage") is not None for p in points)


def _header(points: list[dict[str, Any]]) -> list[str]:
    return HEADER[:4] + ["advantage over control"] + HEADER[4:] if _has_advantage(points) else HEADER


def _table_rows(points: list[dict[str, Any]]) -> list[list[str]]:
    adv = _has_advantage(points)
    out = []
    for p in points:
        row = [p["family"], p["sweep"], p["cell"], _pm(LINKAGE, p["x"], p["x_ci95"], p["n_seeds"])]
        if adv:
            row.append("" if p.get("advantage") is None else
                       _pm(ADVANTAGE, p["advantage"], p.get("advantage_ci95") or 0.0, p["n_seeds"]))
        row += [f"{p['chance']:.3g}", f"{p['attacked_rows']:.0f} / {p['leaked_pairs']:.0f}",
                _pm(UTILITY_METRIC, p["y"], p["y_ci95"], p["n_seeds"])]
        out.append(row)
    return out


def pareto(points: list[dict[str, Any]], x: str = "x") -> list[dict[str, Any]]:
    """The points no other point beats on both axes (at most the leakage ``x``, at least the
    utility ``y``), by increasing ``x``."""
    front: list[dict[str, Any]] = []
    for p in sorted((p for p in points if p.get(x) is not None), key=lambda p: (p[x], -p["y"])):
        if not front or p["y"] > front[-1]["y"]:
            front.append(p)
    return front


def _family_series(points: list[dict[str, Any]], xkey: str, adv: bool) -> Series:
    xs, ys = [p[xkey] for p in points], [p["y"] for p in points]
    return Series(points[0]["family"], xs, ys,
                  xerr=error_bars(ADVANTAGE if adv else LINKAGE, xs, [p[f"{xkey}_ci95"] or 0.0 for p in points]),
                  yerr=error_bars(UTILITY_METRIC, ys, [p["y_ci95"] for p in points]))


def _reference(pts: list[dict[str, Any]], adv: bool) -> Line | None:
    """The data-free reference of a panel: no advantage over the control, or the chance linkage."""
    if adv:
        return Line("no advantage over the data-free control", "x", 0.0)
    chances = sorted({round(p["chance"], 12) for p in pts if math.isfinite(p["chance"])})
    return Line("chance linkage (data-free guess)", "x", max(chances)) if chances else None


def _panel(points: list[dict[str, Any]], dataset: str, families: list[str], adv: bool) -> Panel:
    xkey = "advantage" if adv else "x"
    pts = [p for p in points if p["dataset"] == dataset and p.get(xkey) is not None]
    series = [FamilySeries(i, _family_series(fp, xkey, adv)) for i, fam in enumerate(families)
              if (fp := [p for p in pts if p["family"] == fam])]
    front = [p for fam in families for p in pareto([p for p in pts if p["family"] == fam], xkey)]
    axes = Axes(X_LABEL_ADVANTAGE if adv else X_LABEL, Y_LABEL,
                f"Cross-family view{f': {dataset}' if dataset else ''} (labelled: each family's Pareto points)")
    return Panel(axes, series, _reference(pts, adv), (-1.05 if adv and any(p[xkey] < 0 for p in pts) else -0.05, 1.05),
                 [(p[xkey], p["y"], short_cell(p["cell"])) for p in front], empty=not pts)


def crossfamily_figure(points: list[dict[str, Any]]) -> CrossFamilyFigure:
    """What the cross-family figure draws (see the module docstring): one panel per data set (one
    empty panel without points), x the advantage over the data-free control when any cell reports
    it, else the linkage rate; each family's colour and marker fixed across the panels."""
    adv = _has_advantage(points)
    datasets = sorted({p["dataset"] for p in points}) or [""]
    families = sorted({p["family"] for p in points})
    return CrossFamilyFigure([_panel(points, d, families, adv) for d in datasets])


def crossfamily_section(rows: list[dict[str, Any]], reports_dir: Path) -> list[str]:
    """Write the cross-family table, CSV, figure and plot points; return the index.md lines."""
    import pandas as pd

    reports_dir = Path(reports_dir)
    points = crossfamily_points(rows)
    datasets = sorted({p["dataset"] for p in points})
    lines = ["## Cross-family view", "",
             f"{THREAT_MODEL.format(leak=DEFAULT_LEAK_FRACTION)} {UTILITY} Every family's representation comes "
             "from the same records of its data set; higher linkage means more leakage (see "
             "`veilbench.crossfamily`). This attacker is stronger than some papers' own threat models: with leaked "
             "pairs from every party it inverts any release that is a fixed invertible map of the records (anchor "
             "noise's private uploads are noiseless by design, DC's linear obfuscations, a clean Gram), so compare "
             "rows with the family tables, which use each paper's attacks.", ""]
    tables: list[str] = []
    for dataset in datasets:
        dpts = [p for p in points if p["dataset"] == dataset]
        table = markdown_table(_header(dpts), _table_rows(dpts))
        heading = [f"### {dataset}", ""] if len(datasets) > 1 else [f"Data set `{dataset}`:", ""]
        tables += [*heading, table]
        lines += [*heading, table]
    if not points:
        none = "No evaluated cell emitted the cross-family arrays (`xfam_*`), so there is nothing to compare yet."
        tables.append(none + "\n")
        lines += [none, ""]
    atomic_write_text(reports_dir / "tables" / "crossfamily.md", "\n".join(tables))
    csv = pd.DataFrame([{**p, "linkage_rate": p["x"], "linkage_rate_ci95": p["x_ci95"],
                         "linkage_advantage": p["advantage"], "linkage_advantage_ci95": p["advantage_ci95"],
                         "utility_balanced_accuracy": p["y"], "utility_balanced_accuracy_ci95": p["y_ci95"]}
                        for p in points], columns=CSV_COLUMNS)
    atomic_write_text(reports_dir / "tables" / "crossfamily.csv", csv.to_csv(index=False))
    write_json(reports_dir / "plots" / "crossfamily.json", points)
    save_figure(draw_crossfamily(crossfamily_figure(points)), reports_dir / "figures" / "crossfamily.png")
    if points:
        lines += ["![Cross-family view](figures/crossfamily.png)", "",
                  "Labelled points are each family's Pareto points (no other cell of the family leaks less and keeps "
                  "more utility). All columns (relative reconstruction error, leaked pairs): `tables/crossfamily.csv`.", ""]
    return lines
