"""Clustering backends and the inverse-count weights (spec §4.2–§4.3)."""

import numpy as np
import pytest

from veilbench.gca.clustering import BACKENDS, fit_centroids, inverse_count_weights, soft_kmeans, uniform_weights
from veilbench.validation import ValidationError


def _blobs(seed=0):
    rng = np.random.default_rng(seed)
    centers = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    sizes = np.array([60, 30, 10])
    z = np.vstack([c + 0.3 * rng.standard_normal((n, 2)) for c, n in zip(centers, sizes)])
    return z, centers, sizes


@pytest.mark.parametrize("backend", BACKENDS)
def test_backends_recover_separated_blobs(backend):
    z, centers, sizes = _blobs()
    cent = fit_centroids(z, 3, backend, seed=0)
    order = np.argsort(-cent.counts)
    assert np.allclose(cent.mu[order], centers, atol=0.3)
    assert np.allclose(cent.counts[order], sizes, atol=0.5)
    assert cent.counts.sum() == pytest.approx(z.shape[0])


def test_gmm_diag_covariance_also_works():
    z, centers, _ = _blobs(1)
    cent = fit_centroids(z, 3, "gmm", seed=0, covariance_type="diag", reg_covar=0.1)
    assert cent.mu.shape == (3, 2)


def test_soft_kmeans_is_a_fixed_point_of_its_update():
    z, centers, _ = _blobs(2)
    mu, counts = soft_kmeans(z, centers + 0.5, temperature=1.0)
    d2 = ((z[:, None, :] - mu[None]) ** 2).sum(-1)
    r = np.exp(-(d2 - d2.min(1, keepdims=True)))
    r /= r.sum(1, keepdims=True)
    assert np.allclose(mu, (r.T @ z) / r.sum(0)[:, None], atol=1e-3)
    assert np.allclose(counts, r.sum(0), atol=1e-2)


def test_empty_components_are_dropped():
    from sklearn.exceptions import ConvergenceWarning

    z = np.repeat(np.array([[0.0, 0.0], [5.0, 5.0]]), 20, axis=0)
    with pytest.warns(ConvergenceWarning):  # sklearn: fewer distinct points than clusters
        cent = fit_centroids(z, 4, "kmeans", seed=0)
    assert cent.mu.shape[0] + cent.n_dropped == 4
    assert np.all(cent.counts > 0)


def test_inverse_weights_formula_hand_case():
    counts = np.array([10.0, 30.0, 60.0])
    # N_bar = 100/3; w~ = [3.333, 1.111, 0.556]; mean = 1.6667
    w_tilde = (100 / 3) / counts
    expected = w_tilde / (w_tilde.mean() + 1e-6)
    w = inverse_count_weights(counts)
    assert np.allclose(w, expected)
    assert w.mean() == pytest.approx(1.0, abs=1e-5)
    assert np.all(np.diff(w) < 0)


def test_inverse_weights_clip_at_w_max_before_normalising():
    counts = np.array([1.0, 100.0, 100.0, 100.0])
    w = inverse_count_weights(counts, w_max=6.0)
    w_tilde = np.minimum(6.0, counts.mean() / counts)
    assert w_tilde[0] == 6.0
    assert np.allclose(w, w_tilde / (w_tilde.mean() + 1e-6))


def test_uniform_weights():
    assert np.array_equal(uniform_weights(np.array([1.0, 9.0])), [1.0, 1.0])


@pytest.mark.parametrize(
    "call,field",
    [
        (lambda: fit_centroids(np.zeros((5, 2)), 6, "gmm"), "n_clusters"),
        (lambda: fit_centroids(np.zeros((5, 2)), 2, "dbscan"), "backend"),
        (lambda: inverse_count_weights(np.array([-1.0, 2.0])), "counts"),
        (lambda: inverse_count_weights(np.array([1.0]), w_max=0.0), "w_max"),
        (lambda: soft_kmeans(np.zeros((4, 2)), np.zeros((2, 2)), temperature=0.0), "temperature"),
    ],
)
def test_bad_input_names_field(call, field):
    with pytest.raises(ValidationError, match=field):
        call()
