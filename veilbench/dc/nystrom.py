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

Solvers for ``Z`` (``solver``): ``"dense"`` is the QR/SVD of ``V`` above, O(na (Kr)²); ``"krylov"``
never forms ``V``: it applies ``M = Σ_k H_k = Σ_k L_k (L_kᵀL_k + λI)^{-1} L_kᵀ`` (centred as
``ΠMΠ``, ``Π = I − 11ᵀ/na``, when ``center``) to blocks of ``b`` vectors, through ``C_k`` (na × r)
and the Cholesky factor of ``L_kᵀL_k + λI`` (r × r), and takes the top-``d̂`` Ritz vectors of a block
Krylov space ``[Ω, MΩ, M²Ω, …]`` (Ω a seeded Gaussian block, fully reorthogonalised), enlarged
until every Ritz residual ``‖M z − θ z‖`` is at most ``tol·θ_1`` (or the space reaches
``max_dim``; ``residual_`` records the largest relative residual): O(K na r²) to factor, O(na Kr b)
per block. The leading eigenvalues of ``M`` lie close together for a large anchor set (each
``H_k`` is nearly a projection), which is why a block method and not single-vector Lanczos.
``"auto"`` takes ``"dense"`` while ``2·min(na, Kr)²·max(na, Kr) ≤ 10¹⁰`` flops, else ``"krylov"``.
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


#: ``solver="auto"`` takes the dense QR/SVD of ``V`` up to this many flops (module docstring).
DENSE_FLOPS = 1e10


def _top_eigenvectors_block_krylov(apply_m, n: int, d_hat: int, rng: np.random.Generator, block: int, tol: float,
                                   max_dim: int) -> tuple[np.ndarray, float]:
    """The ``d̂`` leading eigenvectors (n × d̂, orthonormal) of a symmetric PSD operator ``apply_m``
    (n × b blocks → n × b) from a block Krylov space (module docstring), and the largest relative
    Ritz residual ``max_j ‖M z_j − θ_j z_j‖ / θ_1``. Column signs as :func:`_top_left_singular_vectors`."""
    limit = min(int(max_dim), n)
    basis = np.empty((n, limit))
    images = np.empty((n, limit))
    t = np.empty((limit, limit))
    new = rng.standard_normal((n, min(block, limit)))
    dim = 0
    while True:
        for _ in range(2):  # full reorthogonalisation against the space so far
            new -= basis[:, :dim] @ (basis[:, :dim].T @ new)
        q, r = np.linalg.qr(new)
        keep = np.abs(np.diag(r)) > 1e-10 * max(np.abs(np.diag(r)).max(), 1e-300)
        q = q[:, keep][:, : limit - dim]
        if q.shape[1] == 0:  # the space is invariant under M: its Ritz pairs are exact
            if dim >= d_hat:
                break
            new = rng.standard_normal((n, min(block, limit - dim)))  # M has rank < d̂: complete the basis
            continue
        b = q.shape[1]
        basis[:, dim : dim + b] = q
        images[:, dim : dim + b] = apply_m(q)
        t[: dim + b, dim : dim + b] = basis[:, : dim + b].T @ images[:, dim : dim + b]
        t[dim : dim + b, :dim] = t[:dim, dim : dim + b].T
        dim += b
        vals, vecs = np.linalg.eigh(0.5 * (t[:dim, :dim] + t[:dim, :dim].T))
        if dim < d_hat:
            new = images[:, dim - b : dim].copy()
            continue
        u = vecs[:, ::-1][:, :d_hat]
        theta = vals[::-1][:d_hat]
        z = basis[:, :dim] @ u
        scale = max(float(theta[0]), np.finfo(float).tiny)
        residual = float(np.linalg.norm(images[:, :dim] @ u - z * theta, axis=0).max() / scale)
        if residual <= tol or dim >= limit:
            break
        new = images[:, dim - b : dim].copy()
    return z * np.sign(z[np.argmax(np.abs(z), axis=0), np.arange(d_hat)]), residual


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
        solver: Literal["auto", "dense", "krylov"] = "auto",
        tol: float = 1e-8,
        block: int | None = None,
        max_dim: int = 2000,
    ):
        self.rank = rank
        self.n_components = n_components
        self.gamma = gamma
        self.lam = lam
        self.center = center
        self.rcond = rcond
        self.seed = seed
        self.solver = solver
        self.tol = tol
        self.block = block
        self.max_dim = max_dim

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
        if self.solver not in ("auto", "dense", "krylov"):
            raise ValidationError(f"solver: must be 'auto', 'dense' or 'krylov', got {self.solver!r}")
        total = len(reps) * int(self.rank)
        dense = self.solver == "dense" or (
            self.solver == "auto" and 2.0 * min(n_a, total) ** 2 * max(n_a, total) <= DENSE_FLOPS)
        self.solver_ = "dense" if dense else "krylov"
        if not dense:
            return self._fit_krylov(reps, d_hat)
        self.residual_ = 0.0
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

    def _fit_krylov(self, reps: list[np.ndarray], d_hat: int) -> NystromNKI:
        """The fit with ``solver="krylov"`` (module docstring)."""
        import scipy.linalg as sl

        n_a = reps[0].shape[0]
        parts = []  # (C_k, W_k^{-1/2}, Cholesky of L_kᵀL_k + λI)
        for a, g in zip(reps, self.gammas_, strict=True):
            c = rbf_kernel(a, a[self.landmarks_], g)
            w_isqrt = _inv_sqrt_psd(c[self.landmarks_], self.rcond)
            gram = w_isqrt.T @ (c.T @ c) @ w_isqrt
            gram[np.diag_indices_from(gram)] += self.lam
            parts.append((c, w_isqrt, sl.cho_factor(gram, lower=True)))

        def hat(k: int, x: np.ndarray) -> np.ndarray:
            c, w, chol = parts[k]
            return c @ (w @ sl.cho_solve(chol, w.T @ (c.T @ x)))

        def apply_m(x: np.ndarray) -> np.ndarray:
            if self.center:
                x = x - x.mean(axis=0)
            out = sum(hat(k, x) for k in range(len(parts)))
            return out - out.mean(axis=0) if self.center else out

        block = self.block or max(2 * d_hat, 8)
        rng = as_rng(self.seed, "dc.nystrom-krylov")
        self.Z_, self.residual_ = _top_eigenvectors_block_krylov(apply_m, n_a, d_hat, rng, block, self.tol, self.max_dim)
        self.B_ = []
        for k, (c, w, _) in enumerate(parts):
            gamma_k = (self.Z_ - hat(k, self.Z_)) / self.lam
            self.B_.append(w @ (w.T @ (c.T @ gamma_k)))
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
