r"""Projectors of a noisy symmetric Gram onto the elliptope E_n (ScoreShield spec §3.3–§3.4).

E_n = {G ∈ Sⁿ : G ⪰ 0, diag G = 1} = K1 ∩ K2 with K1 = Sⁿ₊ (PSD cone) and
K2 = {X ∈ Sⁿ : X_ii = 1, |X_ij| ≤ 1} (Lemma C.22). Building blocks (sym(A) = (A + Aᵀ)/2):

* P_PSD(A) = V diag(max(λ, 0)) Vᵀ with sym(A) = V diag(λ) Vᵀ (one eigendecomposition, O(n³));
* P_box(A): off-diagonal entries clipped to [−1, 1], diagonal set to 1 (O(n²)).

Solvers (each returns a :class:`Projection` with the solver's iterations, number of
eigendecompositions and the output's feasibility residuals):

* :func:`aap`: the paper's averaged alternating projections X ← ½P_PSD(X) + ½P_box(X), stopped
  when ‖X_new − X‖_F/‖X‖_F < tol (§3.4a); optional finalisation to exact feasibility;
* :func:`dykstra`: Boyle–Dykstra on K1, K2, converging to the metric projection P_{E_n}(G̃) (§3.4b);
* :func:`clip_only`: P_box alone (spec [X] baseline, no PSD coupling);
* :func:`eigclip_rescale`: Y = P_PSD(G̃), then D^{−½} Y D^{−½} with D = diag(Y) floored (§3.4a
  finalisation used as a one-shot projector);
* the exact Newton solver lives in :mod:`veilbench.scoreshield.newton`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from veilbench.validation import ValidationError, check_in_range, check_symmetric

DIAG_FLOOR = 1e-12


@dataclass(frozen=True)
class Feasibility:
    """Residual infeasibility of a release: λ_min, max |G_ii − 1|, max(0, max_{i≠j} |G_ij| − 1)."""

    min_eig: float
    max_diag_err: float
    max_offdiag_excess: float

    def as_dict(self) -> dict[str, float]:
        return {"min_eig": self.min_eig, "max_diag_err": self.max_diag_err, "max_offdiag_excess": self.max_offdiag_excess}


@dataclass(frozen=True)
class Projection:
    """A projected Gram (n × n) with solver diagnostics."""

    gram: np.ndarray
    solver: str
    iterations: int
    n_eigh: int
    converged: bool
    feasibility: Feasibility
    extra: dict[str, float] = field(default_factory=dict)

    def info(self) -> dict[str, object]:
        return {
            "solver": self.solver,
            "iterations": self.iterations,
            "n_eigh": self.n_eigh,
            "converged": self.converged,
            **self.feasibility.as_dict(),
            **self.extra,
        }


def check_gram(g: np.ndarray, name: str = "gram", atol: float = 1e-8) -> np.ndarray:
    """Validate a finite, square, symmetric (within ``atol`` relative to its scale) matrix."""
    arr = np.asarray(g, dtype=float)
    scale = float(np.max(np.abs(arr))) if arr.size and np.all(np.isfinite(arr)) else 1.0
    out = check_symmetric(arr, name, atol=atol * max(scale, 1.0))
    if out.shape[0] < 1:
        raise ValidationError(f"{name}: expected a non-empty matrix")
    return sym(out)


def sym(a: np.ndarray) -> np.ndarray:
    """(A + Aᵀ)/2."""
    return (a + a.T) / 2.0


def project_psd(a: np.ndarray) -> np.ndarray:
    """P_PSD(A) = V diag(max(λ, 0)) Vᵀ of sym(A) (n × n → n × n)."""
    lam, vec = np.linalg.eigh(sym(a))
    pos = lam > 0
    vp = vec[:, pos]
    return sym((vp * lam[pos]) @ vp.T)


def project_box(a: np.ndarray) -> np.ndarray:
    """P_box(A): entries clipped to [−1, 1], diagonal set to 1."""
    out = np.clip(a, -1.0, 1.0)
    np.fill_diagonal(out, 1.0)
    return out


def feasibility(g: np.ndarray) -> Feasibility:
    """Residuals of ``g`` (n × n) with respect to E_n (one extra ``eigvalsh``, not counted)."""
    n = g.shape[0]
    off = np.abs(g[~np.eye(n, dtype=bool)])
    return Feasibility(
        min_eig=float(np.linalg.eigvalsh(sym(g))[0]),
        max_diag_err=float(np.max(np.abs(np.diag(g) - 1.0))),
        max_offdiag_excess=float(max(0.0, off.max() - 1.0)) if off.size else 0.0,
    )


def rescale_unit_diagonal(y: np.ndarray) -> np.ndarray:
    """D^{−½} Y D^{−½} with D = max(diag(Y), 1e-12), diagonal then set to 1 exactly."""
    d = 1.0 / np.sqrt(np.maximum(np.diag(y), DIAG_FLOOR))
    out = sym(y * d[:, None] * d[None, :])
    np.fill_diagonal(out, 1.0)
    return out


def _check_iter(max_iter: int, tol: float) -> None:
    if int(max_iter) < 1:
        raise ValidationError(f"max_iter: must be ≥ 1, got {max_iter}")
    check_in_range(tol, "tol", 0.0, None, low_inclusive=False)


def aap(g_noisy: np.ndarray, max_iter: int = 500, tol: float = 1e-6, finalize: bool = False) -> Projection:
    """Averaged alternating projections X ← ½P_PSD(X) + ½P_box(X) from X₀ = sym(G̃) (spec §3.4a).

    Stops when ‖X_new − X‖_F / ‖X‖_F < ``tol`` or after ``max_iter`` iterations; the rule reads
    only the noisy iterates, so the output stays a post-processing of G̃. ``finalize`` applies
    P_PSD then the unit-diagonal rescaling for exact feasibility (spec [X]).
    """
    x = check_gram(g_noisy, "g_noisy")
    _check_iter(max_iter, tol)
    converged, it = False, 0
    for it in range(1, int(max_iter) + 1):
        x_new = 0.5 * project_psd(x) + 0.5 * project_box(x)
        change = np.linalg.norm(x_new - x) / max(np.linalg.norm(x), DIAG_FLOOR)
        x = x_new
        if change < tol:
            converged = True
            break
    n_eigh = it
    if finalize:
        x = rescale_unit_diagonal(project_psd(x))
        n_eigh += 1
    return Projection(x, "aap", it, n_eigh, converged, feasibility(x))


def dykstra(g_noisy: np.ndarray, max_iter: int = 5000, tol: float = 1e-7) -> Projection:
    """Boyle–Dykstra alternating projections with corrections → P_{E_n}(G̃) (spec §3.4b).

    Y ← P_PSD(X + p); p ← X + p − Y; X ← P_box(Y + q); q ← Y + q − X, until both the relative
    change of X and the gap ‖Y − X‖_F (relative to ‖X‖_F) fall below ``tol``. The returned
    matrix is the box iterate X (unit diagonal, |X_ij| ≤ 1; PSD up to the final gap).
    """
    x = check_gram(g_noisy, "g_noisy")
    _check_iter(max_iter, tol)
    p = np.zeros_like(x)
    q = np.zeros_like(x)
    converged, it = False, 0
    for it in range(1, int(max_iter) + 1):
        y = project_psd(x + p)
        p = x + p - y
        x_new = project_box(y + q)
        q = y + q - x_new
        scale = max(np.linalg.norm(x_new), DIAG_FLOOR)
        change = np.linalg.norm(x_new - x) / scale
        gap = np.linalg.norm(y - x_new) / scale
        x = x_new
        if change < tol and gap < tol:
            converged = True
            break
    return Projection(x, "dykstra", it, it, converged, feasibility(x))


def clip_only(g_noisy: np.ndarray) -> Projection:
    """P_box(G̃) alone: unit diagonal and |entries| ≤ 1, no PSD constraint (spec [X] baseline)."""
    x = project_box(check_gram(g_noisy, "g_noisy"))
    return Projection(x, "clip", 1, 0, True, feasibility(x))


def eigclip_rescale(g_noisy: np.ndarray) -> Projection:
    """D^{−½} P_PSD(G̃) D^{−½}: PSD with unit diagonal, one eigendecomposition (not the metric projection)."""
    x = rescale_unit_diagonal(project_psd(check_gram(g_noisy, "g_noisy")))
    return Projection(x, "eigclip", 1, 1, True, feasibility(x))
