r"""Record linkage: how often a reconstruction points back to its true source record.

For reconstructions :math:`\hat x_k` of records with true pool indices :math:`t_k` and a pool
:math:`P` (N_pool × p) of candidate originals, the linkage rate is

.. math:: \mathrm{linkage} = \frac{1}{K}\sum_k \mathbf{1}\big[\arg\min_q \|\hat x_k - P_q\|_2 = t_k\big],

with chance level 1/N_pool (anchor-noise spec §6.1; DC issue "nearest-record linkage").
Duplicated pool rows make the arg-min ambiguous: a hit counts only when the true source is the
*unique* nearest row (ties at the minimum distance, e.g. an exact duplicate, are misses), so
duplicates can never inflate the rate. This metric is shared by every family so that the
cross-family comparison uses one definition.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from veilbench.linalg.distances import sq_distances
from veilbench.validation import ValidationError, check_array


@dataclass(frozen=True)
class LinkageResult:
    """Linkage rate, number of reconstructions, pool size and the chance level 1/N_pool."""

    rate: float
    n_queries: int
    n_pool: int
    chance: float


def linkage_rate(
    reconstructions: np.ndarray,
    pool: np.ndarray,
    true_index: np.ndarray,
    rtol: float = 1e-9,
    batch_size: int = 2048,
) -> LinkageResult:
    """Fraction of reconstructions whose unique nearest pool row is their true source.

    Parameters
    ----------
    reconstructions : (K, p) array
    pool : (N_pool, p) array of candidate source records.
    true_index : (K,) int array, the pool row each reconstruction came from.
    rtol : relative tolerance under which two distances count as tied.
    """
    rec = check_array(reconstructions, "reconstructions", ndim=2)
    pl = check_array(pool, "pool", ndim=2)
    idx = np.asarray(true_index)
    if rec.shape[1] != pl.shape[1]:
        raise ValidationError(
            f"reconstructions and pool: feature dimensions differ ({rec.shape[1]} vs {pl.shape[1]})"
        )
    if idx.shape != (rec.shape[0],) or idx.dtype.kind not in "iu":
        raise ValidationError(f"true_index: expected {rec.shape[0]} integer indices, got {idx.shape} {idx.dtype}")
    if idx.size and (idx.min() < 0 or idx.max() >= pl.shape[0]):
        raise ValidationError(f"true_index: must lie in [0, {pl.shape[0] - 1}]")
    hits = 0
    for start in range(0, rec.shape[0], batch_size):
        d = sq_distances(rec[start : start + batch_size], pl)
        t = idx[start : start + batch_size]
        d_true = d[np.arange(d.shape[0]), t]
        d_other = d.copy()
        d_other[np.arange(d.shape[0]), t] = np.inf
        closest_other = d_other.min(axis=1) if pl.shape[0] > 1 else np.full(d.shape[0], np.inf)
        hits += int(np.sum(d_true < closest_other * (1 - rtol) - 1e-300))
    n = int(rec.shape[0])
    return LinkageResult(rate=hits / n, n_queries=n, n_pool=int(pl.shape[0]), chance=1.0 / pl.shape[0])


def relative_reconstruction_error(reconstructions: np.ndarray, originals: np.ndarray) -> float:
    """‖X̂ − X‖_F / ‖X − mean(X)‖_F (anchor-noise spec §6.1): 1.0 is as good as guessing the mean."""
    rec = check_array(reconstructions, "reconstructions", ndim=2)
    org = check_array(originals, "originals", ndim=2)
    if rec.shape != org.shape:
        raise ValidationError(f"reconstructions and originals: shapes differ ({rec.shape} vs {org.shape})")
    denom = np.linalg.norm(org - org.mean(axis=0))
    if denom == 0:
        raise ValidationError("originals: all rows are identical, relative error undefined")
    return float(np.linalg.norm(rec - org) / denom)
