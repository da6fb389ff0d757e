"""Benchmark: FedAvg rounds per second, 20 clients, tabular AE.

Engines:
* ``sequential``: :func:`veilbench.gca.simulator.run_parameter_sharing`, clients trained one after
  another (one ``nn.Module`` forward/backward per client mini-batch);
* ``veilbench``: :func:`veilbench.gca.vectorized.run_parameter_sharing_vectorized`, all clients'
  mini-batches in one batched product per layer (same trajectory for the same seed);
* ``flower``: :func:`veilbench.gca.flower_app.run_flower_simulation`, Flower's simulation (Ray
  backend, one client worker: clients one after another, like ``sequential``) with Flower's
  ``FedAvg`` strategy. Needs the optional ``flwr`` extra (run from the Flower environment); without
  it the row is left out and the JSON says so. Its warm-up is a first identical FedAvg run inside
  the same simulation (Ray start, worker imports); the row times the second run's rounds only.

Data: a synthetic "Adult-scale" one-class set (spec §12.1 SYN): normals from an 8-component
Gaussian mixture in 5-d pushed through a fixed random tanh MLP to 14-d plus noise; anomalies
from shifted components and a uniform box; standardised on the training normals. Threads are
pinned to one (torch and BLAS); each engine gets one untimed warm-up round. Each row: rounds per
wall-clock second (training, aggregation and the per-round evaluation) and the final-round accuracy.

Usage: ``python benchmarks/bench_fl_rounds.py [--quick]`` → ``reports/bench/fl_rounds.json``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

from veilbench.io import write_json  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def synthetic_tabular(n_normal: int, n_anom: int, seed: int, d: int = 14) -> tuple[np.ndarray, np.ndarray]:
    """``(normals (n_normal, d), anomalies (n_anom, d))`` of the SYN stand-in, unscaled."""
    rng = np.random.default_rng(seed)
    centers = 3.0 * rng.standard_normal((10, 5))
    w1, w2 = rng.standard_normal((5, 32)) / np.sqrt(5), rng.standard_normal((32, d)) / np.sqrt(32)

    def push(z: np.ndarray) -> np.ndarray:
        return np.tanh(z @ w1) @ w2 + 0.05 * rng.standard_normal((z.shape[0], d))

    normal = push(centers[rng.integers(0, 8, n_normal)] + rng.standard_normal((n_normal, 5)))
    n_box = n_anom // 3
    shifted = push(centers[rng.integers(8, 10, n_anom - n_box)] + 1.5 * rng.standard_normal((n_anom - n_box, 5)))
    box = rng.uniform(normal.min(0), normal.max(0), (n_box, d))
    return normal.astype(np.float32), np.vstack([shifted, box]).astype(np.float32)


def build_federation(n_clients: int, per_client: int, seed: int):
    """IID federation of ``n_clients`` × ``per_client`` training normals; balanced tail test set."""
    from veilbench.gca.models import AESpec
    from veilbench.gca.partition import iid_partition
    from veilbench.gca.simulator import Federation

    n_train = n_clients * per_client
    n_anom = max(n_train // 5, 50)
    normal, anom = synthetic_tabular(n_train + n_anom, n_anom, seed)
    train, test_normal = normal[:n_train], normal[n_train:]
    mu, sd = train.mean(0), train.std(0) + 1e-6
    train, test_normal, anom = (train - mu) / sd, (test_normal - mu) / sd, (anom - mu) / sd
    labels = iid_partition(n_train, n_clients, seed)
    x_test = np.vstack([test_normal, anom])
    y_test = np.r_[np.zeros(len(test_normal)), np.ones(len(anom))].astype(np.int64)
    return Federation([train[labels == c] for c in range(n_clients)], x_test, y_test, AESpec("mlp", train.shape[1]))


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small shards and 2 rounds (< 60 s)")
    parser.add_argument("--out", default=str(ROOT / "reports" / "bench" / "fl_rounds.json"))
    args = parser.parse_args(argv)

    import torch

    from veilbench.gca.simulator import FedConfig, run_parameter_sharing
    from veilbench.gca.vectorized import run_parameter_sharing_vectorized

    torch.set_num_threads(1)
    try:
        from veilbench.gca.flower_app import run_flower_simulation
        import flwr  # noqa: F401
    except ImportError:
        run_flower_simulation = None
    clients = 20
    per_client, rounds, epochs = (100, 2, 2) if args.quick else (1_250, 5, 10)
    fed = build_federation(clients, per_client, seed=100)
    cfg = FedConfig(rounds=rounds, local_epochs=epochs)
    engines = {"sequential": run_parameter_sharing, "veilbench": run_parameter_sharing_vectorized}
    rows = []
    for protocol in ("fedavg",):
        for engine, run in engines.items():
            run(protocol, fed, FedConfig(rounds=1, local_epochs=1), 0)  # warm-up, untimed
            start = time.perf_counter()
            result = run(protocol, fed, cfg, 100)
            elapsed = time.perf_counter() - start
            rows.append({"engine": engine, "protocol": protocol, "clients": clients,
                         "rounds_per_second": rounds / elapsed, "final_accuracy": float(result.accuracy[-1])})
            print(f"{engine:>10} {protocol}: {rounds / elapsed:.3f} rounds/s, final accuracy {result.accuracy[-1]:.4f}")
        if run_flower_simulation is not None:
            start = time.perf_counter()
            _, timed = run_flower_simulation([protocol, protocol], fed, cfg, 100)
            total = time.perf_counter() - start
            rows.append({"engine": "flower", "protocol": protocol, "clients": clients,
                         "rounds_per_second": rounds / timed.seconds, "final_accuracy": float(timed.accuracy[-1]),
                         "wall_seconds_including_startup": total})
            print(f"{'flower':>10} {protocol}: {rounds / timed.seconds:.3f} rounds/s, final accuracy "
                  f"{timed.accuracy[-1]:.4f} ({total:.1f} s with Ray start and warm-up run)")
    report = {"benchmark": "fl_rounds", "rows": rows,
              "config": {"quick": args.quick, "records_per_client": per_client, "rounds": rounds,
                         "local_epochs": epochs, "batch_size": cfg.batch_size, "threads": 1,
                         "model": "tabular AE 14-256-64-16 mirrored",
                         "flower": ("flwr " + __import__("flwr").__version__ + ", Ray backend, 1 client worker"
                                    if run_flower_simulation is not None else "not installed: no flower row"),
                         "load_average_1min": os.getloadavg()[0]}}
    write_json(args.out, report)
    return report


if __name__ == "__main__":
    main()
