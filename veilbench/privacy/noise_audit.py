r"""White-box audit of a Gaussian mechanism: is the noise it added N(0, σ²) with enough σ for its claim?

The black-box audit (:mod:`.audit`) sees releases only and can certify at most
:func:`~veilbench.privacy.audit.max_certifiable_epsilon` of its run count, so it is blind at large ε.
This audit reads the noise the mechanism actually added, e = release − clean, taken *before* any
clipping or projection (those are post-processing, and their output is not the noise), as k
independent entries that should be i.i.d. N(0, σ²) (for a symmetrised Gram G + sym(Z): the n
diagonal entries and √2 × the n(n − 1)/2 entries above it, :func:`veilbench.scoreshield.gram.gram_noise_entries`).
It needs only their sum of squares S = Σ eᵢ² and a sample of them.

**Scale (exact).** Under eᵢ ~ N(0, σ'²), S/σ'² ~ χ²_k, so with χ²_{k,p} the p-quantile

.. math:: \underline\sigma = \sqrt{S/\chi^2_{k,1-a}}, \qquad \overline\sigma = \sqrt{S/\chi^2_{k,a}}

are one-sided (1 − a) lower and upper confidence bounds on σ'.

**Privacy (exact profile).** A Gaussian mechanism of L2 sensitivity Δ and noise σ, released r times
(adaptively; r releases compose exactly into one Gaussian of sensitivity Δ√r, Dong, Roth & Su 2022,
Cor. 3.3), spends at δ the ε solving

.. math:: \delta = \Phi\Big(\frac{\Delta_r}{2\sigma} - \frac{\varepsilon\sigma}{\Delta_r}\Big)
          - e^{\varepsilon}\Phi\Big(-\frac{\Delta_r}{2\sigma} - \frac{\varepsilon\sigma}{\Delta_r}\Big),
          \qquad \Delta_r = \Delta\sqrt r

(Balle & Wang 2018, Thm 8; :func:`~veilbench.privacy.calibration.gaussian_epsilon`), which *decreases*
in σ. So the **upper** bound on σ gives the lower bound on ε, ε̲ = ε(σ̄), and the lower bound on σ
the upper one, ε̄ = ε(σ̲); both hold with probability ≥ 1 − a when Δ is attained by some pair of
neighbours (the worst-case pairs the black-box audits use). The audit flags when ε̲ > ε_claimed: the
noise is certifiably too small for the claim, i.e. σ̄ < σ_min = the smallest σ meeting
(ε_claimed, δ) (:func:`~veilbench.privacy.calibration.analytic_sigma`).

**Power (exact).** A mechanism that adds ρσ instead of the calibrated σ has S = ρ²σ²χ²_k and is
flagged when S < σ_min² χ²_{k,a}, with probability

.. math:: \mathrm{power}(\rho) = F_{\chi^2_k}\big(\sigma_{\min}^2\,\chi^2_{k,a} / (\rho\sigma)^2\big),

stated for ρ = 1/2 and 0.8. The audit is *decidable* when power(1/2) ≥
:data:`~veilbench.privacy.audit.POWER_TARGET`, as for the black-box audit.

**Shape.** On the sample: D'Agostino–Pearson's K² normality test (skewness, so symmetry, and
kurtosis; ``scipy.stats.normaltest``, asymptotically χ²₂) and Student's t test of a zero mean
(``scipy.stats.ttest_1samp``, exact for Gaussian noise of any σ). A mechanism with the right
variance but the wrong law (Laplace, uniform) or a bias fails these, not the scale test.

**Flag.** Any of the three tests at level a = α/3 (Bonferroni): a correct mechanism is flagged with
probability ≤ α. :data:`NOISE_AUDIT_ALPHA` = 10⁻⁴ per cell and seed: a default run's private cells
(about sixty, a few seeds each) flag a correct mechanism somewhere with probability of about 0.02.

Release arrays (one row per group of entries of the same σ, e.g. per round): ``dp_noise_sum_sq``
(R,) float64, ``dp_noise_count`` (R,) int64, ``dp_noise_sample`` (R, m) float64 (the first entries
of each group; non-finite padding is ignored), :func:`noise_arrays`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy.stats import chi2, normaltest, ttest_1samp

from veilbench.privacy.audit import POWER_TARGET
from veilbench.privacy.calibration import analytic_sigma, gaussian_epsilon
from veilbench.validation import ValidationError, check_array, check_in_range

NOISE_AUDIT_ALPHA = 1e-4
"""Default probability that the audit flags a correct Gaussian mechanism (all three tests): small enough
that the 57 private cells of a run times 40 seeds raise a false flag with probability about 0.2 (a per-cell rate of 10⁻⁴), while σ/2 and
0.8σ are still flagged with ≥ 95 % power in every cell of the default run (tests/privacy)."""

SAMPLE_SIZE = 4096
"""Noise entries kept per group for the shape tests by :func:`noise_arrays`."""

MIN_SHAPE_SAMPLE = 20
"""Fewest sample entries the normality test runs on (its kurtosis part needs 20); below, its p-value is NaN."""

METRIC_PREFIX = "privacy_noise_audit_"

#: The noise arrays a release hands to the audit.
ARRAY_NAMES = ("dp_noise_sum_sq", "dp_noise_count", "dp_noise_sample")


@dataclass(frozen=True)
class NoiseAudit:
    """Outcome of :func:`audit_gaussian_noise` (σ's are per noise entry; ε's at the claim's δ)."""

    n_entries: int
    sigma_expected: float
    sigma_hat: float
    sigma_lower: float
    sigma_upper: float
    sigma_min: float
    epsilon_claimed: float
    epsilon_lower: float
    epsilon_upper: float
    normality_pvalue: float
    mean_pvalue: float
    power_half_sigma: float
    power_08_sigma: float
    alpha: float = NOISE_AUDIT_ALPHA

    @property
    def level(self) -> float:
        """Level a = α/3 of each of the three tests."""
        return self.alpha / 3.0

    @property
    def flagged_scale(self) -> bool:
        """ε̲ > ε_claimed: the noise is certifiably too small for the claim."""
        return self.epsilon_lower > self.epsilon_claimed

    @property
    def flagged_shape(self) -> bool:
        """The sample rejects normality or a zero mean at level a (NaN p-values never flag)."""
        return bool(self.normality_pvalue < self.level or self.mean_pvalue < self.level)

    @property
    def flagged(self) -> bool:
        return self.flagged_scale or self.flagged_shape

    @property
    def decidable(self) -> bool:
        """Power against half the calibrated noise ≥ :data:`~veilbench.privacy.audit.POWER_TARGET`."""
        return self.power_half_sigma >= POWER_TARGET

    def metrics(self, suffix: str = "") -> dict[str, float]:
        """``privacy_noise_audit_<name><suffix>`` → value (flags and decidability as 0/1)."""
        values = {
            "entries": float(self.n_entries), "sigma_expected": self.sigma_expected, "sigma_hat": self.sigma_hat,
            "sigma_lower": self.sigma_lower, "sigma_upper": self.sigma_upper, "epsilon_claimed": self.epsilon_claimed,
            "epsilon_lower": self.epsilon_lower, "epsilon_upper": self.epsilon_upper,
            "normality_pvalue": self.normality_pvalue, "mean_pvalue": self.mean_pvalue,
            "power_half_sigma": self.power_half_sigma, "power_08_sigma": self.power_08_sigma,
            "decidable": float(self.decidable), "flagged": float(self.flagged), "alpha": self.alpha,
        }
        return {f"{METRIC_PREFIX}{k}{suffix}": float(v) for k, v in values.items()}


def noise_arrays(entries: np.ndarray, sample_size: int = SAMPLE_SIZE) -> dict[str, np.ndarray]:
    """Release arrays of one group of independent noise entries ``entries`` (any shape, flattened):
    ``dp_noise_sum_sq`` (1,), ``dp_noise_count`` (1,) and ``dp_noise_sample`` (1, min(k, sample_size)).

    Σ eᵢ² is numpy's pairwise sum of the squares, not BLAS ``dot``, whose summation order (so its
    last bits) depends on the number of BLAS threads."""
    e = check_array(entries, "entries").ravel()
    m = int(check_in_range(sample_size, "sample_size", 1, None))
    return {"dp_noise_sum_sq": np.array([float(np.sum(np.square(e)))]), "dp_noise_count": np.array([e.size], dtype=np.int64),
            "dp_noise_sample": e[:m].reshape(1, -1).copy()}


def chi2_power(ratio: float, sigma: float, sigma_min: float, k: int, level: float) -> float:
    """P(σ̄ < σ_min) when the k entries are N(0, (ratio·σ)²): F_{χ²_k}(σ_min² χ²_{k,level} / (ratio σ)²)."""
    return float(chi2.cdf(sigma_min**2 * chi2.ppf(level, k) / (ratio * sigma) ** 2, k))


def _shape_pvalues(sample: np.ndarray, count: np.ndarray) -> tuple[float, float]:
    """(K² normality p, t-test zero-mean p) of the finite sample entries within each group's count."""
    rows = [row[: int(c)] for row, c in zip(sample, count, strict=True)]
    pooled = np.concatenate(rows) if rows else np.empty(0)
    pooled = pooled[np.isfinite(pooled)]
    normal = float(normaltest(pooled).pvalue) if pooled.size >= MIN_SHAPE_SAMPLE else math.nan
    mean = float(ttest_1samp(pooled, 0.0).pvalue) if pooled.size >= 2 and np.ptp(pooled) > 0 else math.nan
    return normal, mean


def audit_gaussian_noise(
    sum_sq: np.ndarray | float,
    count: np.ndarray | int,
    sample: np.ndarray,
    sigma: float,
    sensitivity: float,
    epsilon: float,
    delta: float,
    releases: int = 1,
    alpha: float = NOISE_AUDIT_ALPHA,
) -> NoiseAudit:
    """Audit noise meant to be i.i.d. N(0, ``sigma``²) against an (ε, δ) claim (module docstring).

    Parameters
    ----------
    sum_sq, count : (R,) arrays (or scalars): per group, Σ eᵢ² and the number of entries (≥ 1 in all).
    sample : (R, m) or (m,) array: the first entries of each group (NaN padding ignored).
    sigma : the calibrated std of one entry (the power is stated against ρ·sigma).
    sensitivity : L2 sensitivity Δ of one release.
    epsilon, delta : the claim, for all ``releases`` releases together.
    releases : r ≥ 1 releases of this (σ, Δ) under the claim (e.g. the rounds of DP-FedAvg).
    alpha : probability of flagging a correct mechanism, in (0, 1).
    """
    ss = check_array(np.atleast_1d(sum_sq), "sum_sq", ndim=1)
    cnt = np.atleast_1d(np.asarray(count))
    if cnt.shape != ss.shape or not np.issubdtype(cnt.dtype, np.number) or np.any(cnt < 1) or np.any(cnt != np.round(cnt)):
        raise ValidationError(f"count: expected {ss.shape[0]} integers ≥ 1 (one per sum_sq), got {cnt!r}")
    if np.any(ss < 0):
        raise ValidationError(f"sum_sq: sums of squares must be ≥ 0, got {ss.min()!r}")
    smp = np.asarray(sample, dtype=float)
    smp = smp.reshape(1, -1) if smp.ndim == 1 else smp
    if smp.ndim != 2 or smp.shape[0] != ss.shape[0]:
        raise ValidationError(f"sample: expected {ss.shape[0]} rows (one per sum_sq), got shape {np.shape(sample)}")
    sig = check_in_range(sigma, "sigma", 0.0, None, low_inclusive=False)
    sens = check_in_range(sensitivity, "sensitivity", 0.0, None, low_inclusive=False)
    eps = check_in_range(epsilon, "epsilon", 0.0, None, low_inclusive=False)
    dlt = check_in_range(delta, "delta", 0.0, 1.0, low_inclusive=False, high_inclusive=False)
    r = int(check_in_range(releases, "releases", 1, None))
    a = check_in_range(alpha, "alpha", 0.0, 1.0, low_inclusive=False, high_inclusive=False) / 3.0
    s_total, k = float(np.sum(ss)), int(np.sum(cnt))
    sigma_lower = math.sqrt(s_total / chi2.isf(a, k))
    sigma_upper = math.sqrt(s_total / chi2.ppf(a, k))
    sens_r = sens * math.sqrt(r)
    sigma_min = analytic_sigma(sens_r, eps, dlt) if math.isfinite(eps) else 0.0
    normal_p, mean_p = _shape_pvalues(smp, cnt)
    return NoiseAudit(
        n_entries=k, sigma_expected=sig, sigma_hat=math.sqrt(s_total / k), sigma_lower=sigma_lower,
        sigma_upper=sigma_upper, sigma_min=sigma_min, epsilon_claimed=eps,
        epsilon_lower=gaussian_epsilon(sigma_upper, sens_r, dlt), epsilon_upper=gaussian_epsilon(sigma_lower, sens_r, dlt),
        normality_pvalue=normal_p, mean_pvalue=mean_p,
        power_half_sigma=chi2_power(0.5, sig, sigma_min, k, a), power_08_sigma=chi2_power(0.8, sig, sigma_min, k, a),
        alpha=3.0 * a,
    )


def audit_noise_arrays(arrays: Mapping[str, np.ndarray], sigma: float, sensitivity: float, epsilon: float,
                       delta: float, releases: int = 1, alpha: float = NOISE_AUDIT_ALPHA) -> NoiseAudit:
    """:func:`audit_gaussian_noise` of the release arrays :data:`ARRAY_NAMES` in ``arrays``."""
    missing = [n for n in ARRAY_NAMES if n not in arrays]
    if missing:
        raise ValidationError(f"release: the noise audit needs the arrays {list(ARRAY_NAMES)}; missing {missing}")
    return audit_gaussian_noise(arrays["dp_noise_sum_sq"], arrays["dp_noise_count"], arrays["dp_noise_sample"],
                                sigma, sensitivity, epsilon, delta, releases, alpha)
