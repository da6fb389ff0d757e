r"""Per-party obfuscation functions ``f_k : R^{1×d} → R^{1×d̃}`` (spec §1.3).

Party ``k`` fits ``f_k`` on its own ``X(k)`` (n_k × d) and applies ``.transform`` to its data, the
anchor ``A`` and the shared test set [lit].

=============== ==================================================================================
kind            ``f_k``
=============== ==================================================================================
``pca``         ``x ↦ (x − mean_k) V_k``, the top-``d̃`` principal axes of ``X(k)`` [paper]
``kpca``        standardise with the party's own mean/sd, then RBF kernel PCA with the median
                heuristic (``veilbench.embed.encoders.MedianRBFKernelPCA``: ``γ = 1/median ‖·‖²``;
                the spec's exact formula is an assumption) [paper/assume]
``umap``        UMAP with per-party ``metric ~ U{correlation, cosine, euclidean}``,
                ``n_neighbors ~ U{2..7}``, ``min_dist ~ U[0, 0.8)``, ``random_state = seed`` [paper]
``orthogonal``  ``x ↦ x Q_k``, ``Q_k`` the first ``d̃`` columns of a Haar orthogonal d × d matrix
                (``veilbench.embed.encoders.RandomOrthogonalProjection``) [assume]
``random``      data-free reference: every call returns i.i.d. N(0, 1) rows of width ``d̃``
                (:class:`RandomRepresentation`), one row per input row, never reading the
                values: the release an analyst gets from publishing nothing useful [assume]
=============== ==================================================================================

Per-party seeds are ``seed·1000 + k`` (spec §1.3 [assume]); see :func:`party_seed`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.decomposition import PCA
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from veilbench.embed.encoders import MedianRBFKernelPCA, RandomOrthogonalProjection
from veilbench.random import as_rng
from veilbench.validation import ValidationError

OBFUSCATIONS = ("pca", "kpca", "umap", "orthogonal", "random")
UMAP_METRICS = ("correlation", "cosine", "euclidean")


class RandomRepresentation(TransformerMixin, BaseEstimator):
    """Data-free ``f_k``: ``transform(X)`` is an independent (len(X) × dim) i.i.d. N(0, 1) draw.

    Only the number of rows of ``X`` is read. The draws come from one generator seeded by
    ``random_state`` at ``fit``, so a fitted party's successive calls (its records, the anchor, the
    test set) are independent of each other and of the data, and reproducible given the seed.
    """

    def __init__(self, dim: int = 16, random_state: int | None = None):
        self.dim = dim
        self.random_state = random_state

    def fit(self, X: np.ndarray, y: Any = None) -> RandomRepresentation:
        self.rng_ = as_rng(self.random_state, "dc.random-representation")
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:
        return self.rng_.standard_normal((len(X), self.dim))


def party_seed(seed: int, party: int) -> int:
    """Seed of party ``party`` in trial ``seed``: ``seed·1000 + party``."""
    return int(seed) * 1000 + int(party)


def draw_umap_settings(seed: int) -> dict[str, Any]:
    """One party's UMAP settings (spec §1.3): metric, n_neighbors ∈ {2..7}, min_dist ∈ [0, 0.8)."""
    rng = as_rng(seed, "dc.umap-settings")
    return {
        "metric": str(rng.choice(UMAP_METRICS)),
        "n_neighbors": int(rng.integers(2, 8)),
        "min_dist": float(rng.uniform(0.0, 0.8)),
    }


def make_obfuscator(kind: str, d_tilde: int, n_rows: int, n_features: int, seed: int) -> Any:
    """Unfitted transformer ``f_k`` of ``kind`` for a party with ``n_rows`` records of ``n_features``.

    Raises ``ValidationError`` when ``d̃`` exceeds what ``kind`` can produce
    (PCA: ``min(n_rows, d)``; kernel PCA: ``n_rows``; orthogonal: ``d``; UMAP: ``n_rows − 2``).
    """
    limits = {"pca": min(n_rows, n_features), "kpca": n_rows, "orthogonal": n_features, "umap": n_rows - 2,
              "random": 100_000}
    if kind not in limits:
        raise ValidationError(f"obfuscation: must be one of {list(OBFUSCATIONS)}, got {kind!r}")
    if not 1 <= d_tilde <= limits[kind]:
        raise ValidationError(
            f"d_tilde: must lie in [1, {limits[kind]}] for {kind} on a party with {n_rows} × {n_features} data, "
            f"got {d_tilde}"
        )
    if kind == "pca":
        return PCA(n_components=d_tilde, svd_solver="full", random_state=seed)
    if kind == "kpca":
        return make_pipeline(StandardScaler(), MedianRBFKernelPCA(dim=d_tilde, random_state=seed))
    if kind == "orthogonal":
        return RandomOrthogonalProjection(dim=d_tilde, random_state=seed)
    if kind == "random":
        return RandomRepresentation(dim=d_tilde, random_state=seed)
    import umap  # lazy: numba compiles on the first fit in a process

    return umap.UMAP(n_components=d_tilde, random_state=seed, n_jobs=1, **draw_umap_settings(seed))


def obfuscate_parties(
    kind: str, d_tilde: int, party_data: list[np.ndarray], shared: list[np.ndarray], seed: int
) -> tuple[list[np.ndarray], list[list[np.ndarray]], list[dict[str, Any]]]:
    """Fit ``f_k`` on each ``party_data[k]`` (n_k × d) and apply it to that data and to each ``shared`` array.

    Returns ``(X̃(k) per party, [f_k(S) for S in shared] per party, per-party settings)``.
    """
    own, others, settings = [], [], []
    for k, x in enumerate(party_data):
        f = make_obfuscator(kind, d_tilde, x.shape[0], x.shape[1], party_seed(seed, k))
        own.append(np.asarray(f.fit_transform(x), dtype=np.float64))
        others.append([np.asarray(f.transform(s), dtype=np.float64) for s in shared])
        settings.append(draw_umap_settings(party_seed(seed, k)) if kind == "umap" else {})
    return own, others, settings
