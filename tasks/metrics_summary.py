"""The per-sweep metrics DVC shows: ``dvc metrics show`` / ``dvc exp show`` print one row per file
and one column per (flattened) key, so each sweep's file holds a few keys shared by every family.

For a sweep with cells ``c`` and seeds ``S``, let ``u_c`` and ``l_c`` be the means over ``S`` of
the cross-family utility ``xfam_utility_balanced_accuracy`` and of the cross-family attack's exact
linkage rate ``xfam_linkage_rate`` (:mod:`veilbench.crossfamily`: the same decoder and the same
classifier on every family's release, so the columns compare across families). The summary is

    cells = |c|,  seeds = |S|,
    utility_min = min_c u_c,  utility_max = max_c u_c,
    linkage_min = min_c l_c,  linkage_max = max_c l_c,
    linkage_chance = mean_c of the linkage rate of a random guess,

with ``null`` where no cell has the metric (e.g. score-vector releases, which hold no records to
link). Non-finite values are ``null`` as well: JSON has no NaN. The full table of per-cell means
stays in ``reports/sweeps/<sweep>/metrics.json`` (and per seed in ``cells/<cell>.json``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

#: summary column → (cross-family metric, reduction over the cells' means)
SUMMARY_COLUMNS: dict[str, tuple[str, str]] = {
    "utility_min": ("xfam_utility_balanced_accuracy", "min"),
    "utility_max": ("xfam_utility_balanced_accuracy", "max"),
    "linkage_min": ("xfam_linkage_rate", "min"),
    "linkage_max": ("xfam_linkage_rate", "max"),
    "linkage_chance": ("xfam_linkage_chance", "mean"),
}

_REDUCE = {"min": min, "max": max, "mean": lambda v: math.fsum(v) / len(v)}


def finite_or_none(value: Any) -> float | None:
    """``value`` as a float, or ``None`` when it is missing, NaN or infinite."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def cell_means_table(means: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, float | None]]:
    """cell → metric → mean over seeds, with non-finite means as ``None`` (``null`` in JSON)."""
    return {cell: {m: finite_or_none(v) for m, v in row.items()} for cell, row in means.items()}


def sweep_summary(means: Mapping[str, Mapping[str, Any]], n_seeds: int) -> dict[str, float | int | None]:
    """The summary of one sweep (see the module docstring) from cell → metric → mean over seeds."""
    summary: dict[str, float | int | None] = {"cells": len(means), "seeds": int(n_seeds)}
    for column, (metric, how) in SUMMARY_COLUMNS.items():
        values = [v for row in means.values() if (v := finite_or_none(row.get(metric))) is not None]
        summary[column] = _REDUCE[how](values) if values else None
    return summary
