r"""The GPM iteration: Jacobi steps with secant extrapolation, then over-relaxed block sweeps.

Iteration (Ling 2023, row convention): :math:`T^t = \sum_j \bar B_j R_j^t` (r × d) and
:math:`R_i^{t+1} = \mathcal P(\bar B_i^\top T^t)` ("Jacobi" step, all blocks from the same template).
Stop when :math:`f^{t+1}-f^t \le \mathrm{tol}\, f^{t+1}`, or
:math:`\max_i\|R_i^{t+1}-R_i^t\|_F \le \mathrm{tol}_R`, or after ``max_iter`` iterations
(``converged`` is False only in the last case). Since C ⪰ 0, f is convex and each polar step is a
linearisation ascent, so f is non-decreasing with the full template (the ``leave_one_out``
ablation, :math:`T_{-i} = T - \bar B_i R_i`, has no such guarantee).

Adaptive schedule (``adaptive=True``; otherwise Ling's step throughout). One iteration is either one
Jacobi step or one sweep over the m blocks, each O(m r d² + m d³).

1. *Jacobi phase.* Near the noiseless solution the Jacobi step is the exact consensus projection:
   with :math:`C_{ij} = s_A^2 O_i^\top O_j` and :math:`R_j = (I + K_j)O_j^\top Q` (K_j skew), the
   linearised step sends every :math:`O_iK_iO_i^\top` to the mean over j, so only the noise modes
   remain, which contract at an observed rate λ. With gains :math:`g_t = f^t - f^{t-1}` quadratic in
   the error, :math:`\lambda_t = \sqrt{g_t/g_{t-1}}`.
   *Secant extrapolation* (Anderson(1); Walker & Ni 2011). From the second Jacobi step on, with the
   map :math:`g(S) = \mathcal P(CS)` and residuals :math:`F^k = g(S^k) - S^k` of the last two steps,
   :math:`\gamma = \langle F^t, F^t - F^{t-1}\rangle / \|F^t - F^{t-1}\|_F^2` and the candidate is
   :math:`S^c = \mathcal P(g(S^t) - \gamma\,(g(S^t) - g(S^{t-1})))` blockwise (:func:`secant_candidate`).
   Since f is convex, :math:`f(S') - f(S) \ge 2\langle S' - S, CS\rangle`, so the Jacobi step
   :math:`\mathcal P(G)` gains at least :math:`2L_J`,
   :math:`L_J = \sum_i\operatorname{tr}((\mathcal P(G_i) - R_i)^\top G_i) \ge 0`. The candidate is
   accepted iff :math:`f(S^c) \ge f(S^t) + 2L_J`, else the Jacobi step is taken: f stays
   non-decreasing and the stop rule never fires on a step shorter than the Jacobi step's guarantee.
2. *Switch* when :math:`\lambda_t > \rho_m` (:func:`consensus_rate`): ρ_m is the rate of the
   block-coordinate sweep below on the consensus error, i.e. the spectral radius, off the
   consensus vector 1, of the Gauss–Seidel matrix :math:`(I-L)^{-1}U` with
   :math:`L + U = (\mathbf 1\mathbf 1^\top - I)/(m-1)` (ρ_3 = 1/8, ρ_4 = 1/9, ρ_16 ≈ 0.117).
3. *Block-coordinate sweep with over-relaxation* (Gauss–Seidel / SOR). For i = 1 … m, with the
   leave-one-out template :math:`T_{-i} = T - \bar B_i R_i` and :math:`G_i = \bar B_i^\top T_{-i}`,

   .. math:: f(R_i) = \|\bar B_i R_i + T_{-i}\|_F^2 = \|\bar B_i\|_F^2 + \|T_{-i}\|_F^2
             + 2\operatorname{tr}(R_i^\top G_i)

   is linear in R_i, so :math:`\mathcal P(G_i)` is the exact block maximiser (von Neumann). The
   over-relaxed candidate :math:`R_i^\omega = \mathcal P(R_i + \omega(\mathcal P(G_i) - R_i))` is
   accepted iff :math:`\operatorname{tr}(R_i^{\omega\top}G_i) \ge \operatorname{tr}(R_i^\top G_i)`,
   else :math:`\mathcal P(G_i)`: every accepted block update keeps f non-decreasing, whatever ω.
4. *ω from Young's SOR theory.* For a consistently ordered linear iteration with Jacobi rate μ, SOR
   with parameter ω has rate λ solving :math:`(\lambda+\omega-1)^2 = \lambda\omega^2\mu^2`, and the
   optimum is :math:`\omega^\star = 2/(1+\sqrt{1-\mu^2})` (:func:`young_omega`). The sweep starts with
   ω = 1; once the observed rate λ_t is steady (relative change < 5% over the last two sweeps, at
   least three sweeps after the last change) and :math:`\omega - 1 < \lambda_t < 1` (real-root regime),
   μ² is solved from the relation and ω raised to :math:`\min(\omega^\star, \omega_{\max})`
   (:data:`OMEGA_MAX`); ω never decreases.

Rank peak (``until_rank_peak``, used by the escape step on lifted blocks St(d, p), p > d): also stop
after the first iteration that does not increase the template's excess-rank energy
:math:`E = \sum_{k>d}\sigma_k(\hat T)^2` (:func:`excess_rank_energy`).

References: Ling (2023); Walker & Ni, "Anderson acceleration for fixed-point iterations" (2011);
Young, "Iterative solution of large linear systems" (1971).
"""

from __future__ import annotations

import numpy as np

from veilbench.anchornoise.gpm.problem import (
    polar,
    polar_near,
    polar_step_leave_one_out,
    template,
)

#: Cap ω_max of the over-relaxation parameter (step 4) [assume].
OMEGA_MAX = 1.9


def excess_rank_energy(T: np.ndarray, d: int) -> float:
    """Σ_{k>d} σ_k(T)²: the energy of a lifted template T (r × p, p > d) outside its top-d right
    singular directions, which the escape's rounding discards (0 iff rank T ≤ d)."""
    return float(np.sum(np.linalg.eigvalsh(T.T @ T)[: T.shape[1] - d]))

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
