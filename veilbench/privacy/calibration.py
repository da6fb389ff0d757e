r"""Gaussian-mechanism noise calibration: σ = calib(Δ, ε, δ).

Three calibrators (ScoreShield spec §2, shared with DP-FedAvg and any Gaussian release):

* ``classical`` (Dwork & Roth 2014, Thm A.1): :math:`\sigma = \Delta\sqrt{2\ln(1.25/\delta)}/\varepsilon`.
  The theorem covers ε < 1 only. σ/Δ depends on (ε, δ) alone, so whether the release still meets
  δ is decided by the exact profile below: δ_achieved = ``achieved_delta(σ, Δ, ε)``. Where
  δ_achieved > δ (from ε = :func:`classical_validity_limit` (δ) on, ≈ 8.4 at δ = 1e-5) the calibration is
  refused with a :class:`~veilbench.validation.ValidationError` unless ``allow_invalid=True``
  (then the release is (ε, δ_achieved)-DP, which is what a ledger must record); between ε = 1
  and that limit it emits a :class:`ClassicalCalibrationWarning`.
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
    """The classical Gaussian calibration was requested outside its theorem (ε ≥ 1)."""


def _check(sensitivity: float, epsilon: float, delta: float) -> tuple[float, float, float]:
    sens = check_in_range(sensitivity, "sensitivity", 0.0, None, low_inclusive=False)
    eps, dlt = check_epsilon_delta(epsilon, delta)
    if not math.isfinite(eps):
        raise ValidationError(
            f"epsilon: must be finite, in (0, ∞), to calibrate noise; got {eps}. ε = ∞ is no privacy: "
            "release without noise (ScoreShield mechanism='clean') instead"
        )
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


def gaussian_epsilon(sigma: float, sensitivity: float, delta: float) -> float:
    r"""Exact ε at ``delta`` of the Gaussian mechanism with noise ``sigma`` and L2 sensitivity Δ.

    The root ε ≥ 0 of :func:`achieved_delta` (σ, Δ, ε) = δ (Balle & Wang 2018, Thm 8), which
    decreases in ε; 0 when δ(0) ≤ δ already, ∞ when σ = 0. It decreases in σ/Δ, so a lower
    confidence bound on σ gives an upper one on ε and vice versa. Found by Brent's method on a
    doubling bracket, to a relative 1e-13 in ε.

    >>> round(gaussian_epsilon(analytic_sigma(2.0, 1.0, 1e-5), 2.0, 1e-5), 9)
    1.0
    """
    sig = check_in_range(sigma, "sigma", 0.0, None)
    sens = check_in_range(sensitivity, "sensitivity", 0.0, None, low_inclusive=False)
    dlt = check_in_range(delta, "delta", 0.0, 1.0, low_inclusive=False, high_inclusive=False)
    if sig == 0.0:
        return math.inf
    if achieved_delta(sig, sens, 0.0) <= dlt:
        return 0.0

    def gap(eps: float) -> float:
        return achieved_delta(sig, sens, eps) - dlt

    hi = 1.0
    while gap(hi) > 0:
        hi *= 2.0
        if hi > 1e300:
            return math.inf
    return brentq(gap, 0.0, hi, xtol=1e-300, rtol=1e-13, maxiter=500)


def classical_noise_multiplier(epsilon: float, delta: float) -> float:
    """σ/Δ of the classical calibration, √(2 ln(1.25/δ))/ε."""
    _, eps, dlt = _check(1.0, epsilon, delta)
    return math.sqrt(2.0 * math.log(1.25 / dlt)) / eps


def classical_validity_limit(delta: float) -> float:
    """Largest ε at which the classical σ still meets δ by the exact profile (Balle & Wang, Thm 8).

    δ_achieved(ε) − δ changes sign once on ε ∈ (0, ∞): negative below the limit, positive above.

    >>> round(classical_validity_limit(1e-5), 2)
    8.42
    """
    _, dlt = check_epsilon_delta(1.0, delta)

    def gap(log_eps: float) -> float:
        eps = math.exp(log_eps)
        return achieved_delta(classical_noise_multiplier(eps, dlt), 1.0, eps) - dlt

    lo, hi = math.log(1e-3), math.log(10.0)
    while gap(hi) < 0:
        lo, hi = hi, hi + 1.0
    return math.exp(brentq(gap, lo, hi, xtol=1e-12, rtol=1e-12))


def classical_sigma(sensitivity: float, epsilon: float, delta: float, allow_invalid: bool = False) -> float:
    """σ = Δ·√(2 ln(1.25/δ))/ε (Dwork & Roth).

    Raises :class:`~veilbench.validation.ValidationError` naming ``epsilon`` where this σ misses δ
    (ε above :func:`classical_validity_limit`) unless ``allow_invalid``; warns from ε ≥ 1, where the
    classical theorem does not apply.
    """
    sens, eps, dlt = _check(sensitivity, epsilon, delta)
    sigma = sens * classical_noise_multiplier(eps, dlt)
    if eps >= 1.0:
        got = achieved_delta(sigma, sens, eps)
        if got > dlt:
            limit = classical_validity_limit(dlt)
            if not allow_invalid:
                raise ValidationError(
                    f"epsilon: the classical calibration meets delta={dlt:g} only for epsilon in (0, {limit:.4g}]; "
                    f"at epsilon={eps:g} its σ gives δ = {got:.3g} (exact Gaussian profile). Use "
                    "calibrator='analytic', or allow_invalid_calibration=true to release at (ε, δ achieved)"
                )
            warnings.warn(
                f"classical Gaussian calibration at epsilon={eps:g} is only (ε, {got:.3g})-DP, not (ε, {dlt:g})-DP "
                f"(valid up to epsilon={limit:.4g}); allowed by allow_invalid_calibration",
                ClassicalCalibrationWarning,
                stacklevel=2,
            )
        else:
            warnings.warn(
                f"classical Gaussian calibration at epsilon={eps:g} ≥ 1 is outside its theorem; the exact "
                f"profile gives δ = {got:.3g} ≤ {dlt:g}, so it is still (ε, δ)-DP (analytic needs less noise)",
                ClassicalCalibrationWarning,
                stacklevel=2,
            )
    return sigma


#: Accepted ``rtol`` of :func:`analytic_sigma`: from a few units in the last place of a double to 10 % of δ.
RTOL_RANGE = (1e-15, 0.1)


def analytic_sigma(sensitivity: float, epsilon: float, delta: float, rtol: float = 1e-12) -> float:
    """Smallest σ whose exact Gaussian privacy profile meets δ at ε (Balle & Wang 2018), to ``rtol``.

    The returned σ satisfies (1 − rtol)·δ ≤ ``achieved_delta(σ, Δ, ε)`` ≤ δ: never less noise than
    (ε, δ) needs, at most a fraction ``rtol`` of δ left unspent. ``rtol`` must lie in
    :data:`RTOL_RANGE`; near its lower end the rounding of the profile itself (two nearly cancelling
    terms at small ε) can exceed rtol·δ, and σ is then the smallest that double precision resolves.

    ``achieved_delta`` decreases in σ, so a bracket of log σ with δ(σ_lo) > δ ≥ δ(σ_hi) is narrowed,
    first by Brent's method (whose stop rule is a step in log σ, which may end on either side of the
    root), then by bisection that keeps the bracket, until δ(σ_hi) is within ``rtol`` of δ or σ_lo
    and σ_hi no longer have a double between them; σ_hi is returned.

    >>> round(analytic_sigma(2.0, 1.0, 1e-5), 3)
    7.461
    """
    tol = check_in_range(rtol, "rtol", *RTOL_RANGE)
    sens, eps, dlt = _check(sensitivity, epsilon, delta)

    def gap(log_sigma: float) -> float:
        return achieved_delta(math.exp(log_sigma), sens, eps) - dlt

    lo, hi = math.log(sens) - 10.0, math.log(sens) + 10.0
    while gap(lo) < 0:
        lo -= 10.0
    while gap(hi) > 0:
        hi += 10.0
    x = brentq(gap, lo, hi, xtol=1e-14, rtol=tol, maxiter=500)
    g_x = gap(x)
    if g_x > 0:
        lo, g_hi = x, gap(hi)
    else:
        hi, g_hi = x, g_x
    while g_hi < -tol * dlt:
        mid = 0.5 * (lo + hi)
        if math.exp(mid) in (math.exp(lo), math.exp(hi)):  # σ_lo, σ_hi adjacent doubles
            break
        g_mid = gap(mid)
        if g_mid > 0:
            lo = mid
        else:
            hi, g_hi = mid, g_mid
    return math.exp(hi)


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


def calibrate_sigma(
    sensitivity: float, epsilon: float, delta: float, calibrator: str = "analytic", allow_invalid: bool = False
) -> float:
    """Dispatch to one of :data:`CALIBRATORS` by name (``analytic`` is the default).

    ``allow_invalid`` lets ``classical`` return its σ where it misses δ (see :func:`classical_sigma`).
    """
    try:
        fn = CALIBRATORS[calibrator]
    except KeyError:
        raise ValidationError(
            f"calibrator: must be one of {sorted(CALIBRATORS)}, got {calibrator!r}"
        ) from None
    if calibrator == "classical":
        return classical_sigma(sensitivity, epsilon, delta, allow_invalid=allow_invalid)
    return fn(sensitivity, epsilon, delta)
