r"""The generalized orthogonal Procrustes problem on anchor uploads, spec §4.1–§4.2, §4.4.

Centering (§4.1): :math:`\bar b_i = B_i^\top\mathbf 1/r`, :math:`\bar B_i = B_i - \mathbf 1\bar b_i^\top`.

Problem (§4.2), with :math:`S = [R_1;\dots;R_m]` (md × d), :math:`B = [\bar B_1,\dots,\bar B_m]`
(r × md) and :math:`C = B^\top B`:

.. math:: \max_{R_i\in O(d)} f(S) = \operatorname{tr}(S^\top C S) = \Big\|\sum_j \bar B_j R_j\Big\|_F^2 .

Polar factors :math:`\mathcal P(M) = UV^\top` (:func:`polar`): the exact block maximisers by the SVD;
combinations of nearby orthogonal blocks by Newton–Schulz (:func:`polar_near`), a few d × d products
instead of an SVD, with the same result to rounding.

References: Ling, "Generalized power method for generalized orthogonal Procrustes problem" (2023);
spec ``anchor-noise.md`` §4.
"""

from __future__ import annotations

import numpy as np

from veilbench.linalg.procrustes import polar_factor, polar_factors
from veilbench.validation import ValidationError, check_array


def check_anchor_uploads(B: np.ndarray, name: str = "B") -> np.ndarray:
    """Validate a stack of anchor uploads, shape (m, r, d) with m ≥ 1 and r ≥ d."""
    arr = check_array(B, name, ndim=3)
    m, r, d = arr.shape
    if r < d:
        raise ValidationError(f"{name}: each anchor upload needs r ≥ d rows, got shape (m, r, d) = {arr.shape}")
    return arr

def center_anchors(B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (B̄ (m, r, d), b̄ (m, d)) with b̄_i the row mean of B_i and B̄_i = B_i − 1 b̄_iᵀ (§4.1)."""
    arr = check_anchor_uploads(B)
    bbar = arr.mean(axis=1)
    return arr - bbar[:, None, :], bbar

def template(Bbar: np.ndarray, R: np.ndarray) -> np.ndarray:
    """T = Σ_j B̄_j R_j, shape (r, d), for B̄ (m, r, d) and R (m, d, d)."""
    return np.matmul(Bbar, R).sum(axis=0)

def objective(Bbar: np.ndarray, R: np.ndarray) -> float:
    """f = ‖Σ_j B̄_j R_j‖_F² = tr(Sᵀ C S)."""
    return float(np.sum(template(Bbar, R) ** 2))

def polar(M: np.ndarray) -> np.ndarray:
    """P(M) = U Vᵀ for M = U Σ Vᵀ (thin SVD) of any shape: orthonormal columns (tall) or rows (wide,
    St(d, p) blocks); a stack (k, d, p) is projected block by block in one LAPACK call."""
    return polar_factors(M)

def polar_near(M: np.ndarray, max_steps: int = 10) -> np.ndarray:
    """P(M) for a stack (k, d, p), d ≤ p, of well-conditioned blocks by Newton–Schulz, else :func:`polar`.

    Each block is scaled to ‖X‖_F² = d (P is invariant under positive scaling); then
    X ← X − (XXᵀ − I)X/2 maps every singular value s to s(3 − s²)/2, which converges quadratically
    to 1 for s² ∈ (0, 3). It is run only while the residual E = XXᵀ − I of the whole stack has
    ‖E‖_F < 1/2 (so s² ∈ (1/2, 3/2), a margin inside that region [assume]: a numerical choice; the
    result is the same polar factor to rounding), and stops at ‖E‖_F ≤ 16·eps·d; otherwise, or after
    ``max_steps``, the SVD is used. A step costs two d × d products. The extrapolated and
    over-relaxed candidates (combinations of nearby orthogonal blocks) are such blocks; G_i = B̄_iᵀT
    in general is not, so the exact block maximisers use the SVD.
    """
    d = M.shape[-2]
    scale = np.sqrt(d / np.sum(M * M, axis=(-2, -1), keepdims=True))
    if not np.all(np.isfinite(scale)):
        return polar(M)
    X = M * scale
    eye = np.eye(d)
    for _ in range(max_steps):
        E = np.matmul(X, np.swapaxes(X, -1, -2)) - eye
        err = float(np.sqrt(np.vdot(E, E)))
        if err >= 0.5:
            break
        if err <= 16 * np.finfo(float).eps * d:
            return X
        X = X - 0.5 * np.matmul(E, X)
    return polar(M)

def polar_step(Bbar: np.ndarray, T: np.ndarray) -> np.ndarray:
    """R_i = P(B̄_iᵀ T) for every i (T is r × p, p = d or d + 1 when lifted), shape (m, d, p)."""
    return polar(np.matmul(np.swapaxes(Bbar, 1, 2), T))

def polar_step_leave_one_out(Bbar: np.ndarray, R: np.ndarray) -> np.ndarray:
    """R_i = P(B̄_iᵀ T_{-i}) with T_{-i} = Σ_{j≠i} B̄_j R_j (classical GPA template)."""
    T = template(Bbar, R)
    return polar(np.matmul(np.swapaxes(Bbar, 1, 2), T[None] - np.matmul(Bbar, R)))

def rotation_error(R: np.ndarray, O: np.ndarray) -> float:
    """E_rot = sqrt(Σ_i ‖R_i − O_iᵀ Q̂‖_F² / (m d)) with Q̂ = P(Σ_i O_i R_i) (§4.4); 0 = perfect."""
    rr = check_array(R, "R", ndim=3)
    oo = check_array(O, "O", ndim=3)
    if rr.shape != oo.shape:
        raise ValidationError(f"R and O: shapes differ ({rr.shape} vs {oo.shape})")
    q = polar_factor(np.einsum("mde,mef->df", oo, rr))
    resid = rr - np.einsum("med,ef->mdf", oo, q)
    return float(np.sqrt(np.sum(resid**2) / (rr.shape[0] * rr.shape[1])))
