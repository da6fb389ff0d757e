r"""Starting points of the GPM: the hollowed spectral start, a random start, and the m = 2 closed form.

Spectral start from the hollowed matrix [assume; spec §4.3 uses C itself]. For
:math:`R_i\in O(d)`, :math:`\operatorname{tr}(R_i^\top C_{ii} R_i) = \operatorname{tr} C_{ii}` is a
constant, so :math:`f(S) = \operatorname{tr}(S^\top\tilde C S) + \sum_i\operatorname{tr}C_{ii}` with
:math:`\tilde C = C - \mathrm{blockdiag}(C_{ii})`: same maximisers. :math:`C_{ii}` carries the noise
self-energy :math:`v^2\bar W_i^\top\bar W_i` (no information on the rotations), so the start is
:math:`R_i^0 = \mathcal P(V_i)` with V (md × d) the top-d eigenvectors of :math:`\tilde C` (block i =
rows i·d … (i+1)·d−1; ``spectral_init(hollow=False)`` is the spec's start from C). At v = 0,
:math:`\tilde C = s_A^2(S_\star S_\star^\top - I)` has V ∝ :math:`S_\star` exactly. Cost: a dense
symmetric eigenproblem of order md (top d pairs), O((md)³), for md ≤ :data:`DENSE_EIG_MAX`, else
Lanczos (ARPACK) on the operator :math:`\tilde CX = B^\top(BX) - \mathrm{blockdiag}(C_{ii})X`, each
product O(m r d²) for a block of d vectors (:func:`hollow_gram_operator`).

Two participants (m = 2) have a closed form: with :math:`M = \bar B_1^\top\bar B_2 = U\Sigma V^\top`,

.. math:: f = \|\bar B_1\|_F^2 + \|\bar B_2\|_F^2 + 2\operatorname{tr}(M\,R_2R_1^\top)
          \le \|\bar B_1\|_F^2 + \|\bar B_2\|_F^2 + 2\|M\|_*

(von Neumann's trace inequality), with equality iff :math:`R_2R_1^\top = VU^\top`, i.e. one orthogonal
Procrustes problem. Fixing the global rotation by :math:`R_1 = I` gives
:math:`R_2 = \mathcal P(\bar B_2^\top\bar B_1) = VU^\top` (:func:`two_party_optimum`), the global
maximizer. O(d) has two components (det = ±1) and, restricted to the one with the wrong sign of
:math:`\det(R_2R_1^\top)`, tr(MQ) has a local maximum (tr Σ − 2σ_min), where an iteration from the
spectral start of C can stop; the closed form avoids it. The certificate always holds there:
:math:`\Lambda - C = [U;-V]\,\Sigma\,[U;-V]^\top \succeq 0`.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.sparse.linalg

from veilbench.linalg.procrustes import (
    haar_orthogonal,
    orthogonal_procrustes,
    polar_factor,
)
from veilbench.random import as_rng
from veilbench.validation import ValidationError

#: Order md above which :func:`spectral_init` and the certificate use Lanczos instead of a dense
#: eigensolver [assume]: a cost crossover (``reports/bench/gpm.md``); both compute the same quantities.
DENSE_EIG_MAX = 256
#: ARPACK's relative tolerance on the Ritz values [assume]: 1e-12 puts the certificate's error
#: ≈ 1e-12·‖Λ − C‖₂, far below its threshold τ ≥ 1e-9, and the start's to rounding.
LANCZOS_TOL = 1e-12


def hollow_gram_operator(Bbar: np.ndarray) -> scipy.sparse.linalg.LinearOperator:
    """C̃ = BᵀB − blockdiag(C_ii) (md × md) matrix-free: C̃X = Bᵀ(BX) − blockdiag(C_ii)X, O(m r d k) for k columns."""
    m, r, d = Bbar.shape
    big = np.concatenate(list(Bbar), axis=1)
    diag = np.matmul(np.swapaxes(Bbar, 1, 2), Bbar)

    def apply(x: np.ndarray) -> np.ndarray:
        x = x.reshape(m * d, -1)
        y = big.T @ (big @ x) - np.matmul(diag, x.reshape(m, d, -1)).reshape(m * d, -1)
        return y

    return scipy.sparse.linalg.LinearOperator((m * d, m * d), matvec=apply, matmat=apply, dtype=float)

def _use_lanczos(n: int, method: str) -> bool:
    if method not in ("auto", "dense", "lanczos"):
        raise ValidationError(f"method: must be 'auto', 'dense' or 'lanczos', got {method!r}")
    return method == "lanczos" or (method == "auto" and n > DENSE_EIG_MAX)

def _lanczos(op: scipy.sparse.linalg.LinearOperator, k: int, tol: float) -> tuple[np.ndarray, np.ndarray] | None:
    """Top-k (largest algebraic) eigenpairs of a symmetric operator by ARPACK from a fixed start (None if
    it does not converge)."""
    try:
        return scipy.sparse.linalg.eigsh(op, k=k, which="LA", tol=tol, v0=np.ones(op.shape[0]))
    except scipy.sparse.linalg.ArpackNoConvergence:
        return None

def spectral_init(Bbar: np.ndarray, hollow: bool = True, method: str = "auto") -> np.ndarray:
    """R_i⁰ = P(V_i), V (md × d) = top-d eigenvectors of C̃ = C − blockdiag(C_ii) (``hollow``) or of C.

    C = BᵀB with B = [B̄_1, …, B̄_m] (r × md); the hollowed start is the module docstring's. ``method``:
    ``"dense"`` (eigh of C̃, O((md)³)), ``"lanczos"`` (ARPACK on :func:`hollow_gram_operator`, each
    product O(m r d²) for a block of d vectors) or ``"auto"`` (Lanczos for md > :data:`DENSE_EIG_MAX`).
    Both give the same start up to one global rotation V → VQ, which the iteration carries along.
    """
    m, r, d = Bbar.shape
    big = np.concatenate(list(Bbar), axis=1)
    v = None
    if hollow and _use_lanczos(m * d, method):
        pairs = _lanczos(hollow_gram_operator(Bbar), d, LANCZOS_TOL)
        v = None if pairs is None else pairs[1]
    if v is None and hollow:
        C = big.T @ big
        for i in range(m):
            C[i * d : (i + 1) * d, i * d : (i + 1) * d] = 0.0
        v = scipy.linalg.eigh(C, subset_by_index=[m * d - d, m * d - 1])[1]
    elif v is None:
        v = np.linalg.svd(big, full_matrices=False)[2][:d].T
    return np.stack([polar_factor(v[i * d : (i + 1) * d]) for i in range(m)])

def two_party_optimum(Bbar: np.ndarray) -> np.ndarray:
    """Global maximizer for m = 2 (module docstring): R_1 = I, R_2 = P(B̄_2ᵀ B̄_1), shape (2, d, d)."""
    d = Bbar.shape[2]
    return np.stack([np.eye(d), orthogonal_procrustes(Bbar[1], Bbar[0])])

def random_init(m: int, d: int, seed: int | np.random.Generator | None) -> np.ndarray:
    """R_i⁰ Haar-random on O(d), independently (ablation of §4.3)."""
    rng = as_rng(seed, "anchornoise.gpm-random-init")
    return np.stack([haar_orthogonal(d, rng) for _ in range(m)])
