r"""Nyström approximation of NKI for large anchor sets (spec §2.5).

With ``r`` landmark anchors ``J ⊂ [na]`` (the same rows for every party, drawn with ``seed``),
``C_k = κ_k(Ã(k), Ã(k)_J)`` (na × r) and ``W_k = C_k[J]`` (r × r), the kernel is approximated as
``K_k ≈ L_k L_kᵀ`` with ``L_k = C_k W_k^{-1/2}`` (eigenvalues of ``W_k`` below
``rcond·max`` dropped). Writing ``L_k = U_k Σ_k V_kᵀ`` (thin SVD), Woodbury gives

``λ S_k = I − H_k``,  ``H_k = U_k diag(σ²/(σ²+λ)) U_kᵀ``,

so minimising ``tr(Zᵀ λΣ_k S_k Z)`` over ``ZᵀZ = I`` means taking the top-``d̂`` left singular vectors
of ``V = [U_1 diag(σ/√(σ²+λ)), …, U_K diag(…)]`` (na × Σr), after projecting ``V`` onto
``{z : 1ᵀz = 0}`` when ``center=True``. Then ``Γ_k = S_k Z = (Z − H_k Z)/λ`` and

``g_k(x) = φ_k(x) L_kᵀ Γ_k``,  ``φ_k(x) = κ_k(x, Ã(k)_J) W_k^{-1/2}``,

precomputed as ``B_k = W_k^{-1/2} L_kᵀ Γ_k`` (r × d̂). Only ``U_k Σ_k = L_k V_k`` is formed (from the
SVD of the triangular factor of ``L_k``'s QR), and the ``d̂`` columns of ``Z`` as ``V W_{:d̂} S_{:d̂}^{-1}``
from the SVD ``R = U_R S Wᵀ`` of ``V``'s triangular QR factor, so no further na-row matrix is built.
Cost: fit O(K na r² + na (Kr)²) — linear in ``na`` — memory O(na·Kr), and O(r (d̃ + d̂)) per new row. With ``r = na`` (all anchors as landmarks) ``L_k L_kᵀ = K_k``
and ``φ_k(x) L_kᵀ = κ_k(x, Ã(k))``, so the fit equals exact :class:`~veilbench.dc.kernel.NKI`.
Graph regularisation needs the dense ``na × na`` Laplacian and is not offered here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from veilbench.dc._base import BaseIntegrator, check_anchor_reps
from veilbench.dc.kernel import median_gamma, rbf_kernel
from veilbench.random import as_rng
from veilbench.validation import ValidationError, check_in_range


def _inv_sqrt_psd(w: np.ndarray, rcond: float) -> np.ndarray:
    """``W^{-1/2}`` (r × r') restricted to eigenvalues above ``rcond·max``: columns ``v_j/√e_j``."""
    e, v = np.linalg.eigh(0.5 * (w + w.T))
    keep = e > rcond * max(float(e[-1]), 0.0)
    return v[:, keep] / np.sqrt(e[keep])


def _scaled_left_singular_vectors(l: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(U Σ, σ, Vᵀ)`` of the thin SVD ``l = U Σ Vᵀ`` (n × r, n ≥ r), with ``U Σ = l V`` formed from
    ``R = U_R Σ Vᵀ`` of ``l = Q R`` (Householder QR, only ``R`` formed): no division by small ``σ``."""
    _, s, vt = np.linalg.svd(np.linalg.qr(l, mode="r"))
    return l @ vt.T, s, vt


def _top_left_singular_vectors(v: np.ndarray, d_hat: int) -> np.ndarray:
    """The ``d̂`` leading left singular vectors of ``v`` (n × m), as the thin SVD ``v = U S Wᵀ`` gives them.

    With ``v = Q R`` (Householder QR, only ``R`` formed) and ``R = U_R S Wᵀ``, ``U = Q U_R`` and
    ``U[:, :d̂] = v W[:, :d̂] S[:d̂]^{-1}``: the ``n × m`` factors ``Q`` and ``U`` are never formed. When
    ``σ_d̂`` is not above ``m·eps·σ_1`` the leading vectors are taken from the thin SVD of ``v`` itself.
    Each column's sign is fixed so that its entry of largest magnitude is positive (as scikit-learn's
    ``svd_flip``), so the result does not depend on the LAPACK path that computed it.
    """
    r = np.linalg.qr(v, mode="r")
    _, sv, wt = np.linalg.svd(r)
    if sv.size < d_hat:
        raise ValidationError(f"rank: Σ_k rank(L_k) = {sv.size} < d̂ = {d_hat}; raise the Nyström rank")
    if sv[d_hat - 1] <= max(v.shape) * np.finfo(float).eps * sv[0]:
        u = np.linalg.svd(v, full_matrices=False)[0][:, :d_hat]
    else:
        u = (v @ wt[:d_hat].T) / sv[:d_hat]
    return u * np.sign(u[np.argmax(np.abs(u), axis=0), np.arange(d_hat)])


class NystromNKI(BaseIntegrator):
    """NKI (paper objective, C = I, no graph) with a rank-``rank`` Nyström kernel per party.

    Learnt: ``landmarks_`` (r,), ``Z_`` (na × d̂), ``B_`` (list of r × d̂), ``gammas_``.
    """

    def __init__(
        self,
        rank: int = 200,
        n_components: int | None = None,
        gamma: float | Literal["median"] = 1.0,
        lam: float = 1.0,
        center: bool = False,
        rcond: float = 1e-10,
        seed: int | None = 0,
    ):
        self.rank = rank
        self.n_components = n_components
        self.gamma = gamma
        self.lam = lam
        self.center = center
        self.rcond = rcond
        self.seed = seed

    def fit(self, anchor_reps: Sequence[np.ndarray], anchor_labels: np.ndarray | None = None) -> NystromNKI:
        """Fit on ``[Ã(1), …, Ã(K)]``; ``anchor_labels`` is ignored (no graph)."""
        reps, d_hat = check_anchor_reps(anchor_reps, self.n_components, min_extra_rows=int(bool(self.center)))
        n_a = reps[0].shape[0]
        check_in_range(self.rank, "rank", 1, n_a)
        check_in_range(self.lam, "lam", 0.0, None, low_inclusive=False)
        if self.gamma != "median":
            check_in_range(self.gamma, "gamma", 0.0, None, low_inclusive=False)
        self.landmarks_ = np.sort(as_rng(self.seed, "dc.nystrom-landmarks").choice(n_a, size=int(self.rank), replace=False))
        self.gammas_ = [median_gamma(a) if self.gamma == "median" else float(self.gamma) for a in reps]
        factors = []
        for a, g in zip(reps, self.gammas_, strict=True):
            c = rbf_kernel(a, a[self.landmarks_], g)
            w_isqrt = _inv_sqrt_psd(c[self.landmarks_], self.rcond)
            factors.append((w_isqrt, *_scaled_left_singular_vectors(c @ w_isqrt)))
        self.Z_ = _top_left_singular_vectors(self._stacked(factors, n_a), d_hat)
        self.B_ = []
        for w_isqrt, us, s, vt in factors:
            gamma_k = (self.Z_ - us @ ((1.0 / (s**2 + self.lam))[:, None] * (us.T @ self.Z_))) / self.lam
            self.B_.append(w_isqrt @ (vt.T @ (us.T @ gamma_k)))
        self.anchors_ = [a[self.landmarks_] for a in reps]
        self._set_shapes(reps, d_hat)
        return self

    def _stacked(self, factors: list[tuple], n_a: int) -> np.ndarray:
        """``V = [U_1 diag(σ/√(σ²+λ)), …]`` (na × Σr), column-centred when ``center``, built in one array."""
        v_all = np.empty((n_a, sum(f[2].size for f in factors)))
        start = 0
        for _, us, s, _ in factors:
            np.divide(us, np.sqrt(s**2 + self.lam), out=v_all[:, start : start + s.size])
            start += s.size
        if self.center:
            v_all -= v_all.mean(axis=0)
        return v_all

    def _apply(self, x: np.ndarray, party: int) -> np.ndarray:
        return rbf_kernel(x, self.anchors_[party], self.gammas_[party]) @ self.B_[party]
