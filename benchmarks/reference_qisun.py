r"""An independent Qi–Sun nearest-correlation Newton method, the benchmark's reference.

Qi & Sun, "A quadratically convergent Newton method for computing the nearest correlation
matrix", SIAM J. Matrix Anal. Appl. 28 (2006) 360–385, with the parameters of the authors'
published code: start y⁰ = b − diag(G) (b = 1), Newton direction from diagonally preconditioned CG
at a fixed relative accuracy 10⁻², Armijo line search with σ = 10⁻⁴ and halving, stop when
‖b − diag((G + Diag y)₊)‖ / (1 + ‖b‖) ≤ 10⁻⁶, output X = (G + Diag y)₊. Written for this
benchmark from the paper, separately from :mod:`veilbench.scoreshield.newton` (no code shared
beyond numpy): eigenvalues in descending order, the Jacobian and the preconditioner written from
the paper's block form of Ω (its Section 5), so that a shared mistake is unlikely.

Every eigendecomposition is a full ``numpy.linalg.eigh``; their count is returned so the
benchmark can report it beside the measured CPU time.
"""

from __future__ import annotations

import numpy as np

SIGMA = 1e-4
CG_RTOL = 1e-2
TOL = 1e-6
MAX_ITER = 200
MAX_LINE_SEARCH = 20
MAX_CG = 200


def _eig(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lam, p = np.linalg.eigh(a)
    return lam[::-1], p[:, ::-1]  # descending, as the paper orders them


def _theta(lam: np.ndarray, y: np.ndarray, b: np.ndarray) -> float:
    pos = np.maximum(lam, 0.0)
    return 0.5 * float(pos @ pos) - float(b @ y)


def _diag_plus(lam: np.ndarray, p: np.ndarray) -> np.ndarray:
    return (p * p) @ np.maximum(lam, 0.0)


def _omega12(lam: np.ndarray, r: int) -> np.ndarray:
    """Ω₁₂ (r × (n − r)): λ_i/(λ_i − λ_j) for the r positive λ_i and the n − r others (descending order)."""
    li, lj = lam[:r][:, None], lam[r:][None, :]
    return li / (li - lj)


def _jacobian(h: np.ndarray, p: np.ndarray, om12: np.ndarray) -> np.ndarray:
    """V h + 10⁻¹⁰ h, V h = diag(P (Ω ∘ (Pᵀ Diag(h) P)) Pᵀ), by the blocks of Ω (the authors' form).

    Ω = [[1, Ω₁₂], [Ω₁₂ᵀ, 0]] for P = [P₁, P₂]; when r ≥ n/2 the complement
    diag(P Pᵀ Diag(h) P Pᵀ) = h is used so that every product has a thin factor."""
    n, r = p.shape[0], om12.shape[0]
    if r == 0:
        return 1e-10 * h
    if r == n:
        return (1.0 + 1e-10) * h
    p1, p2 = p[:, :r], p[:, r:]
    if r < n / 2:
        w12 = om12 * (p1.T @ (h[:, None] * p2))
        top = (p1.T @ (h[:, None] * p1)) @ p1.T + w12 @ p2.T
        bottom = w12.T @ p1.T
        return np.sum(p * np.vstack([top, bottom]).T, axis=1) + 1e-10 * h
    w12 = (1.0 - om12) * (p1.T @ (h[:, None] * p2))
    top = w12 @ p2.T
    bottom = w12.T @ p1.T + (p2.T @ (h[:, None] * p2)) @ p2.T
    return h - np.sum(p * np.vstack([top, bottom]).T, axis=1) + 1e-10 * h


def _preconditioner(p: np.ndarray, om12: np.ndarray) -> np.ndarray:
    """diag(V)_i = Σ_jk Ω_jk P_ij² P_ik² = (Σ_{j≤r} P_ij²)² + 2 Σ_{j≤r<k} Ω_jk P_ij² P_ik²."""
    r = om12.shape[0]
    q = p * p
    q1, q2 = q[:, :r], q[:, r:]
    return np.maximum(q1.sum(axis=1) ** 2 + 2.0 * np.sum((q1 @ om12) * q2, axis=1), 1e-8)


def _cg(rhs: np.ndarray, p: np.ndarray, om: np.ndarray) -> tuple[np.ndarray, int]:
    c = _preconditioner(p, om)
    x = np.zeros_like(rhs)
    r = rhs.copy()
    z = r / c
    d = z.copy()
    rz = float(r @ z)
    stop = CG_RTOL * float(np.linalg.norm(rhs))
    for k in range(1, MAX_CG + 1):
        w = _jacobian(d, p, om)
        alpha = rz / float(d @ w)
        x += alpha * d
        r -= alpha * w
        if float(np.linalg.norm(r)) <= stop:
            return x, k
        z = r / c
        rz, rz_old = float(r @ z), rz
        d = z + (rz / rz_old) * d
    return x, MAX_CG


def nearest_correlation_qisun(g: np.ndarray) -> dict:
    """X = P_{E_n}(G) for a symmetric G (n × n); returns X, Newton iterations, eigendecompositions, CG steps."""
    g = (g + g.T) / 2.0
    n = g.shape[0]
    b = np.ones(n)
    y = b - np.diag(g)
    lam, p = _eig(g + np.diag(y))
    n_eig, cg_total = 1, 0
    f = _theta(lam, y, b)
    residual = b - _diag_plus(lam, p)
    k = 0
    while float(np.linalg.norm(residual)) / (1.0 + float(np.linalg.norm(b))) > TOL and k < MAX_ITER:
        om = _omega12(lam, int(np.sum(lam > 0)))
        d, steps = _cg(residual, p, om)
        cg_total += steps
        slope = float(-residual @ d)  # ∇θ(y)ᵀ d with ∇θ = diag(X₊) − b
        t = 1.0
        for _ in range(MAX_LINE_SEARCH + 1):
            y_new = y + t * d
            lam_new, p_new = _eig(g + np.diag(y_new))
            n_eig += 1
            f_new = _theta(lam_new, y_new, b)
            if f_new <= f + SIGMA * t * slope:  # Armijo
                break
            t *= 0.5
        y, lam, p, f = y_new, lam_new, p_new, f_new
        residual = b - _diag_plus(lam, p)
        k += 1
    x = (p * np.maximum(lam, 0.0)) @ p.T
    return {"gram": x, "iterations": k, "n_eigh": n_eig, "cg_iterations": cg_total,
            "residual": float(np.linalg.norm(residual))}
