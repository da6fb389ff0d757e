r"""Empirical lower bounds on ε from runs of a mechanism on two neighbouring inputs, with stated power.

Given a scalar test statistic computed from many independent releases on D (``samples_d``)
and on a neighbour D' (``samples_dprime``), any rejection region S gives, for an
(ε, δ)-DP mechanism, :math:`P[M(D) \in S] \le e^{\varepsilon} P[M(D') \in S] + \delta`, hence

.. math:: \varepsilon \ge \ln\frac{\underline{p} - \delta}{\overline{q}}

with :math:`\underline{p}` a one-sided Clopper–Pearson lower bound on P[M(D) ∈ S] and
:math:`\overline{q}` an upper bound on P[M(D') ∈ S]. Regions are one-sided thresholds
``stat > t`` and the mirrored ``stat < t``; the threshold is chosen on one half of the samples
and the bound evaluated on the other half (Jagielski et al. 2020; Nasr et al. 2021). Confidence:
each of the four one-sided bounds (two rates × two directions) holds at level 1 − α/4, so by the
union (Bonferroni) bound the reported ε̂ — the better of the two directions — is a valid lower
bound with probability ≥ 1 − α.

What an audit of ``N`` releases per side can say is limited by ``N`` (:func:`max_certifiable_epsilon`):
a perfect attack on the ``n = N − ⌊N/2⌋`` evaluation releases gives
:math:`\underline{p} = (\alpha/4)^{1/n}`, :math:`\overline{q} = 1 - (\alpha/4)^{1/n}`, and no
mechanism can be shown to violate a claimed ε above :math:`\ln((\underline{p} - \delta)/\overline{q})`.
Power is stated for a Gaussian mechanism whose statistic is N(s, 1) on D and N(0, 1) on D'
(s = mean gap / noise std, the *separation*). :func:`simulated_power` is the share of seeded runs
of this very procedure that flag ε̂ > the claimed ε; :func:`audit_power` is the exact binomial
power of the best *fixed* threshold (hit counts Binomial(n, Φ̄(t − s)) and Binomial(n, Φ̄(t))), a
cheap screen. :func:`plan_audit` states the power against a mechanism run with half the
calibrated noise (separation 2s) — the audit is *decidable* when it is ≥ 95 % — and, when no
release count is given, picks the smallest count (doubling) that reaches it. (A one-run audit,
Steinke, Nasr & Jagielski 2023, would need far fewer runs; this module keeps the classical design.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.stats import beta, binom, norm

from veilbench.random import stream
from veilbench.validation import ValidationError, check_array, check_in_range

POWER_TARGET = 0.95
"""Power against a half-noise mechanism an audit needs to be called decidable."""


@dataclass(frozen=True)
class AuditPlan:
    """Release count of an audit and what it can decide.

    ``max_certifiable_epsilon``: the largest ε̂ any mechanism can reach at this count and confidence;
    ``power_half_noise``: probability the audit flags a mechanism with half the calibrated noise
    (a noiseless release is its own half-noise version); ``decidable``: that power ≥ ``target``.
    """

    n_releases: int
    max_certifiable_epsilon: float
    power_half_noise: float
    decidable: bool
    target: float = POWER_TARGET

    def as_dict(self) -> dict[str, object]:
        return {"audit_releases": self.n_releases, "max_certifiable_epsilon": self.max_certifiable_epsilon,
                "power_half_noise": self.power_half_noise, "audit_decidable": self.decidable,
                "power_target": self.target}


@dataclass(frozen=True)
class AuditResult:
    """Outcome of an audit: the ε lower bound, the threshold and the rates behind it (and its plan)."""

    epsilon_lower_bound: float
    threshold: float
    direction: str
    tpr_lower: float
    fpr_upper: float
    n_samples: int
    alpha: float = 0.05
    plan: AuditPlan | None = None


def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """Two-sided (1 − α) Clopper–Pearson interval for a binomial proportion k/n."""
    lo = 0.0 if k == 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return lo, hi


def _cp_lower(k: np.ndarray, n: int, level: float) -> np.ndarray:
    """One-sided Clopper–Pearson lower bounds (confidence 1 − ``level``) for counts ``k`` of ``n``."""
    k = np.asarray(k)
    out = np.zeros(k.shape)
    m = k > 0
    out[m] = beta.ppf(level, k[m], n - k[m] + 1)
    return out


def _cp_upper(k: np.ndarray, n: int, level: float) -> np.ndarray:
    """One-sided Clopper–Pearson upper bounds (confidence 1 − ``level``) for counts ``k`` of ``n``."""
    k = np.asarray(k)
    out = np.ones(k.shape)
    m = k < n
    out[m] = beta.ppf(1.0 - level, k[m] + 1, n - k[m])
    return out


def _bound(p_lo: np.ndarray, q_hi: np.ndarray, delta: float) -> np.ndarray:
    """ε̂ = max(ln((p̲ − δ)/q̄), 0), 0 where p̲ ≤ δ."""
    num = np.asarray(p_lo) - delta
    with np.errstate(divide="ignore", invalid="ignore"):
        eps = np.where(num > 0, np.log(np.maximum(num, 1e-300) / np.asarray(q_hi)), 0.0)
    return np.maximum(eps, 0.0)


def _eval_size(n_releases: int) -> int:
    """Releases per side in the evaluation half."""
    return int(n_releases) - int(n_releases) // 2


def max_certifiable_epsilon(n_releases: int, delta: float, alpha: float = 0.05) -> float:
    """Largest ε̂ an audit of ``n_releases`` per side can certify (perfect attack, see module docstring).

    >>> round(max_certifiable_epsilon(2000, 1e-5), 2)
    5.43
    """
    n = _eval_size(int(check_in_range(n_releases, "n_releases", 2, None)))
    dlt = check_in_range(delta, "delta", 0.0, 1.0, high_inclusive=False)
    check_in_range(alpha, "alpha", 0.0, 1.0, low_inclusive=False, high_inclusive=False)
    p = (alpha / 4.0) ** (1.0 / n)
    return float(_bound(np.array([p]), np.array([1.0 - p]), dlt)[0])


def audit_power(separation: float, epsilon: float, delta: float, n_releases: int, alpha: float = 0.05,
                n_grid: int = 48) -> float:
    """P(ε̂ > ``epsilon``) for a statistic N(s, 1) on D vs N(0, 1) on D', at the best threshold.

    ``separation`` s ≥ 0 is the mean gap over the noise std. Exact binomial computation at each of
    ``n_grid`` thresholds (refined once around the best). The split-half audit picks its threshold
    from data; its own power (:func:`simulated_power`) is typically a little lower.
    """
    s = check_in_range(separation, "separation", 0.0, None)
    eps = check_in_range(epsilon, "epsilon", 0.0, None)
    dlt = check_in_range(delta, "delta", 0.0, 1.0, high_inclusive=False)
    n = _eval_size(int(check_in_range(n_releases, "n_releases", 2, None)))
    if not math.isfinite(eps) or eps >= max_certifiable_epsilon(n_releases, dlt, alpha):
        return 0.0
    level = alpha / 4.0
    tail = 1e-12

    def power_at(t: float) -> float:
        fpr, tpr = float(norm.sf(t)), float(norm.sf(t - s))
        k0 = np.arange(int(binom.ppf(tail, n, fpr)), int(binom.isf(tail, n, fpr)) + 2)
        k0 = k0[k0 <= n]
        need = dlt + math.exp(eps) * _cp_upper(k0, n, level)
        k1_lo, k1_hi = int(binom.ppf(tail, n, tpr)), min(int(binom.isf(tail, n, tpr)) + 1, n)
        k1 = np.arange(k1_lo, k1_hi + 1)
        lo = _cp_lower(k1, n, level)
        idx = np.searchsorted(lo, need, side="right")  # first k1 whose lower bound exceeds the need
        k_min = np.where(idx < k1.size, k1[np.minimum(idx, k1.size - 1)], n + 1)
        return float(np.sum(binom.pmf(k0, n, fpr) * binom.sf(k_min - 1, n, tpr)))

    grid = np.linspace(-2.0, s + 8.0, n_grid)
    values = [power_at(t) for t in grid]
    i = int(np.argmax(values))
    fine = np.linspace(grid[max(i - 1, 0)], grid[min(i + 1, n_grid - 1)], 9)
    return float(min(max(values[i], *(power_at(t) for t in fine)), 1.0))


@lru_cache(maxsize=128)
def simulated_power(separation: float, epsilon: float, delta: float, n_releases: int, alpha: float = 0.05,
                    n_sim: int = 100, seed: int = 0) -> float:
    """Share of ``n_sim`` runs of :func:`epsilon_lower_bound` (seeded) that flag ε̂ > ``epsilon`` when the
    statistic is N(``separation``, 1) on D and N(0, 1) on D', ``n_releases`` per side.

    The power of the audit procedure itself (threshold chosen on the selection half); its
    standard error is at most 0.5/√n_sim.
    """
    s = check_in_range(separation, "separation", 0.0, None)
    n = int(check_in_range(n_releases, "n_releases", 20, None))
    check_in_range(n_sim, "n_sim", 1, None)
    rng = stream((seed, n), "audit.simulated-power")
    hits = 0
    for r in range(int(n_sim)):
        on_d, on_dprime = rng.normal(s, 1.0, n), rng.normal(0.0, 1.0, n)
        hits += epsilon_lower_bound(on_d, on_dprime, delta, alpha, seed=r).epsilon_lower_bound > epsilon
    return hits / int(n_sim)


def plan_audit(
    separation: float,
    epsilon: float,
    delta: float,
    alpha: float = 0.05,
    n_releases: int | None = None,
    target: float = POWER_TARGET,
    max_releases: int = 256_000,
    min_releases: int = 1_000,
) -> AuditPlan:
    """Release count per side, certifiable ε and half-noise power of an audit of a claimed ``epsilon``.

    ``separation``: mean gap over noise std of the audited statistic at the calibrated noise (the
    half-noise mechanism has twice it); ``inf`` for a noiseless data-dependent release (flagged
    surely once ``epsilon`` < :func:`max_certifiable_epsilon`), 0 for a data-free one (never flagged).
    The power is :func:`simulated_power` (the procedure's own), screened by :func:`audit_power`
    (the best-threshold power, an upper bound up to the simulation's error, cheap).
    With ``n_releases`` given, that count is stated; with ``None`` the count doubles from
    ``min_releases`` until the half-noise power reaches ``target``, up to ``max_releases``; when even
    that cannot decide, ``min_releases`` is used and the plan says ``decidable = False``.
    """
    check_in_range(target, "target", 0.0, 1.0, low_inclusive=False, high_inclusive=False)
    sep = check_in_range(separation, "separation", 0.0, None)
    eps = check_in_range(epsilon, "epsilon", 0.0, None)
    dlt = check_in_range(delta, "delta", 0.0, 1.0, high_inclusive=False)

    def power(n: int) -> float:
        if sep == 0.0 or not math.isfinite(eps) or eps >= max_certifiable_epsilon(n, dlt, alpha):
            return 0.0
        if math.isinf(sep):
            return 1.0
        return simulated_power(2.0 * sep, eps, dlt, n, alpha)

    def plan(n: int, pw: float) -> AuditPlan:
        return AuditPlan(n, max_certifiable_epsilon(n, dlt, alpha), pw, bool(pw >= target), target)

    if n_releases is not None:
        n = int(check_in_range(n_releases, "n_releases", 20, None))
        return plan(n, power(n))
    lo = int(check_in_range(min_releases, "min_releases", 20, None))
    hi = int(check_in_range(max_releases, "max_releases", lo, None))
    n = lo
    while sep > 0.0 and math.isfinite(eps):
        if eps < max_certifiable_epsilon(n, dlt, alpha) and (
                math.isinf(sep) or audit_power(2.0 * sep, eps, dlt, n, alpha) >= target):
            pw = power(n)
            if pw >= target:
                return plan(n, pw)
        if n >= hi:
            break
        n = min(2 * n, hi)
    return plan(lo, power(lo))


SELECTION_STRICTNESS = 0.01
"""The selection half ranks thresholds by the bound at confidence level α/4 × this factor: a stricter
level favours thresholds whose rates are well estimated, which the evaluation half then confirms
more often (a threshold picked for a lucky tail count rarely survives the evaluation half)."""

N_CANDIDATES = 64
"""Thresholds tried per direction: this many log-spaced upper order statistics of the D' selection
half (the rare events large ε̂ come from) and as many pooled quantiles."""


def _candidates(xs: np.ndarray, ys: np.ndarray, n_thresholds: int | None) -> np.ndarray:
    """Thresholds to try, from the sorted samples ``xs`` (D) and ``ys`` (D'): :data:`N_CANDIDATES`
    log-spaced upper order statistics of ``ys`` and as many quantiles of each sample (``None``), or
    ``n_thresholds`` quantiles of each."""
    n_q = N_CANDIDATES if n_thresholds is None else n_thresholds
    levels = np.linspace(0.0, 1.0, n_q + 2)[1:-1]
    grid = [xs[(levels * (xs.size - 1)).astype(int)], ys[(levels * (ys.size - 1)).astype(int)]]
    if n_thresholds is None:
        ranks = np.unique(np.geomspace(1, ys.size, N_CANDIDATES).astype(int))  # 1 = the largest
        grid.append(ys[ys.size - ranks])
    return np.unique(np.concatenate(grid))


def _best_threshold(xs: np.ndarray, ys: np.ndarray, delta: float, level: float, n_thresholds: int | None) -> float:
    """Threshold t maximising the bound of ``stat > t`` on the sorted samples ``xs`` (D), ``ys`` (D')."""
    cand = _candidates(xs, ys, n_thresholds)
    k_d = xs.size - np.searchsorted(xs, cand, side="right")
    k_dp = ys.size - np.searchsorted(ys, cand, side="right")
    scores = _bound(_cp_lower(k_d, xs.size, level), _cp_upper(k_dp, ys.size, level), delta)
    return float(cand[int(np.argmax(scores))])


def epsilon_lower_bound(
    samples_d: np.ndarray,
    samples_dprime: np.ndarray,
    delta: float,
    alpha: float = 0.05,
    n_thresholds: int | None = None,
    seed: int = 0,
    plan: AuditPlan | None = None,
) -> AuditResult:
    """Lower-bound ε from scalar statistics of releases on neighbours D and D'.

    Parameters
    ----------
    samples_d, samples_dprime : (N,) arrays
        One statistic per independent release (e.g. the released score of the differing record).
    delta : float in [0, 1)
        The δ the mechanism claims.
    alpha : float in (0, 1)
        The bound holds with probability ≥ 1 − α over both directions (each one-sided
        Clopper–Pearson bound at α/4, see the module docstring).
    n_thresholds : ``None`` (default) tries log-spaced upper order statistics of the D' selection
        half and pooled quantiles (:data:`N_CANDIDATES` each); an integer tries that many pooled
        quantiles only.
    plan : the :class:`AuditPlan` to carry in the result (what this run count can decide).

    Returns the best bound over thresholds chosen on a random half of the samples and
    evaluated on the other half, in both directions (``>`` and, by negation, ``<``).
    """
    a = check_array(samples_d, "samples_d", ndim=1, min_rows=20)
    b = check_array(samples_dprime, "samples_dprime", ndim=1, min_rows=20)
    dlt = check_in_range(delta, "delta", 0.0, 1.0, high_inclusive=False)
    check_in_range(alpha, "alpha", 0.0, 1.0, low_inclusive=False, high_inclusive=False)
    if n_thresholds is not None and n_thresholds < 1:
        raise ValidationError(f"n_thresholds: must be ≥ 1 (or None for every sample value), got {n_thresholds}")
    level = alpha / 4.0
    rng = stream(seed, "audit.selection-split")
    ia, ib = rng.permutation(a.size), rng.permutation(b.size)
    a_sel, a_ev = np.sort(a[ia[: a.size // 2]]), a[ia[a.size // 2 :]]
    b_sel, b_ev = np.sort(b[ib[: b.size // 2]]), b[ib[b.size // 2 :]]
    best = AuditResult(0.0, float("nan"), ">", 0.0, 1.0, int(a.size + b.size), alpha, plan)
    for direction, sign in ((">", 1.0), ("<", -1.0)):
        xs, ys = (a_sel, b_sel) if sign > 0 else (-a_sel[::-1], -b_sel[::-1])
        t_best = _best_threshold(xs, ys, dlt, level * SELECTION_STRICTNESS, n_thresholds)
        xe, ye = sign * a_ev, sign * b_ev
        p_lo = float(_cp_lower(np.array([np.sum(xe > t_best)]), xe.size, level)[0])
        q_hi = float(_cp_upper(np.array([np.sum(ye > t_best)]), ye.size, level)[0])
        eps = float(_bound(np.array([p_lo]), np.array([q_hi]), dlt)[0])
        if eps > best.epsilon_lower_bound:
            best = AuditResult(eps, sign * t_best, direction, p_lo, q_hi, int(a.size + b.size), alpha, plan)
    return best
