"""Tiny prepare/embed inputs for the ScoreShield tests: a digits subset, PCA-8 embeddings."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="session")
def tiny_inputs() -> dict[str, dict[str, np.ndarray]]:
    from sklearn.datasets import load_digits
    from sklearn.decomposition import PCA

    x, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(0)
    idx = rng.permutation(x.shape[0])[:360]
    x, y = x[idx], y[idx]
    x_tr, y_tr, x_te, y_te = x[:240], y[:240], x[240:], y[240:]
    pca = PCA(n_components=8, random_state=0).fit(x_tr)
    prepare = {
        "X_train": x_tr,
        "y_train": y_tr,
        "party_train": np.zeros(240, dtype=np.int64),
        "X_test": x_te,
        "y_test": y_te,
    }
    embed = {"Z_train": pca.transform(x_tr), "Z_test": pca.transform(x_te)}
    return {"prepare": prepare, "embed": embed}
