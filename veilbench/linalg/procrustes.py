r"""Orthogonal Procrustes, polar factors and Haar-random orthogonal matrices.

* :func:`orthogonal_procrustes` solves :math:`\min_{R^\top R = I} \|A R - B\|_F`; the solution is
  the polar factor :math:`R = U V^\top` of :math:`A^\top B = U \Sigma V^\top` (Schönemann 1966).
* :func:`polar_factor` returns :math:`U V^\top` for any square or tall matrix M = U Σ Vᵀ,
  the projection of M onto the orthogonal (Stiefel) set in Frobenius norm;
  :func:`polar_factors` does the same for a stack of matrices of any shape, unchecked (inner loops).
* :func:`haar_orthogonal` samples O from the Haar measure on O(d): QR of a standard Gaussian
  matrix with the signs of diag(R) fixed (Mezzadri 2007), so E[O] = 0 and O Oᵀ = I.
"""

from __future__ import annotations

import numpy as np

from veilbench.random import as_rng
from veilbench.validation import ValidationError, check_array


def polar_factor(m: np.ndarray) -> np.ndarray:
    """Orthogonal polar factor U Vᵀ of ``m`` (p × q, p ≥ q), the closest matrix with orthonormal columns."""
    arr = check_array(m, "m", ndim=2)
    if arr.shape[0] < arr.shape[1]:
        raise ValidationError(f"m: expected p ≥ q for a p × q matrix, got shape {arr.shape}")
    u, _, vt = np.linalg.svd(arr, full_matrices=False)
    return u @ vt


def polar_factors(m: np.ndarray) -> np.ndarray:
    """U Vᵀ (thin SVD M = U Σ Vᵀ) of a matrix or of each matrix of a stack (..., p, q), any p, q:
    orthonormal columns when p ≥ q, orthonormal rows when p < q. One LAPACK call for the whole
    stack and no input checks: for solver inner loops (:func:`polar_factor` checks its input)."""
    u, _, vt = np.linalg.svd(m, full_matrices=False)
    return u @ vt


def orthogonal_procrustes(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """R minimising ‖A R − B‖_F subject to Rᵀ R = I.

    Parameters
    ----------
    a, b : (n, d) arrays with the same shape.

    Returns
    -------
    r : (d, d) orthogonal matrix.

    Examples
    --------
    >>> from veilbench.random import stream
    >>> rng = stream(0, "example")
    >>> q = haar_orthogonal(3, rng); a = rng.normal(size=(10, 3))
    >>> bool(np.allclose(orthogonal_procrustes(a, a @ q), q))
    True
    """
    aa = check_array(a, "a", ndim=2)
    bb = check_array(b, "b", ndim=2)
    if aa.shape != bb.shape:
        raise ValidationError(f"a and b: shapes must match, got {aa.shape} vs {bb.shape}")
    return polar_factor(aa.T @ bb)


def haar_orthogonal(d: int, seed: int | np.random.Generator | None = None) -> np.ndarray:
    """A d × d orthogonal matrix drawn from the Haar measure on O(d)."""
    if int(d) < 1:
        raise ValidationError(f"d: must be ≥ 1, got {d}")
    rng = as_rng(seed, "linalg.haar-orthogonal")
    z = rng.standard_normal((int(d), int(d)))
    q, r = np.linalg.qr(z)
    return q * np.sign(np.diag(r))
