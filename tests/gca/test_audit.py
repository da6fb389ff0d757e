"""DP-FedAvg audit: the correct server step stays within its claimed ε, a half-noise one is caught."""

from __future__ import annotations

import pytest

from veilbench.gca.audit import audit_dp_fedavg_round


def test_correct_dp_fedavg_round_passes_the_audit() -> None:
    result = audit_dp_fedavg_round(noise_multiplier=1.0, delta=1e-2, n_runs=4000, seed=1)
    assert 0.0 < result.audit.epsilon_lower_bound <= result.epsilon_claimed
    assert not result.violated


def test_half_noise_dp_fedavg_round_is_caught() -> None:
    result = audit_dp_fedavg_round(noise_multiplier=1.0, delta=1e-2, n_runs=4000, noise_scale=0.5, seed=1)
    assert result.violated, (result.audit.epsilon_lower_bound, result.epsilon_claimed)


@pytest.mark.slow
def test_half_noise_dp_fedavg_round_is_caught_at_the_default_run_size() -> None:
    """Default DP-FedAvg settings (z ≈ 1, δ = 1e-5, one-round ε ≈ 4.7): the default (auto) run count
    has ≥ 95 % power against a half-noise server, can certify more than the claim, and flags it."""
    result = audit_dp_fedavg_round(noise_multiplier=1.0, delta=1e-5, noise_scale=0.5, seed=2)
    assert result.plan.decidable and result.plan.power_half_noise >= 0.95
    assert result.plan.max_certifiable_epsilon > result.epsilon_claimed
    assert result.violated, (result.audit.epsilon_lower_bound, result.epsilon_claimed)


def test_a_fixed_small_run_count_states_that_it_cannot_decide() -> None:
    """2 000 rounds (the former default) certify at most ≈ 5.4: a half-noise server is never flagged."""
    result = audit_dp_fedavg_round(noise_multiplier=1.0, delta=1e-5, n_runs=2000, noise_scale=0.5, seed=2)
    assert not result.plan.decidable and result.plan.power_half_noise < 0.5
    assert result.plan.max_certifiable_epsilon == pytest.approx(5.43, abs=0.01)
