"""A family's headline comparison: utility kept vs what an attacker gets back, and the best
mechanism at each privacy level.

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
``DATA_FREE_METRICS``, :mod:`tasks.report.references`) and data-free attackers reported as
``<attacker metric>_trivial_<guess>``; they are shown beside the table and drawn dashed, not ranked.
"""

from __future__ import annotations

import re
from typing import Any

from tasks.report.references import is_data_free_cell, metric_references, reference_value
from tasks.report.rows import Row, has, mean
from veilbench.config import Config

#: the headline comparison of one family: ``{"sweep", "utility", "attack", "rows"}``
Headline = dict[str, Any]


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


def utility_sign(metric: str) -> int:
    """+1 when a larger utility is better, −1 for error-like utilities (RMSE, MSE, EER)."""
    tokens = set(re.split(r"[_\-]", metric.lower()))
    return -1 if tokens & {"mse", "rmse", "eer", "error"} else 1


def reference_groups(cfg: Config, family: str) -> set[str]:
    """The ``reference_groups`` of the family's frontiers."""
    return {g for fr in cfg.report.frontiers if fr.family == family for g in fr.reference_groups}


def is_reference(row: Row, groups: set[str]) -> bool:
    """A reference cell: its method or a string option is one of ``groups``, or it is data-free."""
    values = {str(row.get("method", ""))} | {str(v) for v in row["params"].values() if isinstance(v, str)}
    return bool(values & groups) or is_data_free(row)


def is_data_free(row: Row) -> bool:
    """True for a data-free reference cell: its options match an entry of its family's ``DATA_FREE``."""
    return is_data_free_cell(str(row.get("family", "")), row["params"])


def metric_reference_values(cfg: Config, family: str, h: Headline) -> list[tuple[str, str, float]]:
    """``(axis, label, value)`` of the metric-level data-free references of the headline's utility
    (axis ``"y"``) and attacker (``"x"``) metrics (:mod:`tasks.report.references`), over the
    headline sweep's cells that report the metric."""
    refs = metric_references(cfg, family, [h["sweep"]])
    out = []
    for axis, metric in (("y", h["utility"]), ("x", h["attack"])):
        ref = refs.get(metric)
        if ref is not None:
            value = reference_value([r for r in h["rows"] if has(r, metric)], ref)
            if value is not None:
                out.append((axis, ref.label, value))
    return out


def trivial_attackers(h: Headline) -> list[tuple[str, dict[str, Any]]]:
    """``(guess, summary)`` of each data-free attacker reported as ``<attacker metric>_trivial_<guess>``
    (sorted by metric name; the first headline cell that reports it)."""
    a = h["attack"]
    out = []
    for m in sorted({m for r in h["rows"] for m in r["summary"] if m.startswith(f"{a}_trivial_")}):
        vals = [r for r in h["rows"] if has(r, m)]
        if vals:
            out.append((m.rsplit("_trivial_", 1)[1], vals[0]["summary"][m]))
    return out


def _sweeps(cfg: Config, family: str) -> list[str]:
    first = [s for s in cfg.report.crossfamily_sweeps if s in cfg.sweeps and cfg.sweeps[s].family == family]
    return first + [s for s, sc in cfg.sweeps.items() if sc.family == family and s not in first]


def _candidates(srows: list[Row], configured: list[str], frontier_x: list[str]) -> tuple[list[str], list[str]]:
    """(utility metrics, attacker metrics) to try on a sweep's rows, in order of preference."""
    present = sorted({m for r in srows for m in r["summary"]})
    advantages = sorted((m for m in present if m.endswith("_advantage")), key=lambda m: (m.startswith("xfam_"), m))
    utilities = configured or [m for m in present if m.startswith("utility_")]
    return ([*utilities, "xfam_utility_balanced_accuracy"],
            advantages + frontier_x + ["xfam_linkage_rate", "privacy_epsilon_lower_bound"])


def headline(cfg: Config, family: str, rows: list[Row]) -> Headline | None:
    """``{"sweep", "utility", "attack", "rows"}`` of the family's headline comparison (see the
    module docstring), or None when no sweep reports a utility and an attacker metric."""
    configured = [m for m in cfg.report.columns.get(family, []) if m.startswith("utility_")]
    frontier_x = [fr.x for fr in cfg.report.frontiers if fr.family == family and not fr.x.startswith("param:")
                  and fr.x.startswith("privacy_")]
    for sweep in _sweeps(cfg, family):
        srows = [r for r in rows if r["sweep"] == sweep]
        utilities, attacks = _candidates(srows, configured, frontier_x)
        pair = next(((u, a) for u in utilities for a in attacks
                     if sum(1 for r in srows if has(r, u) and has(r, a)) >= 2), None)
        if pair is not None:
            return {"sweep": sweep, "utility": pair[0], "attack": pair[1], "rows": srows}
    return None


def best_per_level(h: Headline, groups: set[str]) -> tuple[str, list[Row]]:
    """(``"epsilon"`` or ``"pareto"``, the chosen cell rows in order) — see the module docstring."""
    u, a = h["utility"], h["attack"]
    cand = [r for r in h["rows"] if has(r, u) and not is_reference(r, groups)]
    eps = sorted({float(r["params"]["epsilon"]) for r in cand if isinstance(r["params"].get("epsilon"), int | float)})
    us = utility_sign(u)
    if len(eps) >= 2:
        best = []
        for e in eps:
            at = [r for r in cand if r["params"].get("epsilon") == e]
            best.append(max(at, key=lambda r: us * mean(r, u)))
        return "epsilon", best
    cand = [r for r in cand if has(r, a)]
    front = []
    for r in sorted(cand, key=lambda r: (leakage(a, mean(r, a)), -us * mean(r, u))):
        if not front or us * mean(r, u) > us * mean(front[-1], u):
            front.append(r)
    return "pareto", front


def clean_reference(h: Headline, groups: set[str]) -> Row | None:
    """The headline sweep's clean reference for a higher-is-better utility: its best reference cell
    that reads the data (a ``reference_groups`` cell, not data-free, e.g. ScoreShield's un-noised
    release); None when the sweep has none or lower utility is better."""
    u = h["utility"]
    refs = [r for r in h["rows"] if has(r, u) and is_reference(r, groups) and not is_data_free(r)]
    if utility_sign(u) < 0 or not refs:
        return None
    best = max(refs, key=lambda r: mean(r, u))
    return best if mean(best, u) > 0 else None


def attack_learns_nothing(h: Headline, groups: set[str]) -> bool:
    """True when the headline attacker metric is an advantage and no release of the headline sweep
    beats its data-free control (one-sided lower bound of the advantage > 0, :mod:`tasks.report.verdicts`)."""
    from tasks.report.data_free import cell_estimate
    from tasks.report.verdicts import Estimate, difference

    a = h["attack"]
    if not is_advantage(a):
        return False
    ests = [e for r in h["rows"] if has(r, a) and not is_reference(r, groups) and (e := cell_estimate(r, a)) is not None]
    return bool(ests) and not any(difference(e, Estimate.of_constant(0.0)).lower > 0 for e in ests)
