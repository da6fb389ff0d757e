"""The evaluated cells as the report reads them: one row per cell of the configured sweeps.

A row is ``{"sweep", "cell", "family", "dataset", "method", "params" (the family options),
"summary" (metric → ``{"mean", "ci95", "n"}`` over seeds), "per_seed" (seed → metric → value)}``,
read from ``reports/sweeps/<sweep>/cells/<cell>.json`` written by ``evaluate``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tasks.paths import sweep_report_dir
from veilbench.config import Config
from veilbench.io import read_verified_json

Row = dict[str, Any]


def load_cell_metrics(cfg: Config, root: Path) -> list[Row]:
    """One row per evaluated cell of the configured sweeps (cells not yet evaluated are skipped; a
    record that no longer matches its seal is a ``ValidationError`` naming it, :mod:`veilbench.io`)."""
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


def mean_of(row: Mapping[str, Any], metric: str) -> float | None:
    """The row's mean of ``metric``; None when it is missing or not finite."""
    s = row["summary"].get(metric)
    return float(s["mean"]) if s and math.isfinite(s["mean"]) else None


def has(row: Mapping[str, Any], metric: str) -> bool:
    """Whether the row has a finite mean of ``metric``."""
    return mean_of(row, metric) is not None


def mean(row: Mapping[str, Any], metric: str) -> float:
    """The row's mean of ``metric`` (which it must have)."""
    return float(row["summary"][metric]["mean"])


def option(row: Mapping[str, Any], key: str) -> float | None:
    """The numeric cell option ``key`` (``param:<name>`` or ``<name>``); None when it is not a number."""
    v = row["params"].get(key.removeprefix("param:"))
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def value(row: Mapping[str, Any], key: str) -> tuple[float, float] | None:
    """``(value, 95% half-width)`` of an axis ``key``: a cell option ``param:<name>`` (half-width 0)
    or a metric (its mean and ``ci95``); None when missing, not a number or not finite."""
    if key.startswith("param:"):
        v = option(row, key)
        return None if v is None else (v, 0.0)
    s = row["summary"].get(key)
    return (s["mean"], s["ci95"]) if s and math.isfinite(s["mean"]) else None


def seed_metrics(row: Mapping[str, Any]) -> list[dict[str, float]]:
    """A row's per-seed metrics (its means when it stores none)."""
    return list((row.get("per_seed") or {}).values()) or [{k: v["mean"] for k, v in row["summary"].items()}]
