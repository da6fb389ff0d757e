"""Speed-up of a 12-cell sweep with 2 Dask workers vs 1, and identical results either way.

Writes ``reports/bench/sweep_scaling.json``::

    {"benchmark": "sweep_scaling", "rows": [{"workers", "cells", "seconds", "cluster_start_seconds"}],
     "identical_results": bool, "speedup": float}

The sweep is 12 GCA cells on digits (K ∈ {2, 4, 8} × weighting × upload fraction ∈ {0.5, 1.0},
10 rounds, 3 seeds: about ten seconds of training per cell), the kind of sweep worth spreading
over workers. For each worker count the benchmark starts a local Dask cluster of that many
single-threaded worker processes, imports the stage code in every worker, and only then times:

* ``cluster_start_seconds``: cluster start-up plus the workers' imports (paid once per cluster,
  not per sweep; an existing cluster given by ``--dask-address`` pays it never);
* ``seconds``: the four cell stages (release, integrate, attack, evaluate) of the sweep, every
  cell a Prefect task on that cluster, so one worker and two run the very same code path.

Prepare and embed run before the clock starts; the report is not built. BLAS and torch run
single-threaded in every worker (with 2 threads the one-worker run would already use both cores).
``python benchmarks/bench_sweep_scaling.py --quick`` uses 4 cells of 2 rounds.
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

from prefect import flow  # noqa: E402  (after the thread settings above)

from flows._stage import run_cell_stage  # noqa: E402
from tasks.paths import CELL_STAGES  # noqa: E402


def sweep_params(quick: bool) -> dict:
    grid = {"n_clusters": [2, 4], "weighting": ["inverse", "uniform"]} if quick else \
        {"n_clusters": [2, 4, 8], "weighting": ["inverse", "uniform"], "upload_fraction": [0.5, 1.0]}
    return {
        "seed": 0,
        "tracking": {"experiment": "bench-sweep-scaling"},
        "datasets": {"digits": {"source": "digits", "test_size": 0.3, "n_parties": 4}},
        "embeddings": {"digits-std": {"dataset": "digits", "encoder": "standardize"}},
        "sweeps": {"bench": {"family": "gca", "embedding": "digits-std", "seeds": [100, 200, 300],
                             "params": {"method": "gca", "rounds": 2 if quick else 10, "local_epochs": 5,
                                        "recon_epochs": 3, "align_epochs": 2, "upload_fraction": 0.5},
                             "grid": grid}},
    }


def _warm() -> None:
    """Run in every worker before timing: import what a cell task imports."""
    import tasks.sweep  # noqa: F401
    import veilbench.gca.family  # noqa: F401


@flow(name="sweep-scaling")
def cell_stages(params_path: str) -> None:
    """The four cell stages of the benchmark sweep, cells as tasks on the flow's task runner."""
    for stage in CELL_STAGES:
        run_cell_stage(stage, ["bench"], params_path)


def run_once(workers: int, quick: bool) -> tuple[dict, dict]:
    """One fresh root and one fresh cluster of ``workers`` processes; returns (row, metrics.json)."""
    from dask.distributed import Client, LocalCluster
    from prefect_dask import DaskTaskRunner

    from tasks.embed import embed
    from tasks.prepare import prepare

    with tempfile.TemporaryDirectory(prefix="veilbench-bench-") as tmp:
        root = Path(tmp)
        params = sweep_params(quick)
        (root / "params.yaml").write_text(yaml.safe_dump(params))
        os.environ["VEILBENCH_ROOT"] = str(root)
        prepare("digits", str(root / "params.yaml"))
        embed("digits-std", str(root / "params.yaml"))
        t0 = time.perf_counter()
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            client.run(_warm)
            start = time.perf_counter() - t0
            t1 = time.perf_counter()
            cell_stages.with_options(task_runner=DaskTaskRunner(address=cluster.scheduler_address))(str(root / "params.yaml"))
            seconds = time.perf_counter() - t1
        metrics = json.loads((root / "reports/sweeps/bench/metrics.json").read_text())
    cells = len(metrics)
    return {"workers": workers, "cells": cells, "seconds": round(seconds, 3),
            "cluster_start_seconds": round(start, 3)}, metrics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=REPO / "reports" / "bench" / "sweep_scaling.json")
    args = parser.parse_args()
    from flows.server import local_prefect_server
    from veilbench.io import write_json

    with local_prefect_server(REPO):
        rows, results = [], []
        for workers in (1, 2):
            row, metrics = run_once(workers, args.quick)
            rows.append(row)
            results.append(metrics)
            print(row, flush=True)
    out = {"benchmark": "sweep_scaling", "mode": "quick" if args.quick else "full", "rows": rows,
           "identical_results": results[0] == results[1],
           "speedup": round(rows[0]["seconds"] / rows[1]["seconds"], 3), "cpu_count": os.cpu_count()}
    write_json(args.out, out)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
