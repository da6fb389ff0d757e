"""Speed-up of a 12-cell sweep with 2 Dask workers vs 1, and identical results either way.

Writes ``reports/bench/sweep_scaling.json``::

    {"benchmark": "sweep_scaling", "rows": [{"workers", "cells", "seconds"}], "identical_results": bool}

Each run happens in a fresh temporary root holding a ScoreShield vector sweep of 12 ε values on
digits (PCA-16), through ``flows.benchmark`` under one local Prefect server. ``seconds`` is the
wall time of the whole flow (prepare and embed included). ``python benchmarks/bench_sweep_scaling.py
--quick`` uses 4 cells.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def sweep_params(n_cells: int) -> dict:
    eps = [round(0.5 * 1.5**i, 4) for i in range(n_cells)]
    return {
        "seed": 0,
        "tracking": {"experiment": "bench-sweep-scaling"},
        "datasets": {"digits": {"source": "digits", "test_size": 0.3}},
        "embeddings": {"digits-pca": {"dataset": "digits", "encoder": "pca", "dim": 16}},
        "sweeps": {"eps": {"family": "scoreshield", "embedding": "digits-pca", "seeds": [0, 1, 2],
                           "params": {"mechanism": "gaussian", "delta": 1e-5, "n_queries": 300},
                           "grid": {"epsilon": eps}}},
    }


def run_once(workers: int, n_cells: int) -> tuple[float, dict]:
    from flows.benchmark import run_benchmark

    with tempfile.TemporaryDirectory(prefix="veilbench-bench-") as tmp:
        root = Path(tmp)
        (root / "params.yaml").write_text(yaml.safe_dump(sweep_params(n_cells)))
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
    n_cells = 4 if args.quick else 12
    from flows.server import local_prefect_server
    from veilbench.io import write_json

    with local_prefect_server(REPO):
        rows, results = [], []
        for workers in (1, 2):
            seconds, metrics = run_once(workers, n_cells)
            rows.append({"workers": workers, "cells": n_cells, "seconds": round(seconds, 3)})
            results.append(metrics)
            print(rows[-1], flush=True)
    out = {"benchmark": "sweep_scaling", "rows": rows, "identical_results": results[0] == results[1],
           "speedup": round(rows[0]["seconds"] / rows[1]["seconds"], 3), "cpu_count": os.cpu_count()}
    write_json(REPO / "reports" / "bench" / "sweep_scaling.json", out)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
