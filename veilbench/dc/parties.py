r"""Which training records each DC party holds (spec §1.1: ``K`` parties, ``n(k) = n`` records each).

The candidates are the training records left after the anchor sources were removed (``candidates``,
sorted row indices). Two ways to form the parties ``X(1), …, X(K)``:

* ``n_parties=None`` — keep the dataset's partition (``party_train`` from ``prepare``): party ``k``
  holds the candidates with ``party_train = k``; with ``n_per_party = n`` each party keeps a seeded
  random subset of ``n`` of them.
* ``n_parties=K`` — re-allocate (so a sweep can grid over ``K``): one seeded permutation ``π`` of the
  candidates; party ``k`` holds ``π[k n : (k+1) n]`` (``n = n_per_party``), or, with
  ``n_per_party=None``, every ``K``-th element of ``π`` starting at ``k`` (sizes differ by ≤ 1).
  With a fixed seed and ``n`` the parties of a smaller ``K`` are the first parties of a larger one,
  so cells of a ``K`` sweep are paired.
"""

from __future__ import annotations

import numpy as np

from veilbench.random import as_rng
from veilbench.validation import ValidationError


def allocate_parties(
    candidates: np.ndarray,
    party_train: np.ndarray,
    n_parties: int | None,
    n_per_party: int | None,
    seed: int | np.random.Generator | None,
) -> list[np.ndarray]:
    """Sorted record indices of each party (list of ``K`` int arrays), see the module docstring.

    ``candidates`` (c,) are row indices into the training set, ``party_train`` (n,) the dataset's
    party id of every training record (ids ``0 … K−1``).
    """
    cand = np.asarray(candidates, dtype=np.int64)
    rng = as_rng(seed, "dc.parties")
    if n_parties is None:
        party = np.asarray(party_train).astype(np.int64)
        ids = np.unique(party)
        if not np.array_equal(ids, np.arange(ids.size)):
            raise ValidationError(f"party_train: party ids must be 0 … K−1, got {ids.tolist()}")
        idx = [cand[party[cand] == k] for k in ids]
        if n_per_party is None:
            return idx
        short = {int(k): int(i.size) for k, i in zip(ids, idx, strict=True) if i.size < n_per_party}
        if short:
            raise ValidationError(f"n_per_party: parties {short} hold fewer than {n_per_party} records")
        return [np.sort(rng.choice(i, size=n_per_party, replace=False)) for i in idx]
    if n_parties < 1:
        raise ValidationError(f"n_parties: must be ≥ 1, got {n_parties}")
    need = n_parties * (n_per_party if n_per_party is not None else 1)
    if need > cand.size:
        raise ValidationError(
            f"n_parties: {n_parties} parties × {n_per_party or 1} records need {need} training records, "
            f"only {cand.size} remain after removing the anchor sources"
        )
    perm = rng.permutation(cand)
    if n_per_party is None:
        return [np.sort(perm[k::n_parties]) for k in range(n_parties)]
    return [np.sort(perm[k * n_per_party : (k + 1) * n_per_party]) for k in range(n_parties)]
