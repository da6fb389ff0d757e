"""Run every available family's four stages on one tiny digits instance; print the metrics as JSON.

Used by ``test_determinism.py`` in fresh subprocesses (so the BLAS/OpenMP thread count set in the
environment takes effect before numpy/torch load)::

    python -m tests.trust.family_runs FAMILY[,FAMILY...] SEED [SEED ...]
    # prints {"<family>": {"<seed>": [metrics of each run]}} (see :func:`main`)

A seed listed twice runs twice in the same process, so run-to-run determinism is checked too. Inputs: digits classes {0, 1, 7} (GCA treats 0 as normal, 1 and 7 as anomalies), 360
training rows in 4 parties, standardised features as the embedding.
"""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

import numpy as np

from veilbench.stages import STAGES

#: family → tiny cell options (seconds on one core), as in each family's own stage tests.
CELLS: dict[str, dict[str, Any]] = {
    "scoreshield": {"mechanism": "gaussian", "epsilon": 8.0, "n_queries": 30, "audit_releases": 400},
    "anchornoise": {"v": 1.0, "r": 100},
    "dc": {"n_estimators": 30, "attacks": ("lr", "pinv"), "n_anchor": 150, "n_smote_source": 40},
    "gca": {"method": "gca", "normal_classes": [0], "anomaly_classes": [1, 7], "rounds": 3, "attack_starts": 4,
            "attack_max_steps": 30, "surrogate_max_epochs": 20, "surrogate_patience": 5},
}



def tiny_inputs() -> dict[str, dict[str, np.ndarray]]:
    """``prepare`` and ``embed`` arrays of the shared tiny instance (see the module docstring)."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    keep = np.isin(y, [0, 1, 7])
    x, y = x[keep], y[keep]
    perm = np.random.default_rng(0).permutation(len(y))
    x, y = x[perm], y[perm]
    n = 360
    mu, sd = x[:n].mean(0), x[:n].std(0) + 1e-9
    prepare = {"X_train": x[:n], "y_train": y[:n], "party_train": np.arange(n) % 4,
               "X_test": x[n:], "y_test": y[n:]}
    return {"prepare": prepare, "embed": {"Z_train": (x[:n] - mu) / sd, "Z_test": (x[n:] - mu) / sd}}


def run_cell(family: str, inputs: dict, seed: int) -> dict[str, float]:
    """The ``evaluate`` metrics of one cell of ``family`` with :data:`CELLS` options."""
    module = importlib.import_module(f"veilbench.{family}.family")
    params = module.Params(**CELLS[family])
    if family == "gca":  # one torch intra-op thread, as the pipeline runs every cell (flows._stage.single_threaded_blas)
        import torch

        torch.set_num_threads(1)
    feed = dict(inputs)
    out = None
    for stage in STAGES:
        out = getattr(module, stage)(feed, params, seed)
        feed[stage] = out.saved_arrays()
    return {k: float(v) for k, v in out.metrics.items()}


def main(families: list[str], seeds: list[int]) -> dict[str, dict[str, Any]]:
    """Family → seed → [metrics of each run of that seed, in order]; a family whose module does not
    import maps to ``{"import_error": "<type>: <message>"}`` instead."""
    inputs = tiny_inputs()
    out: dict[str, dict[str, Any]] = {}
    for f in families:
        try:
            importlib.import_module(f"veilbench.{f}.family")
        except ImportError as exc:
            out[f] = {"import_error": f"{type(exc).__name__}: {exc}"}
            continue
        out[f] = {}
        for s in seeds:
            out[f].setdefault(str(s), []).append(run_cell(f, inputs, s))
    return out


def blas_threads() -> list[int]:
    """The distinct thread counts of the BLAS pools loaded in this process (threadpoolctl).

    OpenMP pools are left out (torch's follows ``OMP_NUM_THREADS``; the library never sets it)."""
    from threadpoolctl import threadpool_info

    return sorted({int(pool["num_threads"]) for pool in threadpool_info() if pool["user_api"] == "blas"})


if __name__ == "__main__":
    fams = sys.argv[1].split(",")
    result: dict[str, Any] = main(fams, [int(s) for s in sys.argv[2:]])
    result["_threads"] = blas_threads()
    print(json.dumps(result, allow_nan=True))
