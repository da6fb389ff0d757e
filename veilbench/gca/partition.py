r"""Client partitions of the normal training records (spec §1.2–§1.3).

* :func:`iid_partition`: a permutation from stream ``"gca.partition-iid"`` of the seed, split by
  ``np.array_split`` into C shards whose sizes differ by at most one.
* :func:`dirichlet_longtail_partition`: the spec's reconstruction [A] of the paper's non-IID
  scheme: MiniBatchKMeans groups (G = min(20, C)) of descriptors, long-tail client quotas
  :math:`q_i \propto 10^{-i/(C-1)}` (max/min ≈ ``ratio``) randomly assigned, a G × C
  Dirichlet(α) preference matrix, and group-by-group sampling of clients with remaining quota.

Both return ``(N,)`` int client labels in ``[0, C)``.
"""

from __future__ import annotations

import numpy as np

from veilbench.random import stream
from veilbench.validation import ValidationError, check_array, check_in_range


def _check_counts(n: int, n_clients: int) -> None:
    if not 1 <= int(n_clients) <= int(n):
        raise ValidationError(f"n_clients: must lie in [1, {n}] (number of records), got {n_clients}")


def iid_partition(n: int, n_clients: int, seed: int) -> np.ndarray:
    """Client label of each of ``n`` records, near-equal random shards."""
    _check_counts(n, n_clients)
    labels = np.empty(n, dtype=np.int64)
    for c, shard in enumerate(np.array_split(stream(seed, "gca.partition-iid").permutation(n), n_clients)):
        labels[shard] = c
    return labels


def longtail_quotas(n: int, n_clients: int, ratio: float, rng: np.random.Generator) -> np.ndarray:
    """Geometric quotas from 1 down to 1/ratio, shuffled, summing to ``n``; ``(C,)`` int."""
    raw = ratio ** (-np.arange(n_clients) / max(n_clients - 1, 1))
    raw = rng.permutation(raw)
    quota = np.floor(raw / raw.sum() * n).astype(np.int64)
    for c in np.argsort(-raw, kind="stable")[: n - quota.sum()]:
        quota[c] += 1
    return quota


def dirichlet_longtail_partition(
    descriptors: np.ndarray, n_clients: int, seed: int, alpha: float = 0.1, ratio: float = 10.0
) -> np.ndarray:
    """Non-IID labels of the rows of ``descriptors`` ``(N, d)`` (standardised features)."""
    from sklearn.cluster import MiniBatchKMeans

    desc = check_array(descriptors, "descriptors", ndim=2)
    n = desc.shape[0]
    _check_counts(n, n_clients)
    alpha = check_in_range(alpha, "alpha", 0.0, None, low_inclusive=False)
    ratio = check_in_range(ratio, "ratio", 1.0, None)
    rng = stream(seed, "gca.partition-longtail")
    n_groups = min(20, n_clients, n)
    groups = MiniBatchKMeans(
        n_groups, n_init=10, max_iter=200, batch_size=min(2048, n), random_state=seed
    ).fit_predict(desc)
    quota = longtail_quotas(n, n_clients, ratio, rng)
    pref = rng.dirichlet(alpha * np.ones(n_clients), size=n_groups)
    labels = np.full(n, -1, dtype=np.int64)
    for g in rng.permutation(n_groups):
        for i in rng.permutation(np.flatnonzero(groups == g)):
            cap = np.flatnonzero(quota > 0)
            p = pref[g, cap]
            p = np.ones(cap.size) if p.sum() == 0 else p
            c = rng.choice(cap, p=p / p.sum())
            labels[i] = c
            quota[c] -= 1
    return labels
