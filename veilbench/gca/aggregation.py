r"""Server aggregation rules of the parameter-sharing baselines (spec §5), on flat vectors.

Notation: global parameters :math:`\theta \in R^P` before the round, client results
:math:`\theta_i` (``local``: ``(C, P)``), sample weights :math:`p_i = N_i / \sum_j N_j`.

* FedAvg / FedProx: :math:`\theta^{+} = \sum_i p_i \theta_i`.
* FedNova: :math:`d_i = (\theta - \theta_i)/\tau_i`, :math:`\tau_{eff} = \sum_i p_i \tau_i`,
  :math:`\theta^{+} = \theta - \tau_{eff} \sum_i p_i d_i` (:math:`\tau_i` = local optimiser steps).
  Equal :math:`\tau_i` gives exactly FedAvg (spec §11.2).
* DP-FedAvg (server-side, spec §5): :math:`\Delta_i = \theta_i - \theta`,
  :math:`\Delta_i \leftarrow \Delta_i \min(1, c/\|\Delta_i\|_2)`,
  :math:`\theta^{+} = \theta + \sum_i p_i \Delta_i + \xi`, :math:`\xi \sim N(0, (\sigma/C)^2 I_P)`.

Everything is numpy float64 internally; results are ``(P,)`` float64.
"""

from __future__ import annotations

import numpy as np

from veilbench.validation import ValidationError, check_array, check_in_range


def sample_weights(sizes: np.ndarray) -> np.ndarray:
    """:math:`p_i = N_i / \\sum_j N_j` from client sizes ``(C,)``; returns ``(C,)``."""
    n = check_array(sizes, "sizes", ndim=1)
    if np.any(n <= 0):
        raise ValidationError(f"sizes: every client needs at least one record, got min {n.min()}")
    return n / n.sum()


def _check(global_params: np.ndarray, local: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, ...]:
    g = check_array(global_params, "global_params", ndim=1)
    loc = check_array(local, "local", ndim=2)
    w = check_array(weights, "weights", ndim=1)
    if loc.shape[1] != g.shape[0]:
        raise ValidationError(f"local: expected {g.shape[0]} columns (one per parameter), got {loc.shape[1]}")
    if w.shape[0] != loc.shape[0]:
        raise ValidationError(f"weights: expected {loc.shape[0]} entries (one per client), got {w.shape[0]}")
    if np.any(w < 0) or not np.isclose(w.sum(), 1.0):
        raise ValidationError(f"weights: must be non-negative and sum to 1, got sum {w.sum():.6g}")
    return g, loc, w


def fedavg(global_params: np.ndarray, local: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """FedAvg/FedProx server step :math:`\\sum_i p_i \\theta_i`."""
    _, loc, w = _check(global_params, local, weights)
    return w @ loc


def fednova(global_params: np.ndarray, local: np.ndarray, weights: np.ndarray, local_steps: np.ndarray) -> np.ndarray:
    """FedNova server step :math:`\\theta - \\tau_{eff} \\sum_i p_i (\\theta - \\theta_i)/\\tau_i`."""
    g, loc, w = _check(global_params, local, weights)
    tau = check_array(local_steps, "local_steps", ndim=1)
    if tau.shape[0] != loc.shape[0] or np.any(tau <= 0):
        raise ValidationError(f"local_steps: need {loc.shape[0]} positive step counts, got {tau.tolist()}")
    tau_eff = float(w @ tau)
    return g - tau_eff * (w / tau) @ (g[None, :] - loc)


def clip_by_norm(delta: np.ndarray, clip: float) -> np.ndarray:
    """Rows of ``delta`` ``(C, P)`` scaled by :math:`\\min(1, c/\\|\\Delta_i\\|_2)`."""
    norms = np.linalg.norm(delta, axis=1)
    return delta * np.minimum(1.0, clip / np.maximum(norms, 1e-300))[:, None]


def clipped_mean_and_noise(global_params: np.ndarray, local: np.ndarray, weights: np.ndarray, clip: float,
                           sigma: float, rng: np.random.Generator, draws: int) -> tuple[np.ndarray, np.ndarray]:
    """The DP-FedAvg server step's two parts (the step is their sum, :func:`dp_fedavg`; the simulator
    keeps the noise for the white-box audit): :math:`\\theta + \\sum_i p_i \\mathrm{clip}(\\Delta_i)` ``(P,)``
    and ``draws`` rows of :math:`\\xi \\sim N(0, (\\sigma/C)^2 I)` ``(draws, P)`` from ``rng``."""
    g, loc, w = _check(global_params, local, weights)
    clip = check_in_range(clip, "clip", 0.0, None, low_inclusive=False)
    sigma = check_in_range(sigma, "sigma", 0.0, None)
    delta = clip_by_norm(loc - g[None, :], clip)
    noise = rng.normal(0.0, sigma / loc.shape[0], size=(draws, g.shape[0]))
    return g + w @ delta, noise


def dp_fedavg(
    global_params: np.ndarray,
    local: np.ndarray,
    weights: np.ndarray,
    clip: float,
    sigma: float,
    rng: np.random.Generator,
    n_draws: int | None = None,
) -> np.ndarray:
    """DP-FedAvg server step: clip each :math:`\\Delta_i` to norm ``clip``, average, add :math:`N(0,(\\sigma/C)^2)`;
    returns ``(P,)``.

    ``n_draws`` = n: n independent steps on the same client results, ``(n, P)``: the clipped mean
    :math:`\\theta + \\sum_i p_i \\Delta_i` once, plus a fresh :math:`\\xi_k` per row, drawn from ``rng`` in
    the order of n successive one-step calls, so row k is bit for bit the k-th of them (the audit's
    many rounds of one step)."""
    draws = 1 if n_draws is None else int(check_in_range(n_draws, "n_draws", 1, None))
    mean, noise = clipped_mean_and_noise(global_params, local, weights, clip, sigma, rng, draws)
    steps = mean[None, :] + noise
    return steps[0] if n_draws is None else steps

