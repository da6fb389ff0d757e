r"""Benchmark: CPU seconds per GCA round on the tabular AE, sequential client loop vs stacked clients.

One GCA round as :func:`veilbench.gca.gca.run_gca` runs it (spec §4.4), by two engines on the same
federation, initial models, seed and configuration:

* ``sequential``: run_gca's client loop, one ``nn.Module`` per client with its two persistent
  ``Adam`` + StepLR optimisers, clients one after the other;
* ``stacked``: :class:`veilbench.gca.vectorized_gca.StackedGCAClients`, all clients' batches in
  batched matrix products and both optimisers as stacked tensors.

Each round has four phases, timed apart (process CPU time): ``reconstruction`` (``recon_epochs``
epochs of every client), ``evaluation`` (every client after each reconstruction epoch, client 0
after each alignment epoch: the same code for both engines, on their current modules),
``server`` (the uploads of :math:`\lfloor\rho N_i\rfloor` codes, the GMM fit with K components
and the weights) and ``alignment`` (``align_epochs`` encoder-only epochs). ``training`` =
reconstruction + alignment, the work the engines differ in. Both engines first run one untimed
round (warm-up), then ``repeats`` timed rounds, each the next round of the same run; the row keeps
the median over the timed rounds. ``max_abs_diff_vs_sequential`` is max |Δθ| over every client's
parameters after the last round (0: the same trajectory to the bit).

Timing follows :mod:`measure`: one torch/BLAS thread, process CPU time, and the *unit*, one
sequential reconstruction step (one client, one mini-batch of B records: forward, backward, Adam),
re-timed before and after every round; ``*_units`` = CPU seconds over the unit, and
``training_units_per_client_step`` = training CPU over the client-steps it took
(:math:`(E_{rec}+E_{align})\sum_i\lceil N_i/B\rceil`) and the unit (about 1 for the sequential
reconstruction). Rows whose unit drifted more than 20 % are flagged and must not be cited.

Data (``full``, paper-like Adult, spec §2): :func:`veilbench.datasets.registry.adult_like`
(48 842 × 14, label 0 "≤50K" the normals): its first 20 × 1 236 label-0 rows are the clients'
training normals (IID shards, :func:`veilbench.gca.partition.iid_partition`; Adult's 24 720,
spec §2), every row after the last of them is the test set (label 1 = anomaly); standardised on
the training normals. Batch 50,
5 + 5 epochs, ρ = 0.1, GMM with K = 10, inverse-count weights, shared init; 2 timed rounds.
``--quick``: 4 clients × 150 records, 1 + 1 epochs, K = 3, 1 timed round (a smoke test, never cited).

Usage: ``python benchmarks/bench_gca_tabular.py [--quick] [--out FILE]`` → ``reports/bench/gca_tabular.json``
(``--quick``: ``reports/bench/quick/gca_tabular.json``). :func:`measure` returns the same report
for other benchmarks to embed.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # measure this checkout's veilbench, not whichever one is installed

from measure import MAX_UNIT_DRIFT  # noqa: E402
from measure import measure as measure_cpu  # noqa: E402
from veilbench.io import write_json  # noqa: E402

MODES = {
    "quick": {"clients": 4, "records_per_client": 150, "recon_epochs": 1, "align_epochs": 1, "n_clusters": 3,
              "repeats": 1},
    "full": {"clients": 20, "records_per_client": 1236, "recon_epochs": 5, "align_epochs": 5, "n_clusters": 10,
             "repeats": 2},
}
SEED = 100
PHASES = ("reconstruction", "evaluation", "server", "alignment")
ENGINES = ("sequential", "stacked")


def build_federation(n_clients: int, per_client: int, seed: int):
    """The module doc's Adult-like federation: ``n_clients`` IID shards of ``per_client`` normals."""
    from veilbench.datasets.registry import adult_like
    from veilbench.gca.federation import Federation
    from veilbench.gca.models import AESpec
    from veilbench.gca.partition import iid_partition

    data = adult_like(seed=seed)
    x, y = data.X, data.y
    n_train = n_clients * per_client
    normal_rows = np.flatnonzero(y == 0)
    if n_train > normal_rows.size - 1:
        raise ValueError(f"clients x records_per_client: at most {normal_rows.size - 1} normals, got {n_train}")
    last = normal_rows[n_train - 1]  # the training normals are the first n_train label-0 rows
    train = x[normal_rows[:n_train]]
    mu, sd = train.mean(0), train.std(0)
    sd = np.where(sd > 0, sd, 1.0)
    labels = iid_partition(n_train, n_clients, seed)
    clients = [((train[labels == c] - mu) / sd).astype(np.float32) for c in range(n_clients)]
    x_test, y_test = ((x[last + 1 :] - mu) / sd).astype(np.float32), y[last + 1 :].astype(np.int64)
    return Federation(clients, x_test, y_test, AESpec("mlp", x.shape[1]))


class Engine:
    """One engine's persistent run state and its GCA round, phase by phase (module doc)."""

    def __init__(self, kind: str, fed, cfg, seed: int) -> None:
        from veilbench.gca.federation import batch_stream, make_optimizer
        from veilbench.gca.gca import init_client_models
        from veilbench.gca.vectorized_gca import StackedGCAClients

        self.kind, self.fed, self.cfg = kind, fed, cfg
        self.xs, self.xt = fed.tensors()
        self.rng = batch_stream(seed)
        models = init_client_models(fed, cfg, seed)
        if kind == "stacked":
            self.stacked = StackedGCAClients(models, cfg)
        else:
            self.models = models
            self.rec = [make_optimizer(m.parameters(), cfg) for m in models]
            self.al = [make_optimizer(m.encoder.parameters(), cfg) for m in models]
        self.steps = np.zeros(len(self.xs), dtype=np.int64)

    def current_models(self) -> list:
        return self.stacked.models() if self.kind == "stacked" else self.models

    def _recon_epoch(self) -> None:
        from veilbench.gca.training import reconstruction_epoch

        if self.kind == "stacked":
            self.steps += self.stacked.reconstruction_epoch(self.xs, self.rng)
        else:
            for i, (m, o, x) in enumerate(zip(self.models, self.rec, self.xs)):
                self.steps[i] += reconstruction_epoch(m, o, x, self.cfg.batch_size, self.rng)

    def _align_epoch(self, mu, w) -> None:
        from veilbench.gca.gca import alignment_epoch

        if self.kind == "stacked":
            self.steps += self.stacked.alignment_epoch(self.xs, mu, w, self.rng)
        else:
            for i, (m, o, x) in enumerate(zip(self.models, self.al, self.xs)):
                self.steps[i] += alignment_epoch(m, o, x, mu, w, self.cfg.batch_size, self.rng)

    def round(self) -> dict:
        """One GCA round; returns the CPU seconds of each phase."""
        import torch

        from veilbench.gca.clustering import centroid_weights, fit_centroids
        from veilbench.gca.federation import evaluate_clients
        from veilbench.gca.gca import upload_codes

        cpu = dict.fromkeys(PHASES, 0.0)

        def timed(phase, fn):
            start = time.process_time()
            out = fn()
            cpu[phase] += time.process_time() - start
            return out

        cfg, fed = self.cfg, self.fed
        for _ in range(cfg.recon_epochs):
            timed("reconstruction", self._recon_epoch)
            timed("evaluation", lambda: evaluate_clients(self.current_models(), self.xs, self.xt, fed.y_test,
                                                         cfg.quantile))

        def server():
            codes = np.concatenate([upload_codes(m, x, cfg.upload_fraction, self.rng)[1]
                                    for m, x in zip(self.current_models(), self.xs)])
            cent = fit_centroids(codes, min(cfg.n_clusters, codes.shape[0]), cfg.clustering,
                                 int(self.rng.integers(2**31)), cfg.covariance_type, cfg.reg_covar, cfg.gmm_n_init)
            return (torch.as_tensor(cent.mu, dtype=torch.float32),
                    torch.as_tensor(centroid_weights(cent.counts, cfg.weighting), dtype=torch.float32))

        mu, w = timed("server", server)
        for _ in range(cfg.align_epochs):
            timed("alignment", lambda: self._align_epoch(mu, w))
            timed("evaluation", lambda: evaluate_clients(self.current_models()[:1], self.xs[:1], self.xt,
                                                         fed.y_test, cfg.quantile))
        return cpu


def sequential_step_unit(fed, cfg, seed: int):
    """The unit: one sequential reconstruction step (one client's first B records) on a scratch copy."""
    from veilbench.gca.federation import initial_model, make_optimizer
    from veilbench.gca.training import reconstruction_epoch
    from veilbench.random import stream

    model = initial_model(fed.spec, seed)
    opt = make_optimizer(model.parameters(), cfg)
    xb = fed.tensors()[0][0][: cfg.batch_size]
    rng = stream(seed, "bench.gca-tabular-unit")  # the one batch's order: immaterial to the timing
    return lambda: reconstruction_epoch(model, opt, xb, cfg.batch_size, rng)


def measure(quick: bool = False, repeats: int | None = None, seed: int = SEED, setting: dict | None = None) -> dict:
    """Both engines' rounds on the mode's federation (module doc); returns the report
    ``{"benchmark", "mode", "config", "rows", "summary"}``. ``setting`` replaces the mode's
    (``MODES`` keys; for tests), ``repeats`` its timed rounds."""
    import torch

    from veilbench.gca.federation import FedConfig
    from veilbench.gca.training import flat_params, n_batches

    torch.set_num_threads(1)
    mode = "quick" if quick else "full"
    setting = dict(setting or MODES[mode])
    repeats = int(repeats or setting["repeats"])
    fed = build_federation(setting["clients"], setting["records_per_client"], seed)
    cfg = FedConfig(recon_epochs=setting["recon_epochs"], align_epochs=setting["align_epochs"],
                    n_clusters=setting["n_clusters"], upload_fraction=0.1, batch_size=50)
    client_steps = (cfg.recon_epochs + cfg.align_epochs) * sum(n_batches(n, cfg.batch_size) for n in fed.sizes)
    unit = sequential_step_unit(fed, cfg, seed)
    rows, engines = [], {}
    for kind in ENGINES:
        engine = engines[kind] = Engine(kind, fed, cfg, seed)
        engine.round()  # warm-up: round 1, untimed
        phases: list[dict] = []
        _, m = measure_cpu(lambda engine=engine: phases.append(engine.round()), unit, repeats=repeats)
        per_phase = {p: float(np.median([ph[p] for ph in phases])) for p in PHASES}
        training = float(np.median([ph["reconstruction"] + ph["alignment"] for ph in phases]))
        u = m["unit_cpu_seconds"]
        rows.append({
            "engine": kind, "clients": len(fed.clients), "records_per_client": int(fed.sizes.min()),
            "rounds_timed": repeats, "cpu_seconds_per_round": m["cpu_seconds"],
            "cpu_seconds_per_round_range": m["cpu_seconds_range"], "phase_cpu_seconds": per_phase,
            "training_cpu_seconds_per_round": training, "round_units": m["cpu_seconds"] / u,
            "training_units": training / u, "training_units_per_client_step": training / client_steps / u,
            "client_steps_per_round": int(client_steps),
            **{k: m[k] for k in ("wall_seconds", "unit_cpu_seconds", "unit_drift", "unit_drift_flagged",
                                 "unit_sample_spread", "unit_repeats_per_checkpoint", "load_average")},
        })
    seq = rows[0]
    diff = max(float(np.abs(flat_params(a) - flat_params(b)).max())
               for a, b in zip(engines["sequential"].current_models(), engines["stacked"].current_models()))
    for row in rows:
        row["speedup_vs_sequential"] = seq["cpu_seconds_per_round"] / row["cpu_seconds_per_round"]
        row["training_speedup_vs_sequential"] = seq["training_cpu_seconds_per_round"] / row["training_cpu_seconds_per_round"]
        row["phase_speedup_vs_sequential"] = {p: seq["phase_cpu_seconds"][p] / row["phase_cpu_seconds"][p]
                                              for p in PHASES if row["phase_cpu_seconds"][p] > 0}
        row["max_abs_diff_vs_sequential"] = diff if row["engine"] == "stacked" else 0.0
    stacked = rows[1]
    summary = {"training_speedup": stacked["training_speedup_vs_sequential"],
               "reconstruction_speedup": stacked["phase_speedup_vs_sequential"].get("reconstruction"),
               "alignment_speedup": stacked["phase_speedup_vs_sequential"].get("alignment"),
               "round_speedup": stacked["speedup_vs_sequential"],
               "max_abs_diff_vs_sequential": diff, "identical_to_sequential": diff == 0.0,
               "citable": mode == "full" and setting == MODES["full"]
                          and not any(r["unit_drift_flagged"] for r in rows)}
    config = {"quick": quick, **setting, "rounds_timed": repeats, "warm_up_rounds": 1, "seed": seed,
              "batch_size": cfg.batch_size, "upload_fraction": cfg.upload_fraction, "clustering": cfg.clustering,
              "weighting": cfg.weighting, "client_init": cfg.client_init, "threads": 1,
              "data": "adult_like (veilbench.datasets.registry): the first clients x records_per_client label-0 "
                      "rows split IID, test = every later row, standardised on the training normals",
              "test_records": int(fed.x_test.shape[0]),
              "model": "tabular AE 14-256-64-16 mirrored (spec §3.1)",
              "unit": "CPU seconds of one sequential reconstruction step (one client, one batch of 50: forward, "
                      "backward, Adam)",
              "timing": "process CPU time, one torch/BLAS thread; the unit is re-timed before and after every timed "
                        f"round; rows whose unit drifted more than {MAX_UNIT_DRIFT:.0%} are flagged"}
    return {"benchmark": "gca_tabular", "mode": mode, "config": config, "rows": rows, "summary": summary}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 clients x 150 records, 1 + 1 epochs, 1 timed round")
    parser.add_argument("--out", default=None, help="output JSON (default reports/bench/gca_tabular.json; "
                                                    "--quick: reports/bench/quick/gca_tabular.json)")
    args = parser.parse_args(argv)
    out = args.out or str(ROOT / "reports" / "bench" / ("quick" if args.quick else "") / "gca_tabular.json")
    report = measure(quick=args.quick)
    write_json(out, report)
    for row in report["rows"]:
        print(f"{row['engine']:>10}: {row['cpu_seconds_per_round']:.2f} CPU-s/round "
              f"(training {row['training_cpu_seconds_per_round']:.2f}, {row['training_speedup_vs_sequential']:.2f}x "
              f"sequential), drift {row['unit_drift']:.2f}", flush=True)
    print(f"max|dtheta| vs sequential: {report['summary']['max_abs_diff_vs_sequential']:.1e} -> {out}")
    return report


if __name__ == "__main__":
    main()
