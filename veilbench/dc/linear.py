r"""Linear integration of anchor representations: MPP, GEP, ODC, LKI (spec §2.1–§2.4).

Every method learns ``G(k) ∈ R^{d̃(k)×d̂}`` from the anchor IRs ``Ã(k)`` (``na × d̃(k)``) and maps a
party's rows by ``g_k(x) = x G(k)`` (rows are samples).

* **MPP** (Imakura et al., spec §2.1): ``Z = U[:, :d̂]`` from the thin SVD of
  ``Acat = [Ã(1), …, Ã(K)]``, ``G(k) = Ã(k)^+ Z``.
* **GEP** (Kawakami et al., spec §2.2): ``(AcatᵀAcat) g = μ D g`` with
  ``D = blockdiag(Ã(k)ᵀÃ(k))``; the ``d̂`` largest ``μ``; ``gᵀDg = 1``; ``G(k)`` = block ``k`` rows.
* **ODC** (Nosaka et al., spec §2.3): ``Z = Ã(1)``, ``G(k) = P(Ã(k)ᵀ Z)`` (polar factor, i.e. the
  orthogonal Procrustes solution); needs ``d̃(k) = d̂``.
* **LKI** (Suetake et al., Thm 1, spec §2.4): ``Q(k) = orth(Ã(k))``, ``Z = `` top-``d̂`` left
  singular vectors of ``W_Q = [Q(1), …, Q(K)]``, ``G(k) = Ã(k)^+ Z``. Optimal objective
  ``K d̂ − Σ_{j≤d̂} σ_j(W_Q)²`` is stored as ``objective_``.

Example (parties differing by an invertible map integrate to the same features up to rotation)::

    >>> from veilbench.random import stream
    >>> rng = stream(0, "example"); a = rng.normal(size=(50, 3)); m = rng.normal(size=(3, 3))
    >>> lki = LKI().fit([a, a @ m])
    >>> bool(np.allclose(lki.transform(a, 0), lki.transform(a @ m, 1)))
    True
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.linalg as sla

from veilbench.dc._base import BaseIntegrator, check_anchor_reps
from veilbench.linalg.procrustes import orthogonal_procrustes
from veilbench.validation import ValidationError


def orth(m: np.ndarray) -> np.ndarray:
    """Orthonormal basis of Col(m) (n × r): thin-SVD ``U`` for singular values > max(shape)·eps·s_max."""
    u, s, _ = np.linalg.svd(m, full_matrices=False)
    if s.size == 0 or s[0] == 0:
        return u[:, :0]
    tol = max(m.shape) * np.finfo(float).eps * s[0]
    return u[:, : int(np.sum(s > tol))]


class _MatrixIntegrator(BaseIntegrator):
    """Linear ``g_k(x) = x G(k)``.

    Subclasses set ``G_`` (list of ``d̃(k) × d̂``) and, except GEP, the target ``Z_`` (na × d̂).
    """

    def __init__(self, n_components: int | None = None):
        self.n_components = n_components

    def _apply(self, x: np.ndarray, party: int) -> np.ndarray:
        return x @ self.G_[party]


class MPP(_MatrixIntegrator):
    """Minimum perturbation problem with ``C = I`` (spec §2.1)."""

    def fit(self, anchor_reps: Sequence[np.ndarray], anchor_labels: np.ndarray | None = None) -> MPP:
        """Fit on ``[Ã(1), …, Ã(K)]`` (each ``na × d̃(k)``); ``anchor_labels`` is ignored."""
        reps, d_hat = check_anchor_reps(anchor_reps, self.n_components)
        u, _, _ = np.linalg.svd(np.hstack(reps), full_matrices=False)
        if u.shape[1] < d_hat:
            raise ValidationError(f"n_components: d̂ must be ≤ Σ d̃(k) = {u.shape[1]}, got {d_hat}")
        self.Z_ = u[:, :d_hat]
        self.G_ = [np.linalg.pinv(a) @ self.Z_ for a in reps]
        self._set_shapes(reps, d_hat)
        return self


class LKI(_MatrixIntegrator):
    """Linear kernel integration (Thm 1, spec §2.4); rank-revealing, so no rank condition."""

    def fit(self, anchor_reps: Sequence[np.ndarray], anchor_labels: np.ndarray | None = None) -> LKI:
        """Fit on ``[Ã(1), …, Ã(K)]``; ``anchor_labels`` is ignored."""
        reps, d_hat = check_anchor_reps(anchor_reps, self.n_components)
        w_q = np.hstack([orth(a) for a in reps])
        u, s, _ = np.linalg.svd(w_q, full_matrices=False)
        if s.size < d_hat:
            raise ValidationError(f"n_components: d̂ must be ≤ Σ rank Ã(k) = {s.size}, got {d_hat}")
        self.Z_ = u[:, :d_hat]
        self.singular_values_ = s[:d_hat]
        self.objective_ = float(len(reps) * d_hat - np.sum(s[:d_hat] ** 2))
        self.G_ = [np.linalg.pinv(a) @ self.Z_ for a in reps]
        self._set_shapes(reps, d_hat)
        return self


class GEP(_MatrixIntegrator):
    """Generalised-eigenvalue DC (spec §2.2): ``eigh(AcatᵀAcat, D)``, ``d̂`` largest eigenvalues.

    ``D`` must be positive definite (every ``Ã(k)`` of full column rank). When its Cholesky
    factorisation fails or its condition number exceeds ``max_condition``, a ridge
    ``ridge·tr(D)/dim(D)·I`` is added and ``ridge_used_`` is set to that amount (else 0.0).
    """

    def __init__(self, n_components: int | None = None, ridge: float = 1e-8, max_condition: float = 1e12):
        super().__init__(n_components)
        self.ridge = ridge
        self.max_condition = max_condition

    def fit(self, anchor_reps: Sequence[np.ndarray], anchor_labels: np.ndarray | None = None) -> GEP:
        """Fit on ``[Ã(1), …, Ã(K)]``; ``anchor_labels`` is ignored."""
        reps, d_hat = check_anchor_reps(anchor_reps, self.n_components)
        acat = np.hstack(reps)
        if acat.shape[1] < d_hat:
            raise ValidationError(f"n_components: d̂ must be ≤ Σ d̃(k) = {acat.shape[1]}, got {d_hat}")
        d = sla.block_diag(*[a.T @ a for a in reps])
        eig_d = np.linalg.eigvalsh(d)
        self.ridge_used_ = 0.0
        if eig_d[0] <= eig_d[-1] / self.max_condition:
            self.ridge_used_ = self.ridge * float(np.trace(d)) / d.shape[0]
            d = d + self.ridge_used_ * np.eye(d.shape[0])
        _, vecs = sla.eigh(acat.T @ acat, d)
        g = vecs[:, ::-1][:, :d_hat]
        bounds = np.cumsum([0] + [a.shape[1] for a in reps])
        self.G_ = [g[bounds[k] : bounds[k + 1]] for k in range(len(reps))]
        self._set_shapes(reps, d_hat)
        return self


class ODC(_MatrixIntegrator):
    """Orthonormal DC (spec §2.3): target ``Z = Ã(1)``, ``G(k)`` the orthogonal Procrustes solution."""

    def fit(self, anchor_reps: Sequence[np.ndarray], anchor_labels: np.ndarray | None = None) -> ODC:
        """Fit on ``[Ã(1), …, Ã(K)]`` (all ``d̃(k) = d̂``); ``anchor_labels`` is ignored."""
        reps, d_hat = check_anchor_reps(anchor_reps, self.n_components)
        for k, a in enumerate(reps):
            if a.shape[1] != d_hat:
                raise ValidationError(f"anchor_reps[{k}]: ODC needs d̃(k) = d̂ = {d_hat} columns, got {a.shape[1]}")
        self.Z_ = reps[0]
        self.G_ = [orthogonal_procrustes(a, self.Z_) for a in reps]
        self._set_shapes(reps, d_hat)
        return self
