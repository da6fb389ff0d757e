"""DP-FedAvg accountant: dp_accounting's RDP ε against closed-form bounds."""

import math

import numpy as np
import pytest

from veilbench.gca.accountant import dp_fedavg_epsilon
from veilbench.privacy.calibration import achieved_delta
from veilbench.validation import ValidationError


def _rdp_gaussian_bound(z, rounds, delta):
    """Classical RDP conversion: min_α R·α/(2z²) + ln(1/δ)/(α−1)."""
    alphas = np.linspace(1.01, 512, 200_000)
    return float(np.min(rounds * alphas / (2 * z * z) + math.log(1 / delta) / (alphas - 1)))


@pytest.mark.parametrize("z,rounds", [(1.0, 5), (2.0, 50), (0.8, 100)])
def test_epsilon_between_exact_and_classical_rdp(z, rounds):
    delta = 1e-5
    eps = dp_fedavg_epsilon(z, rounds, delta)
    # R Gaussian rounds of multiplier z = one Gaussian with sensitivity √R and σ = z (exact profile)
    assert achieved_delta(z, math.sqrt(rounds), eps) <= delta * 1.0001
    assert eps <= _rdp_gaussian_bound(z, rounds, delta) + 1e-6


def test_epsilon_monotone():
    assert dp_fedavg_epsilon(1.0, 10, 1e-5) < dp_fedavg_epsilon(1.0, 20, 1e-5)
    assert dp_fedavg_epsilon(2.0, 10, 1e-5) < dp_fedavg_epsilon(1.0, 10, 1e-5)
    assert dp_fedavg_epsilon(1.0, 10, 1e-5, sampling_rate=0.1) < dp_fedavg_epsilon(1.0, 10, 1e-5)


def test_noise_multiplier_of_the_simulator():
    from veilbench.gca.simulator import FedConfig, dp_noise_multiplier

    cfg = FedConfig(dp_clip=0.5, dp_sigma=2.0)
    # equal weights: (σ/C)/(c/C) = σ/c = 4; unequal: (2/2)/(0.5*0.75)
    assert dp_noise_multiplier(cfg, np.array([0.5, 0.5])) == pytest.approx(4.0)
    assert dp_noise_multiplier(cfg, np.array([0.25, 0.75])) == pytest.approx(1.0 / 0.375)


@pytest.mark.parametrize(
    "kwargs,field",
    [
        (dict(noise_multiplier=0.0, rounds=1, delta=1e-5), "noise_multiplier"),
        (dict(noise_multiplier=1.0, rounds=0, delta=1e-5), "rounds"),
        (dict(noise_multiplier=1.0, rounds=1, delta=1.0), "delta"),
        (dict(noise_multiplier=1.0, rounds=1, delta=1e-5, sampling_rate=0.0), "sampling_rate"),
    ],
)
def test_bad_input_names_field(kwargs, field):
    with pytest.raises(ValidationError, match=field):
        dp_fedavg_epsilon(**kwargs)


@pytest.mark.parametrize("z,rounds", [(1.0, 5), (2.0, 50)])
def test_ledger_pld_of_the_rounds_is_tighter_than_the_rdp_accountant(z, rounds):
    """The ledger composes R rounds of multiplier z with dp_accounting's PLD: exact up to discretisation,
    so at most the RDP ε and not far below it."""
    from veilbench.privacy.ledger import LedgerEntry, compose

    rdp = dp_fedavg_epsilon(z, rounds, 1e-5)
    entry = LedgerEntry("d", "s", "dpfedavg", 0, "dpfedavg", dp_fedavg_epsilon(z, 1, 1e-5), 1e-5, rounds, z)
    pld = compose([entry])[("d", "s", "dpfedavg")].epsilon
    assert 0.7 * rdp < pld <= rdp
    assert achieved_delta(z, math.sqrt(rounds), pld) <= 1e-5 * 1.001
