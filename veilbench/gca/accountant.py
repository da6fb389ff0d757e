r"""Privacy accounting for DP-FedAvg with Google's ``dp_accounting`` RDP accountant.

Each round releases :math:`\theta + \sum_i p_i \mathrm{clip}(\Delta_i) + N(0, s^2 I)` with
:math:`s = \sigma/C`. Under client-level add/remove adjacency with the weights held fixed [A],
the L2 sensitivity of the weighted sum is :math:`c \max_i p_i`, so a round is a Gaussian
mechanism with noise multiplier :math:`z = s / (c \max_i p_i)`. With full participation
(q = 1) the R rounds compose as ``SelfComposedDpEvent(GaussianDpEvent(z), R)``; with Poisson
client sampling at rate q < 1 as ``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(z)), R)``.
The accountant returns the smallest ε with the run (ε, δ)-DP at the given δ.

Caveat (spec §11.3): clipping happens at the server, so the guarantee covers observers of the
released global models only, not the server itself, which sees every unclipped update.
"""

from __future__ import annotations

from veilbench.validation import check_in_range


def dp_fedavg_epsilon(noise_multiplier: float, rounds: int, delta: float, sampling_rate: float = 1.0) -> float:
    """ε spent after ``rounds`` Gaussian rounds with multiplier ``z`` at ``delta`` (RDP accountant)."""
    import dp_accounting
    from dp_accounting.rdp import RdpAccountant

    z = check_in_range(noise_multiplier, "noise_multiplier", 0.0, None, low_inclusive=False)
    r = int(check_in_range(rounds, "rounds", 1, None))
    d = check_in_range(delta, "delta", 0.0, 1.0, low_inclusive=False, high_inclusive=False)
    q = check_in_range(sampling_rate, "sampling_rate", 0.0, 1.0, low_inclusive=False)
    event = dp_accounting.GaussianDpEvent(z)
    if q < 1.0:
        event = dp_accounting.PoissonSampledDpEvent(q, event)
    accountant = RdpAccountant()
    accountant.compose(dp_accounting.SelfComposedDpEvent(event, r))
    return float(accountant.get_epsilon(d))
