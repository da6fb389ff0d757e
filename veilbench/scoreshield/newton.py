r"""Exact nearest-correlation projection by the Qi–Sun semismooth Newton method on the dual.

Problem (spec §3.4b): :math:`\min_X \tfrac12\|X - \tilde G\|_F^2` s.t. X ⪰ 0, diag X = 1, the
metric projection of the noisy Gram onto the elliptope E_n. Qi & Sun (SIAM J. Matrix Anal.
Appl. 28, 2006) solve the unconstrained, convex, once-differentiable dual

.. math:: \min_{y \in \mathbb R^n} \theta(y) = \tfrac12 \|(\tilde G + \mathrm{Diag}(y))_+\|_F^2 - \mathbf 1^\top y,
          \qquad \nabla\theta(y) = \mathrm{diag}\big((\tilde G + \mathrm{Diag}(y))_+\big) - \mathbf 1,

whose minimiser y* gives X* = (G̃ + Diag(y*))₊. With G̃ + Diag(y) = P diag(λ) Pᵀ, the
generalised Jacobian of ∇θ applied to h is

.. math:: V h = \mathrm{diag}\big(P (\Omega \circ (P^\top \mathrm{Diag}(h) P)) P^\top\big),
          \quad \Omega_{ij} = \begin{cases} 1 & \lambda_i, \lambda_j > 0 \\ 0 & \lambda_i, \lambda_j \le 0 \\
          \frac{\lambda_i}{\lambda_i - \lambda_j} & \lambda_i > 0 \ge \lambda_j \end{cases}

Each Newton step solves V d = −∇θ by diagonally preconditioned CG (V h costs O(n² min(r, n − r))
with r positive eigenvalues, using diag(P H Pᵀ) = h for the complementary block), then an Armijo
line search on θ (one eigendecomposition per trial). Convergence is quadratic near y*.
The last iterate's small diagonal error ‖∇θ‖ is removed by the unit-diagonal rescaling.
"""

from __future__ import annotations

import numpy as np

from veilbench.scoreshield.projectors import Feasibility, Projection, check_gram, rescale_unit_diagonal
from veilbench.validation import ValidationError, check_in_range

_REG = 1e-10  # Qi–Sun's Tikhonov term keeping V positive definite


class _Dual:
    """θ, ∇θ and the Jacobian action at one y (one eigendecomposition of G̃ + Diag(y))."""

    def __init__(self, g: np.ndarray | None, y: np.ndarray, eig: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        lam, p = np.linalg.eigh(g + np.diag(y)) if eig is None else eig
        self.lam, self.p, self.y = lam, p, y
        self.pos = lam > 0
        lp = np.maximum(lam, 0.0)
        self.theta = 0.5 * float(lp @ lp) - float(y.sum())
        self.grad = np.einsum("ij,j,ij->i", p, lp, p) - 1.0
        self._omega_block: np.ndarray | None = None

    def x_plus(self) -> np.ndarray:
        pp = self.p[:, self.pos]
        return (pp * self.lam[self.pos]) @ pp.T

    def _omega12(self) -> np.ndarray:
        """Ω restricted to (positive, non-positive) eigen-indices: λ_i / (λ_i − λ_j)."""
        if self._omega_block is None:
            lp, ln = self.lam[self.pos], self.lam[~self.pos]
            self._omega_block = lp[:, None] / (lp[:, None] - ln[None, :])
        return self._omega_block

    def jac(self, h: np.ndarray) -> np.ndarray:
        """V h + 1e-10 h."""
        p1, p2 = self.p[:, self.pos], self.p[:, ~self.pos]
        r, n = p1.shape[1], h.size
        w12 = self._omega12()
        if r == 0:
            return _REG * h
        if r == n:
            return (1.0 + _REG) * h
        if r <= n - r:
            # diag(P1 (P1ᵀ H P1) P1ᵀ) + 2 diag(P1 (Ω12 ∘ P1ᵀ H P2) P2ᵀ)
            hp1 = p1.T * h
            a = hp1 @ p1
            b = w12 * (hp1 @ p2)
            out = np.einsum("ij,ij->i", p1 @ a, p1) + 2.0 * np.einsum("ij,ij->i", p1 @ b, p2)
        else:
            # h − diag(P2 (P2ᵀ H P2) P2ᵀ) − 2 diag(P1 ((1 − Ω12) ∘ P1ᵀ H P2) P2ᵀ)
            hp2 = p2.T * h
            a = hp2 @ p2
            b = (1.0 - w12) * (p1.T * h @ p2)
            out = h - np.einsum("ij,ij->i", p2 @ a, p2) - 2.0 * np.einsum("ij,ij->i", p1 @ b, p2)
        return out + _REG * h

    def jac_diag(self) -> np.ndarray:
        """diag(V) = Σ_jk Ω_jk P_ij² P_ik², the Jacobi preconditioner (floored)."""
        q1, q2 = self.p[:, self.pos] ** 2, self.p[:, ~self.pos] ** 2
        s1 = q1.sum(axis=1)
        d = s1 * s1 + 2.0 * np.einsum("ij,ij->i", q1 @ self._omega12(), q2)
        return np.maximum(d, 1e-8)


def best_shift(lam: np.ndarray) -> float:
    """s* = argmin_s θ(y + s·1) from the eigenvalues λ of G̃ + Diag(y) (n of them).

    G̃ + Diag(y + s·1) has eigenvalues λ + s and the same eigenvectors, so along the direction 1
    θ(y + s1) = ½ Σ_j max(λ_j + s, 0)² − 1ᵀy − n s, convex and piecewise quadratic in s, minimal where
    Σ_j max(λ_j + s, 0) = n: with the k largest eigenvalues active, s = (n − Σ_{j≤k} λ_(j)) / k for the k
    whose active set is consistent. An exact line search along 1 at the price of a sort.
    """
    ls = np.sort(lam)[::-1]
    n = ls.size
    sums = np.cumsum(ls)
    k = np.arange(1, n + 1)
    shifts = (n - sums) / k
    nxt = np.append(ls[1:], -np.inf)
    ok = (ls + shifts > 0) & (nxt + shifts <= 0)
    return float(shifts[np.argmax(ok)]) if ok.any() else 0.0


def _pcg(dual: _Dual, rhs: np.ndarray, tol: float, max_iter: int) -> tuple[np.ndarray, int]:
    """Preconditioned CG for V d = rhs, relative residual ``tol``."""
    m_inv = 1.0 / dual.jac_diag()
    d = np.zeros_like(rhs)
    r = rhs.copy()
    z = m_inv * r
    p = z.copy()
    rz = float(r @ z)
    stop = tol * np.linalg.norm(rhs)
    k = 0
    for k in range(1, max_iter + 1):
        vp = dual.jac(p)
        alpha = rz / float(p @ vp)
        d += alpha * p
        r -= alpha * vp
        if np.linalg.norm(r) <= stop:
            break
        z = m_inv * r
        rz_new = float(r @ z)
        p = z + (rz_new / rz) * p
        rz = rz_new
    return d, k


def nearest_correlation_newton(
    g_noisy: np.ndarray, tol: float = 1e-8, max_iter: int = 100, cg_max_iter: int = 200
) -> Projection:
    """Metric projection of G̃ (n × n symmetric) onto E_n by semismooth Newton (Qi & Sun 2006).

    Stops when ‖∇θ(y)‖₂ = ‖diag(X₊) − 1‖₂ ≤ ``tol`` · √n. Starts at y₀ = 1 − diag(G̃) + s*·1 with
    s* the exact minimiser of θ along 1 (:func:`best_shift`; it reuses y₀'s eigendecomposition, so
    it costs no eigendecomposition; on noisy Grams, whose spectrum the noise spreads far beyond
    [0, n], it is large). Returns the rescaled X₊ with iterations (Newton steps), eigendecompositions
    and total CG steps in ``extra``. X₊ = P₊ diag(λ₊) P₊ᵀ and its rescaling D^{−½} X₊ D^{−½} are
    positive semidefinite by construction (a congruence), so no eigendecomposition is spent to check
    it: the returned feasibility has ``min_eig`` = 0 (exact-arithmetic value) and the measured diagonal
    and off-diagonal residuals.
    """
    g = check_gram(g_noisy, "g_noisy")
    check_in_range(tol, "tol", 0.0, None, low_inclusive=False)
    if int(max_iter) < 1:
        raise ValidationError(f"max_iter: must be ≥ 1, got {max_iter}")
    n = g.shape[0]
    first = _Dual(g, 1.0 - np.diag(g))
    shift = best_shift(first.lam)
    dual = _Dual(None, first.y + shift, (first.lam + shift, first.p))
    n_eigh, cg_total, it, converged = 1, 0, 0, False
    target = tol * np.sqrt(n)
    for it in range(1, int(max_iter) + 1):
        gnorm = float(np.linalg.norm(dual.grad))
        if gnorm <= target:
            converged, it = True, it - 1
            break
        d, k = _pcg(dual, -dual.grad, min(1e-2, gnorm), cg_max_iter)
        cg_total += k
        slope = float(dual.grad @ d)
        step = 1.0
        for _ in range(30):
            trial = _Dual(g, dual.y + step * d)
            n_eigh += 1
            if trial.theta <= dual.theta + 1e-4 * step * slope + 1e-14 * abs(dual.theta):
                break
            step *= 0.5
        dual = trial
    else:
        converged = float(np.linalg.norm(dual.grad)) <= target
    x = rescale_unit_diagonal(dual.x_plus())
    extra = {"cg_iterations": float(cg_total), "dual_gradient_norm": float(np.linalg.norm(dual.grad))}
    return Projection(x, "newton", it, n_eigh, converged, _psd_feasibility(x), extra)


def _psd_feasibility(x: np.ndarray) -> Feasibility:
    """Residuals of a matrix that is PSD by construction: λ_min reported as 0, the others measured (O(n²))."""
    off = np.abs(x - np.diag(np.diag(x)))
    return Feasibility(0.0, float(np.max(np.abs(np.diag(x) - 1.0))), float(max(0.0, off.max() - 1.0)))
