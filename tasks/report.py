"""``report`` stage: the report a person reads, from cell metrics.

Reads every ``reports/sweeps/<sweep>/cells/<cell>.json`` written by ``evaluate`` (only sweeps
and cells present in ``params.yaml``) and writes

* ``reports/index.md``, summary first: per family the question it answers, the best mechanism at
  each privacy level with the references and headline verdicts (:mod:`tasks.report_family`; at
  most 8 columns, all families within the first 60 lines), then the cross-family view
  (:mod:`tasks.crossfamily_report`), the paper-vs-ours table, the GCA communication note, the
  privacy ledger and a glossary of the metrics shown (:mod:`tasks.report_numbers`);
* ``reports/<family>.md`` for every registered family: the summary, the family's Pareto figure,
  one table per sweep (the options that vary in it and the metrics of ``report.columns``), the
  configured frontier figures;
* ``reports/index.html``: index and family pages as one offline file (:mod:`tasks.report_html`);
* ``reports/tables/<family>.md`` and ``.csv``: one row per cell, every metric (the CSV holds the
  mean and the 95% t half-width ``<metric>_ci95``);
* ``reports/figures/<frontier>.png``: one figure per ``report.frontiers`` entry, x = a privacy
  quantity (a metric, or ``param:<name>`` for a parameter such as ε), y = a utility metric, one
  curve per ``group_by`` value with CI error bars; cells without the x value (e.g. the clean
  reference) are drawn as dashed horizontal reference lines; ``<family>-pareto.png`` and
  ``crossfamily.png`` (conventions: :mod:`tasks.report_figures`);
* ``reports/plots/<frontier>.json``: the plotted points, for ``dvc plots``;
* ``reports/gca/communication.csv``: MiB per round per method and dataset for the GCA paper's
  configurations (formulas, independent of the sweeps; described in index.md when a GCA sweep runs);
* ``reports/privacy_ledger.csv``: every DP release (from ``data/release/<sweep>/ledger.json``)
  and, in ``index.md``, its composition per data set (:mod:`veilbench.privacy.ledger`).

Table cells show numbers as what they are (:func:`tasks.report_numbers.fmt_stats`): bounded
metrics as ``mean [lower, upper]`` clipped to their range, yes/no outcomes as ``k of n`` seeds,
others as ``mean ± half-width``, with the digits the interval allows.

The report is also an MLflow run (stage ``report``) holding the ledger and the composed budgets.

Every number shown comes from a run; nothing is typed in.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tasks.common import as_task, load_params
from tasks.paths import repo_root, sweep_dir, sweep_report_dir
from tasks.report_figures import PALETTE, REFERENCE_STYLE, colour, legend_outside, marker
from tasks.report_figures import save_figure as save_figure  # re-exported: tasks.crossfamily_report uses it
from tasks.report_numbers import error_bars, fmt_stats, glossary
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
                   *[fmt_stats(m, r["summary"].get(m)) for m in metric_names]])
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


def plot_frontier(points: list[dict[str, Any]], fr: FrontierConfig, path: Path) -> dict[str, list[Any]]:
    """Save one privacy–utility figure (PNG): one curve per group with CI error bars (Okabe–Ito
    colours, distinct markers), reference cells as dashed horizontal lines, the marked x as a dotted
    line, the paper's value as a labelled star, the legend outside the axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    refs = [p for p in points if p["x"] is None]
    for i, (name, g) in enumerate(_curves(points).items()):
        label = name
        if fr.fit_loglog and (fit := loglog_slope([p["x"] for p in g], [p["y"] for p in g])) is not None:
            label = f"{name} (slope {fit[0]:.2f})"
        xs, ys = [p["x"] for p in g], [p["y"] for p in g]
        ax.errorbar(xs, ys, yerr=error_bars(fr.y, ys, [p["y_ci95"] for p in g]),
                    xerr=error_bars(fr.x, xs, [p["x_ci95"] for p in g]), marker=marker(i), color=colour(i), capsize=3,
                    label=label)
    n_curves = len(_curves(points))
    for j, p in enumerate(refs):
        ax.axhline(p["y"], color=PALETTE[(n_curves + j) % len(PALETTE)], label=f"{p['group']} (reference)",
                   **REFERENCE_STYLE)
    if fr.mark_x is not None:
        ax.axvline(fr.mark_x, linestyle=":", color="0.3", label=fr.mark_label or f"x = {fr.mark_x:g}")
    if fr.paper_y is not None:
        ax.plot([fr.mark_x], [fr.paper_y], marker="*", markersize=14, color="k", linestyle="none", zorder=5,
                label=f"paper: {fr.paper_label or fr.paper_y}")
        ax.annotate("paper", (fr.mark_x, fr.paper_y), textcoords="offset points", xytext=(7, -3), fontsize=8)
    log_x = fr.log_x if fr.log_x is not None else fr.x in ("param:eps", "param:epsilon")
    if log_x:
        ax.set_xscale("log")
    if fr.log_y:
        ax.set_yscale("log")
    ax.set_xlabel(fr.x_label or fr.x, fontsize=8)
    ax.set_ylabel(fr.y_label or fr.y, fontsize=8)
    ax.set_title(fr.name, fontsize=9)
    ax.grid(True, alpha=0.3)
    legend_outside(ax, fontsize=7)
    return save_figure(fig, path)


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


def _write_csv(records: list[dict[str, Any]], path: Path) -> None:
    import pandas as pd

    atomic_write_text(path, pd.DataFrame(records).to_csv(index=False))


def sweep_tables(cfg: Config, family: str, fam_rows: list[dict[str, Any]]) -> tuple[list[str], set[str]]:
    """Markdown of one table per sweep of a family (the options that vary inside the sweep and the
    reader's metrics: ``report.columns[family]``, default all) and the metric names shown."""
    lines: list[str] = []
    shown: set[str] = set()
    for sweep in dict.fromkeys(r["sweep"] for r in fam_rows):
        srows = [r for r in fam_rows if r["sweep"] == sweep]
        header, md, _ = family_table(srows, cfg.report.columns.get(family))
        keep = [i for i, h in enumerate(header) if h not in ("sweep", "dataset")]
        dataset = srows[0]["dataset"]
        lines += [f"### {sweep}", "", f"Data set `{dataset}`, {len(srows)} cell(s).", "",
                  _markdown([header[i] for i in keep], [[row[i] for i in keep] for row in md])]
        shown |= {h for h in header if h in {m for r in srows for m in r["summary"]}}
    return lines, shown


def family_page(cfg: Config, family: str, rows: list[dict[str, Any]], claim_records: list[dict[str, Any]],
                reports: Path) -> list[str]:
    """The detail page ``reports/<family>.md``: the summary, the Pareto figure, one table per
    sweep with the reader's columns, the configured frontier figures, a glossary."""
    from tasks.report_family import plot_pareto, summary_section

    fam_rows = [r for r in rows if r["family"] == family]
    lines = [f"# {family}: details", "", f"[Back to the summary](index.md). All metrics of every cell: "
             f"`tables/{family}.md`, `tables/{family}.csv`.", ""]
    if not fam_rows:
        return [*lines, "No evaluated sweep of this family in `params.yaml`.", ""]
    lines += summary_section(cfg, family, rows, claim_records, level=2)
    if plot_pareto(cfg, family, rows, reports / "figures" / f"{family}-pareto.png") is not None:
        lines += [f"![{family}: utility vs attacker](figures/{family}-pareto.png)", ""]
    lines += ["## Cells", ""]
    tables, shown = sweep_tables(cfg, family, fam_rows)
    lines += tables
    for fr in (f for f in cfg.report.frontiers if f.family == family):
        pts = frontier_points(rows, fr)
        write_json(reports / "plots" / f"{fr.name}.json", pts)
        plot_frontier(pts, fr, reports / "figures" / f"{fr.name}.png")
        lines += [f"## {fr.name}", "", f"![{fr.name}](figures/{fr.name}.png)", "", *frontier_summary(pts, fr)]
    return [*lines, *glossary(sorted(shown))]


def report(params_path: str | Path | None = None, root: Path | None = None) -> Path:
    """Build ``reports/index.md`` (summary first: one short answer per family, then the cross-family
    view, the paper-vs-ours table, the ledger and a glossary), ``reports/<family>.md`` (details),
    tables, figures and ``reports/index.html``."""
    from veilbench.families import FAMILY_MODULES

    from tasks.report_family import summary_section

    root = root or repo_root()
    cfg = load_params(params_path, root)
    rows = load_cell_metrics(cfg, root)
    reports = root / "reports"
    families = sorted({r["family"] for r in rows})
    claim_lines, claim_rows = claims_section(cfg, rows)
    lines = [f"# {cfg.report.title}", "",
             "Each family: the question, the best mechanism at each privacy level (utility vs attacker; mean and 95% "
             "interval over seeds), its headline verdicts, a link to details. Then the cross-family view, the papers' "
             "claims, the privacy ledger and a [glossary](#glossary). Generated by `veilbench report`; every number "
             "comes from a run.", ""]
    if not rows:
        lines += ["No evaluated sweeps yet: run `veilbench run` first.", ""]
    for family in families:
        lines += summary_section(cfg, family, rows, claim_rows)
    shown: set[str] = set()
    for family in sorted(set(FAMILY_MODULES) | set(families)):
        fam_rows = [r for r in rows if r["family"] == family]
        if fam_rows:
            header, md, csv = family_table(fam_rows)
            atomic_write_text(reports / "tables" / f"{family}.md", _markdown(header, md))
            _write_csv(csv, reports / "tables" / f"{family}.csv")
        page = family_page(cfg, family, rows, claim_rows, reports)
        atomic_write_text(reports / f"{family}.md", "\n".join(page) + "\n")
    from tasks.crossfamily_report import crossfamily_section

    xfam = set(cfg.report.crossfamily_sweeps)
    lines += crossfamily_section([r for r in rows if not xfam or r["sweep"] in xfam], reports)
    shown |= {"xfam_linkage_rate", "xfam_utility_balanced_accuracy"}
    if claim_rows:
        lines += claim_lines
        _write_csv(claim_rows, reports / "tables" / "claims.csv")
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
    import pandas as pd

    atomic_write_text(ledger_csv, pd.DataFrame(ledger_rows, columns=columns).to_csv(index=False))
    from tasks.report_family import headline

    for family in families:
        h = headline(cfg, family, rows)
        if h is not None:
            shown |= {h["utility"], h["attack"]}
    lines += glossary(sorted(shown))
    out = reports / "index.md"
    atomic_write_text(out, "\n".join(lines) + "\n")
    from tasks.report_html import write_html

    write_html(out, reports / "index.html")
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
