"""DP-FedAvg audit: the correct server step stays within its claimed ε, a half-noise one is caught."""

from __future__ import annotations

from veilbench.gca.audit import audit_dp_fedavg_round


def test_correct_dp_fedavg_round_passes_the_audit() -> None:
    result = audit_dp_fedavg_round(noise_multiplier=1.0, delta=1e-2, n_runs=4000, seed=1)
    assert 0.0 < result.audit.epsilon_lower_bound <= result.epsilon_claimed
    assert not result.violated


def test_half_noise_dp_fedavg_round_is_caught() -> None:
    result = audit_dp_fedavg_round(noise_multiplier=1.0, delta=1e-2, n_runs=4000, noise_scale=0.5, seed=1)
    assert result.violated, (result.audit.epsilon_lower_bound, result.epsilon_claimed)
