r"""Benchmark: CPU seconds per GCA and FedAvg round at the paper's FMNIST setting, against the FLOP floor.

**The round.** Pair 2/8 of ``params.paper.yaml`` (``paper-gca-fmnist-2v8``: the conv AE 128/128/16,
20 clients of 300 normals, batch 50, GCA's 5 reconstruction + 5 alignment epochs with an evaluation
of every client on the validation and test pools (2 000 records) after each reconstruction epoch,
the vision GMM with 100 inits; FedAvg's 10 local epochs and one evaluation of the global model),
run by :func:`veilbench.gca.simulator.run_protocol` for ``rounds`` rounds; the CPU time of round r
is read at the end of round r (the runner's per-round checkpoint hook, which here saves nothing),
so the victim's extra epochs after the last round are not in it. The first round is a warm-up.

**The floor.** FLOPs per round (``torch.utils.flop_counter.FlopCounterMode`` on one record of each
kind of pass, times the records that pass sees in a round: reconstruction steps (forward + backward of
the AE), alignment steps (of the encoder), scoring passes (forward of the AE: every client on the
pools and its own shard, per evaluation), uploads (encoder forward)), each divided by the sustained
rate of that same pass on this AE measured in the same run (a batch-50 training step with Adam, a
batch-50 encoder step, a :data:`~veilbench.gca.training.SCORE_BATCH`-row scoring pass, repeated
for a few CPU seconds). ``ratio = measured / floor``: the overhead beyond the AE's own arithmetic
(the GMM, thresholds, ROC AUCs, data movement, Python). Target ≤ 1.3.

**The tabular engines.** :func:`bench_gca_tabular.measure`: GCA rounds on the tabular AE, client loop vs
:class:`~veilbench.gca.vectorized_gca.StackedGCAClients`.

Timing follows :mod:`measure`: one torch/BLAS thread, process CPU time, the unit (one sequential
training step of the conv AE at batch 50) re-timed before and after every round; rows whose unit
drifted more than 20 % are flagged and must not be cited. Run alone on the machine.

Usage: ``python benchmarks/bench_gca_rounds.py [--quick] [--out FILE]`` → ``reports/bench/gca_rounds.json``.
``--quick``: 4 clients of 60 records, 1 + 1 epochs, 2 rounds, 5 GMM inits, a 200-record pool (a smoke
test, never cited; ``reports/bench/quick/``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import tasks.numerics  # noqa: E402,F401  (the project's CPU code-path pins, before torch)
from measure import MAX_UNIT_DRIFT, drift_summary  # noqa: E402

SWEEP = "paper-gca-fmnist-2v8"
SEED = 100


def paper_setting(quick: bool) -> dict[str, Any]:
    """The 2/8 sweep's cell options from ``params.paper.yaml`` (``--quick``: shrunk)."""
    import yaml

    opts = dict(yaml.safe_load((ROOT / "params.paper.yaml").read_text())["sweeps"][SWEEP]["params"])
    opts.update(device="cpu")
    if quick:
        opts.update(n_clients=4, recon_epochs=1, align_epochs=1, local_epochs=1, gmm_n_init=5)
    return opts


def federation(opts: dict[str, Any], quick: bool):
    """The federation of pair 2/8 on Fashion-MNIST as the pipeline builds it (``prepare`` as
    ``params.paper.yaml``'s ``fmnist`` data set, then the GCA family's own data step)."""
    from tasks.paths import data_roots
    from veilbench.datasets import load_dataset, prepare_dataset
    from veilbench.gca import family

    data = load_dataset("fashion_mnist", data_roots=data_roots())
    prep = prepare_dataset(data, test_size=0.142857, n_parties=20, scheme="iid", alpha=0.5, max_records=None, seed=0)
    arrays = prep.arrays()
    params = family.Params(method="gca", **opts)
    fed = family._data({"prepare": arrays, "embed": arrays}, params, SEED).federation
    if quick:
        from veilbench.gca.federation import Federation

        fed = Federation([c[:60] for c in fed.clients], fed.x_test[:100], fed.y_test[:100], fed.spec,
                         x_val=fed.x_val[:100], y_val=fed.y_val[:100])
    return fed, params


def pass_flops(model) -> dict[str, float]:
    """FLOPs per record of each pass: ``train`` (AE forward + backward of the loss), ``align``
    (encoder forward + backward), ``score`` (AE forward), ``encode`` (encoder forward)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    x = torch.zeros(2, model.input_dim)

    def count(fn) -> float:
        with FlopCounterMode(display=False) as counter:
            fn()
        return counter.get_total_flops() / x.shape[0]

    with torch.no_grad():
        score, encode = count(lambda: model(x)), count(lambda: model.encode(x))
    train = count(lambda: ((x - model(x)) ** 2).sum(1).mean().backward())
    align = count(lambda: (model.encode(x) ** 2).sum(1).mean().backward())
    model.zero_grad(set_to_none=True)
    return {"train": train, "align": align, "score": score, "encode": encode}


def pass_rates(model, batch: int, flops: dict[str, float], seconds: float) -> dict[str, float]:
    """Sustained FLOP/s of each pass on ``model`` (CPU time over ``seconds`` of repeats)."""
    import copy

    import torch

    from veilbench.gca.training import SCORE_BATCH

    m = copy.deepcopy(model)
    rec = torch.optim.Adam(m.parameters(), lr=1e-3, foreach=True)
    enc = torch.optim.Adam(m.encoder.parameters(), lr=1e-3, foreach=True)
    xb, xs = torch.rand(batch, m.input_dim) * 2 - 1, torch.rand(SCORE_BATCH, m.input_dim) * 2 - 1

    def train():
        rec.zero_grad(set_to_none=True)
        ((xb - m(xb)) ** 2).sum(1).mean().backward()
        rec.step()

    def align():
        enc.zero_grad(set_to_none=True)
        (m.encode(xb) ** 2).sum(1).mean().backward()
        enc.step()

    def score():
        with torch.no_grad():
            m(xs)

    def encode():
        with torch.no_grad():
            m.encode(xs)

    out = {}
    for name, fn, rows in (("train", train, batch), ("align", align, batch), ("score", score, SCORE_BATCH),
                           ("encode", encode, SCORE_BATCH)):
        fn()
        t, n = time.process_time(), 0
        while time.process_time() - t < seconds:
            fn()
            n += 1
        out[name] = flops[name] * rows * n / (time.process_time() - t)
    return out


def round_flops(method: str, fed, cfg) -> dict[str, float]:
    """Records per pass in one round of ``method`` (the multipliers of :func:`pass_flops`)."""
    sizes = [int(n) for n in fed.sizes]
    pool = fed.x_test.shape[0] + fed.x_val.shape[0]
    if method == "gca":
        upload = sum(max(1, int(cfg.upload_fraction * n)) for n in sizes)
        return {"train": cfg.recon_epochs * sum(sizes), "align": cfg.align_epochs * sum(sizes),
                "score": cfg.recon_epochs * sum(pool + n for n in sizes) + cfg.align_epochs * (pool + sizes[0]),
                "encode": upload}
    return {"train": cfg.local_epochs * sum(sizes), "align": 0, "score": pool + sum(sizes), "encode": 0}


class _RoundClock:
    """A runner's checkpoint hook that saves nothing and records the CPU time at the end of each round."""

    def __init__(self) -> None:
        self.ends: list[float] = [time.process_time()]

    def load(self):
        return None

    def save(self, round_: int, state: dict) -> None:
        self.ends.append(time.process_time())


def measure_rounds(method: str, fed, params, rounds: int, unit) -> dict[str, Any]:
    """CPU seconds of each round of ``method`` (module doc) with the unit before and after."""
    from dataclasses import replace

    from veilbench.gca.simulator import run_protocol

    cfg = replace(params.fed_config(), rounds=rounds, attack_extra_epochs=0)
    before = [unit() for _ in range(3)]
    clock = _RoundClock()
    run_protocol(method, fed, cfg, SEED, checkpoints=clock)
    after = [unit() for _ in range(3)]
    per_round = [b - a for a, b in zip(clock.ends, clock.ends[1:])]
    return {"round_cpu_s": per_round, "unit_before": before, "unit_after": after}


def run(quick: bool = False, rounds: int | None = None, rate_seconds: float | None = None) -> dict[str, Any]:
    import numpy as np
    import torch

    torch.set_num_threads(1)
    opts = paper_setting(quick)
    fed, params = federation(opts, quick)
    rounds = rounds or (2 if quick else 3)
    rate_seconds = rate_seconds or (0.5 if quick else 5.0)
    from veilbench.gca.federation import initial_model

    model = initial_model(fed.spec, SEED)
    flops = pass_flops(model)
    rates = pass_rates(model, params.batch_size, flops, rate_seconds)
    unit_model = initial_model(fed.spec, SEED)
    unit_opt = torch.optim.Adam(unit_model.parameters(), lr=1e-3, foreach=True)
    xb = torch.from_numpy(fed.clients[0][: params.batch_size])

    def unit() -> float:
        t = time.process_time()
        unit_opt.zero_grad(set_to_none=True)
        ((xb - unit_model(xb)) ** 2).sum(1).mean().backward()
        unit_opt.step()
        return time.process_time() - t

    rows = []
    for method in ("gca", "fedavg"):
        cfg = params.fed_config()
        counts = round_flops(method, fed, cfg)
        floor = sum(counts[k] * flops[k] / rates[k] for k in counts)
        res = measure_rounds(method, fed, params, rounds, unit)
        timed = res["round_cpu_s"][1:] or res["round_cpu_s"]
        checkpoints = [float(np.median(res["unit_before"])), float(np.median(res["unit_after"]))]
        drift = drift_summary(checkpoints, res["unit_before"] + res["unit_after"])
        measured = float(np.median(timed))
        rows.append({
            "method": method, "rounds_run": rounds, "round_cpu_s": res["round_cpu_s"],
            "measured_cpu_s_per_round": measured,
            "round_flops": {k: counts[k] * flops[k] for k in counts},
            "floor_cpu_s_per_round": floor,
            "floor_by_pass_s": {k: counts[k] * flops[k] / rates[k] for k in counts},
            "ratio_to_floor": measured / floor,
            "estimated_cpu_h_per_100_rounds": measured * 100 / 3600,
            **drift,
        })
    tabular = None
    if not quick:
        from bench_gca_tabular import measure as tabular_measure

        tabular = tabular_measure(quick=False)
    return {
        "benchmark": "gca_rounds", "quick": quick, "sweep": SWEEP, "seed": SEED,
        "setting": {k: v for k, v in opts.items() if k not in ("device",)},
        "clients": len(fed.clients), "records_per_client": [int(n) for n in fed.sizes],
        "pool_records": int(fed.x_test.shape[0] + fed.x_val.shape[0]),
        "flops_per_record": flops, "rates_flop_per_s": rates,
        "rows": rows, "tabular": tabular, "target_ratio": 1.3, "max_unit_drift": MAX_UNIT_DRIFT,
        "machine": {"cpu": platform.processor() or platform.machine(), "python": platform.python_version(),
                    "torch": torch.__version__, "threads": torch.get_num_threads(),
                    "load_average": list(os.getloadavg())},
        "command": "python benchmarks/bench_gca_rounds.py" + (" --quick" if quick else ""),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    out = Path(args.out or ROOT / "reports" / "bench" / ("quick/gca_rounds.json" if args.quick else "gca_rounds.json"))
    report = run(args.quick, args.rounds)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    for row in report["rows"]:
        print(f"{row['method']}: {row['measured_cpu_s_per_round']:.1f} CPU-s per round, floor "
              f"{row['floor_cpu_s_per_round']:.1f}, ratio {row['ratio_to_floor']:.2f}"
              + (" (unit drift flagged)" if row.get("unit_drift_flagged") else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
