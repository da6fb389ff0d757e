"""The privacy ledger of the report: every differentially private release of the evaluated sweeps
(``data/release/<sweep>/ledger.json``, written by the release stage) in ``reports/privacy_ledger.csv``,
and in ``index.md`` what each deployment (cell) spends, by PLD composition
(:mod:`veilbench.privacy.ledger`); the composed budgets are also logged to the report's MLflow run
(:func:`metric_key`).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from tasks.paths import sweep_dir
from tasks.report.tables import markdown_table
from veilbench.config import Config
from veilbench.io import atomic_write_text, read_verified_json


def metric_key(*parts: str) -> str:
    """An MLflow-safe metric name from ``parts`` (characters outside [A-Za-z0-9_.-/ ] become ``_``)."""
    return "/".join(re.sub(r"[^A-Za-z0-9_.\-/ ]", "_", p) for p in parts)


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
             markdown_table(header, md), "Full ledger: `privacy_ledger.csv`.", ""]
    composed = {metric_key(*k): {"n_releases": c.n_releases, "epsilon": c.epsilon, "delta": c.delta}
                for k, c in totals.items()}
    return lines, rows, composed




def write_ledger_csv(rows: list[dict[str, Any]], path: Path) -> None:
    """Write the ledger rows as ``privacy_ledger.csv`` (:data:`LEDGER_COLUMNS`; a header alone when empty)."""
    import pandas as pd

    atomic_write_text(path, pd.DataFrame(rows, columns=LEDGER_COLUMNS).to_csv(index=False))
