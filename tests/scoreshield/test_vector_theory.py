"""Regime (i) release against the spec §4 oracles (naive risks, clipping, decisions) and bad inputs."""

from __future__ import annotations

import numpy as np
import pytest

from veilbench.scoreshield.gram import symmetric_gaussian
from veilbench.scoreshield.vector import GaussianScoreMechanism, perturb_scores
from veilbench.validation import ValidationError


def test_naive_vector_risk_is_n_sigma_squared():
    s = np.linspace(-0.9, 0.9, 50)
    errs = [np.sum((perturb_scores(s, 0.7, k, clip=False).scores - s) ** 2) for k in range(2000)]
    assert np.mean(errs) == pytest.approx(50 * 0.49, rel=0.03)


def test_clipping_never_increases_error_and_keeps_interior_decisions():
    rng = np.random.default_rng(0)
    for k in range(200):
        s = rng.uniform(-1, 1, 30)
        s[:5] = 1.0
        noisy = perturb_scores(s, 1.5, k, clip=False).scores
        clipped = perturb_scores(s, 1.5, k, clip=True)
        assert np.sum((clipped.scores - s) ** 2) <= np.sum((noisy - s) ** 2) + 1e-12
        tau = rng.uniform(-0.99, 0.99)
        assert np.array_equal(clipped.scores > tau, noisy > tau)
        assert clipped.clipped_fraction == pytest.approx(np.mean(np.abs(noisy) >= 1))


def test_local_box_bound_for_saturated_scores():
    """E‖clip(s̃) − s‖² ≤ σ²(n − a/2) with a coordinates at ±1 (spec §4.1, small σ)."""
    s = np.concatenate([np.ones(20), -np.ones(10), np.zeros(20)])
    sigma = 0.05
    risk = np.mean([np.sum((perturb_scores(s, sigma, k).scores - s) ** 2) for k in range(3000)])
    assert risk <= sigma**2 * (50 - 30 / 2) * 1.03
    assert risk == pytest.approx(sigma**2 * (50 - 30 / 2), rel=0.05)


def test_naive_gram_risk_is_sigma_squared_n_n_plus_one_over_two():
    n, sigma = 6, 1.3
    z = symmetric_gaussian(n, sigma, 0, size=(20_000,))
    assert np.mean(np.sum(z**2, axis=(1, 2))) == pytest.approx(sigma**2 * n * (n + 1) / 2, rel=0.02)


def test_mechanism_sigma_scales_with_sensitivity():
    a = GaussianScoreMechanism(1.0, 1e-5, sensitivity=2.0)
    b = GaussianScoreMechanism(1.0, 1e-5, sensitivity=1.0)
    assert a.sigma == pytest.approx(2 * b.sigma)
    assert a.release(np.zeros((2, 3)), 0).scores.shape == (2, 3)


@pytest.mark.parametrize(("call", "field"), [
    (lambda: perturb_scores(np.array([0.2, 1.5]), 1.0, 0), "scores"),
    (lambda: perturb_scores(np.array([0.2, np.nan]), 1.0, 0), "scores"),
    (lambda: perturb_scores(np.array([0.2]), -1.0, 0), "sigma"),
    (lambda: GaussianScoreMechanism(0.0, 1e-5), "epsilon"),
    (lambda: GaussianScoreMechanism(1.0, 0.0), "delta"),
    (lambda: GaussianScoreMechanism(1.0, 1e-5, sensitivity=-2.0), "sensitivity"),
    (lambda: GaussianScoreMechanism(1.0, 1e-5, calibrator="renyi"), "calibrator"),
])
def test_bad_inputs(call, field):
    with pytest.raises(ValidationError, match=field):
        call()


def test_public_margin_floor_makes_the_claimed_sensitivity_hold():
    """With Δ_m = 1 + m, clean scores below −m are clamped, so ±1 neighbours differ by ≤ 1 + m."""
    from veilbench.scoreshield.vector import audit_score_release

    m, eps, delta = 0.0, 2.0, 1e-2  # m = 0: Δ_m = 1, half the worst-case sensitivity
    floored = GaussianScoreMechanism(eps, delta, sensitivity=1 + m, score_floor=-m)
    unfloored = GaussianScoreMechanism(eps, delta, sensitivity=1 + m)
    assert floored.release(np.array([-0.9, 0.5]), 0).scores[0] == pytest.approx(
        perturb_scores(np.array([-m, 0.5]), floored.sigma, 0).scores[0])
    ok = audit_score_release(lambda c, r: floored.release(c, r).scores, delta, 20_000, seed=0)
    assert ok.epsilon_lower_bound <= eps
    # Without the clamp, the +1 / −1 neighbours move by 2 > 1 + m: the audit sees the excess.
    bad = audit_score_release(lambda c, r: unfloored.release(c, r).scores, delta, 20_000, seed=0)
    assert bad.epsilon_lower_bound > eps
