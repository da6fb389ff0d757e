"""Differential-privacy primitives shared by every family: noise calibration and audits."""

from veilbench.privacy.calibration import (
    CALIBRATORS,
    achieved_delta,
    analytic_sigma,
    calibrate_sigma,
    classical_sigma,
    conservative_sigma,
)

__all__ = [
    "CALIBRATORS",
    "achieved_delta",
    "analytic_sigma",
    "calibrate_sigma",
    "classical_sigma",
    "conservative_sigma",
]
