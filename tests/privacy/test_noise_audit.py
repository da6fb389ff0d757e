"""The white-box noise audit's maths, each value computed independently of :mod:`veilbench.privacy.noise_audit`:
χ² bounds from the gamma distribution, the ε bound against dp_accounting's PLD, the stated power against a
simulation of the audit's own decision, and its behaviour on correct, scaled, non-Gaussian and biased noise."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld
from scipy.stats import gamma

from veilbench.privacy.calibration import achieved_delta, analytic_sigma, gaussian_epsilon
from veilbench.privacy.noise_audit import (
    METRIC_PREFIX,
    NOISE_AUDIT_ALPHA,
    audit_gaussian_noise,
    audit_noise_arrays,
    chi2_power,
    noise_arrays,
)
from veilbench.random import stream
from veilbench.validation import ValidationError

DELTA = 1e-5


def _audit(noise: np.ndarray, sigma: float, epsilon: float, sensitivity: float = 1.0, **kw):
    return audit_noise_arrays(noise_arrays(noise), sigma, sensitivity, epsilon, DELTA, **kw)


def _chi2_quantile(p: float, k: int) -> float:
    """χ²_k quantile through the gamma law Γ(k/2, scale 2) (not scipy.stats.chi2)."""
    return float(gamma.ppf(p, k / 2.0, scale=2.0))


# ------------------------------------------------------------------------------------------------
# the exact Gaussian ε
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("sigma", "sens", "delta"), [(7.03, 1.0, 1e-5), (0.6, 1.0, 1e-5), (3.0, 2.0, 1e-6),
                                                      (0.5, 0.5, 1e-3)])
def test_gaussian_epsilon_inverts_the_profile_and_matches_dp_accounting(sigma, sens, delta):
    eps = gaussian_epsilon(sigma, sens, delta)
    assert achieved_delta(sigma, sens, eps) == pytest.approx(delta, rel=1e-9)
    kw = dict(sensitivity=sens, value_discretization_interval=1e-4)
    hi = pld.from_gaussian_mechanism(sigma, pessimistic_estimate=True, **kw).get_epsilon_for_delta(delta)
    lo = pld.from_gaussian_mechanism(sigma, pessimistic_estimate=False, **kw).get_epsilon_for_delta(delta)
    assert lo - 1e-3 <= eps <= hi + 1e-3 and eps == pytest.approx(hi, rel=2e-3)


def test_gaussian_epsilon_edges_and_monotonicity():
    assert gaussian_epsilon(0.0, 1.0, DELTA) == math.inf
    assert gaussian_epsilon(1e3, 1.0, 0.4) == 0.0  # δ(0) ≤ δ already
    eps = [gaussian_epsilon(s, 1.0, DELTA) for s in (0.05, 0.2, 0.6, 2.0, 7.0)]
    assert all(a > b for a, b in zip(eps, eps[1:]))
    assert gaussian_epsilon(analytic_sigma(1.0, 8.0, DELTA), 1.0, DELTA) == pytest.approx(8.0, rel=1e-9)
    for bad, field in (((-1.0, 1.0, DELTA), "sigma"), ((1.0, 0.0, DELTA), "sensitivity"), ((1.0, 1.0, 1.0), "delta")):
        with pytest.raises(ValidationError, match=field):
            gaussian_epsilon(*bad)


def test_composed_releases_are_one_gaussian_of_sensitivity_delta_sqrt_r():
    """r releases of σ, Δ: the PLD of one release self-composed r times gives the same ε as Δ√r."""
    sigma, r = 6.0, 20
    want = pld.from_gaussian_mechanism(sigma, sensitivity=1.0, value_discretization_interval=1e-4).self_compose(r)
    assert gaussian_epsilon(sigma, math.sqrt(r), DELTA) == pytest.approx(want.get_epsilon_for_delta(DELTA), rel=2e-3)


# ------------------------------------------------------------------------------------------------
# the χ² bounds, the ε bounds and the power
# ------------------------------------------------------------------------------------------------


def test_sigma_bounds_solve_the_chi_square_tail_equations():
    k, sigma = 500, 2.0
    e = sigma * stream(0, "t").standard_normal(k)
    res = _audit(e, sigma, 1.0)
    a, s = NOISE_AUDIT_ALPHA / 3, float(np.dot(e, e))
    assert res.sigma_hat == pytest.approx(math.sqrt(s / k), rel=1e-12)
    assert res.sigma_lower == pytest.approx(math.sqrt(s / _chi2_quantile(1 - a, k)), rel=1e-9)
    assert res.sigma_upper == pytest.approx(math.sqrt(s / _chi2_quantile(a, k)), rel=1e-9)
    assert res.sigma_lower < res.sigma_hat < res.sigma_upper
    assert res.n_entries == k and res.sigma_expected == sigma and res.alpha == NOISE_AUDIT_ALPHA


def test_epsilon_lower_comes_from_the_upper_sigma_bound():
    """ε decreases in σ: the lower bound on ε is the exact ε of σ̄ (the upper bound on σ), the upper one of σ̲."""
    eps, sens = 4.0, 2.0
    sigma = analytic_sigma(sens, eps, DELTA)
    res = _audit(sigma * stream(1, "t").standard_normal(3000), sigma, eps, sensitivity=sens, releases=3)
    want_lo = pld.from_gaussian_mechanism(res.sigma_upper, sensitivity=sens * math.sqrt(3),
                                          value_discretization_interval=1e-4).get_epsilon_for_delta(DELTA)
    assert res.epsilon_lower == pytest.approx(want_lo, rel=2e-3)
    assert res.epsilon_lower == gaussian_epsilon(res.sigma_upper, sens * math.sqrt(3), DELTA)
    assert res.epsilon_upper == gaussian_epsilon(res.sigma_lower, sens * math.sqrt(3), DELTA)
    assert res.epsilon_lower < res.epsilon_upper
    assert res.sigma_min == pytest.approx(analytic_sigma(sens * math.sqrt(3), eps, DELTA), rel=1e-12)


@pytest.mark.parametrize("ratio", [0.5, 0.8])
def test_stated_power_is_the_chi_square_law_of_the_broken_scale(ratio):
    """power(ρ) = F_{χ²_k}(σ_min² χ²_{k,a}/(ρσ)²), from the gamma law; at the run's sizes it meets the targets."""
    eps, k = 8.0, 666  # the smallest Gram of the default run: the 36 train sentences of the paraphrases
    sigma = analytic_sigma(1.0, eps, DELTA)
    a = NOISE_AUDIT_ALPHA / 3
    want = gamma.cdf(sigma**2 * _chi2_quantile(a, k) / (ratio * sigma) ** 2, k / 2.0, scale=2.0)
    res = _audit(sigma * stream(2, "t").standard_normal(k), sigma, eps)
    got = res.power_half_sigma if ratio == 0.5 else res.power_08_sigma
    assert got == pytest.approx(want, rel=1e-9, abs=1e-12)
    assert got >= 0.95 and res.decidable


def test_stated_power_matches_a_simulation_of_the_audit_decision():
    """At a k where the power against 0.8σ is intermediate, the share of simulated runs the audit flags
    agrees with :func:`chi2_power` within 4 standard errors, and a correct σ is flagged at rate a = α/3."""
    eps, k, n_sim, alpha = 2.0, 70, 2000, 0.05
    sigma = analytic_sigma(1.0, eps, DELTA)
    rng = stream(3, "t")
    a = alpha / 3
    assert 0.3 < chi2_power(0.8, sigma, sigma, k, a) < 0.7
    assert chi2_power(1.0, sigma, sigma, k, a) == pytest.approx(a, rel=1e-6)
    for ratio in (0.8, 1.0):
        power = chi2_power(ratio, sigma, sigma, k, a)
        flags = 0
        for _ in range(n_sim):
            e = ratio * sigma * rng.standard_normal(k)
            flags += audit_gaussian_noise(np.dot(e, e), k, e[:1], sigma, 1.0, eps, DELTA, alpha=alpha).flagged_scale
        assert abs(flags / n_sim - power) < 4 * math.sqrt(power * (1 - power) / n_sim), (ratio, flags / n_sim, power)


# ------------------------------------------------------------------------------------------------
# decisions on correct, scaled, non-Gaussian and biased noise
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("eps", [1.0, 8.0, 32.0])
def test_correct_noise_is_never_flagged_and_scaled_noise_always_over_40_seeds(eps):
    k = 666
    sigma = analytic_sigma(1.0, eps, DELTA)
    for seed in range(40):
        g = stream(seed, "noise").standard_normal(k)
        ok = _audit(sigma * g, sigma, eps)
        assert not ok.flagged and ok.epsilon_lower <= eps <= ok.epsilon_upper, seed
        for ratio in (0.5, 0.8):
            bad = _audit(ratio * sigma * g, sigma, eps)
            assert bad.flagged_scale and bad.epsilon_lower > eps, (seed, ratio)


def test_more_noise_than_calibrated_is_not_a_violation():
    sigma = analytic_sigma(1.0, 8.0, DELTA)
    res = _audit(2.0 * sigma * stream(4, "t").standard_normal(2000), sigma, 8.0)
    assert not res.flagged and res.epsilon_upper < 8.0


@pytest.mark.parametrize("law", ["laplace", "uniform"])
def test_noise_of_the_right_variance_but_the_wrong_law_fails_the_normality_test(law):
    k, eps = 4096, 1.0
    sigma = analytic_sigma(1.0, eps, DELTA)
    rng = stream(5, "t")
    e = rng.laplace(0.0, sigma / math.sqrt(2), k) if law == "laplace" else rng.uniform(-1, 1, k) * sigma * math.sqrt(3)
    res = _audit(e, sigma, eps)
    assert res.normality_pvalue < res.level and res.flagged_shape and res.flagged
    assert not res.flagged_scale  # the variance is right: only the shape test sees it


def test_biased_noise_fails_the_mean_test():
    sigma = analytic_sigma(1.0, 8.0, DELTA)
    res = _audit(sigma * (0.2 + stream(6, "t").standard_normal(4096)), sigma, 8.0)
    assert res.mean_pvalue < res.level and res.flagged and not res.flagged_scale


def test_no_noise_at_all_is_infinitely_flagged():
    res = _audit(np.zeros(100), 1.0, 8.0)
    assert res.epsilon_lower == math.inf and res.flagged


def test_groups_pool_and_padding_and_short_samples_are_ignored():
    """(R,) sums over groups are pooled; NaN padding and entries past a group's count are not sampled;
    fewer than 20 sample entries give no normality p-value (and no flag from it)."""
    sigma = analytic_sigma(1.0, 4.0, DELTA)
    rng = stream(7, "t")
    rows = [sigma * rng.standard_normal(n) for n in (300, 200)]
    sample = np.full((2, 256), np.nan)
    sample[0], sample[1, :200] = rows[0][:256], rows[1]
    sample[0, 250:] = 1e6  # within group 0's 300 entries: read
    pooled = audit_gaussian_noise([np.dot(r, r) for r in rows], np.array([300, 200]), sample, sigma, 1.0, 4.0, DELTA)
    flat = np.concatenate(rows)
    one = audit_gaussian_noise(np.dot(flat, flat), 500, flat, sigma, 1.0, 4.0, DELTA)
    assert pooled.sigma_upper == pytest.approx(one.sigma_upper, rel=1e-12) and pooled.n_entries == 500
    assert pooled.flagged_shape  # the 1e6 entries are within group 0's count and are read
    capped = audit_gaussian_noise([np.dot(r, r) for r in rows], np.array([250, 200]), sample, sigma, 1.0, 4.0, DELTA)
    assert not capped.flagged_shape  # now they lie past the count and are ignored
    short = audit_gaussian_noise(np.dot(flat, flat), 500, flat[:10], sigma, 1.0, 4.0, DELTA)
    assert math.isnan(short.normality_pvalue) and not math.isnan(short.mean_pvalue) and not short.flagged


def test_metrics_are_named_and_flags_are_numbers():
    sigma = analytic_sigma(1.0, 8.0, DELTA)
    m = _audit(0.5 * sigma * stream(8, "t").standard_normal(1000), sigma, 8.0).metrics("_round")
    assert all(k.startswith(METRIC_PREFIX) and k.endswith("_round") for k in m)
    assert m[f"{METRIC_PREFIX}flagged_round"] == 1.0 and m[f"{METRIC_PREFIX}epsilon_claimed_round"] == 8.0
    assert all(isinstance(v, float) for v in m.values())


@pytest.mark.parametrize(("kwargs", "field"), [
    (dict(sum_sq=[1.0, 2.0], count=[3]), "count"), (dict(count=[0]), "count"), (dict(count=[2.5]), "count"),
    (dict(sum_sq=[-1.0]), "sum_sq"), (dict(sum_sq=[np.nan]), "sum_sq"), (dict(sample=np.zeros((2, 3))), "sample"),
    (dict(sigma=0.0), "sigma"), (dict(sensitivity=-1.0), "sensitivity"), (dict(epsilon=0.0), "epsilon"),
    (dict(delta=0.0), "delta"), (dict(releases=0), "releases"), (dict(alpha=1.0), "alpha"),
])
def test_bad_arguments_name_their_field(kwargs, field):
    args = dict(sum_sq=[10.0], count=[10], sample=np.zeros(10), sigma=1.0, sensitivity=1.0, epsilon=1.0, delta=DELTA)
    args.update(kwargs)
    with pytest.raises(ValidationError, match=rf"^{field}: "):
        audit_gaussian_noise(**args)
    with pytest.raises(ValidationError, match=r"release: .*missing \['dp_noise_sample'\]"):
        audit_noise_arrays({"dp_noise_sum_sq": np.ones(1), "dp_noise_count": np.ones(1)}, 1.0, 1.0, 1.0, DELTA)
