r"""Regime (ii): the ScoreShield Gram release G̃ = G + sym(Z) (spec §3.3, Algorithms 2/5).

For unit-row embeddings X (n × d) the clean cosine Gram is G = X Xᵀ ∈ E_n. The noisy release is

.. math:: \tilde G = G + \mathrm{sym}(Z), \qquad Z_{ij} \overset{iid}{\sim} N(0, \sigma^2),
          \qquad \sigma = \mathrm{calib}(\Delta_F, \varepsilon, \delta),

i.e. diagonal variance σ², off-diagonal variance σ²/2 (spec §8 item 3). sym(Z) is a
post-processing of G + Z, whose Frobenius sensitivity is Δ_F, so G̃ and any projection of it
are (ε, δ)-DP. Adjacency:

* ``"record"`` (R): Δ_F = 2√(2(n − 1)) (person-level; :func:`gram_record_sensitivity`);
* ``"output"`` (O): a user Δ, independent of n (Cohen-Addad et al.; not person-level unless
  Δ ≥ 2√(2(n − 1))).

Projectors (:data:`PROJECTORS`) map G̃ back to E_n.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from veilbench.privacy.audit import AuditPlan, AuditResult, epsilon_lower_bound
from veilbench.privacy.calibration import calibrate_sigma
from veilbench.random import as_rng
from veilbench.scoreshield.newton import nearest_correlation_newton
from veilbench.scoreshield.projectors import Projection, aap, check_gram, clip_only, dykstra, eigclip_rescale, sym
from veilbench.scoreshield.sensitivity import gram_record_sensitivity, worst_case_gram_pair
from veilbench.validation import ValidationError, check_array, check_epsilon_delta, check_in_range, check_unit_rows

PROJECTORS: dict[str, Callable[..., Projection]] = {
    "aap": aap,
    "dykstra": dykstra,
    "newton": nearest_correlation_newton,
    "clip": clip_only,
    "eigclip": eigclip_rescale,
}


def cosine_gram(x: np.ndarray) -> np.ndarray:
    """G = X Xᵀ (n × n) of unit rows X (n × d); rows must already have unit norm."""
    arr = check_unit_rows(x, "x")
    return np.clip(sym(arr @ arr.T), -1.0, 1.0)


def spectral_embedding(gram: np.ndarray, k: int) -> np.ndarray:
    r"""E = V_k diag(√max(λ_k, 0)) (n × min(k, n)) from the top-k eigenpairs of sym(Ĝ) (n × n).

    The analyst's record coordinates for a released Gram (cross-family protocol): for a PSD Ĝ of
    rank ≤ k, E Eᵀ = Ĝ exactly; negative eigenvalues of an unprojected G̃ contribute zero columns.
    Columns are ordered by decreasing eigenvalue.
    """
    g = check_gram(gram, "gram")
    if int(k) < 1:
        raise ValidationError(f"k: must be ≥ 1, got {k}")
    k = min(int(k), g.shape[0])
    lam, vec = np.linalg.eigh(g)
    top = np.arange(g.shape[0] - 1, g.shape[0] - 1 - k, -1)  # eigh sorts ascending
    return vec[:, top] * np.sqrt(np.maximum(lam[top], 0.0))


def symmetric_gaussian(
    n: int, sigma: float, seed: int | np.random.Generator | None, size: tuple[int, ...] = ()
) -> np.ndarray:
    """sym(Z) with Z (``size`` × n × n) i.i.d. N(0, σ²): diagonal variance σ², off-diagonal σ²/2."""
    sig = check_in_range(sigma, "sigma", 0.0, None)
    z = sig * as_rng(seed, "scoreshield.gram-noise").standard_normal((*size, n, n))
    return (z + np.swapaxes(z, -1, -2)) / 2.0


def gram_noise_entries(noise: np.ndarray) -> np.ndarray:
    r"""The n(n + 1)/2 independent entries of a symmetrised noise W = sym(Z) (n × n), on Z's scale.

    For Z i.i.d. N(0, σ²), W_ii = Z_ii has variance σ² and W_ij = (Z_ij + Z_ji)/2 (i < j) has σ²/2,
    and no two of them share a Z entry: the returned [W_11, …, W_nn, √2 W_12, √2 W_13, …, √2 W_{n−1,n}]
    ((n(n + 1)/2,), diagonal first, then the upper triangle row by row) are i.i.d. N(0, σ²). Entries
    below the diagonal repeat those above and are not read.
    """
    w = check_array(noise, "noise", ndim=2)
    if w.shape[0] != w.shape[1]:
        raise ValidationError(f"noise: expected a square (n × n) array, got shape {w.shape}")
    return np.concatenate([np.diag(w), math.sqrt(2.0) * w[np.triu_indices(w.shape[0], k=1)]])


@dataclass(frozen=True)
class GramRelease:
    """The noisy Gram G̃ (n × n), its σ and the Frobenius sensitivity Δ_F it was calibrated to."""

    noisy: np.ndarray
    sigma: float
    sensitivity: float


class GaussianGramMechanism:
    """G̃ = G + sym(Z) with σ calibrated to the adjacency's Frobenius sensitivity.

    Parameters
    ----------
    epsilon, delta : the (ε, δ) budget of the whole Gram.
    adjacency : ``"record"`` (Δ_F = 2√(2(n − 1))) or ``"output"`` (Δ_F = ``sensitivity``).
    sensitivity : Δ for output-space adjacency (ignored for ``"record"``).
    calibrator : ``"analytic"`` (default), ``"classical"`` or ``"conservative"``.
    allow_invalid_calibration : let ``classical`` calibrate where it misses δ.
    """

    def __init__(
        self,
        epsilon: float,
        delta: float,
        adjacency: str = "record",
        sensitivity: float = 1.0,
        calibrator: str = "analytic",
        allow_invalid_calibration: bool = False,
    ) -> None:
        self.epsilon, self.delta = check_epsilon_delta(epsilon, delta)
        if adjacency not in ("record", "output"):
            raise ValidationError(f"adjacency: must be one of ['output', 'record'], got {adjacency!r}")
        self.adjacency = adjacency
        self.sensitivity = check_in_range(sensitivity, "sensitivity", 0.0, None, low_inclusive=False)
        self.calibrator = calibrator
        self.allow_invalid_calibration = allow_invalid_calibration

    def sensitivity_for(self, n: int) -> float:
        """Δ_F for an n-record Gram."""
        return gram_record_sensitivity(n) if self.adjacency == "record" else self.sensitivity

    def sigma_for(self, n: int) -> float:
        """σ = calib(Δ_F(n), ε, δ)."""
        return calibrate_sigma(self.sensitivity_for(n), self.epsilon, self.delta, self.calibrator,
                               allow_invalid=self.allow_invalid_calibration)

    def release(self, x: np.ndarray, seed: int | np.random.Generator | None) -> GramRelease:
        """G̃ = X Xᵀ + sym(Z) for unit rows X (n × d)."""
        g = cosine_gram(x)
        n = g.shape[0]
        sigma = self.sigma_for(n)
        return GramRelease(g + symmetric_gaussian(n, sigma, seed), sigma, self.sensitivity_for(n))


def audit_pair(mechanism: GaussianGramMechanism, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Neighbouring unit-row collections (n × 2) whose Grams differ by exactly Δ_F.

    Record adjacency: n copies of e₁ versus row 0 flipped (attains 2√(2(n − 1))). Output
    adjacency: row 0 rotated by φ with (1 − cos φ)·√(2(n − 1)) = Δ, which needs
    n ≥ 1 + Δ²/8.
    """
    x, xp = worst_case_gram_pair(n)
    if mechanism.adjacency == "record":
        return x, xp
    gap = mechanism.sensitivity / math.sqrt(2.0 * (n - 1))
    if gap > 2.0:
        raise ValidationError(f"n: output-space Δ={mechanism.sensitivity:g} needs n ≥ {1 + mechanism.sensitivity**2 / 8:.0f}")
    phi = math.acos(1.0 - gap)
    xp[0] = [math.cos(phi), math.sin(phi)]
    return x, xp


def audit_gram_release(
    mechanism: GaussianGramMechanism,
    n: int = 6,
    n_releases: int = 10_000,
    seed: int = 0,
    alpha: float = 0.05,
    plan: AuditPlan | None = None,
) -> AuditResult:
    """Empirical ε lower bound of the noisy Gram release on the neighbours of :func:`audit_pair`.

    Each release is G + sym(Z) with the mechanism's σ for this n (drawn in one batch by
    :func:`symmetric_gaussian`, as :meth:`GaussianGramMechanism.release` does); the statistic is the
    projection ⟨G̃, ΔG⟩/‖ΔG‖_F (the Neyman–Pearson direction). Projections are post-processing
    and cannot raise ε, so the unprojected release is audited.
    """
    n = max(n, math.ceil(1 + mechanism.sensitivity**2 / 8) if mechanism.adjacency == "output" else n)
    x, xp = audit_pair(mechanism, n)
    g, gp = cosine_gram(x), cosine_gram(xp)
    direction = (g - gp) / np.linalg.norm(g - gp)
    sigma = mechanism.sigma_for(n)
    rng = as_rng(seed, "scoreshield.gram-audit")
    stats = [
        np.sum(clean * direction) + np.einsum("kij,ij->k", symmetric_gaussian(n, sigma, rng, (n_releases,)), direction)
        for clean in (g, gp)
    ]
    return epsilon_lower_bound(stats[0], stats[1], delta=mechanism.delta, alpha=alpha, seed=seed, plan=plan)
