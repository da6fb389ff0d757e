"""The privacy audit stays below the claimed ε for the correct mechanisms and flags broken ones."""

from __future__ import annotations

import math

import numpy as np
import pytest

from veilbench.privacy.audit import audit_power, max_certifiable_epsilon, plan_audit, simulated_power
from veilbench.privacy.calibration import analytic_sigma
from veilbench.scoreshield.gram import GaussianGramMechanism, audit_gram_release
from veilbench.scoreshield.sensitivity import gram_record_sensitivity
from veilbench.scoreshield.vector import GaussianScoreMechanism, audit_score_release, perturb_scores

# δ = 1e-2 puts the Gaussian's privacy loss where 20k releases can see it (a violation hidden in
# a 1e-5 tail is invisible to any finite-sample audit).
EPS, DELTA, N = 2.0, 1e-2, 20_000


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("clip", [True, False])
def test_vector_audit_correct_vs_half_noise(seed, clip):
    mech = GaussianScoreMechanism(EPS, DELTA, clip=clip)

    def correct(c, rng):
        return mech.release(c, rng).scores

    def half(c, rng):
        return perturb_scores(c, mech.sigma / 2.0, rng, clip=clip).scores

    ok = audit_score_release(correct, DELTA, N, seed=seed)
    bad = audit_score_release(half, DELTA, N, seed=seed)
    assert 0.0 < ok.epsilon_lower_bound <= EPS
    assert bad.epsilon_lower_bound > EPS


def test_vector_audit_of_clean_release_is_large():
    res = audit_score_release(lambda c, rng: c, DELTA, 2000, seed=0)
    assert res.epsilon_lower_bound > 5.0


class ForgotRowFactor(GaussianGramMechanism):
    """A buggy Gram mechanism using the score-vector Δ = 2 instead of Δ_F = 2√(2(n − 1))."""

    def sensitivity_for(self, n: int) -> float:
        return 2.0


@pytest.mark.parametrize("seed", [0, 1])
def test_gram_audit_correct_vs_wrong_sensitivity(seed):
    ok = audit_gram_release(GaussianGramMechanism(EPS, DELTA, "record"), n=6, n_releases=N, seed=seed)
    bad = audit_gram_release(ForgotRowFactor(EPS, DELTA, "record"), n=6, n_releases=N, seed=seed)
    assert ok.epsilon_lower_bound <= EPS < bad.epsilon_lower_bound
    assert gram_record_sensitivity(6) > 2.0


def test_gram_audit_output_adjacency_pair_has_the_claimed_distance():
    from veilbench.scoreshield.gram import audit_pair, cosine_gram

    mech = GaussianGramMechanism(EPS, DELTA, "output", sensitivity=1.5)
    x, xp = audit_pair(mech, 6)
    assert np.linalg.norm(cosine_gram(x) - cosine_gram(xp)) == pytest.approx(1.5)
    assert audit_gram_release(mech, n=6, n_releases=N, seed=0).epsilon_lower_bound <= EPS


class HalfNoiseGram(GaussianGramMechanism):
    """A buggy Gram mechanism adding half the calibrated noise (σ/2 ⇔ Δ_F/2)."""

    def sensitivity_for(self, n: int) -> float:
        return super().sensitivity_for(n) / 2.0


@pytest.mark.parametrize("adjacency", ["record", "output"])
def test_gram_audit_catches_half_noise(adjacency):
    ok = audit_gram_release(GaussianGramMechanism(EPS, DELTA, adjacency), n=6, n_releases=N, seed=3)
    bad = audit_gram_release(HalfNoiseGram(EPS, DELTA, adjacency), n=6, n_releases=N, seed=3)
    assert ok.epsilon_lower_bound <= EPS < bad.epsilon_lower_bound


# ------------------------------------------------------------------------------------------------
# Stated power: what a run count can certify, and half-noise mechanisms at the default run sizes
# ------------------------------------------------------------------------------------------------


def test_perfect_attack_reaches_exactly_the_certifiable_maximum_at_the_bonferroni_level():
    """Each one-sided Clopper–Pearson bound is at α/4 (two rates × two directions): a noiseless release
    gives p̲ = (α/4)^{1/n} on the n evaluation releases and ε̂ = max_certifiable_epsilon."""
    res = audit_score_release(lambda c, rng: c, DELTA, 2000, seed=0)
    p = (0.05 / 4) ** (1 / 1000)
    assert res.tpr_lower == pytest.approx(p, rel=1e-12)
    assert res.epsilon_lower_bound == pytest.approx(math.log((p - DELTA) / (1 - p)), rel=1e-12)
    assert res.epsilon_lower_bound == pytest.approx(max_certifiable_epsilon(2000, DELTA), rel=1e-12)
    assert max_certifiable_epsilon(2000, 1e-5) == pytest.approx(5.43, abs=0.01)
    assert max_certifiable_epsilon(4000, 1e-5) > max_certifiable_epsilon(2000, 1e-5)


HALF_NOISE_SEP = 2.0 / analytic_sigma(1.0, 4.0, 1e-5)  # half-noise separation of the ε = 4 score release


def test_power_is_zero_beyond_the_certifiable_maximum_and_grows_with_the_run_count():
    sep = HALF_NOISE_SEP
    assert simulated_power(sep, 9.0, 1e-5, 2000) == 0.0 == audit_power(sep, 9.0, 1e-5, 2000)  # 9 > 5.43
    assert audit_power(sep, 4.0, 1e-5, 4000) < 0.2 and audit_power(sep, 4.0, 1e-5, 64_000) >= 0.95


@pytest.mark.slow  # 2 × 100 simulated audits, up to 64 000 releases a side
def test_simulated_power_agrees_with_the_exact_power_at_both_run_counts():
    small, large = simulated_power(HALF_NOISE_SEP, 4.0, 1e-5, 4000), simulated_power(HALF_NOISE_SEP, 4.0, 1e-5, 64_000)
    assert small < 0.2 and large >= 0.95


def test_plan_with_a_fixed_count_says_when_it_cannot_decide():
    """The default record-adjacency Gram cells audit ε = 8 with 1 000 releases: nothing above ~4.7 can
    be certified, so the plan is not decidable (power 0 against a half-noise release)."""
    plan = plan_audit(1.0 / analytic_sigma(1.0, 8.0, 1e-5), 8.0, 1e-5, n_releases=1000)
    assert not plan.decidable and plan.power_half_noise == 0.0 and plan.max_certifiable_epsilon < 5.0
    clean = plan_audit(math.inf, 1000.0, 1e-5)  # the clean release's capped claim cannot be tested
    assert not clean.decidable and clean.n_releases == 1000
    free = plan_audit(0.0, 0.0, 1e-5)  # a data-free release is never flagged
    assert free.power_half_noise == 0.0


def test_default_record_gram_cell_reports_cannot_decide():
    from veilbench.scoreshield import family

    p = family.Params(regime="gram", adjacency="record", mechanism="noisy", epsilon=8.0, delta=1e-5,
                      audit_releases=1000)
    out = family.attack({}, p, seed=0)
    assert out.metrics["privacy_audit_decidable"] == 0.0
    assert out.metrics["privacy_audit_max_certifiable_epsilon"] < 8.0
    assert out.metrics["privacy_audit_power_half_noise"] == 0.0


class HalfSigmaGram(GaussianGramMechanism):
    """A broken Gram mechanism releasing half the calibrated noise."""

    def sigma_for(self, n: int) -> float:
        return super().sigma_for(n) / 2.0


@pytest.mark.slow  # audits at the default (auto) run count: tens of thousands of releases
def test_half_noise_gram_release_is_flagged_at_the_default_run_size():
    """The default output-adjacency Gram cell at ε = 2 (Δ = 1): its default (auto) run count has
    ≥ 95 % power against half noise; the half-noise release is flagged there, the correct one is not."""
    from veilbench.scoreshield import family

    p = family.Params(regime="gram", adjacency="output", gram_sensitivity=1.0, mechanism="aap", epsilon=2.0,
                      delta=1e-5)
    out = family.attack({}, p, seed=0)
    assert out.metrics["privacy_audit_decidable"] == 1.0 and out.metrics["privacy_audit_power_half_noise"] >= 0.95
    assert out.metrics["privacy_audit_flagged"] == 0.0
    n = int(out.metrics["privacy_audit_releases"])
    bad = audit_gram_release(HalfSigmaGram(2.0, 1e-5, "output", 1.0), n=6, n_releases=n, seed=1)
    assert bad.epsilon_lower_bound > 2.0


@pytest.mark.slow  # audits at the default (auto) run count: tens of thousands of releases
def test_half_noise_score_release_is_flagged_at_the_default_run_size():
    """The noisy score before clipping is audited (clipping at ±1 hides the tails: the clipped
    half-noise release on the ±1 neighbours is only ≈ 2.8-DP, so no audit of it could flag ε = 4)."""
    from veilbench.scoreshield import family

    eps = 4.0  # a default scoreshield-vector cell
    mech = GaussianScoreMechanism(eps, 1e-5)
    out = family.attack({"release": {"scores": np.zeros((3, 5))}}, family.Params(epsilon=eps), seed=0)
    assert out.metrics["privacy_audit_decidable"] == 1.0 and out.metrics["privacy_audit_flagged"] == 0.0
    n = int(out.metrics["privacy_audit_releases"])

    def half(c, rng):
        return perturb_scores(c, mech.sigma / 2.0, rng, clip=False).scores

    assert audit_score_release(half, 1e-5, n, seed=3).epsilon_lower_bound > eps
