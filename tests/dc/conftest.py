"""Tiny prepare/embed inputs for the DC tests: a digits subset, 4 IID parties, standardised features."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.preprocessing import StandardScaler

from veilbench.datasets.partition import partition_parties


def make_inputs(n_train: int = 400, n_test: int = 200, n_parties: int = 4, seed: int = 0) -> dict:
    """``{"prepare": …, "embed": …}`` from a seeded digits subset (features / 16, then standardised)."""
    x, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(seed)
    order = rng.permutation(y.size)
    tr, te = order[:n_train], order[n_train : n_train + n_test]
    x = x / 16.0
    scaler = StandardScaler().fit(x[tr])
    prepare = {
        "X_train": x[tr],
        "y_train": y[tr],
        "party_train": partition_parties(y[tr], n_parties, seed=seed),
        "X_test": x[te],
        "y_test": y[te],
    }
    embed = {"Z_train": scaler.transform(x[tr]), "Z_test": scaler.transform(x[te])}
    return {"prepare": prepare, "embed": embed}


@pytest.fixture(scope="session")
def digits_inputs() -> dict:
    return make_inputs()
