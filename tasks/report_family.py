"""Per-family answer of the report: utility kept vs what an attacker gets back, best mechanism per
privacy level, and the family's detail page.

For one family, :func:`headline` picks a *headline sweep* (the family's sweep in
``report.crossfamily_sweeps``, else its sweeps in ``params.yaml`` order), a *utility metric* (the
first ``utility_*`` metric of ``report.columns[family]`` that the sweep's cells report, else the
cross-family utility) and an *attacker metric*: the first ``*_advantage`` metric the cells report
(attacker advantage over a data-free control, preferred whenever a family emits it), else the
privacy metric on the x axis of the family's frontiers, else the cross-family linkage rate, else
the empirical ε lower bound.

*Best mechanism at each privacy level*:

* when the sweep's cells vary a DP budget ``epsilon`` (a guarantee fixed before any attack), one
  row per ε: the cell with the best utility among those at that ε;
* otherwise the Pareto frontier of (attacker metric, utility) over the non-reference cells: cell
  c is on it when no other cell d has at most c's leakage and at least c's utility, one of them
  strictly (leakage read in the metric's direction: larger success rates and advantages, smaller
  reconstruction errors, mean more leakage). Rows go from least to most leakage, each the best
  utility reachable with at most that leakage.

*References* are cells whose mechanism/method (or a ``group_by`` value) is one of the family's
frontiers' ``reference_groups``, or that are data-free (declared by the family's ``DATA_FREE``),
plus the metric-level data-free references of the utility and attacker metrics (the family's
``DATA_FREE_METRICS``, :mod:`tasks.report_references`) and data-free attackers reported as
``<attacker metric>_trivial_<guess>``; they are shown beside the table and drawn dashed, not ranked.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from tasks.report_figures import (
    FAMILY_NAMES,
    METRIC_REFERENCE_GREYS,
    REFERENCE_STYLE,
    colour,
    legend_outside,
    marker,
    place_labels,
    reference_colour,
    save_figure,
    short_cell,
)
from tasks.report_numbers import error_bars, fmt_number, fmt_stats, interval
from veilbench.config import Config

#: the question each family answers, in a reader's words
QUESTIONS: dict[str, str] = {
    "scoreshield": "A partner receives cosine scores or a Gram matrix with Gaussian noise calibrated to (ε, δ)-DP "
                   "and projected back to a valid object: how much utility is kept at each ε, and how much does an "
                   "attacker recover?",
    "gca": "Federated clients share Gaussian-mixture centroids of their autoencoder codes instead of model weights: "
           "how much anomaly-detection utility is kept, and how much training data can the server extract?",
    "dc": "Parties share obfuscated intermediate representations and a shared anchor (data collaboration): how "
          "much accuracy does the collaboration keep, and how well can an attacker with leaked anchor pairs "
          "reconstruct the records?",
    "anchornoise": "Parties share geometrically perturbed data plus noisy anchors, aligned by a generalized power "
                   "method: how much classification utility survives, and how often can colluders link a record "
                   "back to its source?",
}

MAX_ROWS = 5


def leak_sign(metric: str) -> int:
    """+1 when a larger value of attacker metric ``metric`` means more leakage, −1 for errors."""
    tokens = set(re.split(r"[_\-]", metric.lower()))
    return -1 if tokens & {"mse", "ntmse", "error", "rmse"} and "advantage" not in tokens else 1


def is_advantage(metric: str) -> bool:
    """An attacker's advantage over its data-free control (0 = the control, at most 1)."""
    return metric.endswith("_advantage")


def leakage(metric: str, value: float) -> float:
    """How much an attacker metric value leaks, larger = more: an advantage floored at 0 (an attacker
    can always fall back on its control, so every advantage ≤ 0 leaks the same nothing), else the
    value signed by :func:`leak_sign`."""
    return max(0.0, value) if is_advantage(metric) else leak_sign(metric) * value


def _attacker(metric: str, stats: dict[str, Any] | None) -> str:
    """A table cell of an attacker metric: an advantage floored at 0 (mean and interval; ``0 (=
    control)`` when the whole interval is ≤ 0), any other metric as :func:`fmt_stats` shows it."""
    if not is_advantage(metric) or not stats or not math.isfinite(stats["mean"]):
        return fmt_stats(metric, stats)
    m, lo, hi = interval(metric, stats)
    if max(0.0, hi) == 0.0:
        return "0 (= control)"
    h = float(stats.get("ci95", 0.0) or 0.0)
    if int(stats.get("n", 1)) <= 1 or h <= 0:
        return fmt_number(max(0.0, m))
    return f"{fmt_number(max(0.0, m), h)} [{fmt_number(max(0.0, lo), h)}, {fmt_number(hi, h)}]"


def utility_sign(metric: str) -> int:
    """+1 when a larger utility is better, −1 for error-like utilities (RMSE, MSE, EER)."""
    tokens = set(re.split(r"[_\-]", metric.lower()))
    return -1 if tokens & {"mse", "rmse", "eer", "error"} else 1


def _has(row: dict[str, Any], metric: str) -> bool:
    s = row["summary"].get(metric)
    return bool(s) and math.isfinite(s["mean"])


def _mean(row: dict[str, Any], metric: str) -> float:
    return float(row["summary"][metric]["mean"])


def reference_groups(cfg: Config, family: str) -> set[str]:
    return {g for fr in cfg.report.frontiers if fr.family == family for g in fr.reference_groups}


def is_reference(row: dict[str, Any], groups: set[str]) -> bool:
    values = {str(row.get("method", ""))} | {str(v) for v in row["params"].values() if isinstance(v, str)}
    return bool(values & groups) or is_data_free(row)


def is_data_free(row: dict[str, Any]) -> bool:
    """True for a data-free reference cell: its options match an entry of its family's ``DATA_FREE``."""
    from tasks.report_references import is_data_free_cell

    return is_data_free_cell(str(row.get("family", "")), row["params"])


def metric_reference_values(cfg: Config, family: str, h: dict[str, Any]) -> list[tuple[str, str, float]]:
    """``(axis, label, value)`` of the metric-level data-free references of the headline's utility
    (axis ``"y"``) and attacker (``"x"``) metrics (:mod:`tasks.report_references`), over the
    headline sweep's cells that report the metric."""
    from tasks.report_references import metric_references, reference_value

    refs = metric_references(cfg, family, [h["sweep"]])
    out = []
    for axis, metric in (("y", h["utility"]), ("x", h["attack"])):
        ref = refs.get(metric)
        if ref is not None:
            value = reference_value([r for r in h["rows"] if _has(r, metric)], ref)
            if value is not None:
                out.append((axis, ref.label, value))
    return out


def _sweeps(cfg: Config, family: str) -> list[str]:
    first = [s for s in cfg.report.crossfamily_sweeps if s in cfg.sweeps and cfg.sweeps[s].family == family]
    return first + [s for s, sc in cfg.sweeps.items() if sc.family == family and s not in first]


def headline(cfg: Config, family: str, rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """``{"sweep", "utility", "attack", "rows"}`` of the family's headline comparison (see the
    module docstring), or None when no sweep reports a utility and an attacker metric."""
    configured = [m for m in cfg.report.columns.get(family, []) if m.startswith("utility_")]
    frontier_x = [fr.x for fr in cfg.report.frontiers if fr.family == family and not fr.x.startswith("param:")
                  and fr.x.startswith("privacy_")]
    for sweep in _sweeps(cfg, family):
        srows = [r for r in rows if r["sweep"] == sweep]
        present = sorted({m for r in srows for m in r["summary"]})
        advantages = sorted((m for m in present if m.endswith("_advantage")), key=lambda m: (m.startswith("xfam_"), m))
        utilities = configured or [m for m in present if m.startswith("utility_")]
        utilities = [*utilities, "xfam_utility_balanced_accuracy"]
        attacks = advantages + frontier_x + ["xfam_linkage_rate", "privacy_epsilon_lower_bound"]
        for u in utilities:
            for a in attacks:
                both = [r for r in srows if _has(r, u) and _has(r, a)]
                if len(both) >= 2:
                    return {"sweep": sweep, "utility": u, "attack": a, "rows": srows}
    return None


def best_per_level(h: dict[str, Any], groups: set[str]) -> tuple[str, list[dict[str, Any]]]:
    """(``"epsilon"`` or ``"pareto"``, the chosen cell rows in order) — see the module docstring."""
    u, a = h["utility"], h["attack"]
    cand = [r for r in h["rows"] if _has(r, u) and not is_reference(r, groups)]
    eps = sorted({float(r["params"]["epsilon"]) for r in cand if isinstance(r["params"].get("epsilon"), int | float)})
    us = utility_sign(u)
    if len(eps) >= 2:
        best = []
        for e in eps:
            at = [r for r in cand if r["params"].get("epsilon") == e]
            best.append(max(at, key=lambda r: us * _mean(r, u)))
        return "epsilon", best
    cand = [r for r in cand if _has(r, a)]
    front = []
    for r in sorted(cand, key=lambda r: (leakage(a, _mean(r, a)), -us * _mean(r, u))):
        if not front or us * _mean(r, u) > us * _mean(front[-1], u):
            front.append(r)
    return "pareto", front


def _thin(rows: list[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    """At most ``k`` rows: the first, the last and evenly spaced ones between."""
    if len(rows) <= k:
        return rows
    idx = sorted({round(i * (len(rows) - 1) / (k - 1)) for i in range(k)})
    return [rows[i] for i in idx]


def _label(row: dict[str, Any]) -> str:
    """The cell name without a leading ``mechanism=``/``method=``/… key (the family's curve key)."""
    return re.sub(r"^(mechanism|method|obfuscation|variant|protocol)=", "", str(row["cell"]))


def clean_reference(h: dict[str, Any], groups: set[str]) -> dict[str, Any] | None:
    """The headline sweep's clean reference for a higher-is-better utility: its best reference cell
    that reads the data (a ``reference_groups`` cell, not data-free, e.g. ScoreShield's un-noised
    release); None when the sweep has none or lower utility is better."""
    u = h["utility"]
    refs = [r for r in h["rows"] if _has(r, u) and is_reference(r, groups) and not is_data_free(r)]
    if utility_sign(u) < 0 or not refs:
        return None
    best = max(refs, key=lambda r: _mean(r, u))
    return best if _mean(best, u) > 0 else None


#: how a summary row's utility compares with the best data-free reference of its sweep
DATA_FREE_MARKS = {"indistinguishable": " (= data-free)", "loses": " (below data-free)", "beats": ""}


def summary_table(h: dict[str, Any], groups: set[str], outcomes: dict[str, str] | None = None
                  ) -> tuple[list[str], list[list[str]], str]:
    """(header, rows, mode) of the best-mechanism-per-privacy-level table (≤ 5 columns). A row whose
    utility does not beat the best data-free reference of its sweep (``outcomes``: cell →
    :func:`tasks.verdicts.beats_data_free`'s outcome) says ``(= data-free)`` or ``(below
    data-free)``; with a clean reference (:func:`clean_reference`), the utility kept as % of it is a
    column. An advantage is shown floored at 0 (:func:`leakage`)."""
    u, a = h["utility"], h["attack"]
    mode, best = best_per_level(h, groups)
    best = _thin(best, MAX_ROWS)
    outcomes = outcomes or {}
    clean = clean_reference(h, groups)
    attacker = f"attacker: `{a}`" + (", floored at 0" if is_advantage(a) else "")

    def cells(r: dict[str, Any]) -> list[str]:
        shown = fmt_stats(u, r["summary"].get(u)) + DATA_FREE_MARKS.get(outcomes.get(r["cell"], "beats"), "")
        kept = [] if clean is None else [f"{100 * _mean(r, u) / _mean(clean, u):.3g} %" if _has(r, u) else ""]
        return [_label(r), shown, *kept, _attacker(a, r["summary"].get(a))]

    kept_header = [] if clean is None else [f"kept: % of {_label(clean)}"]
    if mode == "epsilon":
        header = ["ε (DP budget)", "best mechanism", f"utility: `{u}`", *kept_header, attacker]
        body = [[f"{r['params']['epsilon']:g}", *cells(r)] for r in best]
    else:
        more = "≤" if leak_sign(a) > 0 else "≥"

        def level(r: dict[str, Any]) -> str:
            m = r["summary"][a]["mean"]
            return "attacker ≤ 0 (= control)" if is_advantage(a) and m <= 0 else f"attacker {more} {m:.3g}"

        header = ["privacy level", "best mechanism", f"utility: `{u}`", *kept_header, attacker]
        body = [[level(r), *cells(r)] for r in best]
    return header, body, mode


def attack_learns_nothing(h: dict[str, Any], groups: set[str]) -> bool:
    """True when the headline attacker metric is an advantage and no release of the headline sweep
    beats its data-free control (one-sided lower bound of the advantage > 0, :mod:`tasks.verdicts`)."""
    from tasks.verdicts import Estimate, cell_estimate, difference

    a = h["attack"]
    if not is_advantage(a):
        return False
    ests = [e for r in h["rows"] if _has(r, a) and not is_reference(r, groups) and (e := cell_estimate(r, a)) is not None]
    return bool(ests) and not any(difference(e, Estimate.of_constant(0.0)).lower > 0 for e in ests)


def scale_text(h: dict[str, Any]) -> str:
    """What the attacker column's scale means, for an advantage."""
    if not is_advantage(h["attack"]):
        return ""
    return ("Attacker: advantage over the best data-free control attack, floored at 0 because an attacker can always "
            "fall back on the control (0 = learns nothing the control does not, 1 = a perfect attack); the raw values, "
            "negative where the release misleads the attacker, are in the details.")


def references_text(h: dict[str, Any], groups: set[str], metric_refs: list[tuple[str, str, float]] = ()) -> str:
    """One sentence naming the reference cells' utility/attacker values, the metric-level data-free
    references (:func:`metric_reference_values`) and data-free attackers."""
    u, a = h["utility"], h["attack"]
    parts = [f"{label}: {'utility' if axis == 'y' else 'attacker'} {fmt_stats(u if axis == 'y' else a, {'mean': v})}"
             for axis, label, v in metric_refs]
    for r in h["rows"]:
        if is_reference(r, groups) and _has(r, u):
            kind = "data-free" if is_data_free(r) else "reference"
            att = f", attacker {fmt_stats(a, r['summary'].get(a))}" if _has(r, a) else ""
            parts.append(f"{r['cell']} ({kind}): utility {fmt_stats(u, r['summary'][u])}{att}")
    trivial = sorted({m for r in h["rows"] for m in r["summary"] if m.startswith(f"{a}_trivial_")})
    for m in trivial:
        vals = [r for r in h["rows"] if _has(r, m)]
        if vals:
            parts.append(f"data-free attacker ({m.rsplit('_trivial_', 1)[1]} guess): {fmt_stats(a, vals[0]['summary'][m])}")
    return ("References: " + "; ".join(parts) + ".") if parts else ""


def verdicts_line(family: str, claim_records: list[dict[str, Any]]) -> str:
    """Headline verdicts of the family's claims: one entry per claim (``claim_verdict`` over its
    settings when present, else ``verdict``, else from ``held``); theorem checks and accounting
    identities apart, as they are not findings; vacuous claims say that the attack learns nothing."""
    by: dict[str, list[str]] = {}
    checks: dict[str, list[str]] = {}
    seen: set[Any] = set()
    for c in claim_records:
        key = c.get("claim_id", c["claim"])
        if c.get("family") != family or key in seen:
            continue
        seen.add(key)
        v = c.get("claim_verdict") or c.get("verdict") or {True: "held", False: "not held", None: "not run"}[c.get("held")]
        name = str(c["claim"]) + (f" ({c['where']})" if c.get("where") else "")
        kind = str(c.get("kind", "measured"))
        (checks if kind in ("theorem check", "accounting identity") else by).setdefault(
            f"{v}, {kind}" if kind != "measured" else str(v), []).append(name)
    if not by and not checks:
        return "No headline claim configured for this family."

    def label(v: str) -> str:
        return "vacuous (the attack learns nothing on this data)" if v == "vacuous" else v

    text = "Verdicts — " + "; ".join(f"**{label(v)}**: {', '.join(names)}" for v, names in by.items()) if by else "Verdicts — none"
    if checks:
        text += ". Not findings — " + "; ".join(f"**{v}**: {', '.join(names)}" for v, names in checks.items())
    return text + " ([paper vs ours](#paper-vs-ours))."


def summary_section(cfg: Config, family: str, rows: list[dict[str, Any]], claim_records: list[dict[str, Any]],
                    level: int = 2) -> list[str]:
    """The short answer for one family: question, best mechanism per privacy level (each row's
    utility against the sweep's best data-free reference, :func:`tasks.report_references.utility_outcomes`),
    what the attacker scale means, references, verdicts and links; at most 13 lines."""
    from tasks.report_references import utility_outcomes
    from tasks.report_tables import markdown_table as _markdown

    hashes = "#" * level
    lines = [f"{hashes} {family}", ""]
    h = headline(cfg, family, rows)
    groups = reference_groups(cfg, family)
    question = QUESTIONS.get(family, f"How much utility does {family} keep, and how much does an attacker get back?")
    if h is None:
        lines += [f"{question} No evaluated sweep reports both a utility and an attacker metric yet.", ""]
    else:
        outcomes = utility_outcomes(cfg, family, h["sweep"], h["utility"], rows,
                                    "higher" if utility_sign(h["utility"]) > 0 else "lower")
        header, body, mode = summary_table(h, groups, outcomes)
        how = "best utility at each ε" if mode == "epsilon" else "Pareto frontier: best utility at each level of leakage"
        refs = references_text(h, groups, metric_reference_values(cfg, family, h))
        nothing = (f"**The attack learns nothing on this data**: no release's `{h['attack']}` beats its data-free "
                   "control." if attack_learns_nothing(h, groups) else "")
        marks = ("*= data-free*: the utility does not beat the best data-free reference of the sweep (paired "
                 "per-seed test)." if any(m in cell for row in body for cell in row
                                          for m in DATA_FREE_MARKS.values() if m) else "")
        text = " ".join(t for t in (question, f"Sweep `{h['sweep']}`, {how}.", scale_text(h), nothing, marks, refs) if t)
        lines += [text, "", _markdown(header, body).rstrip("\n"), ""]
    lines += [f"{verdicts_line(family, claim_records)} Details: [{family}.md]({family}.md), "
              f"figure `figures/{family}-pareto.png`, all numbers `tables/{family}.csv`.", ""]
    return lines


def plot_pareto(cfg: Config, family: str, rows: list[dict[str, Any]], path: Path) -> dict[str, list[Any]] | None:
    """The family's Pareto figure: every cell of the headline sweep (utility vs attacker metric),
    frontier points joined and labelled (short names, :func:`tasks.report_figures.short_cell`), the
    other cells grey (each cell drawn once), reference cells' utility and data-free attackers as
    dashed lines, legend outside, a readable title. Returns the figure's layout
    (:func:`tasks.report_figures.layout`), or None (and writes nothing) without a headline comparison."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    h = headline(cfg, family, rows)
    if h is None:
        return None
    u, a = h["utility"], h["attack"]
    groups = reference_groups(cfg, family)
    mode, best = best_per_level(h, groups)
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    front = [r for r in best if _has(r, a)]
    on_front = {id(r) for r in front}
    pts = [r for r in h["rows"] if _has(r, u) and _has(r, a) and not is_reference(r, groups) and id(r) not in on_front]
    if pts:
        # small and above the frontier: a cell as good as a frontier point shows inside its marker
        ax.scatter([_mean(r, a) for r in pts], [_mean(r, u) for r in pts], color="0.55", s=12, label="other cells",
                   zorder=4)
    if front:
        xs, ys = [_mean(r, a) for r in front], [_mean(r, u) for r in front]
        ax.errorbar(xs, ys, yerr=error_bars(u, ys, [r["summary"][u]["ci95"] for r in front]), color=colour(0),
                    marker=marker(0),
                    capsize=3, label="best per ε" if mode == "epsilon" else "Pareto frontier", zorder=3)
    i = 1
    for r in h["rows"]:
        if is_reference(r, groups) and _has(r, u):
            kind = "data-free" if is_data_free(r) else "reference"
            ax.axhline(_mean(r, u), color=reference_colour(i), label=f"{short_cell(r['cell'])} ({kind})",
                       **REFERENCE_STYLE)
            i += 1
    for axis, label, v in metric_reference_values(cfg, family, h):
        (ax.axhline if axis == "y" else ax.axvline)(v, color=METRIC_REFERENCE_GREYS[axis],
                                                    label=f"{label} ({axis} = {v:.3g})", **REFERENCE_STYLE)
    for m in sorted({m for r in h["rows"] for m in r["summary"] if m.startswith(f"{a}_trivial_")}):
        vals = [r for r in h["rows"] if _has(r, m)]
        if vals:
            ax.axvline(_mean(vals[0], m), color=reference_colour(i),
                       label=f"data-free attacker ({m.rsplit('_trivial_', 1)[1]})", **REFERENCE_STYLE)
            i += 1
    ax.set_xlabel(f"attacker: {a}" + (" (higher = more leakage)" if leak_sign(a) > 0 else " (lower = more leakage)"),
                  fontsize=8)
    ax.set_ylabel(f"utility: {u}", fontsize=8)
    ax.set_title(f"{FAMILY_NAMES.get(family, family)}: utility vs attacker, best per privacy level ({h['sweep']})",
                 fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.margins(x=0.08, y=0.08)
    legend_outside(ax)
    if front:
        place_labels(ax, xs, ys, [short_cell(r["cell"]) for r in front])
    return save_figure(fig, path)
