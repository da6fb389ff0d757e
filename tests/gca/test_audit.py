"""DP-FedAvg audits: the correct server step stays within its claimed ε, a half-noise one is caught — by the
black-box audit of one round and by the white-box audit of the noise the server added in every round."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq

from veilbench.gca.accountant import dp_fedavg_epsilon
from veilbench.gca.audit import audit_dp_fedavg_noise, audit_dp_fedavg_round
from veilbench.privacy.calibration import analytic_sigma, gaussian_epsilon
from veilbench.random import stream
from veilbench.validation import ValidationError


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


# ------------------------------------------------------------------------------------------------
# white-box audit of the server's noise (audit_dp_fedavg_noise) and its place in the evaluate stage
# ------------------------------------------------------------------------------------------------

SAMPLE = 256  # elements per round the release keeps for the shape tests


def server_noise_arrays(rounds: int, n_params: int, std: float, seed: int) -> dict[str, np.ndarray]:
    """What the release records of a server adding N(0, std²) to each of ``n_params`` elements per round."""
    rng = stream(seed, "test.server-noise")
    xi = std * rng.standard_normal((rounds, n_params))
    return {"dp_noise_sum_sq": np.sum(xi**2, axis=1), "dp_noise_count": np.full(rounds, n_params, dtype=np.int64),
            "dp_noise_sample": xi[:, :SAMPLE].copy(), "dp_noise_std": np.array([std])}


def _sigma_for_claim(epsilon: float, rounds: int, weights: np.ndarray, clip: float, delta: float) -> float:
    """The server σ (dp_fedavg's argument) whose RDP claim over ``rounds`` rounds is ``epsilon``."""
    z = brentq(lambda z: dp_fedavg_epsilon(z, rounds, delta) - epsilon, 0.05, 50.0, xtol=1e-12)
    return z * clip * weights.max() * weights.size


@pytest.mark.parametrize("epsilon", [8.0, 32.0])
def test_server_noise_audit_flags_half_and_08_noise_and_passes_correct_noise(epsilon) -> None:
    """20 rounds, unequal weights, the claim from the RDP accountant at ε = 8 and 32: over 40 seeds the
    correct server is never flagged, the σ/2 and 0.8σ servers always; the stated powers are ≥ 0.95."""
    weights, clip, delta, rounds, n_params = np.array([0.4, 0.3, 0.2, 0.1]), 0.7, 1e-5, 20, 2000
    sigma = _sigma_for_claim(epsilon, rounds, weights, clip, delta)
    std = sigma / weights.size
    for seed in range(40):
        ok = audit_dp_fedavg_noise(server_noise_arrays(rounds, n_params, std, seed), clip, sigma, weights, delta, epsilon)
        assert not ok.flagged and ok.epsilon_lower <= epsilon, seed
        assert ok.power_half_sigma >= 0.95 and ok.power_08_sigma >= 0.95
        for ratio in (0.5, 0.8):
            bad = audit_dp_fedavg_noise(server_noise_arrays(rounds, n_params, ratio * std, seed), clip, sigma, weights,
                                        delta, epsilon)
            assert bad.flagged_scale and bad.epsilon_lower > epsilon, (seed, ratio)
    # the audit's model: per-element std σ/C, sensitivity c·max p, R rounds composed as one Gaussian
    assert ok.sigma_expected == pytest.approx(std, rel=1e-12) and ok.n_entries == rounds * n_params
    z = std / (clip * weights.max())
    assert ok.sigma_min == pytest.approx(analytic_sigma(clip * weights.max() * math.sqrt(rounds), epsilon, delta))
    assert ok.sigma_min < std and gaussian_epsilon(z, math.sqrt(rounds), delta) < epsilon  # RDP is not tight


def test_server_noise_audit_names_its_bad_inputs() -> None:
    arrays = server_noise_arrays(2, 300, 0.25, 0)
    with pytest.raises(ValidationError, match="weights: must be ≥ 0 and sum to 1"):
        audit_dp_fedavg_noise(arrays, 1.0, 1.0, np.array([0.5, 0.6]), 1e-5, 4.0)
    with pytest.raises(ValidationError, match=r"release: .*missing \['dp_noise_sum_sq'"):
        audit_dp_fedavg_noise({}, 1.0, 1.0, np.array([0.5, 0.5]), 1e-5, 4.0)
    with pytest.raises(ValidationError, match="^clip: "):
        audit_dp_fedavg_noise(arrays, 0.0, 1.0, np.array([0.5, 0.5]), 1e-5, 4.0)


@pytest.fixture(scope="module")
def dpfedavg_stages():
    """release → integrate → attack of a small DP-FedAvg cell (the black-box round audit at 400 runs)."""
    import veilbench.gca.audit as audit_mod
    from tests.gca.helpers import digits_stage_inputs
    from veilbench.gca import family as F

    params = F.Params(method="dpfedavg", rounds=3, attack_starts=4, attack_max_steps=30, surrogate_max_epochs=20,
                      surrogate_patience=5)
    state = dict(digits_stage_inputs(360, seed=0))
    with pytest.MonkeyPatch.context() as mp:
        real = audit_mod.audit_dp_fedavg_round
        mp.setattr(audit_mod, "audit_dp_fedavg_round", lambda **kw: real(**{**kw, "n_runs": 400}))
        outputs = {}
        for stage in ("release", "integrate", "attack"):
            outputs[stage] = getattr(F, stage)(state, params, 1)
            state[stage] = outputs[stage].arrays
    return F, params, state, outputs


def test_dpfedavg_release_states_rounds_multiplier_and_both_accountants(dpfedavg_stages) -> None:
    """The ledger's contract: R releases of multiplier z, each at the exact one-round ε; the RDP figure for all R."""
    _, params, state, outputs = dpfedavg_stages
    (entry,) = outputs["release"].ledger
    z = float(state["release"]["dp_noise_multiplier"][0])
    assert entry.count == params.rounds and entry.noise_multiplier == z and entry.delta == params.dp_delta
    assert entry.epsilon == pytest.approx(gaussian_epsilon(z, 1.0, params.dp_delta), rel=1e-12)
    assert entry.epsilon_rdp == dp_fedavg_epsilon(z, params.rounds, params.dp_delta)
    assert state["release"]["dp_epsilon"][0] == entry.epsilon_rdp
    assert entry.adjacency == "client"


def test_dpfedavg_evaluate_audits_the_server_noise(dpfedavg_stages) -> None:
    """The evaluate stage flags a server that adds σ/2 (or 0.8σ) and passes one that adds σ, reading the
    release's noise arrays (synthetic here, drawn as the server draws them: N(0, (σ/C)²) per element)."""
    from veilbench.gca.aggregation import sample_weights

    F, params, state, _ = dpfedavg_stages
    n_params = state["release"]["victim_params"].size
    weights = sample_weights(F._data(state, params, 1).federation.sizes)
    flags = {}
    for ratio in (1.0, 0.8, 0.5):
        noise = server_noise_arrays(params.rounds, n_params, ratio * params.dp_sigma / weights.size, 3)
        metrics = F.evaluate({**state, "release": {**state["release"], **noise}}, params, 1).metrics
        flags[ratio] = metrics["privacy_noise_audit_flagged"]
        assert metrics["privacy_noise_audit_epsilon_claimed"] == metrics["dp_epsilon"]
        assert metrics["privacy_noise_audit_entries"] == params.rounds * n_params
    assert flags == {1.0: 0.0, 0.8: 1.0, 0.5: 1.0}
    # the release's own record of the noise its server added passes the audit, every element counted
    real = F.evaluate(state, params, 1).metrics
    assert real["privacy_noise_audit_flagged"] == 0.0
    assert real["privacy_noise_audit_entries"] == params.rounds * n_params
    assert np.array_equal(state["release"]["dp_noise_count"], np.full(params.rounds, n_params))
