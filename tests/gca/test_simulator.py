"""Simulator protocols: determinism, aggregation-rule identities, GCA alignment mechanics."""

import numpy as np
import pytest

from veilbench.gca.communication import upload_size
from veilbench.gca.gca import alignment_epoch, alignment_loss, run_gca
from veilbench.gca.simulator import FedConfig, Federation, make_optimizer, run_protocol
from veilbench.gca.training import flat_params, set_flat_params
from veilbench.validation import ValidationError

from .helpers import tiny_federation

FAST = FedConfig(rounds=2, local_epochs=2, recon_epochs=2, align_epochs=1, batch_size=10, upload_fraction=0.5,
                 n_clusters=2, attack_extra_epochs=1)


@pytest.mark.parametrize("method", ["gca", "fedavg", "dpfedavg"])
def test_same_seed_identical_different_seed_differs(method):
    fed = tiny_federation()
    a, b, c = (run_protocol(method, fed, FAST, s) for s in (5, 5, 6))
    assert np.array_equal(a.accuracy, b.accuracy) and np.array_equal(a.auc, b.auc)
    assert np.array_equal(a.victim_params, b.victim_params) and np.array_equal(a.victim_codes, b.victim_codes)
    assert not (np.array_equal(a.victim_params, c.victim_params) and np.array_equal(a.victim_codes, c.victim_codes))


def test_curve_shapes_follow_the_evaluation_protocol():
    fed = tiny_federation()
    gca = run_protocol("gca", fed, FAST, 0)
    fl = run_protocol("fedavg", fed, FAST, 0)
    assert gca.points_per_round == 2 and list(gca.rounds) == [1, 1, 2, 2] and list(gca.epochs) == [1, 2, 1, 2]
    assert fl.points_per_round == 1 and list(fl.rounds) == [1, 2]
    assert gca.align_accuracy.shape == (2,)
    assert gca.victim_codes.shape == (upload_size(30, 0.5), 16)
    assert np.all((gca.accuracy >= 0) & (gca.accuracy <= 1))


def test_fednova_equals_fedavg_on_equal_shards_and_differs_otherwise():
    equal = tiny_federation((30, 30, 30))
    assert np.allclose(run_protocol("fednova", equal, FAST, 1).victim_params,
                       run_protocol("fedavg", equal, FAST, 1).victim_params, atol=1e-6)
    unequal = tiny_federation((10, 30, 60))
    nova = run_protocol("fednova", unequal, FAST, 1)
    avg = run_protocol("fedavg", unequal, FAST, 1)
    assert len(set(nova.local_steps.tolist())) == 3
    assert not np.allclose(nova.victim_params, avg.victim_params)


def test_fedprox_with_zero_mu_is_fedavg():
    from dataclasses import replace

    fed = tiny_federation()
    avg = run_protocol("fedavg", fed, FAST, 2)
    prox0 = run_protocol("fedprox", fed, replace(FAST, prox_mu=0.0), 2)
    prox = run_protocol("fedprox", fed, replace(FAST, prox_mu=1.0), 2)
    assert np.array_equal(avg.victim_params, prox0.victim_params)
    assert not np.allclose(avg.victim_params, prox.victim_params)


def test_dpfedavg_without_noise_and_clipping_is_fedavg():
    from dataclasses import replace

    fed = tiny_federation()
    avg = run_protocol("fedavg", fed, FAST, 3)
    dp = run_protocol("dpfedavg", fed, replace(FAST, dp_clip=1e9, dp_sigma=0.0), 3)
    assert np.allclose(avg.victim_params, dp.victim_params, atol=1e-5)
    assert dp.dp_noise_multiplier == 0.0


def test_set_flat_params_copies():
    import torch

    model = tiny_federation().spec.build(np.random.default_rng(0))
    vec = np.zeros(sum(p.numel() for p in model.parameters()), dtype=np.float32)
    set_flat_params(model, vec)
    with torch.no_grad():
        next(model.parameters()).add_(1.0)
    assert np.all(vec == 0.0)
    assert np.array_equal(flat_params(model) != 0, np.arange(vec.size) < next(model.parameters()).numel())


def test_alignment_loss_hand_case():
    import torch

    z = torch.tensor([[0.0, 0.0], [3.0, 0.0]])
    mu = torch.tensor([[0.0, 1.0], [3.0, 2.0]])
    w = torch.tensor([2.0, 0.5])
    # assignments 0 and 1: (2·1 + 0.5·4)/2
    assert float(alignment_loss(z, mu, w)) == pytest.approx(2.0)


def test_alignment_moves_encoder_only_and_pulls_codes_to_centroids():
    import torch

    fed = tiny_federation()
    model = fed.spec.build(np.random.default_rng(0))
    x = torch.from_numpy(fed.clients[0])
    mu = torch.zeros(2, 16)
    mu[1, 0] = 1.0
    w = torch.tensor([1.0, 1.0])
    dec_before = [p.detach().clone() for p in model.decoder.parameters()]
    enc_before = flat_params(model.encoder)
    with torch.no_grad():
        before = float(alignment_loss(model.encode(x), mu, w))
    opt = make_optimizer(model.encoder.parameters(), FAST)
    rng = np.random.default_rng(0)
    for _ in range(10):
        alignment_epoch(model, opt, x, mu, w, 10, rng)
    with torch.no_grad():
        after = float(alignment_loss(model.encode(x), mu, w))
    assert all(torch.equal(a, b) for a, b in zip(dec_before, model.decoder.parameters()))
    assert not np.array_equal(enc_before, flat_params(model.encoder))
    assert after < 0.5 * before


def test_gca_client_init_shared_vs_independent():
    from dataclasses import replace

    from veilbench.gca.gca import init_client_models

    fed = tiny_federation()
    shared = init_client_models(fed, FAST, 0)
    indep = init_client_models(fed, replace(FAST, client_init="independent"), 0)
    assert np.array_equal(flat_params(shared[0]), flat_params(shared[2]))
    assert not np.array_equal(flat_params(indep[0]), flat_params(indep[2]))


@pytest.mark.parametrize(
    "backend,weighting", [("kmeans", "uniform"), ("soft_kmeans", "inverse"), ("minibatch_kmeans", "inverse")]
)
def test_gca_runs_with_every_backend_and_weighting(backend, weighting):
    from dataclasses import replace

    res = run_gca(tiny_federation(), replace(FAST, rounds=1, clustering=backend, weighting=weighting), 0)
    assert np.all(np.isfinite(res.accuracy)) and res.info["n_clusters_used"] == [2]


def test_single_and_centralized_run():
    fed = tiny_federation()
    single = run_protocol("single", fed, FAST, 0)
    central = run_protocol("centralized", fed, FAST, 0)
    assert single.bytes_up_per_round == 0 and central.local_steps.shape == (1,)
    assert np.all(np.isfinite(single.auc)) and np.all(np.isfinite(central.auc))


@pytest.mark.parametrize(
    "call,field",
    [
        (lambda: run_protocol("fedsgd", tiny_federation(), FAST, 0), "method"),
        (lambda: Federation([], np.zeros((2, 6)), np.array([0, 1]), tiny_federation().spec), "clients"),
        (lambda: Federation([np.zeros((3, 5))], np.zeros((2, 6)), np.array([0, 1]), tiny_federation().spec), "clients"),
        (lambda: Federation([np.zeros((3, 6))], np.zeros((2, 6)), np.array([0]), tiny_federation().spec), "y_test"),
    ],
)
def test_bad_input_names_field(call, field):
    with pytest.raises(ValidationError, match=field):
        call()
