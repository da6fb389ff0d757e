"""Calibrators: closed forms, the analytic σ as the smallest σ meeting δ (even far outside the first
bracket), the validity limit as a root of the exact profile, and where warnings and errors point."""

from __future__ import annotations

import math
import os
import re
import warnings

import pytest

from veilbench.privacy import calibration
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
from veilbench.validation import ValidationError


@pytest.mark.parametrize(("sens", "eps", "delta"), [(2.0, 0.5, 1e-5), (1.0, 3.0, 1e-2), (0.5, 40.0, 0.3)])
def test_conservative_sigma_closed_form(sens, eps, delta):
    """σ = Δ(z + √(z² + 2ε))/(2ε), z = √(2 ln(1/δ))."""
    z = math.sqrt(2.0 * math.log(1.0 / delta))
    assert conservative_sigma(sens, eps, delta) == pytest.approx(sens * (z + math.sqrt(z * z + 2 * eps)) / (2 * eps),
                                                                 rel=1e-14)


@pytest.mark.parametrize(("sens", "eps", "delta"), [
    (1.0, 1e-5, 1e-5),  # σ ≈ 9·10⁴ Δ: beyond the first bracket's upper end e^{10} Δ
    (1.0, 1e9, 1e-5),  # σ ≈ 2·10⁻⁵ Δ: below its lower end e^{−10} Δ
    (2.0, 1.0, 1e-5),
    (3.0, 20.0, 0.2),
])
def test_analytic_sigma_is_the_smallest_sigma_meeting_delta(sens, eps, delta):
    sigma = analytic_sigma(sens, eps, delta)
    assert achieved_delta(sigma, sens, eps) <= delta < achieved_delta(sigma * (1 - 1e-8), sens, eps)


def test_default_calibrator_is_analytic_and_names_are_checked():
    assert calibrate_sigma(2.0, 1.0, 1e-5) == analytic_sigma(2.0, 1.0, 1e-5)
    assert calibrate_sigma(2.0, 1.0, 1e-5, "conservative") == conservative_sigma(2.0, 1.0, 1e-5)
    with pytest.raises(ValidationError, match="^" + re.escape(
            "calibrator: must be one of ['analytic', 'classical', 'conservative'], got 'gauss'") + "$"):
        calibrate_sigma(2.0, 1.0, 1e-5, "gauss")


def test_classical_refusal_message_points_to_the_alternatives():
    limit = classical_validity_limit(1e-5)
    with pytest.raises(ValidationError) as err:
        classical_sigma(2.0, 10.0, 1e-5)
    assert str(err.value).endswith(
        "Use calibrator='analytic', or allow_invalid_calibration=true to release at (ε, δ achieved)")
    assert str(err.value).startswith(f"epsilon: the classical calibration meets delta=1e-05 only for epsilon in (0, "
                                     f"{limit:.4g}]; at epsilon=10 its σ gives δ = ")


def test_classical_warnings_point_at_the_caller():
    """Both warnings (valid beyond ε = 1; allowed although invalid) are attributed to the caller of
    classical_sigma, not to the library module (a wrapper between the two, such as a mutation-testing
    trampoline, takes the caller's place)."""
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        classical_sigma(2.0, 2.0, 1e-5)
        classical_sigma(2.0, 10.0, 1e-5, allow_invalid=True)
    assert [w.category for w in rec] == [ClassicalCalibrationWarning] * 2
    assert not any(os.path.samefile(w.filename, calibration.__file__) for w in rec)


@pytest.mark.parametrize("delta", [0.9, 0.5, 1e-30, 1e-60])
def test_validity_limit_is_the_root_of_the_exact_profile_for_any_delta(delta):
    """Large δ puts the limit below 10 (near 4), tiny δ above it (12–14): δ_achieved(limit) = δ either way."""
    limit = classical_validity_limit(delta)
    z = classical_noise_multiplier(limit, delta)
    assert z == math.sqrt(2.0 * math.log(1.25 / delta)) / limit
    assert achieved_delta(z, 1.0, limit) == pytest.approx(delta, rel=1e-6)
    below, above = limit * (1 - 1e-6), limit * (1 + 1e-6)
    assert achieved_delta(classical_noise_multiplier(below, delta), 1.0, below) < delta
    assert achieved_delta(classical_noise_multiplier(above, delta), 1.0, above) > delta
    assert (limit > 10.0) == (delta < 1e-20)


def test_achieved_delta_and_calibrators_name_the_bad_argument():
    assert achieved_delta(1.0, 1.0, 0.0) == pytest.approx(2 * 0.691462461274013 - 1, rel=1e-12)  # ε = 0: 2Φ(1/2) − 1
    cases = [
        (lambda: achieved_delta(0.0, 1.0, 1.0), "sigma: must lie in (0.0, inf], got 0.0"),
        (lambda: achieved_delta(1.0, 0.0, 1.0), "sensitivity: must lie in (0.0, inf], got 0.0"),
        (lambda: achieved_delta(1.0, 1.0, -0.5), "epsilon: must lie in [0.0, inf], got -0.5"),
        (lambda: calibrate_sigma(0.0, 1.0, 1e-5), "sensitivity: must lie in (0.0, inf], got 0.0"),
        (lambda: calibrate_sigma(2.0, math.inf, 1e-5),
         "epsilon: must be finite, in (0, ∞), to calibrate noise; got inf. ε = ∞ is no privacy: release without "
         "noise (ScoreShield mechanism='clean') instead"),
    ]
    for call, msg in cases:
        with pytest.raises(ValidationError, match="^" + re.escape(msg) + "$"):
            call()
