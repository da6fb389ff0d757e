"""Inverse-support vs uniform centroid weighting (spec §4.3) on an unbalanced federation.

The federation has one large client whose records lie in one region of input space and two small
clients in another, so the pooled uploads form one well-supported and one poorly-supported
cluster. The paper's inverse weighting must (a) broadcast a larger weight to the poorly-supported
centroid, (b) change the trained models relative to the uniform ablation, and (c) pull the
minority's codes towards their centroid more strongly than uniform weights do. A GCA that always
used uniform weights fails (a) and (b); one that ignored the weights in the loss fails (b) and (c).
"""

from dataclasses import replace

import numpy as np
import pytest

from veilbench.gca.clustering import centroid_weights, inverse_count_weights
from veilbench.gca.gca import alignment_epoch, alignment_loss, run_gca
from veilbench.gca.models import AESpec
from veilbench.gca.simulator import FedConfig, Federation, initial_model, make_optimizer
from veilbench.gca.training import flat_params
from veilbench.validation import ValidationError

D = 6
CFG = FedConfig(rounds=2, recon_epochs=1, align_epochs=2, batch_size=20, upload_fraction=0.5, n_clusters=2,
                clustering="kmeans", attack_extra_epochs=0)


def unbalanced_federation(seed: int = 0, sizes=(90, 12, 12)) -> Federation:
    """Client 0: records around +3·e (large); clients 1, 2: around −3·e (small); e a unit vector."""
    rng = np.random.default_rng(seed)
    e = np.ones(D) / np.sqrt(D)
    clients = [(rng.standard_normal((n, D)) * 0.3 + (3.0 if i == 0 else -3.0) * e).astype(np.float32)
               for i, n in enumerate(sizes)]
    x_test = np.vstack([rng.standard_normal((20, D)) * 0.3 + 3.0 * e, rng.standard_normal((20, D)) * 2.0])
    return Federation(clients, x_test.astype(np.float32), np.r_[np.zeros(20), np.ones(20)].astype(np.int64),
                      AESpec("mlp", D))


@pytest.fixture(scope="module")
def runs():
    fed = unbalanced_federation()
    return {w: run_gca(fed, replace(CFG, weighting=w), seed=3) for w in ("inverse", "uniform")}


def test_inverse_weighting_favours_the_poorly_supported_centroid(runs):
    for counts, w in zip(runs["inverse"].info["centroid_counts"], runs["inverse"].info["centroid_weights"]):
        counts, w = np.asarray(counts), np.asarray(w)
        assert counts.max() > 2.0 * counts.min(), counts  # the federation is unbalanced
        np.testing.assert_allclose(w, inverse_count_weights(counts))
        assert w[counts.argmin()] > 2.0 * w[counts.argmax()]
    for w in runs["uniform"].info["centroid_weights"]:
        assert np.array_equal(w, np.ones(len(w)))


def test_inverse_and_uniform_weighting_train_different_models(runs):
    for a, b in zip(runs["inverse"].final_models, runs["uniform"].final_models):
        assert not np.array_equal(flat_params(a.encoder), flat_params(b.encoder))


def test_inverse_weights_pull_minority_codes_closer_than_uniform():
    """Same start, centroids and mini-batches; only the weights differ: relative to the majority,
    the minority's codes end nearer their centroid under inverse weights."""
    import torch

    from veilbench.gca.clustering import fit_centroids
    from veilbench.gca.training import encode

    fed = unbalanced_federation()
    x = torch.from_numpy(np.vstack(fed.clients))
    minority = torch.from_numpy(np.r_[np.zeros(90, bool), np.ones(24, bool)])
    z0 = encode(initial_model(fed.spec, 0), x)
    cent = fit_centroids(z0, 2, "kmeans", 0)
    mu = torch.as_tensor(cent.mu, dtype=torch.float32)
    after = {}
    for weighting in ("inverse", "uniform"):
        model = initial_model(fed.spec, 0)
        w = torch.as_tensor(centroid_weights(cent.counts, weighting), dtype=torch.float32)
        opt = make_optimizer(model.encoder.parameters(), CFG)
        rng = np.random.default_rng(0)
        for _ in range(3):
            alignment_epoch(model, opt, x, mu, w, 20, rng)
        with torch.no_grad():  # unweighted distance to the nearest centroid: minority over majority
            z = model.encode(x)
            after[weighting] = float(alignment_loss(z[minority], mu, torch.ones(2))
                                     / alignment_loss(z[~minority], mu, torch.ones(2)))
    assert after["inverse"] < 0.95 * after["uniform"], after


def test_unknown_weighting_is_an_error_naming_the_field():
    with pytest.raises(ValidationError, match="weighting"):
        centroid_weights(np.array([1.0, 2.0]), "proportional")
