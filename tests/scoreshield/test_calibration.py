"""Calibrators against the spec §2 reference values and Google's dp_accounting PLD accountant."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from pydantic import ValidationError as PydanticValidationError

from veilbench.privacy.calibration import (
    ClassicalCalibrationWarning,
    achieved_delta,
    analytic_sigma,
    calibrate_sigma,
    classical_noise_multiplier,
    classical_sigma,
    classical_validity_limit,
    conservative_sigma,
)
from veilbench.privacy.ledger import LedgerEntry
from veilbench.scoreshield import family
from veilbench.validation import ValidationError

# Spec §2 validity table (Δ = 2): ε, δ, σ classical, σ analytic, exact δ achieved by classical σ.
SPEC_TABLE = [
    (1, 1e-5, 9.690, 7.461, 4.1e-8),
    (10, 1e-5, 0.969, 1.000, 2.3e-5),
    (10, 1e-3, 0.755, 0.812, 3.4e-3),
    (35, 1e-4, 0.248, 0.362, 0.33),
    (100, 1e-4, 0.087, 0.182, 1.0),
    (100, 1e-2, 0.062, 0.166, 1.0),
]

# A few cells of the spec §2 classical-σ grid for the FR tables (Δ = 2).
CLASSICAL_GRID = [(15, 1e-7, 0.762), (20, 1e-3, 0.378), (35, 1e-4, 0.248), (70, 0.2, 0.055), (100, 0.8, 0.019)]


@pytest.mark.parametrize(("eps", "delta", "sig_cl", "sig_an", "delta_cl"), SPEC_TABLE)
def test_spec_table(eps, delta, sig_cl, sig_an, delta_cl):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ClassicalCalibrationWarning)
        cl = classical_sigma(2.0, eps, delta, allow_invalid=True)
    assert cl == pytest.approx(2.0 * math.sqrt(2.0 * math.log(1.25 / delta)) / eps, rel=1e-12)
    assert round(cl, 3) == pytest.approx(sig_cl, abs=1e-3)
    assert round(analytic_sigma(2.0, eps, delta), 3) == pytest.approx(sig_an, abs=1e-3)
    got = achieved_delta(cl, 2.0, eps)
    assert got == pytest.approx(delta_cl, rel=0.05, abs=5e-3 if delta_cl > 0.1 else 0)


@pytest.mark.parametrize(("eps", "delta", "sig"), CLASSICAL_GRID)
def test_classical_grid(eps, delta, sig):
    with pytest.raises(ValidationError, match=r"epsilon: .*only for epsilon in \(0, "):
        classical_sigma(2.0, eps, delta)
    with pytest.warns(ClassicalCalibrationWarning, match="only"):
        assert classical_sigma(2.0, eps, delta, allow_invalid=True) == pytest.approx(sig, abs=6e-4)


@pytest.mark.parametrize(("sens", "eps", "delta"), [(2.0, 0.5, 1e-5), (2.0, 1.0, 1e-5), (1.0, 4.0, 1e-6)])
def test_analytic_matches_dp_accounting_pld(sens, eps, delta):
    """The PLD accountant brackets the target δ at the analytic σ (optimistic ≤ δ ≤ pessimistic)."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    sigma = analytic_sigma(sens, eps, delta)
    kw = dict(sensitivity=sens, value_discretization_interval=1e-4)
    hi = pld.from_gaussian_mechanism(sigma, pessimistic_estimate=True, **kw).get_delta_for_epsilon(eps)
    lo = pld.from_gaussian_mechanism(sigma, pessimistic_estimate=False, **kw).get_delta_for_epsilon(eps)
    assert lo <= delta * (1 + 1e-6) and delta <= hi * (1 + 1e-6)
    assert hi == pytest.approx(delta, rel=0.02)
    # 1% less noise is measurably not (ε, δ)-DP according to the accountant.
    lo_less = pld.from_gaussian_mechanism(0.99 * sigma, pessimistic_estimate=False, **kw).get_delta_for_epsilon(eps)
    assert lo_less > delta


@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0, 2.0, 5.0, 20.0, 100.0])
@pytest.mark.parametrize("delta", [1e-7, 1e-5, 1e-2, 0.4])
def test_conservative_valid_and_above_analytic(eps, delta):
    cons = conservative_sigma(2.0, eps, delta)
    assert cons >= analytic_sigma(2.0, eps, delta)
    assert achieved_delta(cons, 2.0, eps) <= delta


def test_classical_warns_from_epsilon_one_only():
    with warnings.catch_warnings():
        warnings.simplefilter("error", ClassicalCalibrationWarning)
        calibrate_sigma(2.0, 0.9, 1e-5, "classical")
    with pytest.warns(ClassicalCalibrationWarning, match="epsilon=1"):
        calibrate_sigma(2.0, 1.0, 1e-5, "classical")


@pytest.mark.parametrize("delta", [1e-7, 1e-5, 1e-2])
def test_classical_is_refused_exactly_beyond_its_validity_limit(delta):
    """Below the limit the classical σ meets δ (exact profile), above it misses δ and is refused."""
    limit = classical_validity_limit(delta)
    assert 1.0 < limit < 10.0
    z = classical_noise_multiplier(limit, delta)
    assert achieved_delta(z, 1.0, limit) == pytest.approx(delta, rel=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ClassicalCalibrationWarning)
        sigma = classical_sigma(2.0, 0.99 * limit, delta)
    assert achieved_delta(sigma, 2.0, 0.99 * limit) <= delta
    for calibrate in (lambda: classical_sigma(2.0, 1.01 * limit, delta),
                      lambda: calibrate_sigma(2.0, 1.01 * limit, delta, "classical")):
        with pytest.raises(ValidationError, match=rf"epsilon: .*\(0, {limit:.4g}\].*epsilon={1.01 * limit:g}"):
            calibrate()


def test_family_refuses_classical_beyond_validity_unless_allowed(tiny_inputs):
    with pytest.raises(PydanticValidationError, match=r"epsilon: calibrator 'classical' meets delta=1e-05 only for "
                                                      r"epsilon in \(0, 8.42\]; at epsilon=10"):
        family.Params(mechanism="gaussian", epsilon=10.0, calibrator="classical", n_queries=5)
    family.Params(mechanism="gaussian", epsilon=8.0, calibrator="classical", n_queries=5)  # valid: exact δ ≤ 1e-5
    p = family.Params(mechanism="gaussian", epsilon=10.0, calibrator="classical", n_queries=5,
                      allow_invalid_calibration=True)
    with pytest.warns(ClassicalCalibrationWarning, match="only"):
        out = family.release(tiny_inputs, p, seed=0)
    sigma = 2.0 * math.sqrt(2.0 * math.log(1.25e5)) / 10.0
    assert out.info["sigma"] == pytest.approx(sigma)
    # the ledger gets σ/Δ, from which it records the δ actually achieved (> the target 1e-5)
    (release,) = out.ledger
    assert release.noise_multiplier == pytest.approx(sigma / 2.0)
    assert (release.epsilon, release.count) == (10.0, 5)
    entry = release.entry("d", "s", "c", 0, "gaussian")
    assert entry == LedgerEntry("d", "s", "c", 0, "gaussian", 10.0, 1e-5, 5, sigma / 2.0, "record")
    assert entry.delta_achieved == pytest.approx(2.27e-5, rel=0.01)


@pytest.mark.parametrize("calibrator", ["analytic", "classical", "conservative"])
def test_infinite_epsilon_is_a_clear_error(calibrator):
    """ε = ∞ is no privacy: refused by the calibrators and the cell options, which point to 'clean'."""
    with pytest.raises(ValidationError, match=r"epsilon: must be finite, in \(0, ∞\).*clean"):
        calibrate_sigma(2.0, math.inf, 1e-5, calibrator)
    with pytest.raises(PydanticValidationError, match=r"epsilon: must be a finite number in \(0, ∞\), got inf.*clean"):
        family.Params(mechanism="gaussian", epsilon=math.inf, calibrator=calibrator)


@pytest.mark.parametrize(("kwargs", "field"), [
    (dict(sensitivity=2.0, epsilon=0.0, delta=1e-5), "epsilon"),
    (dict(sensitivity=2.0, epsilon=-1.0, delta=1e-5), "epsilon"),
    (dict(sensitivity=2.0, epsilon=1.0, delta=0.0), "delta"),
    (dict(sensitivity=2.0, epsilon=1.0, delta=1.0), "delta"),
    (dict(sensitivity=0.0, epsilon=1.0, delta=1e-5), "sensitivity"),
    (dict(sensitivity=2.0, epsilon=float("nan"), delta=1e-5), "epsilon"),
])
def test_bad_budget_names_field(kwargs, field):
    for calibrator in ("analytic", "classical", "conservative"):
        with pytest.raises(ValidationError, match=field):
            calibrate_sigma(calibrator=calibrator, **kwargs)
    assert np.isfinite(analytic_sigma(2.0, 1.0, 1e-5))
