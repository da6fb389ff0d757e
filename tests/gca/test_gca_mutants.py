"""run_gca follows Algorithm 1 call by call: which model, optimiser, shard, centroids and weights each step
gets, in which order, and what the result reports (steps, bytes, per-round server state, the victim's
post-training upload). The helpers it calls are wrapped (recording, then delegating), so a swapped
argument, a skipped epoch or a wrong index shows up as a different call."""

from __future__ import annotations

import math

import numpy as np
import pytest

from veilbench.gca import gca
from veilbench.gca.clustering import centroid_weights
from veilbench.gca.communication import upload_size
from veilbench.gca.simulator import FedConfig
from veilbench.random import stream
from veilbench.validation import ValidationError

from .helpers import tiny_federation

SIZES = (12, 20, 27)
CFG = FedConfig(rounds=2, recon_epochs=2, align_epochs=2, batch_size=8, upload_fraction=0.1, n_clusters=6,
                clustering="kmeans", covariance_type="diag", reg_covar=1e-3, gmm_n_init=2, weighting="inverse",
                quantile=0.6, attack_extra_epochs=2)


def _params(opt) -> set[int]:
    return {id(p) for g in opt.optimizer.param_groups for p in g["params"]}


@pytest.fixture
def traced(monkeypatch):
    """One recorded run: ``(federation, result, calls)`` with calls ``(name, args, output)`` in order.

    Function-scoped on purpose: a mutation tester attributes the run to every test that checks it."""
    fed = tiny_federation(SIZES)
    calls = []
    for name in ("reconstruction_epoch", "alignment_epoch", "upload_codes", "fit_centroids", "evaluate_clients"):
        def wrapped(*args, _fn=getattr(gca, name), _name=name):
            out = _fn(*args)
            calls.append((_name, args, out))
            return out

        monkeypatch.setattr(gca, name, wrapped)
    return fed, gca.run_gca(fed, CFG, 3), calls


def test_calls_follow_algorithm_one(traced):
    _, res, calls = traced
    c = len(SIZES)
    one_round = (["reconstruction_epoch"] * c + ["evaluate_clients"]) * CFG.recon_epochs \
        + ["upload_codes"] * c + ["fit_centroids"] + (["alignment_epoch"] * c + ["evaluate_clients"]) * CFG.align_epochs
    want = one_round * CFG.rounds + ["reconstruction_epoch"] * CFG.attack_extra_epochs + ["upload_codes"]
    assert [name for name, _, _ in calls] == want
    assert res.method == "gca" and res.points_per_round == CFG.recon_epochs


def test_each_client_trains_its_own_model_on_its_own_shard(traced):
    fed, res, calls = traced
    models = res.final_models
    rng = calls[0][1][4]
    rec_opt, al_opt = {}, {}
    per_round = [a for name, a, _ in calls if name in ("reconstruction_epoch", "alignment_epoch")]
    for name, args, _ in calls:
        if name not in ("reconstruction_epoch", "alignment_epoch"):
            continue
        model, opt, x = args[:3]
        i = next(j for j, m in enumerate(models) if m is model)
        assert np.array_equal(x.numpy(), fed.clients[i])
        assert args[-2] == CFG.batch_size and args[-1] is rng
        if name == "reconstruction_epoch":
            assert _params(opt) == {id(p) for p in model.parameters()}
            assert rec_opt.setdefault(i, opt) is opt
        else:
            assert _params(opt) == {id(p) for p in model.encoder.parameters()}
            assert al_opt.setdefault(i, opt) is opt
    assert len(per_round) == CFG.rounds * len(SIZES) * (CFG.recon_epochs + CFG.align_epochs) + CFG.attack_extra_epochs
    # the extra epochs after the last round train the victim (client 0) only
    extra = [a for name, a, _ in calls if name == "reconstruction_epoch"][-CFG.attack_extra_epochs:]
    assert all(a[0] is models[0] and a[1] is rec_opt[0] for a in extra)


def test_steps_are_counted_for_every_epoch_of_the_rounds(traced):
    _, res, _ = traced
    per_epoch = np.array([math.ceil(n / CFG.batch_size) for n in SIZES])
    assert res.local_steps.dtype == np.int64
    assert res.local_steps.tolist() == (CFG.rounds * (CFG.recon_epochs + CFG.align_epochs) * per_epoch).tolist()


def test_server_fits_the_pooled_uploads_and_broadcasts_float32_centroids_and_weights(traced):
    _, res, calls = traced
    import torch

    uploads = [(a, out) for name, a, out in calls if name == "upload_codes"]
    fits = [(a, out) for name, a, out in calls if name == "fit_centroids"]
    aligns = [a for name, a, _ in calls if name == "alignment_epoch"]
    c = len(SIZES)
    n_up = sum(upload_size(n, CFG.upload_fraction) for n in SIZES)
    assert n_up == 5 < CFG.n_clusters
    for r, (args, cent) in enumerate(fits):
        pooled = np.concatenate([out[1] for _, out in uploads[r * c : (r + 1) * c]])
        codes, k, backend, seed, cov, reg, n_init = args
        assert np.array_equal(codes, pooled) and k == n_up  # K = min(n_clusters, U)
        assert (backend, cov, reg, n_init) == ("kmeans", "diag", 1e-3, 2)
        assert isinstance(seed, int) and 0 <= seed < 2**31
        for a in aligns[r * c * CFG.align_epochs : (r + 1) * c * CFG.align_epochs]:
            mu, w = a[3], a[4]
            assert mu.dtype == w.dtype == torch.float32
            assert np.array_equal(mu.numpy(), cent.mu.astype(np.float32))
            assert np.array_equal(w.numpy(), centroid_weights(cent.counts, "inverse").astype(np.float32))
    for i, (args, _) in enumerate(uploads[:-1]):
        assert args[0] is res.final_models[i % c] and args[2] == CFG.upload_fraction
    assert res.info == {
        "n_dropped_components": [out.n_dropped for _, out in fits],
        "n_clusters_used": [n_up] * CFG.rounds,
        "centroid_counts": [out.counts.tolist() for _, out in fits],
        "centroid_weights": [centroid_weights(out.counts, "inverse").tolist() for _, out in fits],
    }
    d_z = res.victim_codes.shape[1]
    assert res.bytes_up_per_round == 4 * n_up * d_z
    k_kept = max(out.mu.shape[0] for _, out in fits)
    assert res.bytes_down_per_round == 4 * c * k_kept * (d_z + 1)
    last = uploads[(CFG.rounds - 1) * c : CFG.rounds * c]
    assert np.array_equal(res.last_upload.codes, np.concatenate([out[1] for _, out in last]))
    assert np.array_equal(res.last_upload.row, np.concatenate([out[0] for _, out in last]))


def test_evaluations_all_clients_after_reconstruction_and_the_victim_after_alignment(traced):
    fed, res, calls = traced
    evals = [(a, out) for name, a, out in calls if name == "evaluate_clients"]
    per_round = CFG.recon_epochs + CFG.align_epochs
    align_acc = []
    for j, (args, out) in enumerate(evals):
        models, xs, xt, y, q = args
        assert np.array_equal(xt.numpy(), fed.x_test) and y is fed.y_test and q == CFG.quantile
        if j % per_round < CFG.recon_epochs:
            assert list(models) == res.final_models and len(xs) == len(SIZES)
        else:
            assert list(models) == res.final_models[:1] and len(xs) == 1
            assert np.array_equal(xs[0].numpy(), fed.clients[0])
            align_acc.append(out[0])
    assert np.array_equal(res.align_accuracy, np.array(align_acc))
    recon = [out for j, (_, out) in enumerate(evals) if j % per_round < CFG.recon_epochs]
    assert np.array_equal(res.accuracy, [o[0] for o in recon]) and np.array_equal(res.auc, [o[1] for o in recon])


def test_victim_codes_are_a_fresh_upload_of_client_zero_after_the_extra_epochs(traced):
    fed, res, calls = traced
    name, args, (idx, codes) = calls[-1]
    assert name == "upload_codes" and args[0] is res.final_models[0]
    assert np.array_equal(args[1].numpy(), fed.clients[0]) and args[2] == CFG.upload_fraction
    assert np.array_equal(res.victim_codes, codes)
    assert np.array_equal(codes, gca.encode(res.final_models[0], args[1][idx]))


def test_upload_is_a_sorted_sample_without_replacement_and_its_codes():
    import torch

    fed = tiny_federation()
    model = fed.spec.build(np.random.default_rng(0))
    x = torch.from_numpy(fed.clients[0])
    idx, codes = gca.upload_codes(model, x, 0.5, np.random.default_rng(4))
    want = np.sort(np.random.default_rng(4).choice(30, size=15, replace=False))
    assert idx.dtype == np.int64 and np.array_equal(idx, want)
    assert np.array_equal(codes, gca.encode(model, x[want]))
    full, _ = gca.upload_codes(model, x, 1.0, np.random.default_rng(5))
    assert np.array_equal(full, np.arange(30))  # every record once
    few, _ = gca.upload_codes(model, x[:, :], 0.01, np.random.default_rng(5))
    assert few.shape == (1,)


def test_client_initial_models_come_from_the_named_streams():
    from veilbench.gca.training import flat_params

    spec = tiny_federation().spec
    shared = gca.client_initial_model(spec, 7, 2, "shared")
    assert np.array_equal(flat_params(shared), flat_params(gca.initial_model(spec, 7)))
    for seed, client in ((7, 2), (7, 0), (8, 2)):
        own = gca.client_initial_model(spec, seed, client, "independent")
        want = spec.build(stream((seed, client), "gca.init-client"))
        assert np.array_equal(flat_params(own), flat_params(want))
    assert not np.array_equal(flat_params(gca.client_initial_model(spec, 7, 2, "independent")),
                              flat_params(gca.client_initial_model(spec, 7, 0, "independent")))
    with pytest.raises(ValidationError, match="^client_init: must be 'shared' or 'independent', got 'own'$"):
        gca.client_initial_model(spec, 7, 2, "own")
