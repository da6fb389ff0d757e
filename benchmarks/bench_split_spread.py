"""Split-to-split spread of representative cells beside their confidence intervals over seeds.

The sweeps' seeds re-draw the mechanism's noise (and, for some families, the records dealt to each
party), but ``prepare`` draws the train/test split once, from the global ``seed`` of
``params.yaml``: every 95% CI in the report is over sweep seeds *given one split*. This script
re-runs whole cells (prepare → embed → the family's four stages, in memory, every sweep seed) on
``--splits`` different split seeds, everything else as in ``params.yaml``, and records per metric

* ``per_split``: split seed → the mean over the sweep seeds;
* ``split_sd``: the standard deviation of those means across splits (ddof 1);
* ``split_component_sd``: the part of that spread due to the split alone, by the one-way
  random-effects decomposition ``σ̂²_split = max(0, split_sd² − s²_within / n)`` (``s²_within`` the
  seed variance pooled over splits, ``n`` the number of sweep seeds): each split's mean carries
  its own seed noise, which ``split_sd`` also contains;
* ``seed_ci95``: the 95% t half-width over the sweep seeds on the configured split.

Writes ``reports/bench/split_spread.json`` (or ``--out``); the report prints it beside the claims
(:func:`tasks.report.split.split_spread_lines`). Run: ``python benchmarks/bench_split_spread.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

#: (sweep, cell, metrics) re-run on each split: a ScoreShield Gram release and a DC integration,
#: both scored on held-out records.
CELLS = [
    ("scoreshield-gram", "epsilon=8.0_mechanism=newton", ["utility_map", "utility_clustering_nmi", "utility_roc_auc"]),
    ("dc-parties", "method=nki_n_parties=8", ["utility_accuracy"]),
]


def cell_on_split(cfg: Any, sweep: str, cell: str, split_seed: int, root: Path) -> dict[int, dict[str, float]]:
    """Sweep seed → evaluate metrics of one cell with the train/test split drawn from ``split_seed``."""
    from tasks.paths import data_roots
    from veilbench.datasets import DATASETS, load_dataset, prepare_dataset
    from veilbench.embed.encoders import fit_encode
    from veilbench.families import get_family
    from veilbench.families.base import STAGES

    scfg = cfg.sweeps[sweep]
    ecfg = cfg.embeddings[scfg.embedding]
    dcfg = cfg.datasets[ecfg.dataset]
    options = dict(dcfg.options)
    if options.get("path") and not Path(options["path"]).is_absolute():
        options["path"] = str(root / options["path"])
    if DATASETS[dcfg.source][1] == "public":
        options["data_roots"] = data_roots()
    prepared = prepare_dataset(load_dataset(dcfg.source, **options), test_size=dcfg.test_size, n_parties=dcfg.n_parties,
                               scheme=dcfg.scheme, alpha=dcfg.alpha, max_records=dcfg.max_records, seed=split_seed)
    base = prepared.arrays()
    Z_train, Z_test = fit_encode(ecfg.encoder, base["X_train"], base["X_test"], dim=ecfg.dim, seed=cfg.seed, **ecfg.options)
    family = get_family(scfg.family)
    params = family.Params(**scfg.expand()[cell])
    out: dict[int, dict[str, float]] = {}
    for seed in scfg.seeds:
        inputs: dict[str, dict[str, np.ndarray]] = {"prepare": base, "embed": {"Z_train": Z_train, "Z_test": Z_test}}
        for stage in STAGES:
            result = getattr(family, stage)(inputs, params, seed)
            inputs[stage] = result.arrays
        out[seed] = {k: float(v) for k, v in result.metrics.items()}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default=str(REPO / "params.yaml"))
    parser.add_argument("--splits", type=int, default=8, help="number of split seeds (0 … splits − 1)")
    parser.add_argument("--out", type=Path, default=REPO / "reports" / "bench" / "split_spread.json")
    args = parser.parse_args()
    if args.splits < 2:
        parser.error(f"--splits: must be ≥ 2, got {args.splits}")
    from scipy.stats import t

    from veilbench.config import load_config

    cfg = load_config(args.params)
    records = []
    for sweep, cell, metrics in CELLS:
        runs = {s: cell_on_split(cfg, sweep, cell, s, REPO) for s in range(args.splits)}
        if cfg.seed not in runs:
            runs[cfg.seed] = cell_on_split(cfg, sweep, cell, cfg.seed, REPO)
        for metric in metrics:
            per_split = {s: float(np.mean([m[metric] for m in r.values()])) for s, r in runs.items()}
            own = np.array([m[metric] for m in runs[cfg.seed].values()])
            n = own.size
            split_sd = float(np.std([per_split[s] for s in range(args.splits)], ddof=1))
            within = float(np.mean([np.var([m[metric] for m in runs[s].values()], ddof=1) for s in range(args.splits)]))
            records.append({
                "sweep": sweep, "cell": cell, "metric": metric, "split_seeds": sorted(runs), "sweep_seeds": cfg.sweeps[sweep].seeds,
                "configured_split_seed": cfg.seed, "per_split": {str(s): v for s, v in sorted(per_split.items())},
                "split_sd": split_sd, "seed_sd_within": float(np.sqrt(within)),
                "split_component_sd": float(np.sqrt(max(0.0, split_sd ** 2 - within / n))),
                "split_range": [min(per_split.values()), max(per_split.values())],
                "seed_mean": float(own.mean()),
                "seed_ci95": float(t.ppf(0.975, n - 1) * own.std(ddof=1) / np.sqrt(n)) if n > 1 else 0.0,
            })
            print(json.dumps(records[-1]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"cells": records}, indent=1) + "\n")


if __name__ == "__main__":
    main()
