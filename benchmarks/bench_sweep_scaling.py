"""Speed-up of a 12-cell sweep with 2 Dask workers vs 1, and identical results either way.

Writes ``reports/bench/sweep_scaling.json``::

    {"benchmark": "sweep_scaling", "rows": [{"workers", "cells", "seconds"}], "identical_results": bool}

Each run happens in a fresh temporary root holding a ScoreShield Gram sweep of 12 ε values on
digits (PCA-32; 400 records, exact Newton projection, 3 seeds: a few seconds per cell and stage),
through ``flows.benchmark`` under one local Prefect server. ``seconds`` is the wall time of the
whole flow: prepare, embed, the Dask cluster's start-up (worker processes import the stack) and
the report included. BLAS runs single-threaded in both runs, so the parallelism measured is the
workers' (with 2 BLAS threads the one-worker run would already use both cores for eigh).
``python benchmarks/bench_sweep_scaling.py --quick`` uses 4 cells of 100 records.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # before numpy loads: one BLAS thread per worker (see the docstring)

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def sweep_params(n_cells: int, n_records: int) -> dict:
    eps = [round(1.0 * 1.5**i, 4) for i in range(n_cells)]
    return {
        "seed": 0,
        "tracking": {"experiment": "bench-sweep-scaling"},
        "datasets": {"digits": {"source": "digits", "test_size": 0.3}},
        "embeddings": {"digits-pca": {"dataset": "digits", "encoder": "pca", "dim": 32}},
        "sweeps": {"eps": {"family": "scoreshield", "embedding": "digits-pca", "seeds": [0, 1, 2],
                           "params": {"regime": "gram", "mechanism": "newton", "adjacency": "output",
                                      "gram_sensitivity": 1.0, "n_records": n_records, "delta": 1e-5},
                           "grid": {"epsilon": eps}}},
    }


def run_once(workers: int, n_cells: int, n_records: int) -> tuple[float, dict]:
    from flows.benchmark import run_benchmark

    with tempfile.TemporaryDirectory(prefix="veilbench-bench-") as tmp:
        root = Path(tmp)
        (root / "params.yaml").write_text(yaml.safe_dump(sweep_params(n_cells, n_records)))
        os.environ["VEILBENCH_ROOT"] = str(root)
        t0 = time.perf_counter()
        run_benchmark(str(root / "params.yaml"), workers=workers)
        seconds = time.perf_counter() - t0
        metrics = json.loads((root / "reports/sweeps/eps/metrics.json").read_text())
    return seconds, metrics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n_cells, n_records = (4, 100) if args.quick else (12, 400)
    from flows.server import local_prefect_server
    from veilbench.io import write_json

    with local_prefect_server(REPO):
        rows, results = [], []
        for workers in (1, 2):
            seconds, metrics = run_once(workers, n_cells, n_records)
            rows.append({"workers": workers, "cells": n_cells, "seconds": round(seconds, 3), "n_records": n_records})
            results.append(metrics)
            print(rows[-1], flush=True)
    out = {"benchmark": "sweep_scaling", "rows": rows, "identical_results": results[0] == results[1],
           "speedup": round(rows[0]["seconds"] / rows[1]["seconds"], 3), "cpu_count": os.cpu_count()}
    write_json(REPO / "reports" / "bench" / "sweep_scaling.json", out)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
