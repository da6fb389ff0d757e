r"""Gaussian-mechanism noise calibration: σ = calib(Δ, ε, δ).

Three calibrators (ScoreShield spec §2, shared with DP-FedAvg and any Gaussian release):

* ``classical`` (Dwork & Roth 2014, Thm A.1): :math:`\sigma = \Delta\sqrt{2\ln(1.25/\delta)}/\varepsilon`.
  Only proven for ε < 1; for ε ≳ 1 it can miss the target δ badly (spec §2 table), so asking
  for it at ε ≥ 1 emits a :class:`ClassicalCalibrationWarning`.
* ``analytic`` (Balle & Wang 2018, Thm 8): the smallest σ with

  .. math:: \Phi\Big(\tfrac{\Delta}{2\sigma} - \tfrac{\varepsilon\sigma}{\Delta}\Big)
            - e^{\varepsilon}\,\Phi\Big(-\tfrac{\Delta}{2\sigma} - \tfrac{\varepsilon\sigma}{\Delta}\Big) \le \delta,

  the exact privacy profile of the Gaussian mechanism; found by root-finding in log σ. Default.
* ``conservative`` (spec §2, [X/R]): :math:`\sigma = \Delta(z + \sqrt{z^2 + 2\varepsilon})/(2\varepsilon)`,
  :math:`z = \sqrt{2\ln(1/\delta)}`, from P(privacy loss > ε) ≤ δ with loss ~ N(μ, 2μ),
  μ = Δ²/(2σ²). Valid for every ε and never below the analytic σ.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

from scipy.optimize import brentq
from scipy.special import log_ndtr, ndtr

from veilbench.validation import ValidationError, check_epsilon_delta, check_in_range


class ClassicalCalibrationWarning(UserWarning):
    """The classical Gaussian calibration was requested where it is not proven DP (ε ≥ 1)."""


def _check(sensitivity: float, epsilon: float, delta: float) -> tuple[float, float, float]:
    sens = check_in_range(sensitivity, "sensitivity", 0.0, None, low_inclusive=False)
    eps, dlt = check_epsilon_delta(epsilon, delta)
    return sens, eps, dlt


def achieved_delta(sigma: float, sensitivity: float, epsilon: float) -> float:
    r"""Exact δ(ε) of the Gaussian mechanism with noise ``sigma`` and L2 sensitivity Δ.

    :math:`\delta(\varepsilon) = \Phi(\Delta/(2\sigma) - \varepsilon\sigma/\Delta)
    - e^{\varepsilon}\Phi(-\Delta/(2\sigma) - \varepsilon\sigma/\Delta)` (Balle & Wang 2018, Thm 8).
    Use it to check what δ another calibrator actually delivers.
    """
    sig = check_in_range(sigma, "sigma", 0.0, None, low_inclusive=False)
    sens = check_in_range(sensitivity, "sensitivity", 0.0, None, low_inclusive=False)
    eps = check_in_range(epsilon, "epsilon", 0.0, None)
    a = sens / (2.0 * sig)
    b = eps * sig / sens
    first = float(ndtr(a - b))
    second = math.exp(eps + float(log_ndtr(-a - b)))
    return max(first - second, 0.0)


def classical_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """σ = Δ·√(2 ln(1.25/δ))/ε (Dwork & Roth). Warns when ε ≥ 1, where it is not proven DP."""
    sens, eps, dlt = _check(sensitivity, epsilon, delta)
    if eps >= 1.0:
        warnings.warn(
            f"classical Gaussian calibration at epsilon={eps:g} ≥ 1 is not proven (ε, δ)-DP; "
            "use calibrator='analytic' (see achieved_delta for the δ it really gives)",
            ClassicalCalibrationWarning,
            stacklevel=2,
        )
    return sens * math.sqrt(2.0 * math.log(1.25 / dlt)) / eps


def analytic_sigma(sensitivity: float, epsilon: float, delta: float, rtol: float = 1e-12) -> float:
    """Smallest σ whose exact Gaussian privacy profile meets δ at ε (Balle & Wang 2018).

    ``achieved_delta(σ, Δ, ε)`` decreases in σ, so the root of ``achieved_delta - δ`` is found
    by Brent's method on log σ. The returned σ satisfies ``achieved_delta(σ) ≤ δ`` to ``rtol``.

    >>> round(analytic_sigma(2.0, 1.0, 1e-5), 3)
    7.461
    """
    sens, eps, dlt = _check(sensitivity, epsilon, delta)

    def gap(log_sigma: float) -> float:
        return achieved_delta(math.exp(log_sigma), sens, eps) - dlt

    lo, hi = math.log(sens) - 10.0, math.log(sens) + 10.0
    while gap(lo) < 0:
        lo -= 10.0
    while gap(hi) > 0:
        hi += 10.0
    root = brentq(gap, lo, hi, xtol=1e-14, rtol=rtol, maxiter=500)
    sigma = math.exp(root)
    # brentq may land a hair on the wrong side of the root: step up until δ is met.
    while achieved_delta(sigma, sens, eps) > dlt:
        sigma *= 1.0 + 1e-12
    return sigma


def conservative_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """σ = Δ(z + √(z² + 2ε))/(2ε), z = √(2 ln(1/δ)) (spec §2 proposal; ≥ analytic for all ε)."""
    sens, eps, dlt = _check(sensitivity, epsilon, delta)
    z = math.sqrt(2.0 * math.log(1.0 / dlt))
    return sens * (z + math.sqrt(z * z + 2.0 * eps)) / (2.0 * eps)


CALIBRATORS: dict[str, Callable[[float, float, float], float]] = {
    "analytic": analytic_sigma,
    "classical": classical_sigma,
    "conservative": conservative_sigma,
}


def calibrate_sigma(sensitivity: float, epsilon: float, delta: float, calibrator: str = "analytic") -> float:
    """Dispatch to one of :data:`CALIBRATORS` by name (``analytic`` is the default)."""
    try:
        fn = CALIBRATORS[calibrator]
    except KeyError:
        raise ValidationError(
            f"calibrator: must be one of {sorted(CALIBRATORS)}, got {calibrator!r}"
        ) from None
    return fn(sensitivity, epsilon, delta)
