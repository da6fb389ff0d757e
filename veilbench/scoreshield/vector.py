r"""Regime (i): the ScoreShield score-vector release (spec §3.1, Algorithm 1).

For a public unit query q and unit-row embeddings X (n × d), the clean score vector is
s = X q ∈ [−1, 1]ⁿ. The release is

.. math:: \hat s = \mathrm{clip}(s + \sigma g, -1, 1), \qquad g \sim N(0, I_n),
          \qquad \sigma = \mathrm{calib}(\Delta, \varepsilon, \delta),

with Δ = 2 (Δ_m = 1 + m under a public margin; :mod:`veilbench.scoreshield.sensitivity`).
Clipping is the Euclidean projection onto [−1, 1]ⁿ and a post-processing, so ŝ is
(ε, δ)-DP; the unclipped s̃ = s + σg is the "noisy" baseline. Each row of a (q × n) score
matrix is treated as one release; the guarantee is per row unless Δ is scaled by √q.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from veilbench.privacy.audit import AuditPlan, AuditResult, epsilon_lower_bound
from veilbench.privacy.calibration import calibrate_sigma
from veilbench.random import as_rng
from veilbench.validation import ValidationError, check_array, check_epsilon_delta, check_in_range


@dataclass(frozen=True)
class VectorRelease:
    """A released (q, n) score matrix, the σ used, the fraction of entries clipped to ±1 and the
    noisy scores s̃ = s + σg before clipping (what the white-box noise audit reads)."""

    scores: np.ndarray
    sigma: float
    clipped_fraction: float
    unclipped: np.ndarray | None = None


def perturb_scores(
    scores: np.ndarray, sigma: float, seed: int | np.random.Generator | None, clip: bool = True
) -> VectorRelease:
    """ŝ = clip(s + σg, −1, 1) (or s + σg without ``clip``) for a score array of any shape.

    scores : (…) array of clean cosines in [−1, 1]; sigma ≥ 0 (0 releases the clean scores).
    """
    s = check_array(scores, "scores")
    if s.size and (s.min() < -1.0 - 1e-9 or s.max() > 1.0 + 1e-9):
        raise ValidationError(f"scores: cosine scores must lie in [-1, 1], got [{s.min():.3g}, {s.max():.3g}]")
    sig = check_in_range(sigma, "sigma", 0.0, None)
    noisy = s + sig * as_rng(seed, "scoreshield.vector-noise").standard_normal(s.shape)
    if not clip:
        return VectorRelease(noisy, sig, 0.0, noisy)
    out = np.clip(noisy, -1.0, 1.0)
    frac = float(np.mean(np.abs(noisy) >= 1.0)) if s.size else 0.0
    return VectorRelease(out, sig, frac, noisy)


class GaussianScoreMechanism:
    """The calibrated Gaussian score release of spec §3.1.

    Parameters
    ----------
    epsilon, delta : the (ε, δ) budget of one released score vector.
    sensitivity : L2 sensitivity Δ of one vector (2 by default; 1 + m under a public margin).
    calibrator : ``"analytic"`` (default), ``"classical"`` or ``"conservative"`` (spec §2).
    clip : project onto [−1, 1]ⁿ (ScoreShield) or not (the "noisy" baseline).
    allow_invalid_calibration : let ``classical`` calibrate where it misses δ (see
        :func:`veilbench.privacy.calibration.classical_sigma`).
    score_floor : clean scores are raised to at least this value before the noise (−m under a
        public margin m). The paper assumes ⟨q, x⟩ ≥ −m as a precondition (App. H.1); enforcing
        it by this data-independent clamp makes Δ_m = 1 + m hold for every input.
    """

    def __init__(
        self,
        epsilon: float,
        delta: float,
        sensitivity: float = 2.0,
        calibrator: str = "analytic",
        clip: bool = True,
        score_floor: float = -1.0,
        allow_invalid_calibration: bool = False,
    ) -> None:
        self.epsilon, self.delta = check_epsilon_delta(epsilon, delta)
        self.sensitivity = check_in_range(sensitivity, "sensitivity", 0.0, None, low_inclusive=False)
        self.calibrator = calibrator
        self.clip = clip
        self.score_floor = check_in_range(score_floor, "score_floor", -1.0, 1.0)
        self.sigma = calibrate_sigma(self.sensitivity, self.epsilon, self.delta, calibrator,
                                     allow_invalid=allow_invalid_calibration)

    def release(self, scores: np.ndarray, seed: int | np.random.Generator | None) -> VectorRelease:
        """Release clean ``scores`` ((q, n), one vector per row) with this mechanism's σ."""
        s = check_array(scores, "scores")
        return perturb_scores(np.maximum(s, self.score_floor), self.sigma, seed, clip=self.clip)


ScoreRelease = Callable[[np.ndarray, np.random.Generator], np.ndarray]


def audit_score_release(
    release: ScoreRelease,
    delta: float,
    n_releases: int = 10_000,
    seed: int = 0,
    alpha: float = 0.05,
    n_thresholds: int | None = None,
    plan: AuditPlan | None = None,
) -> AuditResult:
    """Empirical ε lower bound of a coordinate-wise score release on the worst-case neighbours.

    The neighbouring datasets differ in one record whose clean score is +1 (x_i = q) versus −1
    (x_i' = −q) (spec §6 recommended audit). ``release(clean, rng)`` maps a 1-d array of clean
    scores to released scores coordinate by coordinate with independent noise, so one call on
    ``n_releases`` copies yields that many independent releases of the differing coordinate.
    The statistic is the released coordinate itself (monotone likelihood ratio for Gaussian
    noise, hence a threshold test is Neyman–Pearson optimal); thresholds as in
    :func:`~veilbench.privacy.audit.epsilon_lower_bound`. A finite-sample audit only sees violations
    carried by events of probability ≳ 10/``n_releases``; a mis-calibration hidden in a δ-sized tail
    goes unseen — ``plan`` (:func:`~veilbench.privacy.audit.plan_audit`) states what this count can decide.
    """
    if n_releases < 40:
        raise ValidationError(f"n_releases: need at least 40 releases, got {n_releases}")
    rng = as_rng(seed, "scoreshield.vector-audit")
    on_d = np.asarray(release(np.ones(n_releases), rng), dtype=float)
    on_dprime = np.asarray(release(-np.ones(n_releases), rng), dtype=float)
    return epsilon_lower_bound(on_d, on_dprime, delta=delta, alpha=alpha, n_thresholds=n_thresholds, seed=seed,
                               plan=plan)
