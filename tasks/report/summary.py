"""A family's short answer at the top of ``reports/index.md`` (and of its page): the question it
answers, the best mechanism at each privacy level (:mod:`tasks.report.headline`) as a table of at
most :data:`MAX_ROWS` rows and 5 columns, what the attacker scale means, the references beside it
and the headline verdicts of its claims.
"""

from __future__ import annotations

import math
import re
from typing import Any

from tasks.report.families import question
from tasks.report.headline import (
    Headline,
    attack_learns_nothing,
    best_per_level,
    clean_reference,
    headline,
    is_advantage,
    is_data_free,
    is_reference,
    leak_sign,
    metric_reference_values,
    reference_groups,
    trivial_attackers,
    utility_sign,
)
from tasks.report.numbers import fmt_number, fmt_stats, interval
from tasks.report.references import utility_outcomes
from tasks.report.rows import Row, has, mean
from tasks.report.tables import markdown_table
from veilbench.config import Config

MAX_ROWS = 5


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


def _thin(rows: list[Row], k: int) -> list[Row]:
    """At most ``k`` rows: the first, the last and evenly spaced ones between."""
    if len(rows) <= k:
        return rows
    idx = sorted({round(i * (len(rows) - 1) / (k - 1)) for i in range(k)})
    return [rows[i] for i in idx]


def _label(row: Row) -> str:
    """The cell name without a leading ``mechanism=``/``method=``/… key (the family's curve key)."""
    return re.sub(r"^(mechanism|method|obfuscation|variant|protocol)=", "", str(row["cell"]))


#: how a summary row's utility compares with the best data-free reference of its sweep
DATA_FREE_MARKS = {"indistinguishable": " (= data-free)", "loses": " (below data-free)", "beats": ""}


def summary_table(h: Headline, groups: set[str], outcomes: dict[str, str] | None = None
                  ) -> tuple[list[str], list[list[str]], str]:
    """(header, rows, mode) of the best-mechanism-per-privacy-level table (≤ 5 columns). A row whose
    utility does not beat the best data-free reference of its sweep (``outcomes``: cell →
    :func:`tasks.report.data_free.beats_data_free`'s outcome) says ``(= data-free)`` or ``(below
    data-free)``; with a clean reference (:func:`tasks.report.headline.clean_reference`), the utility kept as % of it is a
    column. An advantage is shown floored at 0 (:func:`tasks.report.headline.leakage`)."""
    u, a = h["utility"], h["attack"]
    mode, best = best_per_level(h, groups)
    best = _thin(best, MAX_ROWS)
    outcomes = outcomes or {}
    clean = clean_reference(h, groups)
    attacker = f"attacker: `{a}`" + (", floored at 0" if is_advantage(a) else "")

    def cells(r: Row) -> list[str]:
        shown = fmt_stats(u, r["summary"].get(u)) + DATA_FREE_MARKS.get(outcomes.get(r["cell"], "beats"), "")
        kept = [] if clean is None else [f"{100 * mean(r, u) / mean(clean, u):.3g} %" if has(r, u) else ""]
        return [_label(r), shown, *kept, _attacker(a, r["summary"].get(a))]

    kept_header = [] if clean is None else [f"kept: % of {_label(clean)}"]
    if mode == "epsilon":
        header = ["ε (DP budget)", "best mechanism", f"utility: `{u}`", *kept_header, attacker]
        body = [[f"{r['params']['epsilon']:g}", *cells(r)] for r in best]
    else:
        more = "≤" if leak_sign(a) > 0 else "≥"

        def level(r: Row) -> str:
            m = r["summary"][a]["mean"]
            return "attacker ≤ 0 (= control)" if is_advantage(a) and m <= 0 else f"attacker {more} {m:.3g}"

        header = ["privacy level", "best mechanism", f"utility: `{u}`", *kept_header, attacker]
        body = [[level(r), *cells(r)] for r in best]
    return header, body, mode


def scale_text(h: Headline) -> str:
    """What the attacker column's scale means, for an advantage."""
    if not is_advantage(h["attack"]):
        return ""
    return ("Attacker: advantage over the best data-free control attack, floored at 0 because an attacker can always "
            "fall back on the control (0 = learns nothing the control does not, 1 = a perfect attack); the raw values, "
            "negative where the release misleads the attacker, are in the details.")


def references_text(h: Headline, groups: set[str], metric_refs: list[tuple[str, str, float]] = ()) -> str:
    """One sentence naming the reference cells' utility/attacker values, the metric-level data-free
    references (:func:`tasks.report.headline.metric_reference_values`) and data-free attackers."""
    u, a = h["utility"], h["attack"]
    parts = [f"{label}: {'utility' if axis == 'y' else 'attacker'} {fmt_stats(u if axis == 'y' else a, {'mean': v})}"
             for axis, label, v in metric_refs]
    for r in h["rows"]:
        if is_reference(r, groups) and has(r, u):
            kind = "data-free" if is_data_free(r) else "reference"
            att = f", attacker {fmt_stats(a, r['summary'].get(a))}" if has(r, a) else ""
            parts.append(f"{r['cell']} ({kind}): utility {fmt_stats(u, r['summary'][u])}{att}")
    parts += [f"data-free attacker ({guess} guess): {fmt_stats(a, stats)}" for guess, stats in trivial_attackers(h)]
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


def _answer(cfg: Config, family: str, rows: list[Row], h: Headline, groups: set[str]) -> list[str]:
    """The paragraph and the table of a family's headline comparison ``h``."""
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
    text = " ".join(t for t in (question(family), f"Sweep `{h['sweep']}`, {how}.", scale_text(h), nothing, marks, refs)
                    if t)
    return [text, "", markdown_table(header, body).rstrip("\n"), ""]


def summary_section(cfg: Config, family: str, rows: list[Row], claim_records: list[dict[str, Any]],
                    level: int = 2) -> list[str]:
    """The short answer for one family: question (the family's ``QUESTION``,
    :mod:`tasks.report.families`), best mechanism per privacy level (each row's utility against
    the sweep's best data-free reference, :func:`tasks.report.references.utility_outcomes`), what
    the attacker scale means, references, verdicts and links; at most 13 lines."""
    lines = [f"{'#' * level} {family}", ""]
    h = headline(cfg, family, rows)
    if h is None:
        lines += [f"{question(family)} No evaluated sweep reports both a utility and an attacker metric yet.", ""]
    else:
        lines += _answer(cfg, family, rows, h, reference_groups(cfg, family))
    return [*lines, f"{verdicts_line(family, claim_records)} Details: [{family}.md]({family}.md), "
            f"figure `figures/{family}-pareto.png`, all numbers `tables/{family}.csv`.", ""]
