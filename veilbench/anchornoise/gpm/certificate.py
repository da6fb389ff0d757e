r"""Global optimality certificate of a GOPP point and its escape direction, spec §4.3.

:math:`\Lambda = \mathrm{blockdiag}(\mathrm{sym}(\bar B_i^\top T R_i^\top))`; if
:math:`\lambda_{\min}(\Lambda - C) \ge -\tau\|\Lambda - C\|_2` then S is a global maximizer (the
semidefinite relaxation is tight). The spec's τ = 1e-9 presumes an exact fixed point; the iterate that
the stop rule returns is only approximately stationary, with a certificate residual of order
10·tol, so the aligner uses τ = max(1e-9, 100·tol) [assume]; the raw ratio is always reported. For
md > :data:`~veilbench.anchornoise.gpm.start.DENSE_EIG_MAX` the smallest eigenpair is computed by
Lanczos on the operator (Λ − C)X = ΛX − Bᵀ(BX) instead of a dense O((md)³) eigendecomposition.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse.linalg

from veilbench.anchornoise.gpm.problem import template
from veilbench.anchornoise.gpm.start import LANCZOS_TOL, _lanczos, _use_lanczos

CERTIFICATE_TOL = 1e-9


def certificate_matrix(Bbar: np.ndarray, R: np.ndarray) -> np.ndarray:
    """Λ − C (md × md, symmetrised) with Λ = blockdiag(sym(B̄_iᵀ T R_iᵀ)) (§4.3)."""
    m, r, d = Bbar.shape
    big = np.concatenate(list(Bbar), axis=1)
    M = -(big.T @ big)
    T = template(Bbar, R)
    for i in range(m):
        blk = Bbar[i].T @ T @ R[i].T
        M[i * d : (i + 1) * d, i * d : (i + 1) * d] += 0.5 * (blk + blk.T)
    return 0.5 * (M + M.T)

def certificate_operator(Bbar: np.ndarray, R: np.ndarray) -> scipy.sparse.linalg.LinearOperator:
    """Λ − C matrix-free (:func:`certificate_matrix`): (Λ − C)X = ΛX − Bᵀ(BX), O(m r d k) for k columns."""
    m, r, d = Bbar.shape
    big = np.concatenate(list(Bbar), axis=1)
    blk = np.matmul(np.matmul(np.swapaxes(Bbar, 1, 2), template(Bbar, R)), np.swapaxes(R, 1, 2))
    lam = 0.5 * (blk + np.swapaxes(blk, 1, 2))

    def apply(x: np.ndarray) -> np.ndarray:
        x = x.reshape(m * d, -1)
        return np.matmul(lam, x.reshape(m, d, -1)).reshape(m * d, -1) - big.T @ (big @ x)

    return scipy.sparse.linalg.LinearOperator((m * d, m * d), matvec=apply, matmat=apply, dtype=float)

def certificate(Bbar: np.ndarray, R: np.ndarray, method: str = "auto") -> float:
    """λ_min(Λ − C)/‖Λ − C‖₂ (§4.3); ≥ −1e-9 certifies a global maximizer (see :func:`escape_direction`)."""
    return escape_direction(Bbar, R, method)[0]

def escape_direction(Bbar: np.ndarray, R: np.ndarray, method: str = "auto") -> tuple[float, np.ndarray]:
    """(:func:`certificate`, u): u (m, d) the unit eigenvector of λ_min(Λ − C), split into blocks u_i.

    ``method="dense"``: eigh of the md × md matrix, O((md)³). ``"lanczos"``: ARPACK on
    :func:`certificate_operator`, first λ_max (for ‖Λ − C‖₂ = max(|λ_min|, |λ_max|)), then the top
    eigenpair of λ_max·I − (Λ − C), whose eigenvalue λ_max − λ_min is far from 0, so the relative
    tolerance :data:`LANCZOS_TOL` bounds the error of λ_min by ≈ LANCZOS_TOL·‖Λ − C‖₂ also when
    λ_min ≈ 0 (a certified point, where S spans d null vectors); ``"auto"``: Lanczos for md >
    :data:`DENSE_EIG_MAX`. Either path falls back to the dense one if ARPACK does not converge.
    """
    m, d = R.shape[0], R.shape[1]
    if _use_lanczos(m * d, method):
        op = certificate_operator(Bbar, R)
        top = _lanczos(op, 1, LANCZOS_TOL)
        if top is not None:
            lam_max = float(top[0][0])
            shifted = scipy.sparse.linalg.LinearOperator(
                op.shape, matvec=lambda x: lam_max * x.reshape(m * d, -1) - op.matmat(x.reshape(m * d, -1)),
                dtype=float,
            )
            low = _lanczos(shifted, 1, LANCZOS_TOL)
            if low is not None:
                lam_min = lam_max - float(low[0][0])
                scale = max(abs(lam_min), abs(lam_max))
                return (lam_min / scale if scale > 0 else 0.0), low[1][:, 0].reshape(m, d)
    ev, vec = np.linalg.eigh(certificate_matrix(Bbar, R))
    scale = float(np.max(np.abs(ev)))
    return (float(ev[0] / scale) if scale > 0 else 0.0), vec[:, 0].reshape(m, d)
