r"""Model-selection protocols over an evaluation curve (spec §1.4, §11.1).

A run records, at ``points_per_round`` points per round (GCA: 5 reconstruction epochs;
baselines: 1), test-set accuracies :math:`a_1..a_T` and validation-set ROC AUCs
:math:`v_1..v_T` (the two sets are disjoint, :func:`veilbench.gca.data.validation_rows`).
A protocol picks one point :math:`t^*`; the cell reports the *test* accuracy and ROC AUC there.

* ``validation`` (the verdicts' protocol): :math:`t^* = \arg\max_t v_t` over every recorded
  point, the checkpoint chosen without looking at the test set;
* ``paper``: :math:`t^* = \arg\max_t a_t` over every recorded point (the paper's protocol: GCA's
  best of 500 per-epoch checkpoints, the baselines' best of 100 per-round ones; it selects on
  the test set, so its value is optimistic and is reported as the paper's column only);
* ``matched``: :math:`\arg\max_r a_{r \cdot p}`, the last point of each round only, so every
  method is selected (on the test set) from the same number of per-round checkpoints;
* ``final``: :math:`t^* = T`, no selection at all.

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

Protocol = Literal["validation", "paper", "matched", "final"]
PROTOCOLS: tuple[str, ...] = ("validation", "paper", "matched", "final")


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
    if protocol in ("paper", "validation"):
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


def selected_index(test_accuracy: np.ndarray, val_auc: np.ndarray, points_per_round: int, protocol: Protocol,
                   max_round: int | None = None) -> int:
    """:math:`t^*` of ``protocol`` (module doc) from the test-accuracy and validation-AUC curves ``(T,)``,
    among the points of the first ``max_round`` rounds (all rounds when None: a run of R rounds is the
    prefix of a longer one, so this is what the shorter run would select)."""
    a = check_array(test_accuracy, "test_accuracy", ndim=1)
    v = np.asarray(val_auc, dtype=np.float64)
    if v.shape != a.shape:
        raise ValidationError(f"val_auc: expected shape {a.shape} like test_accuracy, got {v.shape}")
    if max_round is not None:
        if not 1 <= max_round <= a.shape[0] // max(points_per_round, 1):
            raise ValidationError(f"max_round: must lie in [1, {a.shape[0] // max(points_per_round, 1)}], got {max_round}")
        a, v = a[: max_round * points_per_round], v[: max_round * points_per_round]
    if protocol != "validation":
        return select(a, points_per_round, protocol).index
    if np.isnan(v).any():
        raise ValidationError("val_auc: protocol 'validation' needs a validation curve (the federation has no "
                              "validation set)")
    return int(np.argmax(v))


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
