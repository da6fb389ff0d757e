r"""Who holds which training record, and in which feature space (spec §2 preprocessing, §10 R2).

Two cell options of the anchor-noise family, both [assume]:

* **Participants** (:func:`assign_participants`). By default participant i holds the records of
  ``prepare``'s party i. With ``n_participants = m`` the training records are re-dealt: a seeded
  permutation π of the n records, record π_k goes to participant k mod m. With
  ``records_per_participant = n_i`` only the first m·n_i records of π are used (each participant
  then holds exactly n_i), so utility vs m can be read at a fixed n_i (spec §10 R2; the I-GDP
  control only shows its non-monotone behaviour at small n_i, spec §9). Without ``n_participants``,
  ``records_per_participant`` keeps the first n_i records of π inside each ``prepare`` party.
* **Feature dimension** (:func:`reduce_dimension`). With ``max_dim = k`` and features of
  dimension p > k, every record z is replaced by (z − μ) V_k, where μ (p,) is the training mean and
  V_k (p × k) the eigenvectors of the k largest eigenvalues of the scatter matrix
  (Z − 1μᵀ)ᵀ(Z − 1μᵀ) (PCA; a p × p eigendecomposition instead of an SVD of Z).
  The basis is treated as public, as if computed from a public sample of the same distribution
  (spec §2: "a public PCA to d ≤ 100" for MNIST). With p ≤ k the features are used as they are.
  This makes d a cell option (the phase-transition study over d) and lets one sweep run on 784-d
  MNIST-format data with an anchor of r ≥ k + 1 rows.
"""

from __future__ import annotations

import numpy as np

from veilbench.validation import ValidationError, check_array


def assign_participants(
    party: np.ndarray,
    rng: np.random.Generator,
    n_participants: int | None = None,
    records_per_participant: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Return (rows (n_used,), participant (n_used,)): ascending training-row indices and their holder 0 … m−1.

    ``party`` (n,) is ``prepare``'s party label of every training record (any integers).
    """
    p = np.asarray(party).reshape(-1)
    n = p.size
    perm = rng.permutation(n)
    if n_participants is not None:
        m = int(n_participants)
        used = m * records_per_participant if records_per_participant is not None else n
        if m < 1 or used > n or n < m:
            need = f"{m} participants" if records_per_participant is None else f"m·n_i = {used} records"
            raise ValidationError(
                f"n_participants: {need} needs at most the {n} training records, got n_participants = {m}"
            )
        sel = perm[:used]
        holder = np.arange(used, dtype=np.int64) % m
    else:
        _, own = np.unique(p, return_inverse=True)
        own = own.reshape(-1).astype(np.int64)
        if records_per_participant is None:
            return np.arange(n, dtype=np.int64), own
        sel, holder = [], []
        for i in range(int(own.max()) + 1):
            mine = perm[own[perm] == i]
            if mine.size < records_per_participant:
                raise ValidationError(
                    f"records_per_participant: must be ≤ the {mine.size} records of party {i}, "
                    f"got {records_per_participant}"
                )
            sel.append(mine[:records_per_participant])
            holder.append(np.full(records_per_participant, i, dtype=np.int64))
        sel, holder = np.concatenate(sel), np.concatenate(holder)
    order = np.argsort(sel, kind="stable")
    return sel[order].astype(np.int64), holder[order]


def reduce_dimension(
    Z_train: np.ndarray, Z_test: np.ndarray, max_dim: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """Project (Z_train (n, p), Z_test (n', p)) onto the top ``max_dim`` principal axes of Z_train when p > max_dim."""
    z = check_array(Z_train, "Z_train", ndim=2)
    zt = check_array(Z_test, "Z_test", ndim=2, min_rows=0)
    if max_dim is None or z.shape[1] <= max_dim:
        return z, zt
    if max_dim > min(z.shape):
        raise ValidationError(f"max_dim: must be ≤ min(n, p) = {min(z.shape)} of Z_train, got {max_dim}")
    mu = z.mean(axis=0)
    zc = z - mu
    _, vecs = np.linalg.eigh(zc.T @ zc)  # ascending eigenvalues
    basis = vecs[:, ::-1][:, :max_dim]
    return zc @ basis, (zt - mu) @ basis
