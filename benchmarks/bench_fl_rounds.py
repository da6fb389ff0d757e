r"""Benchmark: FedAvg rounds per CPU second on the tabular AE, 20 and 50 clients.

Engines (one FedAvg protocol, the same federation, seed and configuration):

* ``sequential``: :func:`veilbench.gca.simulator.run_parameter_sharing` with the sequential local
  step, clients trained one after another (one ``nn.Module`` forward/backward per client batch);
* ``veilbench``: :func:`veilbench.gca.vectorized.run_parameter_sharing_vectorized`, the same round
  loop with the client-vectorised local step (all clients' batches in batched matrix products,
  one Adam over the stacked parameters);
* ``flower``: :func:`veilbench.gca.flower_app.run_flower_simulation`, Flower's simulation (Ray
  backend, one client worker: clients one after another, like ``sequential``) with Flower's
  ``FedAvg``. Its work runs in Ray worker processes, so its CPU time is that of this process and
  all its descendants (sampled while they live, :func:`tree_cpu`); the Ray start and imports are
  taken out by running the simulation once with one FedAvg run and once with two identical runs:
  the difference is the CPU time of one warm run (``cpu_resolved`` false and no rate when it is
  within start-up noise, as in tiny runs). Needs ``flwr``; without it the row is left out
  and the JSON says so.

Timing follows :mod:`measure`: process CPU time with one torch/BLAS thread, and the *unit* (one
sequential FedAvg round on the same federation) re-timed before and after every measurement.
Each row: ``rounds_per_second`` = rounds / CPU seconds, ``round_units`` = CPU seconds per round
over the unit, ``speedup_vs_sequential`` = sequential CPU / engine CPU (same run),
``unit_drift`` (rows above 20 % are flagged and must not be cited), the load average,
``max_abs_diff_vs_sequential`` (max |Δ| over the final global model's parameters; Flower returns
no parameters: null) and ``max_abs_auc_diff_vs_sequential`` (over the per-round ROC AUC curve).

Data: a synthetic "Adult-scale" one-class set (spec §12.1 SYN): 25 000 training normals from an
8-component Gaussian mixture in 5-d pushed through a fixed random tanh MLP to 14-d plus noise,
split over the clients; anomalies from shifted components and a uniform box; standardised on the
training normals. Full mode: 10 rounds of 10 local epochs, batch 50. ``--quick``: 2 000 records,
2 rounds of 2 epochs, 20 clients only.

Partitions (``--partition``):

* ``iid`` (default, ``reports/bench/fl_rounds.json``): near-equal shards (1 250 records each for
  20 clients, 500 for 50), :func:`veilbench.gca.partition.iid_partition`;
* ``longtail`` (``reports/bench/fl_rounds_longtail.json``): the spec's non-IID scheme,
  :func:`veilbench.gca.partition.dirichlet_longtail_partition` (α = 0.1, largest/smallest quota
  ≈ 10). Its clients take different numbers of local steps :math:`\tau_c = E\lceil N_c/B\rceil`;
  each row records ``client_records`` [min, max] and ``lockstep_steps_ratio`` =
  :math:`C \max_c \tau_c / \sum_c \tau_c` (1 for equal shards): the work an engine stepping every
  client until the last one finished would do over the sequential engine's. The vectorised engine
  steps only the running clients (:mod:`veilbench.gca.vectorized`), so its speed-up here is the
  check that this holds.

Usage: ``python benchmarks/bench_fl_rounds.py [--quick] [--no-flower] [--partition iid|longtail]
[--rounds N --out FILE] [--out FILE]`` → the partition's file above (quick runs belong under
``reports/bench/quick/``; ``--rounds N`` replaces the mode's rounds for a reduced, non-citable run
written only to ``--out``).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # measure this checkout's veilbench, not whichever one is installed

from measure import MAX_UNIT_DRIFT, drift_summary, measure, unit_checkpoint  # noqa: E402
from veilbench.io import write_json  # noqa: E402

MODES = {
    "quick": {"clients": (20,), "records": 2_000, "rounds": 2, "local_epochs": 2},
    "full": {"clients": (20, 50), "records": 25_000, "rounds": 10, "local_epochs": 10},
}
PROTOCOL = "fedavg"
SEED = 100
#: ``--partition`` → the default output file under ``reports/bench/``
OUTPUTS = {"iid": "fl_rounds.json", "longtail": "fl_rounds_longtail.json"}
#: the long-tail partition's Dirichlet concentration and largest/smallest quota (spec §1.3)
LONGTAIL_ALPHA, LONGTAIL_RATIO = 0.1, 10.0


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


def build_federation(n_clients: int, per_client: int, seed: int, partition: str = "iid"):
    """Federation of ``n_clients`` × ``per_client`` training normals split by ``partition``
    (``iid`` or ``longtail``, module doc); balanced tail test set."""
    from veilbench.gca.models import AESpec
    from veilbench.gca.partition import dirichlet_longtail_partition, iid_partition
    from veilbench.gca.simulator import Federation

    n_train = n_clients * per_client
    n_anom = max(n_train // 5, 50)
    normal, anom = synthetic_tabular(n_train + n_anom, n_anom, seed)
    train, test_normal = normal[:n_train], normal[n_train:]
    mu, sd = train.mean(0), train.std(0) + 1e-6
    train, test_normal, anom = (train - mu) / sd, (test_normal - mu) / sd, (anom - mu) / sd
    if partition == "iid":
        labels = iid_partition(n_train, n_clients, seed)
    elif partition == "longtail":
        labels = dirichlet_longtail_partition(train, n_clients, seed, alpha=LONGTAIL_ALPHA, ratio=LONGTAIL_RATIO)
    else:
        raise ValueError(f"partition: one of {sorted(OUTPUTS)}, got {partition!r}")
    x_test = np.vstack([test_normal, anom])
    y_test = np.r_[np.zeros(len(test_normal)), np.ones(len(anom))].astype(np.int64)
    return Federation([train[labels == c] for c in range(n_clients)], x_test, y_test, AESpec("mlp", train.shape[1]))


def lockstep_steps_ratio(sizes, local_epochs: int, batch_size: int) -> float:
    r""":math:`C \max_c \tau_c / \sum_c \tau_c` with :math:`\tau_c = E\lceil N_c/B\rceil` for the
    ``C = len(sizes)`` clients: the client-steps of an engine stepping every client until the last
    one finished over the sequential engine's (1 for equal shards)."""
    from veilbench.gca.training import n_batches

    steps = np.array([local_epochs * n_batches(int(n), batch_size) for n in sizes])
    return float(len(steps) * steps.max() / steps.sum())


def tree_cpu(fn, interval: float = 0.2):
    """``(fn(), CPU seconds of this process and all its descendants during the call, wall seconds)``.

    Descendants (Ray's workers) are sampled every ``interval`` seconds while they live (their last
    sample counts, so a process's final < ``interval`` s can be missed); this process's own CPU
    time is exact (:func:`time.process_time`).
    """
    import psutil

    me = psutil.Process()
    before: dict[int, float] = {}
    last: dict[int, float] = {}
    stop = threading.Event()

    def cpu(p) -> float:
        t = p.cpu_times()
        return t.user + t.system

    def sample(record: dict) -> None:
        for child in me.children(recursive=True):
            try:
                record[child.pid] = cpu(child)
            except psutil.Error:
                pass

    sample(before)

    def loop() -> None:
        while not stop.wait(interval):
            sample(last)

    thread = threading.Thread(target=loop, daemon=True)
    c0, w0 = time.process_time(), time.perf_counter()
    thread.start()
    try:
        out = fn()
    finally:
        stop.set()
        thread.join()
    own, wall = time.process_time() - c0, time.perf_counter() - w0
    sample(last)
    children = sum(v - before.get(pid, 0.0) for pid, v in last.items())
    return out, own + children, wall


def _row(engine: str, n_clients: int, per_client: int, rounds: int, cpu: float, m: dict, result, seq) -> dict:
    from veilbench.gca.training import flat_params

    row = {"engine": engine, "protocol": PROTOCOL, "clients": n_clients, "records_per_client": per_client,
           "rounds": rounds, "rounds_per_second": rounds / cpu, "cpu_seconds": cpu,
           "round_units": cpu / rounds / m["unit_cpu_seconds"],
           **{k: m[k] for k in ("cpu_seconds_range", "wall_seconds", "unit_cpu_seconds", "unit_drift",
                                "unit_drift_flagged", "unit_sample_spread", "repeats", "load_average") if k in m},
           "final_accuracy": float(result.accuracy[-1]),
           "max_abs_auc_diff_vs_sequential": float(np.abs(np.asarray(result.auc) - seq.auc).max())}
    final = getattr(result, "final_models", None)
    row["max_abs_diff_vs_sequential"] = (
        float(np.abs(flat_params(final[0]) - flat_params(seq.final_models[0])).max()) if final else None)
    return row


def _flower_row(run_flower, fed, cfg, unit, n_clients, per_client, seq, seq_cpu, unit_repeats) -> dict:
    """Flower's row: CPU of one warm run = (two runs) − (one run), process tree (module doc)."""
    load_start = os.getloadavg()
    checkpoints, samples = [], []

    def checkpoint() -> None:
        median, more = unit_checkpoint(unit, unit_repeats)
        checkpoints.append(median)
        samples.extend(more)

    checkpoint()
    _, cpu_one, _ = tree_cpu(lambda: run_flower([PROTOCOL], fed, cfg, SEED))
    checkpoint()
    (_, timed), cpu_two, wall_two = tree_cpu(lambda: run_flower([PROTOCOL, PROTOCOL], fed, cfg, SEED))
    checkpoint()
    cpu = cpu_two - cpu_one
    # Below ~1/4 of the start-up CPU the difference is start-up noise (tiny runs): no rate then.
    resolved = cpu > 0.25 * max(cpu_one - cpu, 0.0)
    m = {**drift_summary(checkpoints, samples), "repeats": 1, "wall_seconds": timed.seconds,
         "load_average": [list(load_start), list(os.getloadavg())]}
    row = _row("flower", n_clients, per_client, cfg.rounds, cpu if resolved else float("nan"), m, timed, seq)
    row.update(speedup_vs_sequential=seq_cpu / cpu if resolved else None, cpu_resolved=bool(resolved),
               tree_cpu_seconds_one_run_simulation=cpu_one, tree_cpu_seconds_two_run_simulation=cpu_two,
               wall_seconds_two_run_simulation=wall_two)
    if not resolved:
        row.update(rounds_per_second=None, round_units=None, cpu_seconds=cpu)
    return row


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 clients × 100 records, 2 rounds of 2 epochs")
    parser.add_argument("--no-flower", action="store_true", help="leave the Flower rows out")
    parser.add_argument("--partition", choices=sorted(OUTPUTS), default="iid",
                        help="how the records are split over the clients (module doc)")
    parser.add_argument("--rounds", type=int, help="the mode's rounds replaced (not citable; needs --out)")
    parser.add_argument("--out", default=None,
                        help="output JSON (default reports/bench/fl_rounds.json, fl_rounds_longtail.json for longtail)")
    args = parser.parse_args(argv)
    mode = "quick" if args.quick else "full"
    setting = dict(MODES[mode])
    if args.rounds is not None:
        if args.rounds < 1 or args.out is None:
            parser.error(f"--rounds: a positive number of rounds with --out FILE (got {args.rounds}, --out {args.out})")
        setting["rounds"], mode = args.rounds, f"{mode}-{args.rounds}-rounds"
    args.out = args.out or str(ROOT / "reports" / "bench" / OUTPUTS[args.partition])

    import torch

    from veilbench.gca.simulator import FedConfig, run_parameter_sharing
    from veilbench.gca.vectorized import run_parameter_sharing_vectorized

    torch.set_num_threads(1)
    run_flower, flower_note = None, "left out (--no-flower)"
    if not args.no_flower:
        try:
            import flwr

            from veilbench.gca.flower_app import run_flower_simulation as run_flower
            flower_note = f"flwr {flwr.__version__}, Ray backend, 1 client worker"
        except ImportError:
            flower_note = "not installed: no flower row"
    engines = {"sequential": run_parameter_sharing, "veilbench": run_parameter_sharing_vectorized}
    unit_repeats = 1  # the unit is a whole sequential round: seconds of CPU, one call per checkpoint
    rows, summary = [], []
    report = {"benchmark": "fl_rounds", "mode": mode, "rows": rows, "summary": summary,
              "config": {"quick": args.quick, "partition": args.partition,
                         "clients": list(setting["clients"]), "records": setting["records"],
                         "rounds": setting["rounds"], "local_epochs": setting["local_epochs"], "batch_size": 50,
                         "protocol": PROTOCOL, "seed": SEED, "threads": 1,
                         "model": "tabular AE 14-256-64-16 mirrored", "flower": flower_note,
                         "unit": "CPU seconds of one sequential FedAvg round on the same federation",
                         "timing": "process CPU time (Flower: this process and its descendants), one torch/BLAS "
                                   f"thread; the unit is re-timed before and after every measurement; rows whose "
                                   f"unit drifted more than {MAX_UNIT_DRIFT:.0%} are flagged"}}
    for n_clients in setting["clients"]:
        per_client = setting["records"] // n_clients
        fed = build_federation(n_clients, per_client, seed=SEED, partition=args.partition)
        cfg = FedConfig(rounds=setting["rounds"], local_epochs=setting["local_epochs"])
        sizes = [x.shape[0] for x in fed.clients]
        partition_fields = {"partition": args.partition, "client_records": [min(sizes), max(sizes)],
                 "lockstep_steps_ratio": lockstep_steps_ratio(sizes, cfg.local_epochs, cfg.batch_size)}

        def unit(fed=fed, cfg=cfg):
            return run_parameter_sharing(PROTOCOL, fed, replace(cfg, rounds=1), SEED)

        results, cpu = {}, {}
        for engine, run in engines.items():
            run(PROTOCOL, fed, FedConfig(rounds=1, local_epochs=1), 0)  # warm-up, untimed
            results[engine], m = measure(lambda run=run: run(PROTOCOL, fed, cfg, SEED), unit, repeats=1,
                                         unit_repeats=unit_repeats)
            cpu[engine] = m["cpu_seconds"]
            row = _row(engine, n_clients, per_client, cfg.rounds, m["cpu_seconds"], m, results[engine],
                       results.get("sequential", results[engine]))
            row["speedup_vs_sequential"] = cpu["sequential"] / m["cpu_seconds"]
            row.update(partition_fields)
            rows.append(row)
            print(f"{n_clients:3d} clients {engine:>10}: {row['rounds_per_second']:.3f} rounds/CPU-s, "
                  f"{row['speedup_vs_sequential']:.2f}x sequential, drift {row['unit_drift']:.2f}, "
                  f"max|Δθ| {row['max_abs_diff_vs_sequential']:.1e}", flush=True)
            write_json(args.out, report)  # after every row: an interrupted run keeps what it finished
        if run_flower is not None:
            row = _flower_row(run_flower, fed, cfg, unit, n_clients, per_client, results["sequential"],
                              cpu["sequential"], unit_repeats)
            row.update(partition_fields)
            rows.append(row)
            print(f"{n_clients:3d} clients {'flower':>10}: {row['rounds_per_second']} rounds/CPU-s, "
                  f"{row['speedup_vs_sequential']}x sequential, drift {row['unit_drift']:.2f}", flush=True)
            write_json(args.out, report)
        mine = [r for r in rows if r["clients"] == n_clients]
        by = {r["engine"]: r for r in mine}
        summary.append({"clients": n_clients, **partition_fields,
                        "veilbench_speedup_vs_sequential": by["veilbench"]["speedup_vs_sequential"],
                        "target_ge_3x": by["veilbench"]["speedup_vs_sequential"] >= 3.0,
                        "veilbench_max_abs_diff_vs_sequential": by["veilbench"]["max_abs_diff_vs_sequential"],
                        "citable": mode == "full" and not any(r["unit_drift_flagged"] for r in mine)})
        write_json(args.out, report)
    return report


if __name__ == "__main__":
    main()
