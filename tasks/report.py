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
  and, in ``index.md``, what each deployment (cell) spends, by PLD composition (:mod:`veilbench.privacy.ledger`);
* ``reports/index.md``: links to all of the above.

The report is also an MLflow run (stage ``report``) holding the ledger and the composed budgets.

Every number shown comes from a run; nothing is typed in.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from tasks.common import as_task, load_params
from tasks.paths import repo_root, sweep_dir, sweep_report_dir
from tasks.tracking import stage_run
from veilbench.config import Config, FrontierConfig, FrontierRef, MetricRef
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


def _group_name(params: dict[str, Any], group_by: str | list[str], fallback: str) -> str:
    keys = [group_by] if isinstance(group_by, str) else group_by
    values = [params.get(k) for k in keys]
    if all(v is None for v in values):
        return fallback
    return ", ".join(str(v) for v in values)


def frontier_points(rows: list[dict[str, Any]], fr: FrontierConfig) -> list[dict[str, Any]]:
    """The (x, y) points of one frontier; ``x`` is None for reference cells without the x value."""
    pts = []
    for r in rows:
        if r["family"] != fr.family or (fr.sweeps and r["sweep"] not in fr.sweeps):
            continue
        y = _value(r, fr.y)
        if y is None:
            continue
        group = _group_name(r["params"], fr.group_by, str(r.get("method", r["cell"])))
        x = None if group in fr.reference_groups else _value(r, fr.x)
        pts.append({"sweep": r["sweep"], "cell": r["cell"], "dataset": r["dataset"], "group": group,
                    "x": None if x is None else x[0], "x_ci95": 0.0 if x is None else x[1],
                    "y": y[0], "y_ci95": y[1]})
    return pts


def _curves(points: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Curve name → its points sorted by x (one curve per group and dataset)."""
    curves: dict[str, list[dict[str, Any]]] = {}
    datasets = {p["dataset"] for p in points}
    for p in points:
        if p["x"] is not None:
            name = p["group"] if len(datasets) == 1 else f"{p['group']} ({p['dataset']})"
            curves.setdefault(name, []).append(p)
    return {k: sorted(v, key=lambda p: p["x"]) for k, v in sorted(curves.items())}


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


def frontier_summary(points: list[dict[str, Any]], fr: FrontierConfig) -> list[str]:
    """Markdown under a figure: fitted log-log slopes and/or each curve's y at ``mark_x``."""
    curves = _curves(points)
    lines: list[str] = []
    if fr.fit_loglog:
        rows = []
        for name, c in curves.items():
            fit = loglog_slope([p["x"] for p in c], [p["y"] for p in c])
            rows.append([name, str(len(c)), "n/a" if fit is None else f"{fit[0]:.3f} ± {fit[1]:.2g}"])
        lines += [f"Fitted log-log slope of {fr.y} against {fr.x} per curve (least squares on the cell means; ± standard error):", "",
                  _markdown(["curve", "points", "slope"], rows)]
    if fr.mark_x is not None:
        rows = []
        for name, c in curves.items():
            y0 = y_at(c, fr.mark_x)
            rows.append([name, "not reached" if y0 is None else f"{y0:.4g}"])
        if fr.paper_y is not None:
            rows.append([f"paper: {fr.paper_label or 'reported value'}", f"{fr.paper_y:.4g}"])
        label = fr.mark_label or f"{fr.x} = {fr.mark_x:g}"
        lines += [f"{fr.y} at {label} (linear interpolation between the neighbouring cells; 'not reached' when the "
                  "curve does not span it):", "", _markdown(["curve", fr.y], rows)]
    return lines


def plot_frontier(points: list[dict[str, Any]], fr: FrontierConfig, path: Path) -> None:
    """Save one privacy–utility figure (PNG) with labelled axes, legend and CI error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    refs = [p for p in points if p["x"] is None]
    for name, g in _curves(points).items():
        label = name
        if fr.fit_loglog and (fit := loglog_slope([p["x"] for p in g], [p["y"] for p in g])) is not None:
            label = f"{name} (slope {fit[0]:.2f})"
        ax.errorbar([p["x"] for p in g], [p["y"] for p in g], yerr=[p["y_ci95"] for p in g],
                    xerr=[p["x_ci95"] for p in g], marker="o", capsize=3, label=label)
    for i, p in enumerate(refs):
        ax.axhline(p["y"], linestyle="--", color=f"C{(i + 5) % 10}", label=f"{p['group']} (reference)")
    if fr.mark_x is not None:
        ax.axvline(fr.mark_x, linestyle=":", color="0.3", label=fr.mark_label or f"x = {fr.mark_x:g}")
    if fr.paper_y is not None:
        ax.plot([fr.mark_x], [fr.paper_y], marker="*", markersize=12, color="k", linestyle="none",
                label=f"paper: {fr.paper_label or fr.paper_y}")
    log_x = fr.log_x if fr.log_x is not None else fr.x in ("param:eps", "param:epsilon")
    if log_x:
        ax.set_xscale("log")
    if fr.log_y:
        ax.set_yscale("log")
    ax.set_xlabel(fr.x_label or fr.x)
    ax.set_ylabel(fr.y_label or fr.y)
    ax.set_title(fr.name)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    save_figure(fig, path)


def save_figure(fig: Any, path: Path) -> None:
    """Write a matplotlib figure as PNG atomically (temporary file, then rename) and close it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    tmp.replace(path)


def _claim_value(rows: list[dict[str, Any]], cfg: Config, ref: MetricRef | FrontierRef) -> dict[str, float] | None:
    """Mean and CI of a claim's reference: a cell metric, or a frontier curve's fitted slope (± its
    standard error) or interpolated y at the frontier's mark (CI 0); None when not available."""
    if isinstance(ref, FrontierRef):
        fr = next(f for f in cfg.report.frontiers if f.name == ref.frontier)
        curve = _curves(frontier_points(rows, fr)).get(ref.curve)
        if not curve:
            return None
        if ref.stat == "slope":
            fit = loglog_slope([p["x"] for p in curve], [p["y"] for p in curve])
            return None if fit is None else {"mean": fit[0], "ci95": fit[1], "n": len(curve)}
        y0 = y_at(curve, float(fr.mark_x))
        return None if y0 is None else {"mean": y0, "ci95": 0.0, "n": 1}
    for r in rows:
        if r["sweep"] == ref.sweep and r["cell"] == ref.cell:
            s = r["summary"].get(ref.metric)
            return s if s and math.isfinite(s["mean"]) else None
    return None


def _ref_name(ref: MetricRef | FrontierRef) -> str:
    if isinstance(ref, FrontierRef):
        return f"[{ref.frontier}: {ref.curve}, {ref.stat.replace('_', ' ')}]"
    return f"[{ref.sweep}/{ref.cell}: {ref.metric}]"


def claims_section(cfg: Config, rows: list[dict[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
    """The "paper vs ours" table: each configured claim, the paper's statement (labelled as the
    paper's), our measured value (mean ± 95% CI), and whether the claim held on our run."""
    if not cfg.report.claims:
        return [], []
    ops = {"<": lambda a, b, t: a < b, "<=": lambda a, b, t: a <= b, ">": lambda a, b, t: a > b,
           ">=": lambda a, b, t: a >= b, "~": lambda a, b, t: abs(a - b) <= t}
    md, records = [], []
    for c in cfg.report.claims:
        ours = _claim_value(rows, cfg, c.ours)
        than = {"mean": float(c.than), "ci95": 0.0} if isinstance(c.than, float | int) else _claim_value(rows, cfg, c.than)
        target = None if than is None else c.factor * than["mean"]
        if ours is None or target is None:
            held, verdict = None, "not run"
        else:
            held = bool(ops[c.op](ours["mean"], target, c.tolerance))
            verdict = "yes" if held else "no"
        scale = "" if c.factor == 1.0 else f"{c.factor:g} × "
        cmp = f"{c.op} {scale}{_fmt(than) if than else '?'}" + (f" (± {c.tolerance:g})" if c.op == "~" else "")
        if not isinstance(c.than, float | int):
            cmp += f" {_ref_name(c.than)}"
        ours_txt = "—" if ours is None else f"{_fmt(ours)} {_ref_name(c.ours)}"
        why = c.why_not if held is not True else ""
        md.append([c.family, c.claim, c.source, c.paper, ours_txt, cmp, verdict, why])
        records.append({"family": c.family, "claim": c.claim, "source": c.source, "paper": c.paper,
                        "ours_ref": _ref_name(c.ours), "ours": None if ours is None else ours["mean"],
                        "ours_ci95": None if ours is None else ours["ci95"], "op": c.op, "factor": c.factor,
                        "than": None if than is None else than["mean"], "held": held, "why_not": why})
    lines = ["## Paper vs ours", "",
             "Headline claims of the papers (`../shared/specs/`) that the configured data can test. The *paper* column "
             "is the paper's own statement or number; *ours* is measured by the named cell of this run (mean ± 95% CI "
             "over seeds); *held* applies the stated test to our value. Where a claim did not hold, the last column "
             "says why.", "",
             _markdown(["family", "claim", "source", "paper (the paper's number)", "ours", "held if ours", "held", "why not"], md),
             "Machine-readable: `tables/claims.csv`.", ""]
    return lines, records


def _metric_key(*parts: str) -> str:
    """An MLflow-safe metric name from ``parts`` (characters outside [A-Za-z0-9_.-/ ] become ``_``)."""
    return "/".join(re.sub(r"[^A-Za-z0-9_.\-/ ]", "_", p) for p in parts)


def ledger_section(cfg: Config, root: Path) -> tuple[list[str], list[dict[str, Any]], dict[str, Any]]:
    """Markdown lines, ledger rows and, per deployment (dataset, sweep, cell), what one seed's run spends."""
    from veilbench.privacy.ledger import LedgerEntry, compose

    rows: list[dict[str, Any]] = []
    for sweep in cfg.sweeps:
        p = sweep_dir(root, "release", sweep) / "ledger.json"
        if p.is_file():
            rows += read_json(p)
    if not rows:
        return ["## Privacy ledger", "", "No differentially private release in the evaluated sweeps.", ""], rows, {}
    entries = [LedgerEntry.from_dict(r) for r in rows]
    rows = [e.as_dict() for e in entries]
    totals = compose(entries)
    worst = {}
    for e in entries:
        k = (e.dataset, e.sweep, e.cell)
        worst[k] = max(worst.get(k, 0.0), e.delta_achieved / e.delta if e.delta > 0 else math.inf)
    header = ["dataset", "sweep", "cell", "releases", "z_eff = σ/Δ", "ε (PLD)", "at δ", "ε (basic)",
              "δ achieved / target"]
    md = [[c.dataset, c.sweep, c.cell, str(c.n_releases),
           "—" if c.noise_multiplier is None else f"{c.noise_multiplier:.4g}", f"{c.epsilon:.4g}",
           f"{c.delta:.3g}", f"{c.epsilon_basic:.4g}", f"{worst[k]:.3g}"] for k, c in sorted(totals.items())]
    lines = ["## Privacy ledger", "",
             "What one deployment spends: each cell is one deployable configuration and its seeds repeat it, so "
             "the releases of one seed (a cell that releases q score vectors separately makes q releases) are "
             "composed with dp_accounting's privacy-loss distributions; alternative cells are not composed. The "
             "Gaussian releases compose exactly into one Gaussian of noise multiplier z_eff. *δ achieved / target* > 1 "
             "marks a calibration used beyond its validity (allowed by `allow_invalid_calibration`): those "
             "releases are only (ε, δ achieved)-DP, and their ε (PLD) at the target δ exceeds the claimed ε.", "",
             _markdown(header, md), "Full ledger: `privacy_ledger.csv`.", ""]
    composed = {_metric_key(*k): {"n_releases": c.n_releases, "epsilon": c.epsilon, "delta": c.delta}
                for k, c in totals.items()}
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
            lines += [f"### {fr.name}", "", f"![{fr.name}](figures/{fr.name}.png)", "", *frontier_summary(pts, fr)]
    claim_lines, claim_rows = claims_section(cfg, rows)
    if claim_rows:
        lines += claim_lines
        atomic_write_text(reports / "tables" / "claims.csv", pd.DataFrame(claim_rows).to_csv(index=False))
    from tasks.crossfamily_report import crossfamily_section

    shown = set(cfg.report.crossfamily_sweeps)
    lines += crossfamily_section([r for r in rows if not shown or r["sweep"] in shown], reports)
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
    columns = ["dataset", "sweep", "cell", "seed", "mechanism", "epsilon", "delta", "count", "noise_multiplier",
               "delta_achieved"]
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
