r"""Empirical privacy audit of the DP-FedAvg server step (issue: trust, DP audits).

Neighbouring inputs under client-level add/remove with fixed weights (the accountant's adjacency,
:mod:`veilbench.gca.accountant`): in D a canary client 0 sends the worst-case update
:math:`\Delta_0 = c\,e_1` (norm exactly the clip bound), in D' its update is absent
(:math:`\Delta_0 = 0`); every other client sends 0. One round of :func:`~veilbench.gca.aggregation.dp_fedavg`
is run many times on each, the statistic is the first coordinate of :math:`\theta^{+} - \theta`
(mean :math:`p_0 c` vs 0), and :func:`veilbench.privacy.audit.epsilon_lower_bound` turns the two
samples into a lower bound on ε, to be compared with the accountant's claim for one round.
``noise_scale`` < 1 simulates a mis-calibrated server (less noise than the accountant assumes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from veilbench.gca.accountant import dp_fedavg_epsilon
from veilbench.gca.aggregation import dp_fedavg
from veilbench.privacy.audit import AuditResult, epsilon_lower_bound
from veilbench.validation import check_in_range


@dataclass(frozen=True)
class DpFedAvgAudit:
    """The claimed one-round ε (accountant) and the empirical lower bound."""

    epsilon_claimed: float
    audit: AuditResult

    @property
    def violated(self) -> bool:
        return self.audit.epsilon_lower_bound > self.epsilon_claimed


def audit_dp_fedavg_round(
    n_clients: int = 4,
    clip: float = 1.0,
    noise_multiplier: float = 1.0,
    delta: float = 1e-2,
    n_runs: int = 4000,
    noise_scale: float = 1.0,
    seed: int = 0,
) -> DpFedAvgAudit:
    """Audit one DP-FedAvg round with equal weights p_i = 1/C.

    ``noise_multiplier`` z is the accountant's: server noise std s = z·c·max p_i, passed to
    ``dp_fedavg`` as σ = s·C (it adds N(0, (σ/C)²)), times ``noise_scale``.
    """
    c = int(check_in_range(n_clients, "n_clients", 1, None))
    check_in_range(noise_scale, "noise_scale", 0.0, None, low_inclusive=False)
    weights = np.full(c, 1.0 / c)
    s = noise_multiplier * clip * weights.max()
    sigma = s * c * noise_scale
    rng = np.random.default_rng(seed)
    theta = np.zeros(1)
    canary = np.zeros((c, 1))
    canary[0, 0] = clip
    absent = np.zeros((c, 1))
    with_canary = np.array([dp_fedavg(theta, canary, weights, clip, sigma, rng)[0] for _ in range(n_runs)])
    without = np.array([dp_fedavg(theta, absent, weights, clip, sigma, rng)[0] for _ in range(n_runs)])
    claimed = dp_fedavg_epsilon(noise_multiplier, 1, delta)
    return DpFedAvgAudit(claimed, epsilon_lower_bound(with_canary, without, delta, seed=seed))
