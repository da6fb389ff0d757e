r"""Empirical privacy audit of the DP-FedAvg server step (issue: trust, DP audits).

Neighbouring inputs under client-level add/remove with fixed weights (the accountant's adjacency,
:mod:`veilbench.gca.accountant`): in D a canary client 0 sends the worst-case update
:math:`\Delta_0 = c\,e_1` (norm exactly the clip bound), in D' its update is absent
(:math:`\Delta_0 = 0`); every other client sends 0. One round of :func:`~veilbench.gca.aggregation.dp_fedavg`
is run many times on each (its ``n_draws``: the same step, one noise draw per
run), the statistic is the first coordinate of :math:`\theta^{+} - \theta`
(mean :math:`p_0 c` vs 0), and :func:`veilbench.privacy.audit.epsilon_lower_bound` turns the two
samples into a lower bound on ε, to be compared with the accountant's claim for one round.
``noise_scale`` < 1 simulates a mis-calibrated server (less noise than the accountant assumes).

The statistic's gap over its noise std is :math:`p_0 c / (z c \max_i p_i) = 1/z`, the separation
:func:`veilbench.privacy.audit.plan_audit` needs to state the audit's power against a half-noise
server; by default the run count is the smallest that flags such a server with ≥ 95 % probability.

White-box: :func:`audit_dp_fedavg_noise` reads the noise the server actually added in each of the R
rounds of a run (its release arrays ``dp_noise_sum_sq`` (R,), ``dp_noise_count`` (R,),
``dp_noise_sample`` (R, m)) and tests it against N(0, (σ/C)²) per element with L2 sensitivity
:math:`c \max_i p_i` per round, the R rounds composing exactly into one Gaussian
(:mod:`veilbench.privacy.noise_audit`), so a server with too little noise is caught whatever ε the
run claims.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from veilbench.gca.accountant import dp_fedavg_epsilon
from veilbench.gca.aggregation import dp_fedavg
from veilbench.privacy.audit import AuditPlan, AuditResult, epsilon_lower_bound, plan_audit
from veilbench.privacy.noise_audit import NOISE_AUDIT_ALPHA, NoiseAudit, audit_noise_arrays
from veilbench.random import stream
from veilbench.validation import ValidationError, check_array, check_in_range


@dataclass(frozen=True)
class DpFedAvgAudit:
    """The claimed one-round ε (accountant), the empirical lower bound and what the run count can decide."""

    epsilon_claimed: float
    audit: AuditResult

    @property
    def violated(self) -> bool:
        return self.audit.epsilon_lower_bound > self.epsilon_claimed

    @property
    def plan(self) -> AuditPlan:
        assert self.audit.plan is not None
        return self.audit.plan


def audit_dp_fedavg_round(
    n_clients: int = 4,
    clip: float = 1.0,
    noise_multiplier: float = 1.0,
    delta: float = 1e-2,
    n_runs: int | None = None,
    noise_scale: float = 1.0,
    seed: int = 0,
    alpha: float = 0.05,
) -> DpFedAvgAudit:
    """Audit one DP-FedAvg round with equal weights p_i = 1/C.

    ``noise_multiplier`` z is the accountant's: server noise std s = z·c·max p_i, passed to
    ``dp_fedavg`` as σ = s·C (it adds N(0, (σ/C)²)), times ``noise_scale``. ``n_runs`` rounds per
    neighbour, or ``None`` for the count :func:`~veilbench.privacy.audit.plan_audit` picks.
    """
    c = int(check_in_range(n_clients, "n_clients", 1, None))
    check_in_range(noise_scale, "noise_scale", 0.0, None, low_inclusive=False)
    weights = np.full(c, 1.0 / c)
    s = noise_multiplier * clip * weights.max()
    sigma = s * c * noise_scale
    claimed = dp_fedavg_epsilon(noise_multiplier, 1, delta)
    plan = plan_audit(1.0 / noise_multiplier, claimed, delta, alpha, n_runs)
    n_runs = plan.n_releases
    rng = stream(seed, "gca.audit-round")
    theta = np.zeros(1)
    canary = np.zeros((c, 1))
    canary[0, 0] = clip
    absent = np.zeros((c, 1))
    with_canary = dp_fedavg(theta, canary, weights, clip, sigma, rng, n_runs)[:, 0]
    without = dp_fedavg(theta, absent, weights, clip, sigma, rng, n_runs)[:, 0]
    return DpFedAvgAudit(claimed, epsilon_lower_bound(with_canary, without, delta, alpha, seed=seed, plan=plan))


def audit_dp_fedavg_noise(
    release_arrays: Mapping[str, np.ndarray],
    clip: float,
    sigma: float,
    weights: np.ndarray,
    delta: float,
    epsilon: float,
    alpha: float = NOISE_AUDIT_ALPHA,
) -> NoiseAudit:
    """White-box audit of the server noise of one DP-FedAvg run against its claimed ``epsilon``.

    ``release_arrays`` holds ``dp_noise_sum_sq`` (R,), ``dp_noise_count`` (R,) and ``dp_noise_sample``
    (R, m): per round, Σ ξ² over the noise elements the server added, their number and the first m of
    them. The server should add ξ ~ N(0, (σ/C)² I) per round (C = len(``weights``) clients, σ =
    ``sigma`` the configured multiplier of :func:`~veilbench.gca.aggregation.dp_fedavg`), and a round's
    L2 sensitivity is c·max p_i (c = ``clip``, p = ``weights``); the claim (ε, δ) covers all R rounds.
    """
    p = check_array(weights, "weights", ndim=1)
    if np.any(p < 0) or not np.isclose(p.sum(), 1.0):
        raise ValidationError(f"weights: must be ≥ 0 and sum to 1, got sum {p.sum():.6g}")
    c = check_in_range(clip, "clip", 0.0, None, low_inclusive=False)
    s = check_in_range(sigma, "sigma", 0.0, None, low_inclusive=False) / p.size
    rounds = int(np.asarray(release_arrays.get("dp_noise_sum_sq", np.zeros(1))).size)
    return audit_noise_arrays(release_arrays, s, c * float(p.max()), epsilon, delta, releases=rounds, alpha=alpha)
