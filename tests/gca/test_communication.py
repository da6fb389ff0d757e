"""Communication accounting reproduces the spec's Tables 11–12 and matches the simulator's byte counter."""

import csv

import numpy as np
import pytest

from veilbench.gca import communication as comm
from veilbench.gca.models import tabular_ae, conv_ae, count_params

TABLE_11_GCA_UP = {"Academic": 0.024, "Adult": 0.150, "Bank": 0.242, "Credit": 1.730, "MAGIC": 0.086,
                   "CIFAR-10": 1.953, "FMNIST": 1.794}
TABLE_12 = {
    "Academic": (0.030, 0.037, 0.050, 0.076, 3.567),
    "Adult": (0.163, 0.176, 0.202, 0.254, 6.508),
    "Bank": (0.255, 0.268, 0.294, 0.345, 6.587),
    "Credit": (1.763, 1.795, 1.860, 1.990, 19.207),
    "MAGIC": (0.093, 0.099, 0.112, 0.138, 2.902),
    "CIFAR-10": (2.735, 3.517, 5.081, 8.209, 51.761),
    "FMNIST": (2.393, 2.992, 4.190, 6.586, 51.057),
}
REDUCTIONS = {
    "Academic": (99.15, 98.97, 98.61, 97.88), "Adult": (97.49, 97.29, 96.90, 96.10),
    "Bank": (96.13, 95.94, 95.54, 94.76), "Credit": (90.82, 90.65, 90.32, 89.64),
    "MAGIC": (96.81, 96.59, 96.14, 95.25), "CIFAR-10": (94.72, 93.20, 90.18, 84.14),
    "FMNIST": (95.31, 94.14, 91.79, 87.10),
}


@pytest.mark.parametrize("name", sorted(TABLE_12))
def test_table_12_to_three_decimals(name):
    cfg = comm.PAPER_CONFIGS[name]
    got = [round(comm.gca_mib(cfg, k), 3) for k in comm.K_GRID] + [round(comm.fl_mib(cfg), 3)]
    assert got == list(TABLE_12[name])
    assert round(comm.gca_bytes(cfg, 10)[0] / comm.MIB, 3) == TABLE_11_GCA_UP[name]
    assert [round(100 * comm.reduction(cfg, k), 2) for k in comm.K_GRID] == list(REDUCTIONS[name])


def test_headline_reduction_range():
    red = [comm.reduction(c, k) for c in comm.PAPER_CONFIGS.values() for k in comm.K_GRID]
    assert (round(100 * min(red), 2), round(100 * max(red), 2)) == (84.14, 99.15)


def test_paper_parameter_counts_come_from_the_models():
    d_x = {"Academic": 22, "Adult": 14, "Bank": 15, "Credit": 29, "MAGIC": 5}
    for name, d in d_x.items():
        assert comm.PAPER_CONFIGS[name].n_params == count_params(tabular_ae(d, np.random.default_rng(0)))
    assert comm.PAPER_CONFIGS["CIFAR-10"].n_params == count_params(conv_ae((3, 32, 32), np.random.default_rng(0)))


def test_reduced_breast_cancer_example():
    cfg = comm.CommConfig(n_clients=5, n_uploads=70, latent_dim=16, n_params=40_602)
    assert sum(comm.gca_bytes(cfg, 4)) == 5_840
    assert sum(comm.fl_bytes(cfg)) == 1_624_080
    assert round(100 * comm.reduction(cfg, 4), 2) == 99.64


def test_simulator_byte_counter_equals_formula():
    from veilbench.gca.simulator import FedConfig, run_protocol

    from .helpers import tiny_federation

    fed = tiny_federation((20, 24, 28))
    cfg = FedConfig(rounds=1, local_epochs=1, recon_epochs=1, align_epochs=1, upload_fraction=0.5,
                    n_clusters=2, clustering="kmeans", attack_extra_epochs=0)
    gca = run_protocol("gca", fed, cfg, 0)
    fl = run_protocol("fedavg", fed, cfg, 0)
    c = comm.config_for(fed.sizes, 0.5, 16, count_params(tabular_ae(6, np.random.default_rng(0))))
    assert c.n_uploads == 10 + 12 + 14
    assert gca.info["n_dropped_components"] == [0]
    assert (gca.bytes_up_per_round, gca.bytes_down_per_round) == comm.gca_bytes(c, 2)
    assert (fl.bytes_up_per_round, fl.bytes_down_per_round) == comm.fl_bytes(c)


def test_write_communication_csv(tmp_path):
    path = tmp_path / "gca" / "communication.csv"
    rows = comm.write_communication_csv(path)
    with open(path) as fh:
        read = list(csv.DictReader(fh))
    assert len(read) == len(rows) == 7 * 5
    adult_fl = next(r for r in read if r["dataset"] == "Adult" and r["method"] == "parameter_sharing")
    assert float(adult_fl["mib_per_round"]) == pytest.approx(6.508, abs=5e-4)
    adult_k10 = next(r for r in read if r["dataset"] == "Adult" and r["K"] == "10")
    assert np.isclose(float(adult_k10["reduction"]), 0.9749, atol=5e-5)
