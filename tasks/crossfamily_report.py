"""Cross-family section of ``reports/index.md``: one linkage attack and one utility for every family.

From the report's cell rows (:func:`tasks.report.load_cell_metrics`) that carry the metrics of
:func:`veilbench.crossfamily.crossfamily_metrics` (``xfam_linkage_rate`` and
``xfam_utility_balanced_accuracy``), writes under ``reports_dir``

* ``tables/crossfamily.md`` and ``tables/crossfamily.csv``: one row per cell (family, sweep, cell,
  dataset, linkage rate ± 95% CI, chance, utility ± 95% CI; the CSV adds the relative
  reconstruction error and the number of leaked pairs);
* ``figures/crossfamily.png``: x = linkage rate, y = utility balanced accuracy, one marker and
  colour per family, CI error bars, chance lines, one panel per dataset; points numbered as the
  table's ``#`` column;
* ``plots/crossfamily.json``: the plotted points, for ``dvc plots``;

and returns the markdown lines for ``index.md``. The files are written even when no cell emitted
the arrays (empty table, a figure saying so) so that they can be declared as stage outputs.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from veilbench.crossfamily import DEFAULT_LEAK_FRACTION, THREAT_MODEL, UTILITY
from veilbench.io import atomic_write_text, write_json

LINKAGE = "xfam_linkage_rate"
UTILITY_METRIC = "xfam_utility_balanced_accuracy"
HEADER = ["#", "family", "sweep", "cell", "dataset", "linkage rate", "chance", "attacked / leaked rows",
          "utility (balanced acc.)"]
CSV_COLUMNS = ["point", "family", "sweep", "cell", "dataset", "method", "linkage_rate", "linkage_rate_ci95",
               "chance", "relative_error", "relative_error_ci95", "leaked_pairs", "attacked_rows", "utility_balanced_accuracy",
               "utility_balanced_accuracy_ci95", "n_seeds"]
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
X_LABEL = "record-linkage rate (fraction of attacked records linked to their source, 0–1)"
Y_LABEL = "utility: balanced accuracy on held-out records (0–1)"


def _stat(row: dict[str, Any], metric: str, key: str = "mean") -> float:
    s = row["summary"].get(metric)
    return float(s[key]) if s is not None else math.nan


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
            "chance": _stat(r, "xfam_linkage_chance"),
            "relative_error": _stat(r, "xfam_relative_error"),
            "relative_error_ci95": _stat(r, "xfam_relative_error", "ci95"),
            "leaked_pairs": _stat(r, "xfam_leaked_pairs"),
            "attacked_rows": _stat(r, "xfam_attacked_rows"),
            "y": _stat(r, UTILITY_METRIC), "y_ci95": _stat(r, UTILITY_METRIC, "ci95"),
            "n_seeds": int(r["summary"][LINKAGE].get("n", 1)),
        })
    return points


def _pm(mean: float, ci: float, n: int) -> str:
    from tasks.report import _fmt  # lazy: tasks.report imports this module

    return _fmt({"mean": mean, "ci95": ci, "n": n})


def _table_rows(points: list[dict[str, Any]]) -> list[list[str]]:
    return [[str(p["point"]), p["family"], p["sweep"], p["cell"], p["dataset"], _pm(p["x"], p["x_ci95"], p["n_seeds"]),
             f"{p['chance']:.3g}", f"{p['attacked_rows']:.0f} / {p['leaked_pairs']:.0f}",
             _pm(p["y"], p["y_ci95"], p["n_seeds"])] for p in points]


def plot_crossfamily(points: list[dict[str, Any]], path: Path) -> None:
    """Save the cross-family figure: one panel per dataset, one marker/colour per family."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = sorted({p["dataset"] for p in points}) or [""]
    families = sorted({p["family"] for p in points})
    style = {f: (f"C{i % 10}", MARKERS[i % len(MARKERS)]) for i, f in enumerate(families)}
    fig, axes = plt.subplots(1, len(datasets), figsize=(6.4 * len(datasets), 4.6), dpi=120, squeeze=False)
    for ax, dataset in zip(axes[0], datasets, strict=True):
        pts = [p for p in points if p["dataset"] == dataset]
        for fam in families:
            fp = [p for p in pts if p["family"] == fam]
            if not fp:
                continue
            colour, marker = style[fam]
            ax.errorbar([p["x"] for p in fp], [p["y"] for p in fp], xerr=[p["x_ci95"] for p in fp],
                        yerr=[p["y_ci95"] for p in fp], fmt=marker, color=colour, capsize=3, label=fam)
            for p in fp:
                ax.annotate(str(p["point"]), (p["x"], p["y"]), textcoords="offset points", xytext=(4, 4), fontsize=7)
        chances = {(p["family"], round(p["chance"], 12)) for p in pts if math.isfinite(p["chance"])}
        if len({c for _, c in chances}) == 1:
            ax.axvline(next(iter(chances))[1], color="0.4", linestyle=":", label="chance (1 / distinct records)")
        else:
            for fam, chance in sorted(chances):
                label = f"chance, {fam}" if chance == min(c for f, c in chances if f == fam) else None
                ax.axvline(chance, color=style[fam][0], linestyle=":", label=label)
        if not pts:
            ax.text(0.5, 0.5, "no cell emitted the cross-family arrays", ha="center", va="center",
                    transform=ax.transAxes)
        ax.set_xlim(-0.03, 1.03)
        ax.set_ylim(0.0, 1.03)
        ax.set_xlabel(X_LABEL, fontsize=8)
        ax.set_ylabel(Y_LABEL, fontsize=8)
        ax.set_title(f"Cross-family view{f': {dataset}' if dataset else ''}")
        ax.grid(True, alpha=0.3)
        if pts:
            ax.legend(fontsize=8, loc="best")
    from tasks.report import save_figure

    save_figure(fig, path)


def crossfamily_section(rows: list[dict[str, Any]], reports_dir: Path) -> list[str]:
    """Write the cross-family table, CSV, figure and plot points; return the index.md lines."""
    import pandas as pd

    from tasks.report import _markdown  # lazy: tasks.report imports this module

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
        table = _markdown(HEADER, _table_rows([p for p in points if p["dataset"] == dataset]))
        heading = [f"### {dataset}", ""] if len(datasets) > 1 else []
        tables += [*heading, table]
        lines += [*heading, table]
    if not points:
        none = "No evaluated cell emitted the cross-family arrays (`xfam_*`), so there is nothing to compare yet."
        tables.append(none + "\n")
        lines += [none, ""]
    atomic_write_text(reports_dir / "tables" / "crossfamily.md", "\n".join(tables))
    csv = pd.DataFrame([{**p, "linkage_rate": p["x"], "linkage_rate_ci95": p["x_ci95"],
                         "utility_balanced_accuracy": p["y"], "utility_balanced_accuracy_ci95": p["y_ci95"]}
                        for p in points], columns=CSV_COLUMNS)
    atomic_write_text(reports_dir / "tables" / "crossfamily.csv", csv.to_csv(index=False))
    write_json(reports_dir / "plots" / "crossfamily.json", points)
    plot_crossfamily(points, reports_dir / "figures" / "crossfamily.png")
    if points:
        lines += ["![Cross-family view](figures/crossfamily.png)", "",
                  "Points are numbered as the tables' `#` column. All columns (relative reconstruction error, "
                  "leaked pairs): `tables/crossfamily.csv`.", ""]
    return lines
