"""The GCA section of the paper report reads cells still running from their per-round checkpoints:
the rounds trend selects on validation within the first R' rounds, the paper's protocol is the best
test accuracy within them, and the claim's comparison uses the rounds both cells have reached."""

from __future__ import annotations

import numpy as np

from tasks.paper_gca_report import _curve_trend, section
from veilbench.checkpoints import RoundCheckpoints

PARAMS = {"sweeps": {"paper-gca-fmnist-2v8": {"family": "gca", "params": {
    "rounds": 100, "normal_classes": [2], "anomaly_classes": [8], "latent_channels": 16, "n_clients": 20,
    "recon_epochs": 2, "align_epochs": 2, "local_epochs": 4, "upload_fraction": 0.1, "n_clusters": 10,
    "covariance_type": "diag", "gmm_n_init": 100, "attack_starts": 100, "attack_max_steps": 1000}}}}


def _curve(rounds: int, ppr: int, test_acc, val_auc) -> np.ndarray:
    r = np.repeat(np.arange(1, rounds + 1), ppr)
    e = np.tile(np.arange(1, ppr + 1), rounds)
    acc, auc = np.asarray(test_acc, float), np.asarray(val_auc, float)
    return np.c_[r, e, acc, auc - 0.01, acc, auc]


def test_the_trend_selects_on_validation_within_each_prefix_and_the_paper_protocol_on_test():
    # 3 rounds x 2 points: validation AUC peaks at point 2 (round 1), test accuracy at point 5 (round 3)
    curve = _curve(3, 2, [0.5, 0.6, 0.55, 0.52, 0.9, 0.4], [0.6, 0.8, 0.7, 0.75, 0.65, 0.79])
    done, rows = _curve_trend(curve, rounds=(1, 2))
    assert done == 3 and [r["rounds"] for r in rows] == [1, 2, 3]
    assert rows[0]["accuracy"] == rows[2]["accuracy"] == 0.6  # the validation pick of rounds 1..r is point 2
    assert [r["accuracy_paper"] for r in rows] == [0.6, 0.6, 0.9]  # the best test point within the rounds


def test_running_cells_are_read_from_their_checkpoints(tmp_path):
    sweep = "paper-gca-fmnist-2v8"
    base = tmp_path / "data" / "checkpoints" / "release" / sweep
    gca = _curve(3, 2, [0.5, 0.6, 0.62, 0.64, 0.66, 0.7], [0.6, 0.7, 0.72, 0.74, 0.76, 0.8])
    fedavg = _curve(2, 1, [0.55, 0.65], [0.65, 0.75])
    RoundCheckpoints(base / "method=gca" / "k" / "seed100").save(3, {"curve": gca, "_cpu_seconds": 7200.0,
                                                                        "_cpu_clock": "process", "_cpu_partial": False})
    RoundCheckpoints(base / "method=fedavg" / "k" / "seed100").save(2, {"curve": fedavg, "_cpu_seconds": 3600.0})  # clock unnamed
    text = "\n".join(section(tmp_path, sweep, PARAMS))
    assert "| gca | 100 | running, round 3 of 100 | 3 |" in text and "| 2.00 |" in text
    assert "| ≥ 1.00 (one thread's) |" in text, "a count saved by a one-thread clock is a lower bound"
    assert "| fedavg | 100 | running, round 2 of 100 | 2 |" in text
    assert "at R = 2 (both cells still running" in text  # compared where both have got to
    # R' = 2: GCA's validation pick is point 4 (test AUC 0.73), FedAvg's point 2 (0.74)
    assert "| 2 | 0.730 | 0.740 | -0.010 |" in text

