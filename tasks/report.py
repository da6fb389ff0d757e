"""``report`` stage: tables, privacy–utility figures and ``reports/index.md`` from cell metrics.

Reads every ``reports/sweeps/<sweep>/cells/<cell>.json`` written by ``evaluate`` (only sweeps
and cells present in ``params.yaml``) and writes

* ``reports/tables/<family>.md`` and ``.csv``: one row per cell, mean ± 95% CI of each metric;
* ``reports/figures/<frontier>.png``: one figure per ``report.frontiers`` entry, x = a privacy
  quantity (a metric, or ``param:<name>`` for a parameter such as ε), y = a utility metric, one
  curve per ``group_by`` value with CI error bars; cells without the x value (e.g. the clean
  reference) are drawn as horizontal reference lines;
* ``reports/plots/<frontier>.json``: the plotted points, for ``dvc plots``;
* ``reports/gca/communication.csv``: MiB per round per method and dataset for the GCA paper's
  configurations (formulas, independent of the sweeps; described in index.md when a GCA sweep runs);
* ``reports/privacy_ledger.csv``: every DP release (from ``data/release/<sweep>/ledger.json``)
  and, in ``index.md``, its composition per data set (:mod:`veilbench.privacy.ledger`);
* ``reports/index.md``: links to all of the above.

The report is also an MLflow run (stage ``report``) holding the ledger and the composed budgets.

Every number shown comes from a run; nothing is typed in.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tasks.common import as_task, load_params
from tasks.paths import repo_root, sweep_dir, sweep_report_dir
from tasks.tracking import stage_run
from veilbench.config import Config, FrontierConfig
from veilbench.io import atomic_write_text, read_json, write_json


def load_cell_metrics(cfg: Config, root: Path) -> list[dict[str, Any]]:
    """One row per evaluated cell of the configured sweeps (cells not yet evaluated are skipped):
    ``{"sweep", "cell", "family", "dataset", "method", "params" (family options), "summary"}``."""
    rows = []
    for sweep, scfg in cfg.sweeps.items():
        for cell in scfg.expand():
            p = sweep_report_dir(root, sweep) / "cells" / f"{cell}.json"
            if p.is_file():
                rec = read_json(p)
                rows.append({"sweep": sweep, "cell": cell, "family": scfg.family, "dataset": rec["dataset"],
                             "method": rec["method"], "params": rec["params"]["family_params"], "summary": rec["summary"]})
    return rows


def _fmt(stats: dict[str, float]) -> str:
    mean, ci = stats["mean"], stats["ci95"]
    if not math.isfinite(mean):
        return str(mean)
    return f"{mean:.4g} ± {ci:.2g}" if stats.get("n", 1) > 1 else f"{mean:.4g}"


def family_table(rows: list[dict[str, Any]], only: list[str] | None = None) -> tuple[list[str], list[list[str]], list[dict[str, Any]]]:
    """(header, markdown cells, CSV records) of one family's cells; ``only`` keeps those metrics."""
    metric_names = sorted({m for r in rows for m in r["summary"]})
    if only:
        metric_names = [m for m in only if m in metric_names]
    # only the options that vary between cells identify a row; constant ones would be noise
    param_names = sorted(
        p for p in {p for r in rows for p, v in r["params"].items() if not isinstance(v, dict | list)}
        if len({repr(r["params"].get(p)) for r in rows}) > 1
    )
    header = ["sweep", "cell", "dataset", *param_names, *metric_names]
    md, csv = [], []
    for r in rows:
        md.append([r["sweep"], r["cell"], r["dataset"], *[str(r["params"].get(p, "")) for p in param_names],
                   *[_fmt(r["summary"][m]) if m in r["summary"] else "" for m in metric_names]])
        rec: dict[str, Any] = {"sweep": r["sweep"], "cell": r["cell"], "dataset": r["dataset"],
                               **{p: r["params"].get(p) for p in param_names}}
        for m in metric_names:
            if m in r["summary"]:
                rec[m] = r["summary"][m]["mean"]
                rec[f"{m}_ci95"] = r["summary"][m]["ci95"]
        csv.append(rec)
    return header, md, csv


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _value(row: dict[str, Any], key: str) -> tuple[float, float] | None:
    if key.startswith("param:"):
        v = row["params"].get(key.removeprefix("param:"))
        return (float(v), 0.0) if isinstance(v, int | float) and not isinstance(v, bool) else None
    s = row["summary"].get(key)
    return (s["mean"], s["ci95"]) if s and math.isfinite(s["mean"]) else None


def frontier_points(rows: list[dict[str, Any]], fr: FrontierConfig) -> list[dict[str, Any]]:
    """The (x, y) points of one frontier; ``x`` is None for reference cells without the x value."""
    pts = []
    for r in rows:
        if r["family"] != fr.family or (fr.sweeps and r["sweep"] not in fr.sweeps):
            continue
        y = _value(r, fr.y)
        if y is None:
            continue
        group = str(r["params"].get(fr.group_by, r.get("method", r["cell"])))
        x = None if group in fr.reference_groups else _value(r, fr.x)
        pts.append({"sweep": r["sweep"], "cell": r["cell"], "dataset": r["dataset"], "group": group,
                    "x": None if x is None else x[0], "x_ci95": 0.0 if x is None else x[1],
                    "y": y[0], "y_ci95": y[1]})
    return pts


def plot_frontier(points: list[dict[str, Any]], fr: FrontierConfig, path: Path) -> None:
    """Save one privacy–utility figure (PNG) with labelled axes, legend and CI error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    curves = [p for p in points if p["x"] is not None]
    refs = [p for p in points if p["x"] is None]
    for group in sorted({p["group"] for p in curves}):
        g = sorted((p for p in curves if p["group"] == group), key=lambda p: p["x"])
        ax.errorbar([p["x"] for p in g], [p["y"] for p in g], yerr=[p["y_ci95"] for p in g],
                    xerr=[p["x_ci95"] for p in g], marker="o", capsize=3, label=group)
    for i, p in enumerate(refs):
        ax.axhline(p["y"], linestyle="--", color=f"C{(i + 5) % 10}", label=f"{p['group']} (reference)")
    if fr.x.startswith("param:eps") or fr.x.startswith("param:epsilon"):
        ax.set_xscale("log")
    ax.set_xlabel(fr.x_label or fr.x)
    ax.set_ylabel(fr.y_label or fr.y)
    ax.set_title(fr.name)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    tmp.replace(path)


def ledger_section(cfg: Config, root: Path) -> tuple[list[str], list[dict[str, Any]], dict[str, Any]]:
    """Markdown lines, ledger rows and composed budgets of every release of the configured sweeps."""
    from veilbench.privacy.ledger import LedgerEntry, compose

    rows: list[dict[str, Any]] = []
    for sweep in cfg.sweeps:
        p = sweep_dir(root, "release", sweep) / "ledger.json"
        if p.is_file():
            rows += read_json(p)
    if not rows:
        return ["## Privacy ledger", "", "No differentially private release in the evaluated sweeps.", ""], rows, {}
    totals = compose(LedgerEntry(**r) for r in rows)
    header = ["dataset", "releases", "ε (basic)", "δ (basic)", "ε (advanced, δ'=1e-6)", "δ (advanced)"]
    md = [[d, str(c.n_releases), f"{c.epsilon_basic:.4g}", f"{c.delta_basic:.3g}", f"{c.epsilon_advanced:.4g}",
           f"{c.delta_advanced:.3g}"] for d, c in sorted(totals.items())]
    lines = ["## Privacy ledger", "",
             "Every (ε, δ)-DP release made by the evaluated sweeps, composed per data set (a cell and seed that "
             "releases q score vectors separately counts q releases). Cells are alternative configurations, so "
             "this is the cost if every released object were published; the total is the smaller of the two "
             "compositions.", "",
             _markdown(header, md), "Full ledger: `privacy_ledger.csv`.", ""]
    composed = {d: {"n_releases": c.n_releases, "epsilon": c.epsilon, "delta": c.delta} for d, c in totals.items()}
    return lines, rows, composed


def report(params_path: str | Path | None = None, root: Path | None = None) -> Path:
    """Build ``reports/index.md`` with per-family tables and the configured frontier figures."""
    import pandas as pd

    root = root or repo_root()
    cfg = load_params(params_path, root)
    rows = load_cell_metrics(cfg, root)
    reports = root / "reports"
    lines = [f"# {cfg.report.title}", "",
             "Generated by `veilbench report` from the evaluated cells of `params.yaml`; every number comes "
             "from a run (mean ± 95% CI over the cell's seeds).", ""]
    if not rows:
        lines.append("No evaluated sweeps yet: run `veilbench run` first.")
    for family in sorted({r["family"] for r in rows}):
        fam_rows = [r for r in rows if r["family"] == family]
        header, md, csv = family_table(fam_rows)
        atomic_write_text(reports / "tables" / f"{family}.md", _markdown(header, md))
        csv_path = reports / "tables" / f"{family}.csv"
        pd.DataFrame(csv).to_csv(tmp := csv_path.with_name(f".{csv_path.name}.tmp"), index=False)
        tmp.replace(csv_path)
        shown_header, shown_md, _ = family_table(fam_rows, cfg.report.columns.get(family))
        lines += [f"## {family}", "", _markdown(shown_header, shown_md),
                  f"All metrics: `tables/{family}.md`, `tables/{family}.csv`.", ""]
        for fr in (f for f in cfg.report.frontiers if f.family == family):
            pts = frontier_points(rows, fr)
            write_json(reports / "plots" / f"{fr.name}.json", pts)
            plot_frontier(pts, fr, reports / "figures" / f"{fr.name}.png")
            lines += [f"### {fr.name}", "", f"![{fr.name}](figures/{fr.name}.png)", ""]
    from veilbench.gca.communication import write_communication_csv

    write_communication_csv(reports / "gca" / "communication.csv")
    if any(s.family == "gca" for s in cfg.sweeps.values()):
        lines += ["## GCA communication", "",
                  "Exact MiB per round for parameter sharing and for GCA at each K, for the paper's dataset "
                  "configurations (spec Tables 11–12, computed by `veilbench.gca.communication`): "
                  "`gca/communication.csv`. Each GCA cell also reports `comm_mib_per_round` measured in its run.", ""]
    ledger_lines, ledger_rows, composed = ledger_section(cfg, root)
    lines += ledger_lines
    ledger_csv = reports / "privacy_ledger.csv"
    columns = ["dataset", "sweep", "cell", "seed", "mechanism", "epsilon", "delta", "count"]
    atomic_write_text(ledger_csv, pd.DataFrame(ledger_rows, columns=columns).to_csv(index=False))
    out = reports / "index.md"
    atomic_write_text(out, "\n".join(lines) + "\n")
    with stage_run(cfg.tracking.experiment, "report", {"title": cfg.report.title}, {}, root) as mlflow:
        mlflow.log_artifact(str(out))
        mlflow.log_artifact(str(ledger_csv))
        for dataset, c in composed.items():
            if not math.isfinite(c["epsilon"]):
                continue
            mlflow.log_metrics({f"ledger.{dataset}.epsilon": c["epsilon"], f"ledger.{dataset}.delta": c["delta"],
                                f"ledger.{dataset}.n_releases": c["n_releases"]})
    return out


report_task = as_task(report, "report")
