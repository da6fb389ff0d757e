"""Split a dataset into train/test and allocate training records to K parties.

``iid``: a seeded random permutation dealt round-robin, so party sizes differ by at most one.
``dirichlet``: for each class c, proportions p_c ~ Dir(α·1_K) split that class's records among
the parties (small α → strongly non-IID label skew; Hsu et al. 2019). Every party is guaranteed
at least one record.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from veilbench.datasets.registry import Dataset
from veilbench.random import stream
from veilbench.validation import ValidationError, check_in_range


@dataclass(frozen=True)
class PreparedData:
    """Output of the ``prepare`` stage (shapes: X_train (n, p), X_test (m, p), labels/party (n,))."""

    X_train: np.ndarray
    y_train: np.ndarray
    party_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    T_train: np.ndarray | None = None
    T_test: np.ndarray | None = None

    def arrays(self) -> dict[str, np.ndarray]:
        """The stage arrays; text data sets add ``T_train``/``T_test`` (unicode, no pickle needed)."""
        out = {
            "X_train": self.X_train,
            "y_train": self.y_train,
            "party_train": self.party_train,
            "X_test": self.X_test,
            "y_test": self.y_test,
        }
        if self.T_train is not None:
            out.update(T_train=self.T_train, T_test=self.T_test)
        return out


def partition_parties(
    y: np.ndarray, n_parties: int, scheme: str = "iid", alpha: float = 0.5, seed: int = 0
) -> np.ndarray:
    """Return the party index (0 … K−1) of each record, shape (n,)."""
    n = int(np.asarray(y).shape[0])
    if not 1 <= n_parties <= n:
        raise ValidationError(f"n_parties: must lie in [1, {n}] (number of training records), got {n_parties}")
    rng = stream(seed, "datasets.parties")
    if scheme == "iid":
        party = np.empty(n, dtype=np.int64)
        party[rng.permutation(n)] = np.arange(n) % n_parties
        return party
    if scheme == "dirichlet":
        check_in_range(alpha, "alpha", 0.0, None, low_inclusive=False)
        party = np.empty(n, dtype=np.int64)
        for c in np.unique(y):
            idx = rng.permutation(np.flatnonzero(y == c))
            props = rng.dirichlet(np.full(n_parties, alpha))
            cuts = (np.cumsum(props)[:-1] * idx.size).astype(int)
            for k, part in enumerate(np.split(idx, cuts)):
                party[part] = k
        # guarantee non-empty parties: move one record from the largest party to each empty one
        for k in range(n_parties):
            if not np.any(party == k):
                largest = np.bincount(party, minlength=n_parties).argmax()
                party[rng.choice(np.flatnonzero(party == largest))] = k
        return party
    raise ValidationError(f"scheme: must be 'iid' or 'dirichlet', got {scheme!r}")


def prepare_dataset(
    data: Dataset,
    test_size: float = 0.3,
    n_parties: int = 1,
    scheme: str = "iid",
    alpha: float = 0.5,
    max_records: int | None = None,
    seed: int = 0,
) -> PreparedData:
    """Stratified train/test split (optionally subsampled to ``max_records``), then partition."""
    from sklearn.model_selection import train_test_split

    check_in_range(test_size, "test_size", 0.0, 1.0, low_inclusive=False, high_inclusive=False)
    X, y = data.X, data.y
    classes, per_class = np.unique(y, return_counts=True)
    if per_class.min() < 2:
        lonely = classes[per_class < 2].tolist()
        raise ValidationError(f"y: class(es) {lonely[:8]} hold a single record; a train/test split needs at least 2 "
                              f"records per class: add records or drop those classes")
    rows = np.arange(X.shape[0])
    rng = stream(seed, "datasets.split")
    if max_records is not None and max_records < X.shape[0]:
        if max_records < 4:
            raise ValidationError(f"max_records: must be ≥ 4, got {max_records}")
        rows = np.sort(rng.choice(X.shape[0], size=max_records, replace=False))
    _, counts = np.unique(y[rows], return_counts=True)
    stratify = y[rows] if counts.min() >= 2 else None
    n_test = math.ceil(test_size * rows.size)
    if stratify is not None and not counts.size <= n_test <= rows.size - counts.size:
        raise ValidationError(
            f"test_size: a stratified split of {rows.size} records in {counts.size} classes needs "
            f"{counts.size / rows.size:.3g} ≤ test_size ≤ {1 - counts.size / rows.size:.3g}, got {test_size}")
    r_tr, r_te = train_test_split(rows, test_size=test_size, random_state=seed, stratify=stratify)
    X_tr, X_te, y_tr, y_te = X[r_tr], X[r_te], y[r_tr], y[r_te]
    if n_parties > X_tr.shape[0]:
        raise ValidationError(
            f"n_parties: must be ≤ the number of training records ({X_tr.shape[0]}), got {n_parties}"
        )
    party = partition_parties(y_tr, n_parties, scheme=scheme, alpha=alpha, seed=seed)
    if data.texts is None:
        return PreparedData(X_tr, y_tr, party, X_te, y_te)
    return PreparedData(X_tr, y_tr, party, X_te, y_te, data.texts[r_tr], data.texts[r_te])
