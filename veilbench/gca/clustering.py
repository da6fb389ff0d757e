r"""GCA server side: clustering backends and inverse-count weights (spec §4.2–§4.3).

Each backend maps pooled codes ``Z`` ``(U, D_z)`` to centroids :math:`\mu` ``(K', D_z)`` and
support counts :math:`N` ``(K',)``:

* ``gmm``: Gaussian mixture (k-means++ means, EM ≤ 200 iterations, tol 1e-3); :math:`\mu_k` =
  component means, :math:`N_k = \sum_n \gamma_{nk}` (soft responsibilities);
* ``kmeans`` (10 inits) and ``minibatch_kmeans`` (batch 4,096, 10 inits): cluster means and hard
  sizes;
* ``soft_kmeans``: :math:`r_{nk} = \mathrm{softmax}_k(-\|z_n - \mu_k\|^2 / T)`,
  :math:`\mu_k \leftarrow \sum_n r_{nk} z_n / \sum_n r_{nk}`, from K-means (10 inits), until the
  largest centroid shift < 1e-4 or 200 iterations; :math:`N_k = \sum_n r_{nk}`.

Components with :math:`N_k \le 10^{-6}` are dropped ("broadcast the non-empty components").

Inverse-count weights (γ = 1, w_max = 6, ε = 1e-6):
:math:`\hat N_k = \max(N_k, \varepsilon)`, :math:`\bar N = \mathrm{mean}_k \hat N_k`,
:math:`\tilde w_k = \min(w_{max}, (\bar N/\hat N_k)^\gamma)`,
:math:`w_k = \tilde w_k / (\mathrm{mean}_j \tilde w_j + \varepsilon)`; uniform ablation :math:`w_k = 1`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.special import softmax

from veilbench.linalg.distances import sq_distances
from veilbench.validation import ValidationError, check_array, check_in_range

Backend = Literal["gmm", "kmeans", "soft_kmeans", "minibatch_kmeans"]
BACKENDS: tuple[str, ...] = ("gmm", "kmeans", "soft_kmeans", "minibatch_kmeans")
EMPTY_COUNT = 1e-6


@dataclass(frozen=True)
class Centroids:
    """Broadcast of one round: non-empty centroids ``mu`` (K', D_z), counts ``counts`` (K',)."""

    mu: np.ndarray
    counts: np.ndarray
    n_dropped: int


def soft_kmeans(
    z: np.ndarray, init: np.ndarray, temperature: float = 1.0, max_iter: int = 200, tol: float = 1e-4
) -> tuple[np.ndarray, np.ndarray]:
    """Soft K-means from centroids ``init`` (K, D); returns ``(mu (K, D), counts (K,))``."""
    z = check_array(z, "z", ndim=2)
    mu = check_array(init, "init", ndim=2).copy()
    temperature = check_in_range(temperature, "temperature", 0.0, None, low_inclusive=False)
    r = softmax(-sq_distances(z, mu) / temperature, axis=1)
    for _ in range(max_iter):
        mass = r.sum(0)
        new = np.where(mass[:, None] > 0, (r.T @ z) / np.maximum(mass, 1e-300)[:, None], mu)
        shift = float(np.max(np.linalg.norm(new - mu, axis=1)))
        mu = new
        r = softmax(-sq_distances(z, mu) / temperature, axis=1)
        if shift < tol:
            break
    return mu, r.sum(0)


def fit_centroids(
    z: np.ndarray,
    n_clusters: int,
    backend: Backend = "gmm",
    seed: int = 0,
    covariance_type: Literal["full", "diag"] = "full",
    reg_covar: float = 1e-6,
    gmm_n_init: int = 1,
    temperature: float = 1.0,
) -> Centroids:
    """Fit ``backend`` with ``n_clusters`` components to ``z`` ``(U, D_z)`` and drop empty ones."""
    from sklearn.cluster import KMeans, MiniBatchKMeans
    from sklearn.mixture import GaussianMixture

    z = check_array(z, "z", ndim=2).astype(np.float64)
    k = int(n_clusters)
    if not 1 <= k <= z.shape[0]:
        raise ValidationError(f"n_clusters: must lie in [1, {z.shape[0]}] (number of codes), got {n_clusters}")
    if backend == "gmm":
        gmm = GaussianMixture(
            k, covariance_type=covariance_type, reg_covar=reg_covar, n_init=gmm_n_init, max_iter=200,
            tol=1e-3, init_params="k-means++", random_state=seed,
        ).fit(z)
        mu, counts = gmm.means_, gmm.predict_proba(z).sum(0)
    elif backend in ("kmeans", "soft_kmeans"):
        km = KMeans(k, n_init=10, random_state=seed).fit(z)
        mu, counts = km.cluster_centers_, np.bincount(km.labels_, minlength=k).astype(np.float64)
        if backend == "soft_kmeans":
            mu, counts = soft_kmeans(z, mu, temperature)
    elif backend == "minibatch_kmeans":
        km = MiniBatchKMeans(k, batch_size=4096, n_init=10, random_state=seed).fit(z)
        mu, counts = km.cluster_centers_, np.bincount(km.labels_, minlength=k).astype(np.float64)
    else:
        raise ValidationError(f"backend: must be one of {BACKENDS}, got {backend!r}")
    keep = counts > EMPTY_COUNT
    return Centroids(mu[keep], counts[keep], int((~keep).sum()))


def inverse_count_weights(
    counts: np.ndarray, gamma: float = 1.0, w_max: float = 6.0, eps: float = 1e-6
) -> np.ndarray:
    """Mean-one inverse-support weights ``(K',)`` from counts ``(K',)`` (formula in the module doc)."""
    n = check_array(counts, "counts", ndim=1)
    if np.any(n < 0):
        raise ValidationError(f"counts: must be non-negative, got min {n.min()}")
    w_max = check_in_range(w_max, "w_max", 0.0, None, low_inclusive=False)
    n_hat = np.maximum(n, eps)
    w_tilde = np.minimum(w_max, (n_hat.mean() / n_hat) ** gamma)
    return w_tilde / (w_tilde.mean() + eps)


def uniform_weights(counts: np.ndarray) -> np.ndarray:
    """Ablation: :math:`w_k = 1` for every non-empty component, ``(K',)``."""
    return np.ones(check_array(counts, "counts", ndim=1).shape[0])


WEIGHTINGS: tuple[str, ...] = ("inverse", "uniform")


def centroid_weights(counts: np.ndarray, weighting: Literal["inverse", "uniform"]) -> np.ndarray:
    """The server's broadcast weights ``(K',)`` for support counts ``(K',)``: :func:`inverse_count_weights`
    (``"inverse"``, the paper's) or :func:`uniform_weights` (``"uniform"``, the ablation). The one
    weighting switch of every GCA engine."""
    if weighting == "inverse":
        return inverse_count_weights(counts)
    if weighting == "uniform":
        return uniform_weights(counts)
    raise ValidationError(f"weighting: must be one of {WEIGHTINGS}, got {weighting!r}")
