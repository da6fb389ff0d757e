"""Differential-privacy primitives shared by every family: noise calibration, audits with stated
power (:mod:`.audit`) and the per-deployment privacy ledger (:mod:`.ledger`)."""

from veilbench.privacy.calibration import (
    CALIBRATORS,
    achieved_delta,
    analytic_sigma,
    calibrate_sigma,
    classical_noise_multiplier,
    classical_sigma,
    classical_validity_limit,
    conservative_sigma,
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
]
