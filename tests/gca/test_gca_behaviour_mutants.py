"""run_gca's bookkeeping that its bit-for-bit protocol tests cannot see: integer step counts, a resumed
run that really continues after the saved round, a client state that must match the clients, and the
engine and thread options reaching the client loop (their results are the same bits by design)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from veilbench.gca import gca
from veilbench.gca.simulator import FedConfig
from veilbench.gca.training import flat_params

from .helpers import tiny_federation

CFG = FedConfig(rounds=2, recon_epochs=1, align_epochs=1, batch_size=8, upload_fraction=0.3, n_clusters=2,
                clustering="kmeans", attack_extra_epochs=1)


@pytest.fixture(scope="module")
def fed():
    return tiny_federation((12, 16, 20))


class _Recorder:
    """Checkpoints (the two methods run_gca calls) that keep a deep copy of every saved state in memory
    (as RoundCheckpoints writes it to disk) and resume from ``start`` (a ``(round, state)`` pair or None)."""

    def __init__(self, start=None):
        self.start, self.saved = start, []

    def load(self):
        return self.start

    def save(self, round_, state):
        self.saved.append((round_, copy.deepcopy(state)))


def test_local_step_counts_are_integers_and_the_server_log_is_complete(fed):
    run = gca.run_gca(fed, CFG, 1)
    assert run.local_steps.dtype == np.int64
    assert run.local_steps.tolist() == [2 * 2 * int(np.ceil(n / 8)) for n in (12, 16, 20)]
    assert set(run.info) == {"n_dropped_components", "n_clusters_used", "centroid_counts", "centroid_weights"}
    assert run.info["n_dropped_components"] == [0, 0]


def test_a_resumed_run_continues_after_the_saved_round_and_saves_only_the_later_ones(fed):
    first = _Recorder()
    whole = gca.run_gca(fed, CFG, 2, checkpoints=first)
    assert [r for r, _ in first.saved] == [1, 2]
    resumed = _Recorder(start=first.saved[0])
    again = gca.run_gca(fed, CFG, 2, checkpoints=resumed)
    assert [r for r, _ in resumed.saved] == [2]
    assert np.array_equal(again.accuracy, whole.accuracy) and np.array_equal(again.victim_codes, whole.victim_codes)
    # a store that holds the last round: nothing is trained again, only the victim's extra epochs run
    done = _Recorder(start=first.saved[-1])
    final = gca.run_gca(fed, CFG, 2, checkpoints=done)
    assert done.saved == []
    assert np.array_equal(final.victim_codes, whole.victim_codes)


def test_a_client_state_for_other_clients_is_refused(fed):
    three = gca.make_clients(fed, CFG, 0)
    two = gca.make_clients(tiny_federation((12, 16)), CFG, 0)
    with pytest.raises(ValueError):
        three.load_state_dict(two.state_dict())


def test_the_engine_option_reaches_the_clients(fed, monkeypatch):
    from veilbench.gca import vectorized_gca

    made = []

    class Spy(vectorized_gca.StackedGCAClients):
        def __init__(self, *args, **kwargs):
            made.append(True)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(vectorized_gca, "StackedGCAClients", Spy)
    vec = gca.run_gca(fed, CFG, 4, engine="vectorized")
    assert made
    assert np.array_equal(vec.victim_codes, gca.run_gca(fed, CFG, 4).victim_codes)


def test_client_threads_reach_the_client_loop_and_the_evaluation(fed, monkeypatch):
    """client_threads = 2: the clients' epochs and the all-client evaluations are mapped on 2 threads
    (the one-model alignment diagnostic has a single client)."""
    seen, evaluated = [], []
    real_map, real_eval = gca.client_map, gca.evaluate_pools

    def map_spy(fn, items, threads=1):
        seen.append(threads)
        return real_map(fn, items, threads)

    def eval_spy(models, xs, pools, quantile, threads=1):
        evaluated.append((len(models), threads))
        return real_eval(models, xs, pools, quantile, threads)

    monkeypatch.setattr(gca, "client_map", map_spy)
    monkeypatch.setattr(gca, "evaluate_pools", eval_spy)
    gca.run_gca(fed, FedConfig(**{**CFG.__dict__, "client_threads": 2}), 4)
    assert seen and set(seen) == {2}
    assert {t for n, t in evaluated if n == 3} == {2} and {n for n, _ in evaluated} == {1, 3}


def test_the_server_fits_at_most_one_cluster_per_uploaded_code(fed):
    """Three clients upload one code each (ρ small); asking for 4 clusters fits 3."""
    cfg = FedConfig(**{**CFG.__dict__, "upload_fraction": 0.01, "n_clusters": 4})
    run = gca.run_gca(fed, cfg, 5)
    assert run.info["n_clusters_used"] == [3, 3]
    assert run.last_upload.codes.shape[0] == 3


def test_gmm_server_uses_the_configured_regularisation_and_restarts(monkeypatch):
    """With the GMM backend the run is still the spec's reference loop to the bit, and the clustering
    receives the configured covariance type, reg_covar and number of restarts."""
    from .test_gca_protocol import CFG as PROTOCOL_CFG
    from .test_gca_protocol import SIZES, reference_gca

    calls = []
    real = gca.fit_centroids

    def spy(codes, k, backend, seed, covariance_type="full", reg_covar=1e-6, gmm_n_init=1):
        calls.append((backend, covariance_type, reg_covar, gmm_n_init))
        return real(codes, k, backend, seed, covariance_type, reg_covar, gmm_n_init)

    monkeypatch.setattr(gca, "fit_centroids", spy)
    fed = tiny_federation(SIZES, validation=True)
    cfg = FedConfig(**{**PROTOCOL_CFG.__dict__, "clustering": "gmm", "covariance_type": "diag", "reg_covar": 0.05,
                       "gmm_n_init": 3, "rounds": 1, "attack_extra_epochs": 0})
    run = gca.run_gca(fed, cfg, 6)
    assert calls == [("gmm", "diag", 0.05, 3)]
    ref = reference_gca(fed, cfg, 6)
    assert run.info["centroid_counts"] == ref["counts"]
    for model, want in zip(run.final_models, ref["params"], strict=True):
        assert np.array_equal(flat_params(model), want)
