"""Exact values of the audit maths: Clopper–Pearson bounds from the binomial tails, the ε̂ formula, the
candidate thresholds, the split-half audit against a brute-force reference, power and planning.

Every expected value is computed independently of :mod:`veilbench.privacy.audit` (scipy.stats.binom
tails, closed forms, brute force over all count pairs), so a changed constant, sign or argument fails.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from scipy.stats import beta, binom, norm

from veilbench.privacy import audit
from veilbench.privacy.audit import (
    AuditPlan,
    audit_power,
    clopper_pearson,
    epsilon_lower_bound,
    max_certifiable_epsilon,
    plan_audit,
    simulated_power,
)
from veilbench.random import stream
from veilbench.validation import ValidationError


def _exact(msg: str):
    """``pytest.raises`` matching the whole message (field name, interval with its brackets, value)."""
    return pytest.raises(ValidationError, match="^" + re.escape(msg) + "$")


# ------------------------------------------------------------------------------------------------
# Clopper–Pearson: the bound p solves the binomial tail equation at the stated level
# ------------------------------------------------------------------------------------------------


def test_one_sided_lower_bound_solves_the_upper_tail_equation():
    """p̲(k) solves P[Bin(n, p̲) ≥ k] = level; p̲(0) = 0; p̲(n) = level^{1/n}."""
    n, level = 10, 0.0125
    lo = audit._cp_lower(np.array([0, 1, 3, 9, 10]), n, level)
    assert lo[0] == 0.0
    for k, p in zip([1, 3, 9], lo[1:4]):
        assert binom.sf(k - 1, n, p) == pytest.approx(level, rel=1e-9)
    assert lo[4] == pytest.approx(level ** (1 / n), rel=1e-12)


def test_one_sided_upper_bound_solves_the_lower_tail_equation():
    """q̄(k) solves P[Bin(n, q̄) ≤ k] = level; q̄(n) = 1; q̄(0) = 1 − level^{1/n}."""
    n, level = 10, 0.0125
    hi = audit._cp_upper(np.array([0, 1, 3, 9, 10]), n, level)
    assert hi[0] == pytest.approx(1 - level ** (1 / n), rel=1e-12)
    for k, q in zip([1, 3, 9], hi[1:4]):
        assert binom.cdf(k, n, q) == pytest.approx(level, rel=1e-9)
    assert hi[4] == 1.0


def test_two_sided_interval_has_alpha_over_two_in_each_tail():
    n, alpha = 20, 0.1
    for k in (3, 11):
        lo, hi = clopper_pearson(k, n, alpha)
        assert binom.sf(k - 1, n, lo) == pytest.approx(alpha / 2, rel=1e-9)
        assert binom.cdf(k, n, hi) == pytest.approx(alpha / 2, rel=1e-9)
    assert clopper_pearson(0, n, alpha) == (0.0, pytest.approx(1 - (alpha / 2) ** (1 / n), rel=1e-12))
    assert clopper_pearson(n, n, alpha) == (pytest.approx((alpha / 2) ** (1 / n), rel=1e-12), 1.0)


def test_bound_is_the_log_ratio_clamped_at_zero():
    """ε̂ = ln((p̲ − δ)/q̄) when positive; 0 when the ratio is below 1 or p̲ ≤ δ."""
    p = np.array([0.5, 0.3, 0.3, 1e-6, 0.25])
    q = np.array([0.1, 0.3, 0.6, 0.5, 0.2])
    got = audit._bound(p, q, 1e-5)
    want = [math.log((0.5 - 1e-5) / 0.1), 0.0, 0.0, 0.0, math.log((0.25 - 1e-5) / 0.2)]
    assert got[0] == pytest.approx(want[0], rel=1e-12) and got[4] == pytest.approx(want[4], rel=1e-12)
    assert 0.0 < got[4] < 1.0
    assert list(got[1:4]) == [0.0, 0.0, 0.0]


def test_evaluation_half_is_the_larger_half():
    assert [audit._eval_size(n) for n in (2, 7, 2000, 2001)] == [1, 4, 1000, 1001]
    assert all(type(audit._eval_size(n)) is int for n in (7, 2001))


@pytest.mark.parametrize(("n_releases", "delta", "alpha"), [(2000, 1e-5, 0.05), (2001, 1e-3, 0.2), (2, 0.0, 0.5)])
def test_max_certifiable_epsilon_closed_form(n_releases, delta, alpha):
    """p = (α/4)^{1/n}, n = N − ⌊N/2⌋: ε_max = ln((p − δ)/(1 − p)), 0 when p ≤ δ."""
    n = n_releases - n_releases // 2
    p = (alpha / 4) ** (1 / n)
    want = max(math.log((p - delta) / (1 - p)), 0.0) if p > delta else 0.0
    assert max_certifiable_epsilon(n_releases, delta, alpha) == pytest.approx(want, rel=1e-12, abs=1e-15)
    if alpha == 0.05:
        assert max_certifiable_epsilon(n_releases, delta) == max_certifiable_epsilon(n_releases, delta, 0.05)


def test_max_certifiable_epsilon_validates_each_argument():
    assert max_certifiable_epsilon(2, 0.0, 0.5) >= 0.0  # the inclusive ends are accepted
    with _exact("n_releases: must lie in [2, inf], got 1"):
        max_certifiable_epsilon(1, 1e-5)
    with _exact("delta: must lie in [0.0, 1.0), got 1.0"):
        max_certifiable_epsilon(100, 1.0)
    with _exact("delta: must lie in [0.0, 1.0), got -0.1"):
        max_certifiable_epsilon(100, -0.1)
    for a in (0.0, 1.0):
        with _exact(f"alpha: must lie in (0.0, 1.0), got {a}"):
            max_certifiable_epsilon(100, 1e-5, a)


# ------------------------------------------------------------------------------------------------
# Candidate thresholds and the selection step
# ------------------------------------------------------------------------------------------------


def test_candidates_with_a_count_are_that_many_quantiles_of_each_sample():
    """levels j/(m+1), j = 1..m; index ⌊level·(size − 1)⌋ of each sorted sample."""
    xs, ys = np.arange(10.0), 100.0 + np.arange(20.0)
    got = audit._candidates(xs, ys, 3)  # levels 1/4, 1/2, 3/4
    assert list(got) == [2.0, 4.0, 6.0, 104.0, 109.0, 114.0]
    assert list(audit._candidates(xs, ys, 1)) == [4.0, 109.0]


def test_default_candidates_add_log_spaced_upper_order_statistics_of_dprime():
    xs, ys = np.arange(10.0), 1000.0 + np.arange(10_000.0)
    got = set(audit._candidates(xs, ys, None).tolist())
    m = audit.N_CANDIDATES
    want = set()
    for j in range(1, m + 1):
        level = j / (m + 1)
        want |= {xs[int(level * 9)], ys[int(level * 9999)]}
    ranks = {int(r) for r in np.geomspace(1, ys.size, m)}
    assert 1 in ranks and ys.size in ranks
    want |= {ys[ys.size - r] for r in ranks}
    assert got == want
    small = 1000.0 + np.arange(20.0)  # a small D' sample: every order statistic, the largest included
    assert set(small) <= set(audit._candidates(xs, small, None).tolist())


def test_best_threshold_counts_strict_exceedances():
    """Ties: ``stat > t`` counts values strictly above t. With D = 2s, D' = 0s and 1s, t = 1 separates
    the samples perfectly (no D' value exceeds it) and beats t = 0."""
    xs = np.full(40, 2.0)
    ys = np.r_[np.zeros(30), np.ones(10)]
    assert audit._best_threshold(xs, ys, 1e-5, 0.0125, None) == 1.0
    # one quantile per sample: the medians 2 (D) and 0 (D'); t = 0 leaves 10 of 40 D' values above
    assert audit._best_threshold(xs, ys, 1e-5, 0.0125, 1) == 0.0


def test_best_threshold_uses_only_the_requested_candidates():
    """D: 25 ones, 15 threes; D': 22 zeros, 18 twos. Over every value, t = 2 is best (15 of D above it,
    none of D'); with one quantile per sample the candidates are the medians 1 (D) and 0 (D'), and t = 0
    (all of D, 18 of D' above) beats t = 1."""
    xs = np.sort(np.r_[np.full(25, 1.0), np.full(15, 3.0)])
    ys = np.sort(np.r_[np.zeros(22), np.full(18, 2.0)])
    assert list(audit._candidates(xs, ys, 1)) == [0.0, 1.0]
    assert audit._best_threshold(xs, ys, 1e-5, 0.0125, None) == 2.0
    assert audit._best_threshold(xs, ys, 1e-5, 0.0125, 1) == 0.0


# ------------------------------------------------------------------------------------------------
# The split-half audit against a brute-force reference
# ------------------------------------------------------------------------------------------------


def _cp_lo(k: int, n: int, level: float) -> float:
    return 0.0 if k == 0 else float(beta.ppf(level, k, n - k + 1))


def _cp_hi(k: int, n: int, level: float) -> float:
    return 1.0 if k == n else float(beta.ppf(1 - level, k + 1, n - k))


def _eps(p: float, q: float, delta: float) -> float:
    return max(math.log((p - delta) / q), 0.0) if p > delta else 0.0


def reference_audit(a, b, delta, alpha, seed):
    """The documented procedure on discrete statistics, by brute force: a random half selects the threshold
    among all values of the selection half (ties to the smallest) at level α/4 × strictness, the other half
    evaluates it at α/4; directions ``>`` then ``<``; returns (ε̂, threshold, direction, p̲, q̄)."""
    level = alpha / 4
    rng = stream(seed, "audit.selection-split")
    ia, ib = rng.permutation(a.size), rng.permutation(b.size)
    best = (0.0, math.nan, ">", 0.0, 1.0)
    for direction, sign in ((">", 1.0), ("<", -1.0)):
        a_sel, a_ev = sign * a[ia[: a.size // 2]], sign * a[ia[a.size // 2 :]]
        b_sel, b_ev = sign * b[ib[: b.size // 2]], sign * b[ib[b.size // 2 :]]
        scores = []
        for t in np.unique(np.r_[a_sel, b_sel]):
            p = _cp_lo(int(np.sum(a_sel > t)), a_sel.size, level * audit.SELECTION_STRICTNESS)
            q = _cp_hi(int(np.sum(b_sel > t)), b_sel.size, level * audit.SELECTION_STRICTNESS)
            scores.append((_eps(p, q, delta), -t))
        t = -max(scores)[1]  # the largest bound, ties to the smallest threshold
        p = _cp_lo(int(np.sum(a_ev > t)), a_ev.size, level)
        q = _cp_hi(int(np.sum(b_ev > t)), b_ev.size, level)
        e = _eps(p, q, delta)
        if e > best[0]:
            best = (e, sign * t, direction, p, q)
    return best


P_LOW = [0.45, 0.3, 0.15, 0.1]


def _discrete(seed: int, mirrored: bool):
    """Statistics on {0, …, 3}: D' leans low, D leans high (both mirrored if ``mirrored``); many ties."""
    rng = np.random.default_rng(seed)
    b = rng.choice(4, 360, p=P_LOW).astype(float)
    a = rng.choice(4, 400, p=P_LOW[::-1]).astype(float)
    return (3.0 - a, 3.0 - b) if mirrored else (a, b)


@pytest.mark.parametrize(("data_seed", "mirrored", "audit_seed", "alpha"),
                         [(0, False, 0, 0.05), (0, False, 2, 0.3), (1, True, 2, 0.3), (2, False, 2, 0.05),
                          (3, True, 1, 0.05), (0, True, 0, 0.3), (1, True, 2, 0.05), (2, True, 3, 0.05)])
def test_audit_matches_the_brute_force_reference_on_tied_statistics(data_seed, mirrored, audit_seed, alpha):
    a, b = _discrete(data_seed, mirrored)
    res = epsilon_lower_bound(a, b, 1e-3, alpha, seed=audit_seed)
    eps, t, direction, p, q = reference_audit(a, b, 1e-3, alpha, audit_seed)
    assert eps > 0.0 and direction == ("<" if mirrored else ">")
    assert res.epsilon_lower_bound == pytest.approx(eps, rel=1e-12)
    assert (res.threshold, res.direction) == (t, direction)
    assert res.tpr_lower == pytest.approx(p, rel=1e-12) and res.fpr_upper == pytest.approx(q, rel=1e-12)
    assert (res.n_samples, res.alpha, res.plan) == (760, alpha, None)


def test_separated_samples_reach_the_closed_form_in_either_direction():
    """D entirely above (below) D': p̲ = (α/4)^{1/n_D}, q̄ = 1 − (α/4)^{1/n_D'} on the evaluation halves,
    direction ``>`` (``<``), and the threshold reported on the statistic's own scale."""
    rng = np.random.default_rng(0)
    hi, lo = 5.0 + rng.random(41), rng.random(30)
    plan = AuditPlan(71, 1.0, 0.5, False)
    alpha = 0.1
    p, q = (alpha / 4) ** (1 / 21), 1 - (alpha / 4) ** (1 / 15)
    up = epsilon_lower_bound(hi, lo, 1e-4, alpha, seed=2, plan=plan)
    down = epsilon_lower_bound(-hi, -lo, 1e-4, alpha, seed=2, plan=plan)
    for res, direction in ((up, ">"), (down, "<")):
        assert res.direction == direction
        assert res.tpr_lower == pytest.approx(p, rel=1e-12) and res.fpr_upper == pytest.approx(q, rel=1e-12)
        assert res.epsilon_lower_bound == pytest.approx(math.log((p - 1e-4) / q), rel=1e-12)
        assert (res.n_samples, res.alpha, res.plan) == (71, alpha, plan)
    # the threshold separates the evaluation halves and lies among the selection values of D'
    assert lo.max() <= up.threshold < hi.min() and up.threshold in lo
    assert -hi.min() < down.threshold <= -lo.max() and -down.threshold in lo


def test_identical_samples_give_the_empty_result():
    a = np.arange(40.0)
    plan = AuditPlan(70, 1.0, 0.0, False)
    res = epsilon_lower_bound(a, a[:30], 1e-5, 0.2, plan=plan)
    assert res.epsilon_lower_bound == 0.0 and math.isnan(res.threshold) and res.direction == ">"
    assert (res.tpr_lower, res.fpr_upper, res.n_samples, res.alpha, res.plan) == (0.0, 1.0, 70, 0.2, plan)


def test_defaults_are_alpha_five_percent_and_seed_zero():
    rng = np.random.default_rng(7)
    a, b = rng.normal(1.5, 1.0, 300), rng.normal(0.0, 1.0, 300)
    default = epsilon_lower_bound(a, b, 1e-5)
    assert default == epsilon_lower_bound(a, b, 1e-5, 0.05, None, 0)
    assert default.alpha == 0.05
    assert default == epsilon_lower_bound(a, b, 1e-5)  # deterministic given the seed
    others = {epsilon_lower_bound(a, b, 1e-5, seed=s).tpr_lower for s in range(1, 5)}
    assert default.tpr_lower not in others


def test_n_thresholds_restricts_the_candidates():
    """With one quantile per sample the threshold is a median of a selection half (of D or D', per direction)."""
    rng = np.random.default_rng(3)
    a, b = rng.normal(2.0, 1.0, 200), rng.normal(0.0, 1.0, 200)
    rng4 = stream(4, "audit.selection-split")
    ia, ib = rng4.permutation(200), rng4.permutation(200)
    med = {float(np.sort(a[ia[:100]])[49]), float(np.sort(b[ib[:100]])[49]),
           float(np.sort(a[ia[:100]])[50]), float(np.sort(b[ib[:100]])[50])}
    one = epsilon_lower_bound(a, b, 1e-5, n_thresholds=1, seed=4)
    assert one.epsilon_lower_bound > 0 and one.threshold in med
    assert epsilon_lower_bound(a, b, 1e-5, seed=4).threshold not in med


def test_audit_validates_each_argument():
    ok = np.zeros(20)
    epsilon_lower_bound(ok, ok, 0.0, n_thresholds=1)  # 20 rows, δ = 0 and one threshold are allowed
    with _exact("samples_d: expected at least 20 rows, got 19"):
        epsilon_lower_bound(np.zeros(19), ok, 1e-5)
    with _exact("samples_dprime: expected at least 20 rows, got 19"):
        epsilon_lower_bound(ok, np.zeros(19), 1e-5)
    with _exact("samples_d: expected a 1-d array, got shape (20, 2)"):
        epsilon_lower_bound(np.zeros((20, 2)), ok, 1e-5)
    with _exact("samples_dprime: expected a 1-d array, got shape (20, 2)"):
        epsilon_lower_bound(ok, np.zeros((20, 2)), 1e-5)
    with _exact("delta: must lie in [0.0, 1.0), got 1.0"):
        epsilon_lower_bound(ok, ok, 1.0)
    with _exact("delta: must lie in [0.0, 1.0), got -1e-05"):
        epsilon_lower_bound(ok, ok, -1e-5)
    for a in (0.0, 1.0, 1.5):
        with _exact(f"alpha: must lie in (0.0, 1.0), got {a}"):
            epsilon_lower_bound(ok, ok, 1e-5, a)
    with _exact("n_thresholds: must be ≥ 1 (or None for every sample value), got 0"):
        epsilon_lower_bound(ok, ok, 1e-5, n_thresholds=0)


# ------------------------------------------------------------------------------------------------
# Power: exact binomial power by brute force over all count pairs; the simulated power by its definition
# ------------------------------------------------------------------------------------------------


def reference_power(separation, epsilon, delta, n_releases, alpha, n_grid):
    """max over thresholds t of P[ε̂(K1, K0) > ε], K1 ~ Bin(n, Φ̄(t − s)), K0 ~ Bin(n, Φ̄(t)), summed over
    every (K0, K1); thresholds: ``n_grid`` points on [−2, s + 8], then 9 points between the neighbours
    of the best."""
    n = n_releases - n_releases // 2
    level = alpha / 4
    k = np.arange(n + 1)
    lo = np.array([_cp_lo(int(i), n, level) for i in k])
    hi = np.array([_cp_hi(int(i), n, level) for i in k])
    flagged = np.array([[_eps(p, q, delta) > epsilon for p in lo] for q in hi], dtype=float)  # [k0, k1]

    def power_at(t):
        return float(binom.pmf(k, n, norm.sf(t)) @ flagged @ binom.pmf(k, n, norm.sf(t - separation)))

    grid = np.linspace(-2.0, separation + 8.0, n_grid)
    values = [power_at(t) for t in grid]
    i = int(np.argmax(values))
    fine = np.linspace(grid[max(i - 1, 0)], grid[min(i + 1, n_grid - 1)], 9)
    return min(max(values + [power_at(t) for t in fine]), 1.0)


@pytest.mark.parametrize(("separation", "epsilon", "delta", "n_releases", "alpha", "n_grid"),
                         [(1.5, 1.0, 1e-3, 100, 0.2, 10), (1.5, 0.5, 0.0, 81, 0.05, 48), (3.0, 2.0, 1e-5, 120, 0.1, 5)])
def test_audit_power_matches_the_brute_force_sum(separation, epsilon, delta, n_releases, alpha, n_grid):
    got = audit_power(separation, epsilon, delta, n_releases, alpha, n_grid)
    want = reference_power(separation, epsilon, delta, n_releases, alpha, n_grid)
    assert 0.05 < want < 0.95
    assert got == pytest.approx(want, abs=1e-9)


def test_audit_power_near_the_limit_counts_only_perfect_hit_counts():
    """Just below ε_max only K1 = n (and K0 = 0) certifies: the power is about P[K1 = n]·P[K0 = 0]."""
    top = max_certifiable_epsilon(100, 1e-3, 0.2)
    want = reference_power(6.0, 0.99 * top, 1e-3, 100, 0.2, 48)
    assert 0.05 < want < 0.95
    assert audit_power(6.0, 0.99 * top, 1e-3, 100, 0.2) == pytest.approx(want, abs=1e-9)


def test_audit_power_defaults_and_the_certifiable_limit():
    want = reference_power(2.0, 1.0, 1e-3, 100, 0.05, 48)
    assert 0.05 < want < 0.95 and audit_power(2.0, 1.0, 1e-3, 100) == pytest.approx(want, abs=1e-9)
    top = max_certifiable_epsilon(100, 1e-3, 0.2)
    assert audit_power(50.0, top * (1 - 1e-9), 1e-3, 100, 0.2) == 1.0  # a perfect attack just below the limit
    assert audit_power(50.0, top, 1e-3, 100, 0.2) == 0.0  # nothing can be certified at the limit
    assert audit_power(50.0, math.inf, 1e-3, 100, 0.2) == 0.0


def test_audit_power_validates_each_argument():
    audit_power(0.0, 0.0, 0.0, 2)  # the inclusive ends are accepted
    with _exact("separation: must lie in [0.0, inf], got -1.0"):
        audit_power(-1.0, 1.0, 1e-5, 100)
    with _exact("epsilon: must lie in [0.0, inf], got -1.0"):
        audit_power(1.0, -1.0, 1e-5, 100)
    with _exact("delta: must lie in [0.0, 1.0), got 1.0"):
        audit_power(1.0, 1.0, 1.0, 100)
    with _exact("n_releases: must lie in [2, inf], got 1"):
        audit_power(1.0, 1.0, 1e-5, 1)
    # an infinite claim returns before the limit is computed: the arguments are still checked
    with _exact("delta: must lie in [0.0, 1.0), got 1.0"):
        audit_power(1.0, math.inf, 1.0, 100)
    with _exact("n_releases: must lie in [2, inf], got 1"):
        audit_power(1.0, math.inf, 1e-5, 1)


def reference_simulated_power(separation, epsilon, delta, n_releases, alpha, n_sim, seed):
    """Share of ``n_sim`` audits (audit seed r, data from stream (seed, N) "audit.simulated-power") with ε̂ > ε."""
    rng = stream((seed, n_releases), "audit.simulated-power")
    hits = 0
    for r in range(n_sim):
        on_d, on_dprime = rng.normal(separation, 1.0, n_releases), rng.normal(0.0, 1.0, n_releases)
        hits += epsilon_lower_bound(on_d, on_dprime, delta, alpha, seed=r).epsilon_lower_bound > epsilon
    return hits / n_sim


def test_simulated_power_is_the_share_of_flagged_audits():
    got = simulated_power(2.0, 0.5, 1e-3, 60, 0.2, 20, 3)
    assert got == reference_simulated_power(2.0, 0.5, 1e-3, 60, 0.2, 20, 3)
    assert 0.0 < got < 1.0
    assert simulated_power(2.0, 0.5, 1e-3, 60, 0.2, 20, 4) == reference_simulated_power(2.0, 0.5, 1e-3, 60, 0.2, 20, 4)
    assert simulated_power(2.0, 0.5, 1e-3, 60, n_sim=20) == reference_simulated_power(2.0, 0.5, 1e-3, 60, 0.05, 20, 0)


def test_simulated_power_validates_each_argument():
    assert simulated_power(0.0, 1.0, 1e-5, 20, n_sim=1) == 0.0  # the inclusive ends are accepted
    with _exact("separation: must lie in [0.0, inf], got -1.0"):
        simulated_power(-1.0, 1.0, 1e-5, 100)
    with _exact("n_releases: must lie in [20, inf], got 19"):
        simulated_power(1.0, 1.0, 1e-5, 19)
    with _exact("n_sim: must lie in [1, inf], got 0"):
        simulated_power(1.0, 1.0, 1e-5, 100, n_sim=0)


# ------------------------------------------------------------------------------------------------
# Planning
# ------------------------------------------------------------------------------------------------


def test_plan_as_dict_names_every_field():
    plan = AuditPlan(400, 2.5, 0.75, False, 0.9)
    assert plan.as_dict() == {"audit_releases": 400, "max_certifiable_epsilon": 2.5, "power_half_noise": 0.75,
                              "audit_decidable": False, "power_target": 0.9}
    assert AuditPlan(1, 1.0, 1.0, True).target == audit.POWER_TARGET == 0.95


def test_plan_with_a_count_states_the_simulated_half_noise_power():
    sep, eps, delta, alpha, n = 0.8, 0.5, 1e-3, 0.2, 60
    pw = simulated_power(2.0 * sep, eps, delta, n, alpha)
    assert 0.0 < pw < 1.0
    plan = plan_audit(sep, eps, delta, alpha, n_releases=n, target=pw)  # power exactly at the target
    assert plan == AuditPlan(n, max_certifiable_epsilon(n, delta, alpha), pw, True, pw)
    below = plan_audit(sep, eps, delta, alpha, n_releases=n, target=min(pw + 0.01, 0.99))
    assert not below.decidable and below.power_half_noise == pw


def test_noiseless_plan_is_decided_exactly_below_the_certifiable_limit():
    n, delta, alpha = 200, 1e-3, 0.2
    top = max_certifiable_epsilon(n, delta, alpha)
    assert plan_audit(math.inf, top * (1 - 1e-9), delta, alpha, n_releases=n) == AuditPlan(n, top, 1.0, True)
    assert plan_audit(math.inf, top, delta, alpha, n_releases=n) == AuditPlan(n, top, 0.0, False)
    assert plan_audit(math.inf, math.inf, delta, alpha, n_releases=n).power_half_noise == 0.0


def test_data_free_plan_has_no_power_even_where_the_simulation_has_false_positives():
    assert simulated_power(0.0, 0.0, 1e-3, 100, 0.9) > 0.0
    assert plan_audit(0.0, 0.0, 1e-3, 0.9, n_releases=100).power_half_noise == 0.0


def test_noiseless_plan_searches_the_doubling_counts():
    """From ``min_releases`` the count doubles until ε < max_certifiable_epsilon(count, δ, α)."""
    delta, alpha = 1e-3, 0.2
    eps = max_certifiable_epsilon(320, delta, alpha) * (1 - 1e-9)  # certifiable from 320 = 40·2³ on
    assert eps >= max_certifiable_epsilon(318, delta, alpha)
    plan = plan_audit(math.inf, eps, delta, alpha, min_releases=40, max_releases=5000)
    assert plan == AuditPlan(320, max_certifiable_epsilon(320, delta, alpha), 1.0, True)
    capped = plan_audit(math.inf, eps, delta, alpha, min_releases=40, max_releases=318)
    assert capped == AuditPlan(40, max_certifiable_epsilon(40, delta, alpha), 0.0, False)
    # the search stops at the cap, not at its next doubling: 40, 80, 160, 300
    assert plan_audit(math.inf, max_certifiable_epsilon(300, delta, alpha) * (1 - 1e-9), delta, alpha,
                      min_releases=40, max_releases=300).n_releases == 300


def test_default_search_range_is_1000_to_256000_releases():
    """A noiseless release whose claim only 256 001 releases could certify is undecidable by default."""
    delta = 1e-5
    last = max_certifiable_epsilon(256_000, delta)
    between = (last + max_certifiable_epsilon(256_001, delta)) / 2
    assert last < between < max_certifiable_epsilon(256_001, delta)
    assert plan_audit(math.inf, last * (1 - 1e-12), delta).n_releases == 256_000
    assert plan_audit(math.inf, between, delta) == AuditPlan(1000, max_certifiable_epsilon(1000, delta), 0.0, False)
    assert plan_audit(math.inf, max_certifiable_epsilon(1000, delta) * 0.999, delta).n_releases == 1000


def test_plan_search_with_noise_takes_the_first_count_whose_simulated_power_reaches_the_target():
    """Finite separation: each doubling count is screened by the exact best-threshold power at twice the
    separation and accepted when the simulated power of the procedure reaches the target (≥, so a
    power exactly at the target is accepted)."""
    sep, eps, delta, alpha = 1.25, 0.5, 1e-3, 0.2
    screen = [audit_power(2 * sep, eps, delta, n, alpha) for n in (20, 40)]
    sim = [simulated_power(2 * sep, eps, delta, n, alpha) for n in (20, 40)]
    target = sim[1]  # reached exactly at 40
    assert 0.5 < target < 1.0 and screen[0] < target <= screen[1] and sim[0] < target
    # the screen decides: at 40 the screen with the default α, or at 2/s, or at s, would fail
    assert max(audit_power(2 * sep, eps, delta, 40), audit_power(2 / sep, eps, delta, 40, alpha),
               audit_power(sep, eps, delta, 40, alpha)) < target
    plan = plan_audit(sep, eps, delta, alpha, min_releases=20, max_releases=160, target=target)
    assert plan == AuditPlan(40, max_certifiable_epsilon(40, delta, alpha), target, True, target)
    undecided = plan_audit(sep, eps, delta, alpha, min_releases=20, max_releases=20, target=target)
    assert undecided == AuditPlan(20, max_certifiable_epsilon(20, delta, alpha), sim[0], False, target)


def test_plan_validates_each_argument():
    plan_audit(0.0, 0.0, 0.0, n_releases=20)  # the inclusive ends are accepted
    assert plan_audit(0.0, 1.0, 1e-5, min_releases=20, max_releases=20).n_releases == 20
    for t in (0.0, 1.0):
        with _exact(f"target: must lie in (0.0, 1.0), got {t}"):
            plan_audit(1.0, 1.0, 1e-5, target=t)
    with _exact("separation: must lie in [0.0, inf], got -1.0"):
        plan_audit(-1.0, 1.0, 1e-5)
    with _exact("epsilon: must lie in [0.0, inf], got -1.0"):
        plan_audit(1.0, -1.0, 1e-5)
    with _exact("epsilon: must lie in [0.0, inf], got -1.0"):
        plan_audit(0.0, -1.0, 1e-5)  # a data-free release never reaches the power computation
    with _exact("delta: must lie in [0.0, 1.0), got 1.0"):
        plan_audit(1.0, 1.0, 1.0)
    with _exact("n_releases: must lie in [20, inf], got 19"):
        plan_audit(1.0, 1.0, 1e-5, n_releases=19)
    with _exact("min_releases: must lie in [20, inf], got 19"):
        plan_audit(1.0, 1.0, 1e-5, min_releases=19)
    with _exact("max_releases: must lie in [100, inf], got 99"):
        plan_audit(1.0, 1.0, 1e-5, min_releases=100, max_releases=99)
