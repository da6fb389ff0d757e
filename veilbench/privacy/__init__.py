"""Differential-privacy primitives shared by every family: noise calibration, black-box audits
with stated power (:mod:`.audit`), the white-box audit of the noise a Gaussian mechanism added
(:mod:`.noise_audit`) and the per-deployment privacy ledger (:mod:`.ledger`)."""

from veilbench.privacy.calibration import (
    CALIBRATORS,
    achieved_delta,
    analytic_sigma,
    calibrate_sigma,
    classical_noise_multiplier,
    classical_sigma,
    classical_validity_limit,
    conservative_sigma,
    gaussian_epsilon,
)

__all__ = [
    "CALIBRATORS",
    "achieved_delta",
    "analytic_sigma",
    "calibrate_sigma",
    "classical_noise_multiplier",
    "classical_sigma",
    "classical_validity_limit",
    "conservative_sigma",
    "gaussian_epsilon",
]
