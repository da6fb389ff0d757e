"""The privacy audit stays below the claimed ε for the correct mechanisms and flags broken ones."""

from __future__ import annotations

import numpy as np
import pytest

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
