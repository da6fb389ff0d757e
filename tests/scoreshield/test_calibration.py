"""Calibrators against the spec §2 reference values and Google's dp_accounting PLD accountant."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from veilbench.privacy.calibration import (
    ClassicalCalibrationWarning,
    achieved_delta,
    analytic_sigma,
    calibrate_sigma,
    classical_sigma,
    conservative_sigma,
)
from veilbench.scoreshield import family

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
        cl = classical_sigma(2.0, eps, delta)
    assert cl == pytest.approx(2.0 * math.sqrt(2.0 * math.log(1.25 / delta)) / eps, rel=1e-12)
    assert round(cl, 3) == pytest.approx(sig_cl, abs=1e-3)
    assert round(analytic_sigma(2.0, eps, delta), 3) == pytest.approx(sig_an, abs=1e-3)
    got = achieved_delta(cl, 2.0, eps)
    assert got == pytest.approx(delta_cl, rel=0.05, abs=5e-3 if delta_cl > 0.1 else 0)


@pytest.mark.parametrize(("eps", "delta", "sig"), CLASSICAL_GRID)
def test_classical_grid(eps, delta, sig):
    with pytest.warns(ClassicalCalibrationWarning):
        assert classical_sigma(2.0, eps, delta) == pytest.approx(sig, abs=6e-4)


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


def test_family_release_warns_for_classical_at_large_epsilon(tiny_inputs):
    p = family.Params(mechanism="gaussian", epsilon=10.0, calibrator="classical", n_queries=5)
    with pytest.warns(ClassicalCalibrationWarning):
        out = family.release(tiny_inputs, p, seed=0)
    assert out.info["sigma"] == pytest.approx(2.0 * math.sqrt(2.0 * math.log(1.25e5)) / 10.0)


@pytest.mark.parametrize(("kwargs", "field"), [
    (dict(sensitivity=2.0, epsilon=0.0, delta=1e-5), "epsilon"),
    (dict(sensitivity=2.0, epsilon=-1.0, delta=1e-5), "epsilon"),
    (dict(sensitivity=2.0, epsilon=1.0, delta=0.0), "delta"),
    (dict(sensitivity=2.0, epsilon=1.0, delta=1.0), "delta"),
    (dict(sensitivity=0.0, epsilon=1.0, delta=1e-5), "sensitivity"),
    (dict(sensitivity=2.0, epsilon=float("nan"), delta=1e-5), "epsilon"),
])
def test_bad_budget_names_field(kwargs, field):
    from veilbench.validation import ValidationError

    for calibrator in ("analytic", "classical", "conservative"):
        with pytest.raises(ValidationError, match=field):
            calibrate_sigma(calibrator=calibrator, **kwargs)
    assert np.isfinite(analytic_sigma(2.0, 1.0, 1e-5))
