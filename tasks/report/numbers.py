"""Numbers in the report shown as what they are: bounded intervals, flags as counts, digits that
follow the interval (each column's definition: :mod:`tasks.report.glossary`).

A cell metric is summarised over the cell's ``n`` seeds as a mean ``m`` and the half-width ``h``
of the 95% Student-t interval ``m ± t_{0.975, n−1} · s / √n`` (:func:`tasks.sweep.summarise`).
Each metric has a *kind*, decided from its name (:func:`metric_kind`):

* ``flag``: a yes/no per seed (``gpm_converged``, ``privacy_audit_flagged``, …). Shown as a count
  ``k of n`` with ``k = round(m · n)``; never as a mean with an interval.
* ``unit``: a proportion or score in [0, 1] (accuracies, ROC AUC, rates, recall, mAP, p-values).
* ``signed``: a score in [−1, 1] (Spearman ρ, adjusted Rand index).
* ``advantage``: an attacker's advantage over its control, at most 1 (a perfect attacker) and
  unbounded below (an attacker worse than its control).
* ``real``: anything else (errors, ε, iteration counts), shown as ``m ± h``.

For a bounded kind with range [a, b] the interval shown is the t interval clipped to the range,
``[max(a, m − h), min(b, m + h)]`` (the t interval of a bounded quantity can leave its range with
few seeds; clipping keeps its coverage and never shows an impossible value), written ``m [lo, hi]``.

Digits follow the interval: the half-width is rounded to one significant digit (two when that
digit is 1), and the mean and bounds to the same decimal place; with one seed (no interval)
three significant digits are shown. Very small or large magnitudes use scientific notation.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

Kind = Literal["flag", "unit", "signed", "advantage", "real"]

#: name suffixes of per-seed yes/no outcomes
FLAG_SUFFIXES = ("_converged", "_certified", "_flagged", "_decidable", "_held", "_reached", "_valid")
#: name tokens of metrics in [0, 1]
UNIT_TOKENS = {"accuracy", "auc", "recall", "map", "precision", "rate", "chance", "pvalue", "fraction", "nmi",
               "ndcg", "eer", "linkage", "tar", "f1", "statistic"}
#: name tokens of metrics in [−1, 1]
SIGNED_TOKENS = {"spearman", "ari", "correlation", "kappa"}

RANGES: dict[str, tuple[float, float]] = {"flag": (0.0, 1.0), "unit": (0.0, 1.0), "signed": (-1.0, 1.0),
                                         "advantage": (-math.inf, 1.0)}


def metric_kind(name: str) -> Kind:
    """The kind of metric ``name`` (see the module docstring); counts such as ``*_rows`` or
    ``*_pairs`` and errors (``*_mse``, ``*_error*``) are ``real`` whatever else the name holds."""
    if name.endswith(FLAG_SUFFIXES):
        return "flag"
    tokens = set(re.split(r"[_\-]", name.lower()))
    if tokens & {"rows", "pairs", "mse", "error", "rmse", "iterations", "epsilon", "mib", "sq", "seconds", "round", "rounds"}:
        return "real"
    if "advantage" in tokens:
        return "advantage"
    if tokens & SIGNED_TOKENS:
        return "signed"
    if tokens & UNIT_TOKENS:
        return "unit"
    return "real"


def metric_range(name: str) -> tuple[float, float] | None:
    """The range [a, b] of a bounded metric, None for an unbounded one."""
    return RANGES.get(metric_kind(name))


def interval(name: str, stats: dict[str, float]) -> tuple[float, float, float]:
    """(mean, lower, upper) of the 95% interval of ``stats`` (``mean``, ``ci95``), clipped to the
    metric's range when it has one."""
    m, h = float(stats["mean"]), float(stats.get("ci95", 0.0) or 0.0)
    lo, hi = m - h, m + h
    rng = metric_range(name)
    if rng is not None:
        lo, hi = max(rng[0], lo), min(rng[1], hi)
    return m, lo, hi


def error_bars(name: str, means: list[float], halves: list[float]) -> list[list[float]]:
    """Matplotlib's asymmetric ``[[below…], [above…]]`` error bars of :func:`interval` (clipped to
    the metric's range, so a bar never reaches an impossible value)."""
    below, above = [], []
    for m, h in zip(means, halves, strict=True):
        mm, lo, hi = interval(name, {"mean": m, "ci95": h or 0.0})
        below.append(max(0.0, mm - lo))
        above.append(max(0.0, hi - mm))
    return [below, above]


def _decimals(h: float) -> int:
    """Decimal places that show the half-width ``h`` to one significant digit (two when it is 1)."""
    exp = math.floor(math.log10(h))
    lead = int(h / 10.0**exp + 1e-9)
    return -exp + (1 if lead == 1 else 0)


def _sci(x: float, ref: float) -> str:
    """``x`` in scientific notation with the significant digits that ``ref`` (the half-width) allows."""
    if x == 0:
        return "0"
    digits = 2 if ref <= 0 else max(0, min(3, math.floor(math.log10(abs(x))) - math.floor(math.log10(ref))))
    return f"{x:.{digits}e}"


def fmt_number(x: float, h: float = 0.0) -> str:
    """``x`` with the decimals its half-width ``h`` allows (three significant digits when h = 0)."""
    if not math.isfinite(x):
        return "n/a" if math.isnan(x) else ("∞" if x > 0 else "−∞")
    if h <= 0 or not math.isfinite(h):
        return f"{x:.3g}"
    if x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e5):
        return _sci(x, h)
    d = _decimals(h)
    if d <= 0:
        return f"{round(x, d):.0f}"
    return f"{x:.{min(d, 8)}f}"


def fmt_stats(name: str, stats: dict[str, Any] | None) -> str:
    """One table cell for metric ``name`` of one cell: ``k of n`` for a flag, ``m [lo, hi]`` for
    a bounded metric, ``m ± h`` otherwise; ``m`` alone with one seed; ``""`` when missing."""
    if not stats:
        return ""
    m, h, n = float(stats["mean"]), float(stats.get("ci95", 0.0) or 0.0), int(stats.get("n", 1))
    if not math.isfinite(m):
        return fmt_number(m)
    kind = metric_kind(name)
    if kind == "flag":
        return f"{round(m * n)} of {n}"
    if n <= 1 or h <= 0:
        return fmt_number(m)
    if kind == "real":
        half = fmt_number(h, h) if not (m != 0 and (abs(m) < 1e-3 or abs(m) >= 1e5)) else f"{h:.0e}"
        return f"{fmt_number(m, h)} ± {half}"
    _, lo, hi = interval(name, stats)
    return f"{fmt_number(m, h)} [{fmt_number(lo, h)}, {fmt_number(hi, h)}]"
