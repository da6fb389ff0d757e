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
  curve per ``group_by`` value with CI error bars; references dashed: reference groups and the
  family's data-free cells as one curve against x when they are run at each x (e.g. a data-free
  release at each ε), else as horizontal lines (e.g. the clean reference), and the metric-level
  data-free references of the x and y metrics (e.g. GCA's best control attacker, the flag-all
  detector; :mod:`tasks.report_references`) as grey lines; ``<family>-pareto.png`` and
  ``crossfamily.png`` (conventions: :mod:`tasks.report_figures`);
* ``reports/plots/<frontier>.json``: the plotted points, for ``dvc plots``;
* ``reports/gca/communication.csv``: MiB per round per method and dataset for the GCA paper's
  configurations (formulas, independent of the sweeps; described in index.md when a GCA sweep runs);
* ``reports/privacy_ledger.csv``: every DP release (from ``data/release/<sweep>/ledger.json``)
  and, in ``index.md``, what each deployment (cell) spends, by PLD composition (:mod:`veilbench.privacy.ledger`).

Table cells show numbers as what they are (:func:`tasks.report_numbers.fmt_stats`): bounded
metrics as ``mean [lower, upper]`` clipped to their range, yes/no outcomes as ``k of n`` seeds,
others as ``mean ± half-width``, with the digits the interval allows.

The report is also an MLflow run (stage ``report``) holding the ledger and the composed budgets.

Every number shown comes from a run; nothing is typed in.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tasks.common import as_task, load_params
from tasks.paths import repo_root, sweep_dir, sweep_report_dir
from tasks.report_figures import (
    METRIC_REFERENCE_GREYS,
    REFERENCE_STYLE,
    cell_options,
    colour,
    dodge,
    legend_outside,
    marker,
    place_labels,
    readable_title,
    reference_colour,
    short_cell,
    short_log_ticks,
)
from tasks.report_figures import (
    save_figure as save_figure,  # re-exported: tasks.crossfamily_report uses it
)
from tasks.report_numbers import error_bars, fmt_stats, glossary
from tasks.report_tables import markdown_table as _markdown
from tasks.tracking import open_store, params_file_tags, stage_run
from tasks.verdicts import data_free_digest, data_free_section
from veilbench.config import Config, FrontierConfig
from veilbench.io import atomic_write_text, read_json, read_verified_json, write_json


def load_cell_metrics(cfg: Config, root: Path) -> list[dict[str, Any]]:
    """One row per evaluated cell of the configured sweeps (cells not yet evaluated are skipped; a
    record that no longer matches its seal is a ``ValidationError`` naming it, :mod:`veilbench.io`):
    ``{"sweep", "cell", "family", "dataset", "method", "params" (family options), "summary",
    "per_seed" (seed → metric → value)}``."""
    rows = []
    for sweep, scfg in cfg.sweeps.items():
        for cell in scfg.expand():
            p = sweep_report_dir(root, sweep) / "cells" / f"{cell}.json"
            if p.is_file():
                rec = read_verified_json(p)  # an edited or damaged record is an error naming it, never shown
                rows.append({"sweep": sweep, "cell": cell, "family": scfg.family, "dataset": rec["dataset"],
                             "method": rec["method"], "params": rec["params"]["family_params"], "summary": rec["summary"],
                             "per_seed": rec.get("per_seed", {})})
    return rows


def family_table(rows: list[dict[str, Any]], only: list[str] | None = None) -> tuple[list[str], list[list[str]], list[dict[str, Any]]]:
    """(header, markdown cells, CSV records) of one family's cells; ``only`` keeps those metrics.
    In the markdown, a data-free reference cell (its family's ``DATA_FREE``) is marked ``(data-free)``."""
    from tasks.report_references import is_data_free_cell

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
        name = f"{r['cell']} (data-free)" if is_data_free_cell(str(r.get("family", "")), r["params"]) else r["cell"]
        md.append([r["sweep"], name, r["dataset"], *[str(r["params"].get(p, "")) for p in param_names],
                   *[fmt_stats(m, r["summary"].get(m)) for m in metric_names]])
        rec: dict[str, Any] = {"sweep": r["sweep"], "cell": r["cell"], "dataset": r["dataset"],
                               **{p: r["params"].get(p) for p in param_names}}
        for m in metric_names:
            if m in r["summary"]:
                rec[m] = r["summary"][m]["mean"]
                rec[f"{m}_ci95"] = r["summary"][m]["ci95"]
        csv.append(rec)
    return header, md, csv


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
    """The (x, y) points of one frontier. ``reference`` marks the cells drawn dashed: those of
    ``reference_groups``, the family's data-free cells (``data_free``: ``DATA_FREE`` of the family
    module) and cells without the x value. A reference keeps its x only when its cells (per group
    and dataset) take two or more x values, e.g. a data-free release run at each ε, and, for an x
    that is a metric, when its group is not in ``reference_groups`` (those are horizontal lines);
    otherwise ``x`` is None (a single reference cell's option, such as the clean reference's
    default ε, says nothing about the x axis)."""
    from tasks.report_references import is_data_free_cell

    pts = []
    for r in rows:
        if r["family"] != fr.family or (fr.sweeps and r["sweep"] not in fr.sweeps):
            continue
        y = _value(r, fr.y)
        if y is None:
            continue
        group = _group_name(r["params"], fr.group_by, str(r.get("method", r["cell"])))
        data_free = is_data_free_cell(fr.family, r["params"])
        listed = group in fr.reference_groups
        x = None if listed and not fr.x.startswith("param:") else _value(r, fr.x)
        reference = data_free or listed
        pts.append({"sweep": r["sweep"], "cell": r["cell"], "dataset": r["dataset"], "group": group,
                    "x": None if x is None else x[0], "x_ci95": 0.0 if x is None else x[1],
                    "y": y[0], "y_ci95": y[1], "reference": reference or x is None, "data_free": data_free})
    swept: dict[tuple[str, str], set[float]] = {}
    for p in pts:
        if p["reference"] and p["x"] is not None:
            swept.setdefault((p["group"], p["dataset"]), set()).add(p["x"])
    for p in pts:
        if p["reference"] and len(swept.get((p["group"], p["dataset"]), ())) < 2:
            p["x"], p["x_ci95"] = None, 0.0
    return pts


def _curves(points: list[dict[str, Any]], references: bool = True) -> dict[str, list[dict[str, Any]]]:
    """Curve name → its points sorted by x (one curve per group and dataset); reference points with
    an x are curves too unless ``references`` is False."""
    curves: dict[str, list[dict[str, Any]]] = {}
    datasets = {p["dataset"] for p in points}
    for p in points:
        if p["x"] is not None and (references or not p.get("reference")):
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


def swept_option(curve: list[dict[str, Any]]) -> str | None:
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


def _flat_references(groups: dict[str, list[dict[str, Any]]], tolerance: float) -> list[tuple[float, str]]:
    """Horizontal reference lines ``(y, label)`` of the reference points ``groups`` (group → points),
    lines whose y values are within ``tolerance`` of each other drawn once (four data-free cells at one accuracy
    are one line: ``random (data-free; 4 cells)``)."""
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
        lines.append((y, ", ".join(parts) + (f", y ≈ {y:.3g}" if len(cluster) > 1 else "")))
    return lines


def draw_frontier(points: list[dict[str, Any]], fr: FrontierConfig,
                  reference_lines: Sequence[dict[str, Any]] = ()) -> Any:
    """One privacy–utility figure (a matplotlib Figure, not saved): one curve per group with CI
    error bars (Okabe–Ito colours, distinct markers); a curve against a metric x joined in the order
    of the one option its cells vary (d̃, σ, …: :func:`swept_option`), each point labelled with that
    option's value; references dashed: a reference group whose cells have the x value (e.g. a
    data-free release at each ε) as one curve against x, the others as horizontal lines (lines at
    the same height drawn once, :func:`_flat_references`), the metric-level data-free references
    (:func:`tasks.report_references.frontier_reference_lines`) as vertical (x) or horizontal or
    curved (y) lines; the marked x as a dotted line, the paper's value as a labelled star, the
    legend outside the axes, the title a readable name (``title``, else the family and the axes'
    labels); curves whose markers would coincide drawn side by side
    (:func:`tasks.report_figures.dodge`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    curves = _curves(points, references=False)
    series: list[list[Any]] = []
    labels: list[tuple[float, float, str]] = []
    for i, (name, g) in enumerate(curves.items()):
        label = name
        if fr.fit_loglog and (fit := loglog_slope([p["x"] for p in g], [p["y"] for p in g])) is not None:
            label = f"{name} (slope {fit[0]:.2f})"
        option = None if fr.x.startswith("param:") else swept_option(g)
        if option is not None:  # joined in the option's order, not zig-zagging along the x metric
            g = sorted(g, key=lambda p, o=option: float(cell_options(p["cell"])[o]))
            labels += [(p["x"], p["y"], short_cell(p["cell"], drop=[k for k in cell_options(p["cell"]) if k != option]))
                       for p in g]
        xs, ys = [p["x"] for p in g], [p["y"] for p in g]
        bars = ax.errorbar(xs, ys, yerr=error_bars(fr.y, ys, [p["y_ci95"] for p in g]),
                           xerr=error_bars(fr.x, xs, [p["x_ci95"] for p in g]), marker=marker(i), color=colour(i),
                           capsize=3, label=label)
        series.append([bars.lines[0], *bars.lines[1], *bars.lines[2]])
    j = len(curves)
    datasets = {p["dataset"] for p in points}
    groups: dict[str, list[dict[str, Any]]] = {}
    for p in points:
        if p.get("reference", p["x"] is None):
            name = p["group"] if len(datasets) == 1 else f"{p['group']} ({p['dataset']})"
            groups.setdefault(name, []).append(p)
    for name, g in groups.items():
        kind = "data-free" if any(p.get("data_free") for p in g) else "reference"
        with_x = sorted((p for p in g if p["x"] is not None), key=lambda p: p["x"])
        if len({p["x"] for p in with_x}) >= 2:
            label = f"{name} ({kind})"
            if fr.fit_loglog and (fit := loglog_slope([p["x"] for p in with_x], [p["y"] for p in with_x])):
                label = f"{name} ({kind}, slope {fit[0]:.2f})"
            [line] = ax.plot([p["x"] for p in with_x], [p["y"] for p in with_x], color=reference_colour(j), marker=".",
                             label=label, **REFERENCE_STYLE)
            series.append([line])
            j += 1
        groups[name] = [p for p in g if p["x"] is None] + [p for p in g if p["x"] is not None and len(
            {q["x"] for q in with_x}) < 2]
    ys_all = [p["y"] for p in points]
    span = (max(ys_all) - min(ys_all)) if ys_all else 0.0
    for y, label in _flat_references(groups, 0.01 * span):
        ax.axhline(y, color=reference_colour(j), label=label, **REFERENCE_STYLE)
        j += 1
    for line in reference_lines:  # neutral greys: never a curve's colour
        grey = METRIC_REFERENCE_GREYS[line["axis"]]
        if "xs" in line:
            ax.plot(line["xs"], line["ys"], color=grey, marker=".", label=line["label"], **REFERENCE_STYLE)
        else:
            draw = ax.axvline if line["axis"] == "x" else ax.axhline
            draw(line["value"], color=grey, label=f"{line['label']} ({line['axis']} = {line['value']:.3g})",
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
    if log_x:
        short_log_ticks(ax.xaxis)
    ax.set_xlabel(fr.x_label or fr.x, fontsize=8)
    ax.set_ylabel(fr.y_label or fr.y, fontsize=8)
    ax.set_title(fr.title or readable_title(fr.family, fr.y_label or fr.y, fr.x_label or fr.x), fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.margins(x=0.06)
    legend_outside(ax, fontsize=7)
    dodge(ax, series)
    if labels:
        place_labels(ax, [x for x, _, _ in labels], [y for _, y, _ in labels], [t for _, _, t in labels], fontsize=6)
    return fig


def plot_frontier(points: list[dict[str, Any]], fr: FrontierConfig, path: Path,
                  reference_lines: Sequence[dict[str, Any]] = ()) -> dict[str, list[Any]]:
    """Save :func:`draw_frontier`'s figure as a PNG; returns its layout."""
    return save_figure(draw_frontier(points, fr, reference_lines), path)


def _metric_key(*parts: str) -> str:
    """An MLflow-safe metric name from ``parts`` (characters outside [A-Za-z0-9_.-/ ] become ``_``)."""
    return "/".join(re.sub(r"[^A-Za-z0-9_.\-/ ]", "_", p) for p in parts)


def _seeds(row: dict[str, Any]) -> list[dict[str, float]]:
    """A cell row's per-seed metrics (its means when it stores none)."""
    return list((row.get("per_seed") or {}).values()) or [{k: v["mean"] for k, v in row["summary"].items()}]


PRIVATE_MARKER = "privacy_noise_audit_flagged"
"""A cell is private (claims a finite ε > 0 for a noisy release) when it reports the white-box audit."""

#: The audits summarised in ``index.md`` over the private cells: (label, the cell's per-seed "decidable"
#: metric (power ≥ 95 % against half the noise; its presence marks an audited cell), per-seed "flagged"
#: test, the power metrics).
AUDITS: tuple[tuple[str, str, Callable[[dict[str, float]], bool], dict[str, str]], ...] = (
    ("white-box noise audit", "privacy_noise_audit_decidable", lambda m: m["privacy_noise_audit_flagged"] > 0,
     {"σ/2": "privacy_noise_audit_power_half_sigma", "0.8σ": "privacy_noise_audit_power_08_sigma"}),
    ("black-box audit", "privacy_audit_decidable",
     lambda m: m.get("privacy_epsilon_lower_bound", -math.inf) > m.get("privacy_epsilon_claimed", math.inf),
     {"half the noise": "privacy_audit_power_half_noise"}),
    ("black-box audit of one DP-FedAvg round", "privacy_audit_decidable_round",
     lambda m: m.get("privacy_epsilon_lower_bound_round", -math.inf) > m.get("privacy_epsilon_claimed_round", math.inf),
     {"half the noise": "privacy_audit_power_half_noise_round"}),
)


def audit_lines(family: str, rows: list[dict[str, Any]]) -> list[str]:
    """The family's line of the *Privacy audits* section of ``index.md`` (after the family summaries,
    which stay at the top): per audit of :data:`AUDITS` (white-box, :mod:`veilbench.privacy.noise_audit`;
    black-box, :mod:`veilbench.privacy.audit`), the private cells it audited, how many are decidable in
    every seed (the cell's own ``*_decidable``: power ≥ 95 % against half the noise), how many are
    flagged in some seed, and the weakest power over cells and seeds."""
    cells = [_seeds(r) for r in rows if r["family"] == family]
    private = [ms for ms in cells if any(PRIVATE_MARKER in m for m in ms)]
    parts = []
    for label, decidable_metric, flagged, powers in AUDITS:
        audited = [[m for m in ms if decidable_metric in m] for ms in private]
        audited = [ms for ms in audited if ms]
        if not audited:
            continue
        decidable = sum(all(m[decidable_metric] == 1.0 for m in ms) for ms in audited)
        n_flagged = sum(any(flagged(m) for m in ms) for ms in audited)
        power = {k: [m[name] for ms in audited for m in ms if name in m] for k, name in powers.items()}
        weakest = ", ".join(f"{min(v):.3f} against {k}" for k, v in power.items() if v)
        parts.append(f"{label}: {len(audited)} audited, {decidable} decidable, {n_flagged} flagged; "
                     f"weakest power {weakest}")
    if not parts:
        return [f"- **{family}**: no cell claims differential privacy; nothing to audit."]
    return [f"- **{family}**: {len(private)} private cell(s); " + "; ".join(parts) + "."]


LEDGER_COLUMNS = ["dataset", "sweep", "cell", "seed", "mechanism", "adjacency", "epsilon", "delta", "count",
                  "noise_multiplier", "delta_achieved", "record_noise_multiplier", "epsilon_record", "epsilon_rdp"]
"""Columns of ``reports/privacy_ledger.csv`` (:meth:`veilbench.privacy.ledger.LedgerEntry.as_dict`)."""


def ledger_section(cfg: Config, root: Path) -> tuple[list[str], list[dict[str, Any]], dict[str, Any]]:
    """Markdown lines, ledger rows and, per deployment (dataset, sweep, cell), what one seed's run spends."""
    from veilbench.privacy.ledger import LedgerEntry, compose

    rows: list[dict[str, Any]] = []
    for sweep in cfg.sweeps:
        p = sweep_dir(root, "release", sweep) / "ledger.json"
        if p.is_file():
            rows += read_verified_json(p)["entries"]
    if not rows:
        return ["## Privacy ledger", "", "No differentially private release in the evaluated sweeps.", ""], rows, {}
    entries = [LedgerEntry.from_dict(r) for r in rows]
    rows = [e.as_dict() for e in entries]
    totals = compose(entries)
    worst = {}
    for e in entries:
        k = (e.dataset, e.sweep, e.cell)
        worst[k] = max(worst.get(k, 0.0), e.delta_achieved / e.delta if e.delta > 0 else math.inf)

    def opt(v: float | None) -> str:
        return "—" if v is None else f"{v:.4g}"

    header = ["dataset / sweep", "cell", "adjacency", "releases (z_eff = σ/Δ)", "ε (PLD) at δ; other accountant",
              "ε record-level (same σ)", "ε (basic)", "δ achieved / target"]
    md = [[f"{c.dataset} / {c.sweep}", c.cell, c.adjacency or "not stated",
           f"{c.n_releases}" + ("" if c.noise_multiplier is None else f" ({c.noise_multiplier:.4g})"),
           f"{c.epsilon:.4g} at δ = {c.delta:.3g}" + ("" if c.epsilon_rdp is None else f"; RDP {c.epsilon_rdp:.4g}"),
           opt(c.epsilon_record), f"{c.epsilon_basic:.4g}", f"{worst[k]:.3g}"] for k, c in sorted(totals.items())]
    lines = ["## Privacy ledger", "",
             "What one deployment spends: each cell is one deployable configuration and its seeds repeat it, so "
             "the releases of one seed (a cell that releases q score vectors separately makes q releases) are "
             "composed with dp_accounting's privacy-loss distributions; alternative cells are not composed. The "
             "Gaussian releases compose exactly into one Gaussian of noise multiplier z_eff. *δ achieved / target* > 1 "
             "marks a calibration used beyond its validity (allowed by `allow_invalid_calibration`): those "
             "releases are only (ε, δ achieved)-DP, and their ε (PLD) at the target δ exceeds the claimed ε.", "",
             "*Adjacency* is the neighbouring relation each ε protects: `record` (one record replaced), `client` "
             "(one client's update added or removed, DP-FedAvg) or `output` (ScoreShield's output-space Gram "
             "adjacency, ‖G − G'‖_F ≤ Δ whatever n: not a record-level guarantee). For `output` rows, *ε "
             "record-level* is what the same σ gives one record at the cell's n (sensitivity 2√(2(n − 1)), exact "
             "Gaussian profile). *RDP* is the figure the cell's own RDP accountant states (DP-FedAvg), beside the ledger's PLD "
             "composition of the same rounds, which is exact and smaller.", "",
             _markdown(header, md), "Full ledger: `privacy_ledger.csv`.", ""]
    composed = {_metric_key(*k): {"n_releases": c.n_releases, "epsilon": c.epsilon, "delta": c.delta}
                for k, c in totals.items()}
    return lines, rows, composed


def _write_csv(records: list[dict[str, Any]], path: Path) -> None:
    import pandas as pd

    atomic_write_text(path, pd.DataFrame(records).to_csv(index=False))


def sweep_tables(cfg: Config, family: str, fam_rows: list[dict[str, Any]]) -> tuple[list[str], set[str]]:
    """Markdown of one table per sweep of a family (the options that vary inside the sweep and the
    reader's metrics: ``report.columns[family]``, default all) and the metric names shown. Each
    table shows the sweep's data-free references: data-free cells are marked ``(data-free)``, each
    shown metric's companion reference metric is a column beside it, and a line under the table
    names every metric's reference (:mod:`tasks.report_references`)."""
    from tasks.report_references import metric_references, reference_notes, with_companions

    lines: list[str] = []
    shown: set[str] = set()
    for sweep in dict.fromkeys(r["sweep"] for r in fam_rows):
        srows = [r for r in fam_rows if r["sweep"] == sweep]
        refs = metric_references(cfg, family, [sweep])
        present = {m for r in srows for m in r["summary"]}
        only = cfg.report.columns.get(family)
        header, md, _ = family_table(srows, with_companions(only, present, refs) if only else None)
        keep = [i for i, h in enumerate(header) if h not in ("sweep", "dataset")]
        dataset = srows[0]["dataset"]
        metrics = [h for h in header if h in present]
        note = reference_notes(srows, metrics, refs)
        lines += [f"### {sweep}", "", f"Data set `{dataset}`, {len(srows)} cell(s).", "",
                  _markdown([header[i] for i in keep], [[row[i] for i in keep] for row in md]),
                  *([note, ""] if note else [])]
        shown |= set(metrics)
    return lines, shown


def family_page(cfg: Config, family: str, rows: list[dict[str, Any]], claim_records: list[dict[str, Any]],
                reports: Path) -> list[str]:
    """The detail page ``reports/<family>.md``: the summary, the Pareto figure, one table per
    sweep with the reader's columns, the configured frontier figures, a glossary."""
    from tasks.report_family import plot_pareto, summary_section
    from tasks.report_references import frontier_reference_lines, metric_references

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
        ref_lines = frontier_reference_lines(rows, fr, metric_references(cfg, family, fr.sweeps))
        plot_frontier(pts, fr, reports / "figures" / f"{fr.name}.png", ref_lines)
        lines += [f"## {fr.name}", "", f"![{fr.name}](figures/{fr.name}.png)", "", *frontier_summary(pts, fr)]
    return [*lines, *glossary(sorted(shown))]


def report(params_path: str | Path | None = None, root: Path | None = None) -> Path:
    """Build ``reports/index.md`` (summary first: one short answer per family, then the cross-family
    view, the paper-vs-ours table, the ledger and a glossary), ``reports/<family>.md`` (details),
    tables, figures and ``reports/index.html``."""
    from tasks.report_family import summary_section
    from veilbench.families import FAMILY_MODULES

    root = root or repo_root()
    cfg = load_params(params_path, root)
    open_store(root)  # a locked or broken MLflow store is refused before anything is written
    rows = load_cell_metrics(cfg, root)  # records are verified here too: a bad one is refused before any write
    ledger_lines, ledger_rows, composed = ledger_section(cfg, root)
    reports = root / "reports"
    families = sorted({r["family"] for r in rows})
    spread_json = reports / "bench" / "split_spread.json"
    from tasks.report_claims import claims_section

    claim_lines, claim_rows = claims_section(cfg, rows, read_json(spread_json) if spread_json.is_file() else None)
    lines = [f"# {cfg.report.title}", "",
             "Each family: the question, the best mechanism at each privacy level (utility vs attacker; mean and 95% "
             "interval over seeds), its headline verdicts, a link to details. Then the cross-family view, the papers' "
             "claims, the privacy ledger and a [glossary](#glossary). Generated by `veilbench report`; every number "
             "comes from a run.", ""]
    if not rows:
        lines += ["No evaluated sweeps yet: run `veilbench run` first.", ""]
    for family in families:
        lines += summary_section(cfg, family, rows, claim_rows)
    if families:
        lines += ["## Privacy audits", "",
                  "What the audits of each family's releases decide. The white-box audit tests the noise each "
                  "private release added (release − clean, before clipping or projection) against its claimed ε "
                  "(`veilbench.privacy.noise_audit`); the black-box audit sees releases only and cannot certify "
                  "large ε (`veilbench.privacy.audit`). *Decidable*: power ≥ 95% against a mechanism with half "
                  "the calibrated noise, in every seed; *flagged*: the audit shows more ε than claimed in some "
                  "seed.", "",
                  *(line for family in families for line in audit_lines(family, rows)), ""]
    sweep_family = {n: s.family for n, s in cfg.sweeps.items()}
    if families:
        lines += ["## Releases that do not beat a data-free reference", "",
                  "Cells whose utility is not better than that of a release that never reads the data (paired "
                  "per-seed test; `report.data_free`):", "",
                  *(line for family in families
                    for line in data_free_digest(family, rows, cfg.report.data_free, sweep_family)), ""]
    shown: set[str] = set()
    for family in sorted(set(FAMILY_MODULES) | set(families)):
        fam_rows = [r for r in rows if r["family"] == family]
        if fam_rows:
            header, md, csv = family_table(fam_rows)
            atomic_write_text(reports / "tables" / f"{family}.md", _markdown(header, md))
            _write_csv(csv, reports / "tables" / f"{family}.csv")
        page = family_page(cfg, family, rows, claim_rows, reports)
        page += ["", *data_free_section(family, rows, cfg.report.data_free, sweep_family)]
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
    lines += ledger_lines
    ledger_csv = reports / "privacy_ledger.csv"
    import pandas as pd

    atomic_write_text(ledger_csv, pd.DataFrame(ledger_rows, columns=LEDGER_COLUMNS).to_csv(index=False))
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
    params_file = Path(params_path).name if params_path else "params.yaml"
    with stage_run(cfg.tracking.experiment, "report", {"title": cfg.report.title}, params_file_tags(params_path, root),
                   root, run_name=f"report {params_file}") as mlflow:
        for path in report_artifacts(reports):
            parent = path.parent.relative_to(reports)
            mlflow.log_artifact(str(path), None if parent == Path(".") else str(parent))
        for dataset, c in composed.items():
            if not math.isfinite(c["epsilon"]):
                continue
            mlflow.log_metrics({f"ledger.{dataset}.epsilon": c["epsilon"], f"ledger.{dataset}.delta": c["delta"],
                                f"ledger.{dataset}.n_releases": c["n_releases"]})
    return out


def report_artifacts(reports: Path) -> list[Path]:
    """The files of a built report that its MLflow run keeps: ``index.md`` and ``index.html`` (the
    whole report, figures embedded), the family pages, the ledger and every figure and table the
    pages show (``figures/*.png``, ``tables/*``, linked from the pages; stale files of an earlier
    configuration are not linked, so not logged)."""
    pages = [reports / "index.md", reports / "index.html", *sorted(reports.glob("*.md"))]
    pages = list(dict.fromkeys(p for p in pages if p.is_file()))
    linked = {m for p in pages if p.suffix == ".md" for m in re.findall(r"(?:figures|tables)/[\w.\-]+\.\w+",
                                                                       p.read_text(encoding="utf-8"))}
    extra = [reports / name for name in sorted(linked) if (reports / name).is_file()]
    ledger = reports / "privacy_ledger.csv"
    return pages + ([ledger] if ledger.is_file() else []) + extra


report_task = as_task(report, "report")
