r"""Spectral clustering from a similarity (Gram) matrix and its agreement with labels.

Ng–Jordan–Weiss spectral clustering (ScoreShield spec §5.3.2):

* affinity A = clip(t(Ĝ), 0, 1) with A_ii = 0, the transform t being ``"shift"``:
  (1 + Ĝ)/2 (default) or ``"relu"``: max(Ĝ, 0);
* normalised affinity M = D^{−½} A D^{−½} (D = diag(A 1), degrees floored at 1e-12), i.e. the
  normalised Laplacian L = I − M; the k eigenvectors of the largest eigenvalues of M (smallest
  of L) form U (n × k);
* rows of U normalised to unit length, then k-means (seeded).

Agreement: NMI (arithmetic-mean normalisation, scikit-learn's default) and adjusted Rand index.
"""

from __future__ import annotations

import numpy as np

from veilbench.validation import ValidationError, check_array, check_labels


def spectral_clustering_from_gram(
    gram: np.ndarray, n_clusters: int, seed: int = 0, transform: str = "shift", n_init: int = 10
) -> np.ndarray:
    """Cluster labels (n,) of the n items of a symmetric similarity matrix ``gram`` (n × n)."""
    from sklearn.cluster import KMeans

    g = check_array(gram, "gram", ndim=2)
    n = g.shape[0]
    if g.shape != (n, n):
        raise ValidationError(f"gram: expected a square matrix, got shape {g.shape}")
    if not 1 <= n_clusters <= n:
        raise ValidationError(f"n_clusters: must lie in [1, {n}], got {n_clusters}")
    if transform == "shift":
        a = (1.0 + g) / 2.0
    elif transform == "relu":
        a = np.maximum(g, 0.0)
    else:
        raise ValidationError(f"transform: must be one of ['relu', 'shift'], got {transform!r}")
    a = np.clip((a + a.T) / 2.0, 0.0, 1.0)
    np.fill_diagonal(a, 0.0)
    d = 1.0 / np.sqrt(np.maximum(a.sum(axis=1), 1e-12))
    m = a * d[:, None] * d[None, :]
    _, vec = np.linalg.eigh(m)
    u = vec[:, -n_clusters:]
    u /= np.maximum(np.linalg.norm(u, axis=1, keepdims=True), 1e-12)
    km = KMeans(n_clusters=n_clusters, n_init=n_init, random_state=seed).fit(u)
    return km.labels_.astype(np.int64)


def clustering_agreement(labels_true: np.ndarray, labels_pred: np.ndarray) -> dict[str, float]:
    """``{"nmi": …, "ari": …}`` between true and predicted labels (both (n,))."""
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    yt = check_labels(labels_true, "labels_true")
    yp = check_labels(labels_pred, "labels_pred", n=yt.size)
    return {"nmi": float(normalized_mutual_info_score(yt, yp)), "ari": float(adjusted_rand_score(yt, yp))}
