"""Run one family stage for one cell, once per seed, from files to files.

Inputs of seed s are the ``prepare`` and ``embed`` arrays of the cell's embedding plus, for each
earlier cell stage, the arrays that stage wrote for seed s (stored in one ``arrays.npz`` under
keys ``s<seed>__<name>``). Metrics of every seed go to the manifest and MLflow; ``evaluate``
also writes ``reports/cells/<cell>/metrics.json`` with per-seed values, mean and 95% CI.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from tasks.common import load_params
from tasks.paths import CELL_STAGES, cell_dir, embed_dir, metrics_path, prepare_dir, repo_root
from tasks.tracking import stage_run
from veilbench.families import get_family
from veilbench.io import read_bundle, write_bundle, write_json


def _split_seed(arrays: dict[str, np.ndarray], seed: int) -> dict[str, np.ndarray]:
    prefix = f"s{seed}__"
    return {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)}


def summarise(per_seed: dict[int, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Mean and 95% t-interval half-width of each metric over seeds (half-width 0 for one seed)."""
    from scipy.stats import t

    names = sorted({k for m in per_seed.values() for k in m})
    out: dict[str, dict[str, float]] = {}
    for name in names:
        vals = np.array([m[name] for m in per_seed.values() if name in m], dtype=float)
        mean = float(np.mean(vals))
        half = float(t.ppf(0.975, vals.size - 1) * np.std(vals, ddof=1) / math.sqrt(vals.size)) if vals.size > 1 else 0.0
        out[name] = {"mean": mean, "ci95": half if math.isfinite(half) else 0.0, "n": int(vals.size)}
    return out


def run_cell_stage(stage: str, cell: str, params_path: str | Path | None = None, root: Path | None = None) -> Path:
    """Run ``stage`` (release/integrate/attack/evaluate) of ``cell`` for every seed of the cell."""
    if stage not in CELL_STAGES:
        raise KeyError(f"stage: must be one of {CELL_STAGES}, got {stage!r}")
    root = root or repo_root()
    cfg = load_params(params_path, root)
    if cell not in cfg.cells:
        raise KeyError(f"cell: {cell!r} is not in params cells ({sorted(cfg.cells)})")
    ccfg = cfg.cells[cell]
    ecfg = cfg.embeddings[ccfg.embedding]
    family = get_family(ccfg.family)
    fparams = family.Params(**ccfg.params)
    stage_fn = getattr(family, stage)

    base = {"prepare": read_bundle(prepare_dir(root, ecfg.dataset))[0], "embed": read_bundle(embed_dir(root, ccfg.embedding))[0]}
    earlier = {s: read_bundle(cell_dir(root, s, cell))[0] for s in CELL_STAGES[: CELL_STAGES.index(stage)] if s != "evaluate"}

    params = {"cell": cell, **ccfg.model_dump(), "family_params": fparams.model_dump(), "embedding_config": ecfg.model_dump()}
    method = str(ccfg.params.get("mechanism") or ccfg.params.get("method") or ccfg.params.get("protocol") or ccfg.family)
    tags = {"cell": cell, "family": ccfg.family, "dataset": ecfg.dataset, "embedding": ccfg.embedding,
            "method": method, "seeds": ",".join(map(str, ccfg.seeds))}
    with stage_run(cfg.tracking.experiment, stage, params, tags, root) as mlflow:
        arrays: dict[str, np.ndarray] = {}
        per_seed_metrics: dict[int, dict[str, float]] = {}
        info: dict[str, Any] = {}
        for seed in ccfg.seeds:
            inputs = dict(base)
            inputs.update({s: _split_seed(a, seed) for s, a in earlier.items()})
            t0 = time.perf_counter()
            result = stage_fn(inputs, fparams, seed)
            elapsed = time.perf_counter() - t0
            arrays.update({f"s{seed}__{k}": v for k, v in result.arrays.items()})
            per_seed_metrics[seed] = {k: float(v) for k, v in result.metrics.items()}
            info[str(seed)] = {**result.info, "seconds": elapsed}
        summary = summarise(per_seed_metrics)
        manifest = {"stage": stage, "cell": cell, "seeds": ccfg.seeds, "params": params, "info": info,
                    "metrics": {str(s): m for s, m in per_seed_metrics.items()}}
        if stage == "evaluate":
            out = metrics_path(root, cell)
            write_json(out, {"cell": cell, "family": ccfg.family, "dataset": ecfg.dataset, "embedding": ccfg.embedding,
                             "method": method, "params": fparams.model_dump(), "seeds": ccfg.seeds,
                             "per_seed": {str(s): m for s, m in per_seed_metrics.items()}, "summary": summary,
                             "info": info})
            mlflow.log_artifact(str(out))
        else:
            out = write_bundle(cell_dir(root, stage, cell), arrays, manifest)
            mlflow.log_artifact(str(out / "manifest.json"))
        for name, stats in summary.items():
            if math.isfinite(stats["mean"]):
                mlflow.log_metric(name, stats["mean"])
                mlflow.log_metric(f"{name}_ci95", stats["ci95"])
        for seed, metrics in per_seed_metrics.items():
            for name, value in metrics.items():
                if math.isfinite(value):
                    mlflow.log_metric(f"seed/{name}", value, step=seed)
    return out
