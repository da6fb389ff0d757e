r"""Generalized orthogonal Procrustes by the generalized power method (GPM), spec §4.

Centering (§4.1): :math:`\bar b_i = B_i^\top\mathbf 1/r`, :math:`\bar B_i = B_i - \mathbf 1\bar b_i^\top`.

Problem (§4.2), with :math:`S = [R_1;\dots;R_m]` (md × d), :math:`B = [\bar B_1,\dots,\bar B_m]`
(r × md) and :math:`C = B^\top B`:

.. math:: \max_{R_i\in O(d)} f(S) = \operatorname{tr}(S^\top C S) = \Big\|\sum_j \bar B_j R_j\Big\|_F^2 .

Iteration (Ling 2023, row convention): :math:`T^t = \sum_j \bar B_j R_j^t` (r × d) and
:math:`R_i^{t+1} = \mathcal P(\bar B_i^\top T^t)` ("Jacobi" step, all blocks from the same template).
Stop when :math:`f^{t+1}-f^t \le \mathrm{tol}\, f^{t+1}`, or
:math:`\max_i\|R_i^{t+1}-R_i^t\|_F \le \mathrm{tol}_R`, or after ``max_iter`` iterations
(``converged_`` is False only in the last case). Since C ⪰ 0, f is convex and each polar step is a
linearisation ascent, so f is non-decreasing with the full template (the ``leave_one_out``
ablation, :math:`T_{-i} = T - \bar B_i R_i`, has no such guarantee).

Spectral start from the hollowed matrix [assume; spec §4.3 uses C itself]. For
:math:`R_i\in O(d)`, :math:`\operatorname{tr}(R_i^\top C_{ii} R_i) = \operatorname{tr} C_{ii}` is a
constant, so :math:`f(S) = \operatorname{tr}(S^\top\tilde C S) + \sum_i\operatorname{tr}C_{ii}` with
:math:`\tilde C = C - \mathrm{blockdiag}(C_{ii})`: same maximisers. :math:`C_{ii}` carries the noise
self-energy :math:`v^2\bar W_i^\top\bar W_i` (no information on the rotations), so the start is
:math:`R_i^0 = \mathcal P(V_i)` with V (md × d) the top-d eigenvectors of :math:`\tilde C` (block i =
rows i·d … (i+1)·d−1; ``spectral_init(hollow=False)`` is the spec's start from C). At v = 0,
:math:`\tilde C = s_A^2(S_\star S_\star^\top - I)` has V ∝ :math:`S_\star` exactly. Measured on the
benchmark grid (m = 4, v/s_A = 0.035): the start's objective gap shrinks ≈ 10×. Cost: a dense symmetric
eigenproblem of order md (top d pairs): dense, O((md)³), for md ≤ :data:`DENSE_EIG_MAX`, else Lanczos
(ARPACK) on the operator :math:`\tilde CX = B^\top(BX) - \mathrm{blockdiag}(C_{ii})X`, each product
O(m r d²) for a block of d vectors (:func:`hollow_gram_operator`); not counted in ``n_iter_``, like
the baseline's start, and included in the benchmark's seconds.

Adaptive schedule (``update="adaptive"``, the default; ``"jacobi"`` keeps Ling's step throughout).
One iteration is either one Jacobi step or one sweep over the m blocks, each O(m r d² + m d³).

1. *Jacobi phase.* Near the noiseless solution the Jacobi step is the exact consensus projection:
   with :math:`C_{ij} = s_A^2 O_i^\top O_j` and :math:`R_j = (I + K_j)O_j^\top Q` (K_j skew), the
   linearised step sends every :math:`O_iK_iO_i^\top` to the mean over j, so only the noise modes
   remain, which contract at an observed rate λ. With gains :math:`g_t = f^t - f^{t-1}` quadratic in
   the error, :math:`\lambda_t = \sqrt{g_t/g_{t-1}}`.
   *Secant extrapolation* (Anderson(1); Walker & Ni 2011). From the second Jacobi step on, with the
   map :math:`g(S) = \mathcal P(CS)` and residuals :math:`F^k = g(S^k) - S^k` of the last two steps,
   :math:`\gamma = \langle F^t, F^t - F^{t-1}\rangle / \|F^t - F^{t-1}\|_F^2` and the candidate is
   :math:`S^c = \mathcal P(g(S^t) - \gamma\,(g(S^t) - g(S^{t-1})))` blockwise (:func:`secant_candidate`):
   the secant step that cancels the dominant contraction mode. Since f is convex,
   :math:`f(S') - f(S) \ge 2\langle S' - S, CS\rangle = 2\sum_i\operatorname{tr}((R_i' - R_i)^\top G_i)`,
   so the Jacobi step :math:`\mathcal P(G)` gains at least :math:`2L_J`,
   :math:`L_J = \sum_i\operatorname{tr}((\mathcal P(G_i) - R_i)^\top G_i) \ge 0`. The candidate is
   accepted iff :math:`f(S^c) \ge f(S^t) + 2L_J` (at least the Jacobi step's guaranteed gain, so f stays
   non-decreasing and the stop rule never fires on a step shorter than the Jacobi one would have been
   guaranteed to be), else the Jacobi step is taken. No constant: γ is a least-squares fit. Cost: the
   candidate's template replaces the Jacobi step's (two block products per block, as the baseline's
   iteration); a rejected candidate adds one (three, as a sweep), in the same iteration. Measured:
   never rejected on the benchmark grid, and it removes the detecting step in the low-noise cells
   (m, 100, 64, 0.035), where the third Jacobi gain is 1–2e-10·f, just above tol.
2. *Switch* when :math:`\lambda_t > \rho_m` (:func:`consensus_rate`): ρ_m is the rate of the
   block-coordinate sweep below on the consensus error, i.e. the spectral radius, off the
   consensus vector 1, of the Gauss–Seidel matrix :math:`(I-L)^{-1}U` with
   :math:`L + U = (\mathbf 1\mathbf 1^\top - I)/(m-1)` (ρ_3 = 1/8, ρ_4 = 1/9, ρ_16 ≈ 0.117). Below the
   phase transition the Jacobi rate stays under ρ_m and the Jacobi phase runs to the stop rule.
3. *Block-coordinate sweep with over-relaxation* (Gauss–Seidel / SOR). For i = 1 … m, with the
   leave-one-out template :math:`T_{-i} = T - \bar B_i R_i` and :math:`G_i = \bar B_i^\top T_{-i}`,

   .. math:: f(R_i) = \|\bar B_i R_i + T_{-i}\|_F^2 = \|\bar B_i\|_F^2 + \|T_{-i}\|_F^2
             + 2\operatorname{tr}(R_i^\top G_i)

   is linear in R_i, so :math:`\mathcal P(G_i)` is the exact block maximiser (von Neumann). The
   over-relaxed candidate :math:`R_i^\omega = \mathcal P(R_i + \omega(\mathcal P(G_i) - R_i))` is
   accepted iff :math:`\operatorname{tr}(R_i^{\omega\top}G_i) \ge \operatorname{tr}(R_i^\top G_i)`,
   else :math:`\mathcal P(G_i)`; T is updated in place (:math:`T = T_{-i} + \bar B_i R_i`). Every
   accepted block update keeps f non-decreasing, whatever ω.
4. *ω from Young's SOR theory.* For a consistently ordered linear iteration with Jacobi rate μ, SOR
   with parameter ω has rate λ solving :math:`(\lambda+\omega-1)^2 = \lambda\omega^2\mu^2`, and the
   optimum is :math:`\omega^\star = 2/(1+\sqrt{1-\mu^2})` (:func:`young_omega`). The sweep starts with
   ω = 1; once the observed rate λ_t is steady (relative change < 5% over the last two sweeps, at
   least three sweeps after the last change) and :math:`\omega - 1 < \lambda_t < 1` (real-root regime),
   μ² is solved from the relation and ω raised to :math:`\min(\omega^\star, \omega_{\max})`
   (:data:`OMEGA_MAX`); ω never decreases. Past the phase transition the Jacobi rate is close to 1,
   where SOR gains most (rate ≈ ω* − 1 instead of μ²).

Escape step (``escape=True``, the default): Riemannian staircase (Boumal 2015; Rosen et al. 2019).
Past the phase transition the converged point can be a non-global local maximum; the certificate
below then fails, λ_min(Λ − C) < 0 with unit eigenvector u = [u_1; …; u_m] (u_i ∈ R^d). Relax the
blocks to the Stiefel set St(d, p) = {Y_i ∈ R^{d×p}: Y_iY_iᵀ = I_d}, p = d + 1, with the same
:math:`f(Y) = \|\sum_j\bar B_jY_j\|_F^2 = \operatorname{tr}(Y^\top CY)`. The embedded point
:math:`Y_i = [R_i, 0]` is stationary there with the same Λ, and :math:`\dot Y_i = [0, u_i]` is tangent
(:math:`Y_i\dot Y_i^\top + \dot Y_iY_i^\top = 0`) with second-order change
:math:`f(Y + t\dot Y) - f(Y) = -t^2 u^\top(\Lambda - C)u + O(t^3) > 0`: an ascent direction that O(d)^m
lacks. So: :math:`Y_i^0 = \mathcal P([R_i, \varepsilon u_i])` (ε = :data:`ESCAPE_STEP`), run the same
adaptive schedule on St(d, p)^m (polar factors of d × p matrices), round with the top-d right
singular vectors W (p × d) of :math:`\hat T = \sum_j\bar B_jY_j` (the d directions carrying most of
the template), :math:`R_i = \mathcal P(Y_iW)`, refine on O(d)^m, and keep whichever of the first and
the refined point has the larger f. One lift, only after a converged run and only when at least half
as many iterations as that run used remain in ``max_iter`` [assume]; its iterations count in
``n_iter_``. Everything stays a polar-step method from the spectral start.

The lifted run stops by the shared stop rule or at the *rank peak* [assume: a rule without a
constant]: after the first iteration that does not increase the template's excess-rank energy
:math:`E(Y) = \sum_{k>d}\sigma_k(\hat T)^2` (:func:`excess_rank_energy`), the part of f that the
rounding discards. The lift is there to move the template off rank d along u; while it does, E
grows. An iteration that shrinks E is moving back towards rank-d templates, i.e. towards O(d)^m,
where the refinement continues from the rounded point with exact polar steps. Measured on the
benchmark grid (below): of the 15 escapes, 4 stop by the stop rule and 11 at the rank peak; those 11
reach the same objective as with the lifted run to convergence (to 3e-12 relative) or, in (16, 200,
64, 0.14), a better one (+1e-4), all in fewer iterations. On the seeds 1 and 2 of the grid, 21
escapes stop at the peak, each 5 to 91 iterations sooner, 11 at the same objective (to 3e-11), 10
within −8.7e-5 … +1.1e-4 of it, and every one still at or above the baseline's objective; so the
rule does not pick the better local maximum, it stops the lift once it has left the first one. In
(16, 200, 16, 0.14) the first run reaches in 8 iterations the point the baseline reaches in 20, but
its certificate fails (λ_min/‖Λ − C‖ = −2.5e-3) and the relaxation is not tight there (the lifted
run, to convergence, ends at f(1 + 2.7e-6) with rank d + 1 and rounds back to the same point); E
shrinks from the first lifted step, so the escape takes one lifted and 5 refining iterations (14 in
all, instead of 37).

Measured against the alternating baseline (``benchmarks/bench_gpm.py``, full grid m ∈ {2, 4, 8, 16},
r ∈ {100, 200, 400}, d ∈ {16, 64}, v/s_A ∈ {0.035, 0.07, 0.14}, one instance per cell (seed 0),
``reports/bench/gpm.json``): same or better objective and fewer iterations in 72/72 cells. On two
other instances per cell (``--seed 1``, ``--seed 2``): same or better objective in 72/72 and fewer
iterations in 71/72 each; the other cell, (16, 100, 16, 0.035), is a tie at 3 iterations at the
floor of the shared stop rule (the baseline's third gain, 8e-11·f, falls just under tol; the GPM
starts 100× closer, but its second step still gains 1.5e-9·f and the third detects convergence).

Two participants (m = 2) have a closed form, used by :meth:`GeneralizedPowerMethod.fit` instead
of the iteration: with :math:`M = \bar B_1^\top\bar B_2 = U\Sigma V^\top`,

.. math:: f = \|\bar B_1\|_F^2 + \|\bar B_2\|_F^2 + 2\operatorname{tr}(M\,R_2R_1^\top)
          \le \|\bar B_1\|_F^2 + \|\bar B_2\|_F^2 + 2\|M\|_*

(von Neumann's trace inequality), with equality iff :math:`R_2R_1^\top = VU^\top`, i.e. one orthogonal
Procrustes problem. Fixing the global rotation by :math:`R_1 = I` gives
:math:`R_2 = \mathcal P(\bar B_2^\top\bar B_1) = VU^\top` (:func:`two_party_optimum`), the global
maximizer in 0 iterations. O(d) has two components (det = ±1) and, restricted to the one with the
wrong sign of :math:`\det(R_2R_1^\top)`, tr(MQ) has a local maximum (tr Σ − 2σ_min); the
Jacobi iteration from the spectral start of C, which lies there, converged to it on the benchmark
instances (measured: up to 0.14% below the optimum at v/s_A = 0.14, ``reports/bench/gpm.json``
before the closed form). The certificate always holds there:
:math:`\Lambda - C = [U;-V]\,\Sigma\,[U;-V]^\top \succeq 0`.

Certificate (§4.3): :math:`\Lambda = \mathrm{blockdiag}(\mathrm{sym}(\bar B_i^\top T R_i^\top))`;
if :math:`\lambda_{\min}(\Lambda - C) \ge -\tau\|\Lambda - C\|_2` then S is a global maximizer
(the semidefinite relaxation is tight). The spec's τ = 1e-9 presumes an exact fixed point; the
iterate that the stop rule returns is only approximately stationary, and its certificate residual
was measured at ≈ 10·tol (tol = 1e-10 → −1e-9 … −2e-9 at v/s_A = 0.07). So τ = max(1e-9, 100·tol)
[assume]; the raw ratio is always reported as ``certificate_``. For md > :data:`DENSE_EIG_MAX` the
smallest eigenpair is computed by Lanczos on the operator (Λ − C)X = ΛX − Bᵀ(BX)
(:func:`escape_direction`) instead of a dense O((md)³) eigendecomposition.

Polar factors: the exact maximisers P(G_i) by the SVD (batched over the blocks in a Jacobi step); the
extrapolated and over-relaxed candidates, combinations of nearby orthogonal blocks, by Newton–Schulz
(:func:`polar_near`), a few d × d products instead of an SVD.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import scipy.linalg
import scipy.sparse.linalg

from veilbench.linalg.procrustes import haar_orthogonal, orthogonal_procrustes, polar_factor, polar_factors
from veilbench.validation import ValidationError, as_rng, check_array, check_in_range

CERTIFICATE_TOL = 1e-9
#: Cap ω_max of the over-relaxation parameter (module docstring, step 4) [assume].
OMEGA_MAX = 1.9
#: Order md above which :func:`spectral_init` and :func:`escape_direction` use Lanczos instead of a
#: dense eigensolver [assume]: a cost crossover (measured on the benchmark instances: Lanczos ≈ 1.3×
#: faster at md = 512 and 1.3–17× at md = 1024, the dense solver as fast or faster at md ≤ 256); both
#: compute the same quantities.
DENSE_EIG_MAX = 256
#: ARPACK's relative tolerance on the Ritz values [assume]: 1e-12 puts the certificate's error
#: ≈ 1e-12·‖Λ − C‖₂, far below its threshold τ ≥ 1e-9, and the start's to rounding.
LANCZOS_TOL = 1e-12
#: Step ε along the unit escape direction u when lifting to St(d, d+1) (module docstring) [assume].
ESCAPE_STEP = 1.0


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
    ``max_steps``, the SVD is used. A step costs two d × d products (≈ 1% of a d = 64 SVD here).
    The extrapolated and over-relaxed candidates (combinations of nearby orthogonal blocks) are such
    blocks; G_i = B̄_iᵀT is not (measured: its residual is ≥ 1/2 on the benchmark), so it gets the SVD.
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
    rng = as_rng(seed)
    return np.stack([haar_orthogonal(d, rng) for _ in range(m)])


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


def excess_rank_energy(T: np.ndarray, d: int) -> float:
    """Σ_{k>d} σ_k(T)²: the energy of a lifted template T (r × p, p > d) outside its top-d right
    singular directions, which the escape's rounding discards (0 iff rank T ≤ d)."""
    return float(np.sum(np.linalg.eigvalsh(T.T @ T)[: T.shape[1] - d]))


def staircase_escape(
    Bbar: np.ndarray, R: np.ndarray, u: np.ndarray, tol: float, tol_rotation: float, max_iter: int
) -> tuple[np.ndarray, list[float], int, bool]:
    """Escape step (module docstring): lift along u to St(d, d+1)^m, run the adaptive schedule there
    to the stop rule or the rank peak, round to O(d)^m and refine; return (R, objective trace of both
    runs, iterations, converged)."""
    d = R.shape[1]
    Y0 = np.stack([polar(np.column_stack([ri, ESCAPE_STEP * ui])) for ri, ui in zip(R, u, strict=True)])
    Y, lifted, n_lift, _ = power_iterations(
        Bbar, Y0, tol, tol_rotation, max_iter, adaptive=True, until_rank_peak=True
    )
    W = np.linalg.svd(template(Bbar, Y), full_matrices=False)[2][:d].T
    R0 = np.stack([polar_factor(y @ W) for y in Y])
    if n_lift == max_iter:
        return R0, lifted, n_lift, False
    R1, refined, n_ref, converged = power_iterations(Bbar, R0, tol, tol_rotation, max_iter - n_lift, adaptive=True)
    return R1, lifted + refined[1:], n_lift + n_ref, converged


def rotation_error(R: np.ndarray, O: np.ndarray) -> float:
    """E_rot = sqrt(Σ_i ‖R_i − O_iᵀ Q̂‖_F² / (m d)) with Q̂ = P(Σ_i O_i R_i) (§4.4); 0 = perfect."""
    rr = check_array(R, "R", ndim=3)
    oo = check_array(O, "O", ndim=3)
    if rr.shape != oo.shape:
        raise ValidationError(f"R and O: shapes differ ({rr.shape} vs {oo.shape})")
    q = polar_factor(np.einsum("mde,mef->df", oo, rr))
    resid = rr - np.einsum("med,ef->mdf", oo, q)
    return float(np.sqrt(np.sum(resid**2) / (rr.shape[0] * rr.shape[1])))


def consensus_rate(m: int) -> float:
    """ρ_m = spectral radius off 1 of (I − L)⁻¹U, L + U = (11ᵀ − I)/(m − 1), L/U strictly lower/upper (step 2)."""
    a = (np.ones((m, m)) - np.eye(m)) / max(m - 1, 1)
    gs = np.linalg.solve(np.eye(m) - np.tril(a, -1), np.triu(a, 1))
    return float(np.sort(np.abs(np.linalg.eigvals(gs)))[-2]) if m > 1 else 0.0


def young_omega(mu2: float) -> float:
    """Optimal SOR parameter ω* = 2 / (1 + √(1 − μ²)) for a Jacobi rate μ (μ² in [0, 1))."""
    return 2.0 / (1.0 + np.sqrt(1.0 - mu2))


def block_sweep(Bbar: np.ndarray, R: np.ndarray, T: np.ndarray, omega: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """One Gauss–Seidel sweep i = 1 … m (step 3): exact block maximiser P(B̄_iᵀT_{-i}), over-relaxed
    by ω when that does not lower f; R (m, d, d) and T = Σ_j B̄_j R_j (r, d) in, updated copies out."""
    R = R.copy()
    for i, b in enumerate(Bbar):
        T_minus = T - b @ R[i]
        G = b.T @ T_minus
        best = polar(G)
        if omega != 1.0:
            over = polar_near(R[i] + omega * (best - R[i]))
            if np.sum(over * G) >= np.sum(R[i] * G):
                best = over
        T = T_minus + b @ best
        R[i] = best
    return R, T


def secant_candidate(R0: np.ndarray, g0: np.ndarray, R1: np.ndarray, g1: np.ndarray) -> np.ndarray | None:
    """Extrapolated Jacobi iterate (step 1b): Anderson(1) on the map g(S) = P(CS) from the pairs
    (S⁰, g(S⁰)), (S¹, g(S¹)), projected blockwise; None when the two residuals coincide."""
    F1 = g1 - R1
    dF = F1 - (g0 - R0)
    den = float(np.sum(dF**2))
    if den == 0.0:
        return None
    gamma = float(np.sum(F1 * dF)) / den
    return polar_near(g1 - gamma * (g1 - g0))


class RelaxationSchedule:
    """Jacobi phase, switch rule and ω of the adaptive schedule (steps 1, 2, 4); ``omega`` None = Jacobi."""

    def __init__(self, m: int):
        self.rho = consensus_rate(m)
        self.omega: float | None = None
        self.rates: list[float] = []
        self.changed_at = 0

    def update(self, t: int, gains: list[float]) -> None:
        """Read the observed rate λ_t = √(g_t / g_{t−1}) after iteration t and set the next step."""
        if len(gains) < 2 or gains[-2] <= 0:
            return
        lam = float(np.sqrt(max(gains[-1], 0.0) / gains[-2]))
        self.rates.append(lam)
        if self.omega is None:
            if lam > self.rho:
                self.omega, self.changed_at = 1.0, t
            return
        steady = len(self.rates) >= 2 and abs(self.rates[-1] - self.rates[-2]) < 0.05 * lam
        if t - self.changed_at >= 3 and steady and self.omega - 1.0 < lam < 1.0:
            mu2 = (lam + self.omega - 1.0) ** 2 / (lam * self.omega**2)
            if mu2 < 1.0 and (new := min(young_omega(mu2), OMEGA_MAX)) > self.omega:
                self.omega, self.changed_at = new, t


def power_iterations(
    Bbar: np.ndarray,
    R0: np.ndarray,
    tol: float,
    tol_rotation: float,
    max_iter: int,
    leave_one_out: bool = False,
    adaptive: bool = False,
    until_rank_peak: bool = False,
) -> tuple[np.ndarray, list[float], int, bool]:
    """Run polar updates from R0 with the stop rule above; return (R, objective trace, iterations, converged).

    ``adaptive=False``: the Jacobi step throughout (Ling's GPM; the alternating baseline's update).
    ``adaptive=True``: the module docstring's schedule (Jacobi phase with the guarded secant
    extrapolation, then over-relaxed block sweeps).
    ``until_rank_peak=True`` (lifted blocks R0 (m, d, p), p > d; the escape step): also stop after the
    first iteration that does not increase :func:`excess_rank_energy` of the template.
    ``converged`` is True when a stop rule fired (False only when ``max_iter`` ran out first).
    """
    R = R0
    T = template(Bbar, R)
    trace = [float(np.sum(T**2))]
    watch_rank = until_rank_peak and R0.shape[2] > R0.shape[1]
    excess = excess_rank_energy(T, R0.shape[1]) if watch_rank else 0.0
    gains: list[float] = []
    schedule = RelaxationSchedule(Bbar.shape[0])
    previous = None  # (S, g(S)) of the last Jacobi step, for the secant extrapolation
    for t in range(1, max_iter + 1):
        if schedule.omega is not None:
            R_new, T = block_sweep(Bbar, R, T, schedule.omega)
        elif leave_one_out:
            R_new = polar_step_leave_one_out(Bbar, R)
            T = template(Bbar, R_new)
        else:
            G = np.matmul(np.swapaxes(Bbar, 1, 2), T)
            R_new = polar(G)
            candidate = secant_candidate(*previous, R, R_new) if adaptive and previous is not None else None
            previous = (R, R_new)
            T_candidate = None if candidate is None else template(Bbar, candidate)
            # accept iff f(candidate) ≥ f + 2 Σ_i tr((P(G_i) − R_i)ᵀ G_i), the Jacobi step's guaranteed gain
            if T_candidate is not None and np.sum(T_candidate**2) >= trace[-1] + 2 * np.sum((R_new - R) * G):
                R_new, T = candidate, T_candidate
            else:
                T = template(Bbar, R_new)
        f = float(np.sum(T**2))
        step = float(np.max(np.linalg.norm(R_new - R, axis=(1, 2))))
        gains.append(f - trace[-1])
        trace.append(f)
        R = R_new
        if gains[-1] <= tol * f or step <= tol_rotation:
            return R, trace, t, True
        if watch_rank:
            excess, previous_excess = excess_rank_energy(T, R0.shape[1]), excess
            if excess <= previous_excess:
                return R, trace, t, True
        if adaptive:
            schedule.update(t, gains)
    return R, trace, max_iter, False


class _ProcrustesAligner:
    """Shared state and ``transform`` of the GOPP solvers (fit in subclasses).

    Learnt state: ``rotations_`` (m, d, d), ``offsets_`` (m, d) = b̄, ``template_`` (r, d) =
    (1/m) Σ_i B̄_i R_i, ``objective_`` = f(rotations_), ``n_iter_``, ``converged_``,
    ``objective_trace_`` (n_iter_ + 1,): f after each iteration, all runs in order (GPM escape: the
    lifted run's entries are the relaxation's objective).
    """

    def __init__(self, tol: float = 1e-10, tol_rotation: float = 1e-8, max_iter: int = 1000):
        self.tol = tol
        self.tol_rotation = tol_rotation
        self.max_iter = max_iter

    def _start(self, B: np.ndarray) -> np.ndarray:
        check_in_range(self.tol, "tol", 0.0, 1.0, low_inclusive=False, high_inclusive=False)
        check_in_range(self.tol_rotation, "tol_rotation", 0.0, None)
        if int(self.max_iter) < 1:
            raise ValidationError(f"max_iter: must be ≥ 1, got {self.max_iter}")
        Bbar, self.offsets_ = center_anchors(B)
        return Bbar

    def _finish(self, Bbar: np.ndarray, R: np.ndarray, trace: list[float], n_iter: int, converged: bool) -> None:
        self.rotations_ = R
        self.template_ = template(Bbar, R) / Bbar.shape[0]
        self.objective_ = objective(Bbar, R)
        self.objective_trace_ = np.asarray(trace)
        self.n_iter_ = int(n_iter)
        self.converged_ = bool(converged)

    def transform(self, Y: np.ndarray, party: np.ndarray) -> np.ndarray:
        """Aligned records Ŷ = (Y − 1 b̄_iᵀ) R_i, row by row with i = party[k] (§4.4); Y (n, d)."""
        y = check_array(Y, "Y", ndim=2, min_rows=0)
        p = np.asarray(party)
        m, d, _ = self.rotations_.shape
        if y.shape[1] != d or p.shape != (y.shape[0],) or (p.size and (p.min() < 0 or p.max() >= m)):
            raise ValidationError(f"Y, party: expected (n, {d}) records and n indices in [0, {m - 1}]")
        return np.einsum("nd,nde->ne", y - self.offsets_[p], self.rotations_[p])


class GeneralizedPowerMethod(_ProcrustesAligner):
    """GPM for generalized orthogonal Procrustes on anchor uploads (spec §4.3).

    Parameters
    ----------
    tol, tol_rotation, max_iter : stop rule (relative objective gain, rotation step, cap).
    init : ``"spectral"`` (default, hollowed spectral start) or ``"random"`` (Haar, ablation).
    template : ``"full"`` (default, includes the self term: monotone) or ``"leave_one_out"``: the
        template of the Jacobi steps (the block sweeps always use the exact leave-one-out maximiser).
    update : ``"adaptive"`` (default: Jacobi phase with secant extrapolation, then over-relaxed
        block-coordinate sweeps) or
        ``"jacobi"`` (Ling's step throughout, ablation).
    escape : run the escape step (module docstring) when the converged point is not certified and
        at least half as many iterations as used remain in ``max_iter``; ``escaped_`` says if it ran.
        ``init``, ``template``, ``update`` and ``escape`` configure the iteration; for m = 2 the closed
        form :func:`two_party_optimum` is returned instead (``n_iter_ = 0``, ``converged_ = True``).
    certify : compute ``certificate_`` = λ_min(Λ − C)/‖Λ − C‖₂ and ``certified_``.
    seed : used by ``init="random"`` only.
    """

    def __init__(
        self,
        tol: float = 1e-10,
        tol_rotation: float = 1e-8,
        max_iter: int = 1000,
        init: Literal["spectral", "random"] = "spectral",
        template: Literal["full", "leave_one_out"] = "full",
        update: Literal["adaptive", "jacobi"] = "adaptive",
        escape: bool = True,
        certify: bool = True,
        seed: int | np.random.Generator | None = None,
    ):
        super().__init__(tol, tol_rotation, max_iter)
        self.init = init
        self.template = template
        self.update = update
        self.escape = escape
        self.certify = certify
        self.seed = seed

    def fit(self, B: np.ndarray) -> GeneralizedPowerMethod:
        """Fit on raw anchor uploads B (m, r, d); centering is done here."""
        if self.init not in ("spectral", "random"):
            raise ValidationError(f"init: must be 'spectral' or 'random', got {self.init!r}")
        if self.template not in ("full", "leave_one_out"):
            raise ValidationError(f"template: must be 'full' or 'leave_one_out', got {self.template!r}")
        if self.update not in ("adaptive", "jacobi"):
            raise ValidationError(f"update: must be 'adaptive' or 'jacobi', got {self.update!r}")
        Bbar = self._start(B)
        m, _, d = Bbar.shape
        self.escaped_ = False
        if m == 2:
            R = two_party_optimum(Bbar)
            self._finish(Bbar, R, [objective(Bbar, R)], 0, True)
        else:
            R0 = spectral_init(Bbar) if self.init == "spectral" else random_init(m, d, self.seed)
            R, trace, n_iter, converged = power_iterations(
                Bbar,
                R0,
                self.tol,
                self.tol_rotation,
                int(self.max_iter),
                leave_one_out=self.template == "leave_one_out",
                adaptive=self.update == "adaptive",
            )
            budget = int(self.max_iter) - n_iter
            if self.escape and converged and 2 * budget >= n_iter:
                cert, u = escape_direction(Bbar, R)
                if cert < -self._certificate_tol():
                    R1, more, n_more, conv1 = staircase_escape(Bbar, R, u, self.tol, self.tol_rotation, budget)
                    self.escaped_ = True
                    trace, n_iter = trace + more[1:], n_iter + n_more
                    if objective(Bbar, R1) > objective(Bbar, R):
                        R, converged = R1, conv1
            self._finish(Bbar, R, trace, n_iter, converged)
        self.certificate_ = certificate(Bbar, self.rotations_) if self.certify else float("nan")
        self.certified_ = bool(self.certify and self.certificate_ >= -self._certificate_tol())
        return self

    def _certificate_tol(self) -> float:
        """τ = max(1e-9, 100·tol) (module docstring)."""
        return max(CERTIFICATE_TOL, 100 * self.tol)
