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

*Headline.* Each family has one primary utility ``U`` and an attacker metric ``A`` (the first of
its :data:`HEADLINE` list that the sweep's cells report: an attacker's advantage over a data-free
control where the family measures one). Over the sweep's *releases* R (cells that are neither a
data-free reference, the family's ``DATA_FREE``, nor a non-private reference, :data:`REFERENCES`)
with a finite ``u_c = mean_S U``,

    utility = best_{c ∈ R} u_c   (max; min for an error such as an MSE),
    attacker = a_{c*}            (A at that best cell c*),
    utility_at_eps.<ε> = best_{c ∈ R, ε_c = ε} u_c   (only when R spans two or more ε),
    metric_utility = "U",  metric_attacker = "A"     (the names, strings),

so an experiment that changes one ε or one mechanism shows as a changed ``utility``/``utility_at_eps``
in ``dvc exp show --only-changed`` and ``dvc metrics diff``. Every key but ``utility_at_eps`` is
shared by all sweeps, so ``dvc metrics show`` stays one narrow table.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
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

#: family → (primary utility, attacker metrics in order of preference)
HEADLINE: dict[str, tuple[str, tuple[str, ...]]] = {
    "scoreshield": ("utility_roc_auc", ("xfam_linkage_advantage", "privacy_epsilon_lower_bound")),
    "gca": ("utility_roc_auc", ("privacy_delta_cos_advantage", "privacy_ntmse_advantage")),
    "dc": ("utility_accuracy", ("privacy_reconstruction_accuracy_best_advantage", "xfam_linkage_advantage")),
    "anchornoise": ("utility_balanced_accuracy", ("privacy_linkage_max_advantage", "xfam_linkage_advantage")),
}

#: family → option filters of its non-private references (no privacy mechanism at all: the clean
#: release, centralised or local training, plain data collaboration), which are not releases
REFERENCES: dict[str, tuple[dict[str, Any], ...]] = {
    "scoreshield": ({"mechanism": "clean"},),
    "gca": ({"method": "centralized"}, {"method": "single"}),
    "dc": ({"method": "central"}, {"method": "local"}),
    "anchornoise": ({"mechanism": "dc"},),
}


def finite_or_none(value: Any) -> float | None:
    """``value`` as a float, or ``None`` when it is missing, NaN or infinite."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def cell_means_table(means: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, float | None]]:
    """cell → metric → mean over seeds, with non-finite means as ``None`` (``null`` in JSON)."""
    return {cell: {m: finite_or_none(v) for m, v in row.items()} for cell, row in means.items()}


def headline_metrics(family: str, present: Iterable[str]) -> tuple[str | None, str | None]:
    """(primary utility, attacker metric) of ``family`` among the metrics ``present``: the
    :data:`HEADLINE` entries, else (for a family not listed) the first ``utility_*`` and the first
    ``*_advantage`` metric in name order; None where none is present."""
    present = set(present)
    utility, attackers = HEADLINE.get(family, (None, ()))
    if utility is None:
        utility = next((m for m in sorted(present) if m.startswith("utility_")), None)
        attackers = tuple(m for m in sorted(present) if m.endswith("_advantage"))
    return (utility if utility in present else None), next((a for a in attackers if a in present), None)


def lower_is_better(metric: str) -> bool:
    """True for an error-like utility (MSE, RMSE, EER, error) whose best value is the smallest."""
    return bool(set(metric.lower().replace("-", "_").split("_")) & {"mse", "rmse", "eer", "error"})


def is_release(family: str, options: Mapping[str, Any]) -> bool:
    """False for a data-free reference cell (the family's ``DATA_FREE``) and a non-private
    reference (:data:`REFERENCES`); True for every other cell."""
    from veilbench.families import get_family
    from veilbench.families.base import is_data_free

    try:
        declared = tuple(getattr(get_family(family), "DATA_FREE", ()))
    except Exception:  # noqa: BLE001 - an unknown family has no declarations
        declared = ()
    return not is_data_free(declared + REFERENCES.get(family, ()), options)


def headline_summary(means: Mapping[str, Mapping[str, Any]], family: str,
                     options: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``metric_utility``, ``metric_attacker``, ``utility``, ``attacker`` and ``utility_at_eps`` of
    one sweep (module docstring) from cell → metric → mean and cell → its options."""
    present = {m for row in means.values() for m, v in row.items() if finite_or_none(v) is not None}
    u, a = headline_metrics(family, present)
    out: dict[str, Any] = {"metric_utility": u, "metric_attacker": a, "utility": None, "attacker": None}
    if u is None:
        return out
    sign = -1.0 if lower_is_better(u) else 1.0
    releases = {c: finite_or_none(row.get(u)) for c, row in means.items() if is_release(family, options.get(c, {}))}
    releases = {c: v for c, v in releases.items() if v is not None}
    if not releases:
        return out
    best = max(releases, key=lambda c: sign * releases[c])
    out["utility"] = releases[best]
    out["attacker"] = finite_or_none(means[best].get(a)) if a else None
    eps: dict[float, float] = {}
    for c, v in releases.items():
        e = options.get(c, {}).get("epsilon")
        if isinstance(e, int | float) and not isinstance(e, bool):
            eps[float(e)] = v if float(e) not in eps else max(eps[float(e)], v, key=lambda x: sign * x)
    if len(eps) >= 2:
        out["utility_at_eps"] = {f"{e:g}": eps[e] for e in sorted(eps)}
    return out


def sweep_summary(means: Mapping[str, Mapping[str, Any]], n_seeds: int, family: str | None = None,
                  options: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The summary of one sweep (see the module docstring) from cell → metric → mean over seeds;
    with the sweep's ``family`` and cell → options, its headline too."""
    summary: dict[str, Any] = {"cells": len(means), "seeds": int(n_seeds)}
    for column, (metric, how) in SUMMARY_COLUMNS.items():
        values = [v for row in means.values() if (v := finite_or_none(row.get(metric))) is not None]
        summary[column] = _REDUCE[how](values) if values else None
    if family is not None:
        summary.update(headline_summary(means, family, options or {}))
    return summary
