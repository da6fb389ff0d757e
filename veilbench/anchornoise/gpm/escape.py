r"""Escape from a non-certified local maximum: one step of the Riemannian staircase.

Boumal (2015); Rosen et al., "SE-Sync" (2019). Past the phase transition the converged point can be a
non-global local maximum; the certificate then fails, λ_min(Λ − C) < 0 with unit eigenvector
u = [u_1; …; u_m] (u_i ∈ R^d). Relax the blocks to the Stiefel set St(d, p) = {Y_i ∈ R^{d×p}:
Y_iY_iᵀ = I_d}, p = d + 1, with the same
:math:`f(Y) = \|\sum_j\bar B_jY_j\|_F^2 = \operatorname{tr}(Y^\top CY)`. The embedded point
:math:`Y_i = [R_i, 0]` is stationary there with the same Λ, and :math:`\dot Y_i = [0, u_i]` is tangent
(:math:`Y_i\dot Y_i^\top + \dot Y_iY_i^\top = 0`) with second-order change
:math:`f(Y + t\dot Y) - f(Y) = -t^2 u^\top(\Lambda - C)u + O(t^3) > 0`: an ascent direction that O(d)^m
lacks. So: :math:`Y_i^0 = \mathcal P([R_i, \varepsilon u_i])` (ε = :data:`ESCAPE_STEP`), run the same
adaptive schedule on St(d, p)^m, round with the top-d right singular vectors W (p × d) of
:math:`\hat T = \sum_j\bar B_jY_j` (the d directions carrying most of the template),
:math:`R_i = \mathcal P(Y_iW)`, and refine on O(d)^m.

The lifted run stops by the shared stop rule or at the *rank peak* [assume: a rule without a
constant]: after the first iteration that does not increase the excess-rank energy
:math:`E(Y) = \sum_{k>d}\sigma_k(\hat T)^2`, the part of f that the rounding discards. The lift is there
to move the template off rank d along u; while it does, E grows. An iteration that shrinks E is moving
back towards rank-d templates, where the refinement continues from the rounded point with exact
polar steps. The rule stops the lift once it has left the first local maximum; it does not choose
between local maxima (the caller keeps the better of the first and the refined point).
"""

from __future__ import annotations

import numpy as np

from veilbench.anchornoise.gpm.iteration import power_iterations
from veilbench.anchornoise.gpm.problem import polar, template
from veilbench.linalg.procrustes import polar_factor

#: Step ε along the unit escape direction u when lifting to St(d, d+1) [assume].
ESCAPE_STEP = 1.0


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
