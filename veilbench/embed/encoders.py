"""Generic encoders used by the ``embed`` stage, all scikit-learn transformers.

=================== ============================================================================
name                what it computes (fit on training rows only)
=================== ============================================================================
``raw``             the features unchanged
``standardize``     (x − μ)/s per feature (s = 1 where a feature is constant)
``pca``             standardise, then project on the top ``dim`` principal axes; with the option
                    ``standardize: false`` centre only: ``x ↦ (x − μ) V`` with ``V`` (p × dim) the
                    top eigenvectors of the training covariance (the spec's public PCA of pixels/255,
                    anchor-noise.md §2, §8: the features keep their own scales)
``kernel_pca``      standardise, then RBF kernel PCA with bandwidth γ = 1/median(‖x_i − x_j‖²)
``umap``            standardise, then UMAP to ``dim`` dimensions (imported lazily: numba compiles on first use)
``random_orthogonal`` standardise, then x ↦ x Q with Q (p × dim) the first columns of a Haar matrix
``sentence``        (text data sets only, in the ``embed`` stage) all-MiniLM-L6-v2 offline,
                    unit-norm 384-d rows (:func:`veilbench.embed.text.encode_texts`)
=================== ============================================================================
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.decomposition import PCA, KernelPCA
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler

from veilbench.linalg.distances import sq_distances
from veilbench.linalg.procrustes import haar_orthogonal
from veilbench.random import stream
from veilbench.validation import ValidationError


class RandomOrthogonalProjection(TransformerMixin, BaseEstimator):
    """x ↦ x Q with Q (p × dim) = the first ``dim`` columns of a Haar-random orthogonal p × p matrix."""

    def __init__(self, dim: int = 16, random_state: int | None = None):
        self.dim = dim
        self.random_state = random_state

    def fit(self, X: np.ndarray, y: Any = None) -> RandomOrthogonalProjection:
        p = X.shape[1]
        if self.dim > p:
            raise ValidationError(f"dim: must be ≤ the number of features ({p}), got {self.dim}")
        self.components_ = haar_orthogonal(p, self.random_state)[:, : self.dim]
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(X) @ self.components_


class MedianRBFKernelPCA(TransformerMixin, BaseEstimator):
    """Kernel PCA with an RBF kernel whose γ = 1/median squared pairwise distance of the training rows."""

    def __init__(self, dim: int = 16, random_state: int | None = None, max_median_rows: int = 1000):
        self.dim = dim
        self.random_state = random_state
        self.max_median_rows = max_median_rows

    def fit(self, X: np.ndarray, y: Any = None) -> MedianRBFKernelPCA:
        rng = stream(0 if self.random_state is None else self.random_state, "embed.kpca-median-rows")
        sub = X[rng.choice(X.shape[0], size=min(X.shape[0], self.max_median_rows), replace=False)]
        sq = sq_distances(sub, sub)
        med = float(np.median(sq[np.triu_indices_from(sq, 1)])) if sub.shape[0] > 1 else 1.0
        self.gamma_ = 1.0 / med if med > 0 else 1.0
        self.kpca_ = KernelPCA(n_components=self.dim, kernel="rbf", gamma=self.gamma_, random_state=self.random_state)
        self.kpca_.fit(X)
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:
        return self.kpca_.transform(X)


def _umap(dim: int, seed: int, **options: Any) -> Any:
    import umap  # lazy: numba compiles on the first fit

    return umap.UMAP(n_components=dim, random_state=seed, n_jobs=1, **options)


ENCODERS = ("raw", "standardize", "pca", "kernel_pca", "umap", "random_orthogonal")

#: Options an encoder takes besides ``dim`` and the seed (``embeddings.<name>.options`` in
#: params.yaml), with their types; ``umap`` takes ``umap.UMAP``'s keyword arguments instead.
ENCODER_OPTIONS: dict[str, dict[str, type]] = {"pca": {"standardize": bool}}


def make_encoder(name: str, dim: int = 32, seed: int = 0, **options: Any) -> Any:
    """Return an unfitted scikit-learn transformer for encoder ``name`` (see module table)."""
    if name not in ENCODERS:
        raise ValidationError(f"encoder: must be one of {list(ENCODERS)}, got {name!r}")
    if name == "raw":
        return FunctionTransformer()
    if dim < 1:
        raise ValidationError(f"dim: must be ≥ 1, got {dim}")
    if name != "umap":
        accepted = ENCODER_OPTIONS.get(name, {})
        for key, value in options.items():
            if key not in accepted or not isinstance(value, accepted[key]):
                raise ValidationError(f"options.{key}: encoder {name!r} takes {sorted(accepted) or 'no options'}"
                                      f"{f' ({accepted[key].__name__})' if key in accepted else ''}, got {value!r}")
    scaler = StandardScaler()
    if name == "standardize":
        return scaler
    if name == "pca":
        pca = PCA(n_components=dim, random_state=seed)
        return make_pipeline(scaler, pca) if options.get("standardize", True) else pca
    if name == "kernel_pca":
        return make_pipeline(scaler, MedianRBFKernelPCA(dim=dim, random_state=seed))
    if name == "random_orthogonal":
        return make_pipeline(scaler, RandomOrthogonalProjection(dim=dim, random_state=seed))
    return make_pipeline(scaler, _umap(dim, seed, **options))


def fit_encode(
    name: str, X_train: np.ndarray, X_test: np.ndarray, dim: int = 32, seed: int = 0, **options: Any
) -> tuple[np.ndarray, np.ndarray]:
    """Fit encoder ``name`` on ``X_train`` (n × p) and return (Z_train (n × k), Z_test (m × k))."""
    if name not in ("raw", "standardize") and dim > X_train.shape[1] and name != "kernel_pca":
        raise ValidationError(f"dim: must be ≤ the number of features ({X_train.shape[1]}) for {name}, got {dim}")
    enc = make_encoder(name, dim=dim, seed=seed, **options)
    Z_train = np.asarray(enc.fit_transform(X_train), dtype=np.float64)
    Z_test = np.asarray(enc.transform(X_test), dtype=np.float64)
    return Z_train, Z_test
