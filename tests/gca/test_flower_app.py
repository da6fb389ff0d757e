"""Flower apps: FedAvg and GCA through Flower's simulation agree with the simulator within seed noise.

``flwr`` is an optional extra (``.[flower]``): the simulation tests skip only when it is absent.
One Flower simulation (one Ray start) runs FedAvg and then GCA on the same three SuperNodes.
"""

import importlib

import numpy as np
import pytest

from veilbench.gca.models import AESpec
from veilbench.gca.simulator import FedConfig, Federation, evaluate_clients, initial_model, run_protocol
from veilbench.validation import ValidationError

SEEDS = range(6)
SEED = 0  # the Flower run's seed (one of SEEDS: same initial model, different mini-batch order)
CFG = FedConfig(rounds=3, local_epochs=3, recon_epochs=3, align_epochs=1, batch_size=10, upload_fraction=0.5,
                n_clusters=2)


def test_flower_module_imports_lazily():
    module = importlib.import_module("veilbench.gca.flower_app")
    assert callable(module.run_flower_simulation)
    assert callable(module.make_server_app) and callable(module.make_client_app)
    with pytest.raises(ValidationError, match="method"):
        module.run_flower_simulation(["fedprox"], None, CFG, 0)


def hard_federation(seed: int = 0, d: int = 6, sizes=(40, 40, 40), m: int = 60) -> Federation:
    """Normals on a 2-d plane in R^d with noise 0.3; anomalies the same plus N(0, 0.5²) off-plane:
    not separable, so accuracy/AUC respond to training (AUC ≈ 0.70 untrained, ≈ 0.90 after 3 rounds)."""
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(rng.standard_normal((d, 2)))[0].T
    n = sum(sizes) + m
    normal = rng.standard_normal((n, 2)) @ basis + 0.3 * rng.standard_normal((n, d))
    anom = rng.standard_normal((m, 2)) @ basis + 0.3 * rng.standard_normal((m, d)) + 0.5 * rng.standard_normal((m, d))
    cuts = np.cumsum((0, *sizes))
    clients = [normal[cuts[i] : cuts[i + 1]].astype(np.float32) for i in range(len(sizes))]
    x_test = np.vstack([normal[cuts[-1] :], anom]).astype(np.float32)
    return Federation(clients, x_test, np.r_[np.zeros(m), np.ones(m)].astype(np.int64), AESpec("mlp", d))


@pytest.fixture(scope="module")
def flower_runs(ray_lock):
    pytest.importorskip("flwr")  # optional extra; everything else here runs without it
    from veilbench.gca.flower_app import run_flower_simulation

    return run_flower_simulation(["fedavg", "gca"], hard_federation(), CFG, SEED)


def _band(values: np.ndarray, m_test: int) -> tuple[float, float]:
    """(mean, tolerance) over seeds: 4 sample standard deviations plus one test record (1/m)."""
    return float(values.mean()), float(4.0 * values.std(ddof=1) + 1.0 / m_test)


@pytest.mark.slow  # a Ray start and 2 × 6 simulator runs
@pytest.mark.parametrize("method", ["fedavg", "gca"])
def test_flower_agrees_with_the_simulator_within_seed_noise(flower_runs, method):
    fed = hard_federation()
    flower = flower_runs[["fedavg", "gca"].index(method)]
    sims = [run_protocol(method, fed, CFG, s) for s in SEEDS]
    # same evaluation protocol: FedAvg one point per round, GCA one per reconstruction epoch
    assert flower.points_per_round == sims[0].points_per_round
    np.testing.assert_array_equal(flower.rounds, sims[0].rounds)
    xs, xt = fed.tensors()
    untrained = evaluate_clients([initial_model(fed.spec, SEED)], xs, xt, fed.y_test, CFG.quantile)
    for k, metric in enumerate(("accuracy", "auc")):
        final = np.array([getattr(r, metric)[-1] for r in sims])
        mean, tol = _band(final, xt.shape[0])
        assert abs(getattr(flower, metric)[-1] - mean) <= tol, (method, metric, getattr(flower, metric), final)
        # the band is narrow enough to tell a trained federation from its untrained start
        assert abs(untrained[k] - mean) > tol, (method, metric, untrained[k], mean, tol)


def test_deployed_setups_read_run_config_and_node_file(tmp_path):
    from types import SimpleNamespace

    from veilbench.gca.flower_app import config_from_run_config, deployed_setups

    fed = hard_federation()
    path = tmp_path / "client1.npz"
    np.savez(path, x_train=fed.clients[1], x_test=fed.x_test, y_test=fed.y_test)
    run_config = {"method": "gca", "num-clients": 3, "input-dim": 6, "seed": 7, "local-epochs": 2, "n-clusters": 5}
    assert config_from_run_config(run_config) == FedConfig(local_epochs=2, n_clusters=5)
    client_setup, server_setup = deployed_setups()
    ctx = SimpleNamespace(run_config=run_config, node_config={"partition-id": 1, "data-path": str(path)})
    s = client_setup(ctx)
    assert (s.client, s.n_clients, s.seed, s.cfg.n_clusters) == (1, 3, 7, 5)
    np.testing.assert_array_equal(s.x.numpy(), fed.clients[1])
    assert server_setup(ctx).spec.input_dim == 6
    np.savez(path, x_train=fed.clients[1][:, :5], x_test=fed.x_test, y_test=fed.y_test)
    with pytest.raises(ValidationError, match="features"):
        client_setup(ctx)
