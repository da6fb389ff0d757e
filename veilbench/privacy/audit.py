r"""Empirical lower bounds on ε from runs of a mechanism on two neighbouring inputs.

Given a scalar test statistic computed from many independent releases on D (``samples_d``)
and on a neighbour D' (``samples_dprime``), any rejection region S gives, for an
(ε, δ)-DP mechanism, :math:`P[M(D) \in S] \le e^{\varepsilon} P[M(D') \in S] + \delta`, hence

.. math:: \varepsilon \ge \ln\frac{\underline{p} - \delta}{\overline{q}}

with :math:`\underline{p}` a Clopper–Pearson lower confidence bound on P[M(D) ∈ S] and
:math:`\overline{q}` an upper bound on P[M(D') ∈ S]. Regions are one-sided thresholds
``stat > t`` (and the mirrored ``stat < t``); the threshold is chosen on one half of the samples
and the bound evaluated on the other half, so the confidence level holds (Jagielski et al. 2020;
Nasr et al. 2021 use the same construction).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import beta

from veilbench.validation import ValidationError, check_array, check_in_range


@dataclass(frozen=True)
class AuditResult:
    """Outcome of an audit: the ε lower bound, the threshold and the rates behind it."""

    epsilon_lower_bound: float
    threshold: float
    direction: str
    tpr_lower: float
    fpr_upper: float
    n_samples: int


def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """Two-sided (1 − α) Clopper–Pearson interval for a binomial proportion k/n."""
    lo = 0.0 if k == 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return lo, hi


def _eps_for(p_d: np.ndarray, p_dp: np.ndarray, t: float, delta: float, alpha: float) -> tuple[float, float, float]:
    k_d, k_dp = int(np.sum(p_d > t)), int(np.sum(p_dp > t))
    p_lo, _ = clopper_pearson(k_d, p_d.size, alpha)
    _, q_hi = clopper_pearson(k_dp, p_dp.size, alpha)
    if p_lo - delta <= 0 or q_hi <= 0:
        return 0.0, p_lo, q_hi
    return max(float(np.log((p_lo - delta) / q_hi)), 0.0), p_lo, q_hi


def epsilon_lower_bound(
    samples_d: np.ndarray,
    samples_dprime: np.ndarray,
    delta: float,
    alpha: float = 0.05,
    n_thresholds: int = 200,
    seed: int = 0,
) -> AuditResult:
    """Lower-bound ε from scalar statistics of releases on neighbours D and D'.

    Parameters
    ----------
    samples_d, samples_dprime : (N,) arrays
        One statistic per independent release (e.g. the released score of the differing record).
    delta : float in [0, 1)
        The δ the mechanism claims.
    alpha : float in (0, 1)
        Confidence level 1 − α of the bound (each side's Clopper–Pearson interval uses α).

    Returns the best bound over thresholds chosen on a random half of the samples and
    evaluated on the other half, in both directions (``>`` and, by negation, ``<``).
    """
    a = check_array(samples_d, "samples_d", ndim=1, min_rows=20)
    b = check_array(samples_dprime, "samples_dprime", ndim=1, min_rows=20)
    dlt = check_in_range(delta, "delta", 0.0, 1.0, high_inclusive=False)
    check_in_range(alpha, "alpha", 0.0, 1.0, low_inclusive=False, high_inclusive=False)
    if n_thresholds < 1:
        raise ValidationError(f"n_thresholds: must be ≥ 1, got {n_thresholds}")
    rng = np.random.default_rng(seed)
    ia, ib = rng.permutation(a.size), rng.permutation(b.size)
    a_sel, a_ev = a[ia[: a.size // 2]], a[ia[a.size // 2 :]]
    b_sel, b_ev = b[ib[: b.size // 2]], b[ib[b.size // 2 :]]
    best = AuditResult(0.0, float("nan"), ">", 0.0, 1.0, int(a.size + b.size))
    for direction, sign in ((">", 1.0), ("<", -1.0)):
        xs, ys = sign * a_sel, sign * b_sel
        grid = np.quantile(np.concatenate([xs, ys]), np.linspace(0.0, 1.0, n_thresholds + 2)[1:-1])
        scores = [_eps_for(xs, ys, t, dlt, alpha)[0] for t in grid]
        t_best = float(grid[int(np.argmax(scores))])
        eps, p_lo, q_hi = _eps_for(sign * a_ev, sign * b_ev, t_best, dlt, alpha)
        if eps > best.epsilon_lower_bound:
            best = AuditResult(eps, sign * t_best, direction, p_lo, q_hi, int(a.size + b.size))
    return best
