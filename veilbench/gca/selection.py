r"""Model-selection protocols over an evaluation curve (spec §1.4, §11.1).

A run records accuracies :math:`a_1..a_T` at ``points_per_round`` points per round (GCA: 5
reconstruction epochs; baselines: 1). Protocols:

* ``paper``: :math:`\max_t a_t` over every recorded point (the paper: GCA's best of 500
  per-epoch checkpoints, the baselines' best of 100 per-round ones);
* ``matched``: :math:`\max_r a_{r \cdot p}`, the last point of each round only, so every method
  is selected from the same number of per-round checkpoints;
* ``final``: :math:`a_T`, no selection at all.

Ties go to the earliest point. The selected index (and its round/epoch) is reported so the
argmax location can be logged (spec §10.6).

Convergence of a run: the per-round curve :math:`b_r = \max_{e} a_{r,e}` (best point of round r)
and the first round :math:`r^\dagger = \min\{r : \max_{s \le r} b_s \ge \max_s b_s - \tau\}` at
which the running best comes within :math:`\tau` of the run's best. :math:`r^\dagger` close to
the last round R says the round budget was too small for the run to settle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from veilbench.validation import ValidationError, check_array

Protocol = Literal["paper", "matched", "final"]
PROTOCOLS: tuple[str, ...] = ("paper", "matched", "final")


@dataclass(frozen=True)
class Selection:
    """Selected value and the 0-based index into the curve where it was found."""

    value: float
    index: int


def checkpoint_indices(n_points: int, points_per_round: int, protocol: Protocol) -> np.ndarray:
    """Indices of the curve's points that ``protocol`` may select from, ``(k,)`` int."""
    if points_per_round < 1 or n_points % points_per_round:
        raise ValidationError(
            f"points_per_round: must be ≥ 1 and divide the curve length {n_points}, got {points_per_round}"
        )
    if protocol == "paper":
        return np.arange(n_points)
    if protocol == "matched":
        return np.arange(points_per_round - 1, n_points, points_per_round)
    if protocol == "final":
        return np.array([n_points - 1])
    raise ValidationError(f"protocol: must be one of {PROTOCOLS}, got {protocol!r}")


def select(curve: np.ndarray, points_per_round: int, protocol: Protocol) -> Selection:
    """Best point of ``curve`` ``(T,)`` among :func:`checkpoint_indices` (first on ties)."""
    a = check_array(curve, "curve", ndim=1)
    idx = checkpoint_indices(a.shape[0], points_per_round, protocol)
    best = idx[int(np.argmax(a[idx]))]
    return Selection(float(a[best]), int(best))


def round_curve(curve: np.ndarray, points_per_round: int) -> np.ndarray:
    """Per-round best :math:`b_r = \\max_e a_{r,e}` of ``curve`` ``(R·p,)``; returns ``(R,)``."""
    a = check_array(curve, "curve", ndim=1)
    checkpoint_indices(a.shape[0], points_per_round, "final")  # validates p against the length
    return a.reshape(-1, points_per_round).max(1)


def converged_round(per_round: np.ndarray, tolerance: float = 0.01) -> int:
    """:math:`r^\\dagger` (1-based, module doc) of a per-round curve ``(R,)`` at ``tolerance`` ≥ 0."""
    b = check_array(per_round, "per_round", ndim=1, min_rows=1)
    if not tolerance >= 0:
        raise ValidationError(f"tolerance: must be ≥ 0, got {tolerance!r}")
    return int(np.argmax(np.maximum.accumulate(b) >= b.max() - tolerance)) + 1


def select_k_star(k_values: np.ndarray, accuracies: np.ndarray) -> int:
    """K* rule (spec §4.5): argmax over K of the seed-mean accuracy, exact ties to the smaller K.

    ``k_values`` ``(n_K,)``; ``accuracies`` ``(n_K, n_seeds)`` per-seed selected accuracies.
    """
    k = check_array(k_values, "k_values", ndim=1)
    acc = check_array(accuracies, "accuracies", ndim=2)
    if acc.shape[0] != k.shape[0]:
        raise ValidationError(f"accuracies: expected {k.shape[0]} rows (one per K), got {acc.shape[0]}")
    means = acc.mean(1)
    best = np.flatnonzero(means == means.max())
    return int(k[best].min())
