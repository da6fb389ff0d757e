"""Tiny deterministic data for the GCA tests."""

from __future__ import annotations

import numpy as np


def blob_data(seed: int = 0, n_normal: int = 120, n_anom: int = 60, d: int = 6):
    """Normals on a 2-d plane in R^d plus noise; anomalies shifted off the plane. Returns (normal, anomalies)."""
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(rng.standard_normal((d, 2)))[0].T
    normal = rng.standard_normal((n_normal, 2)) @ basis + 0.05 * rng.standard_normal((n_normal, d))
    anom = rng.standard_normal((n_anom, 2)) @ basis + 0.05 * rng.standard_normal((n_anom, d))
    anom += 3.0 * rng.standard_normal((1, d))
    return normal.astype(np.float32), anom.astype(np.float32)


def tiny_federation(sizes=(30, 30, 30), seed: int = 0, d: int = 6, validation: bool = False):
    """A Federation with clients of the given sizes on :func:`blob_data` (``validation``: every second
    evaluation record goes to a validation set)."""
    from veilbench.gca.models import AESpec
    from veilbench.gca.simulator import Federation

    normal, anom = blob_data(seed, n_normal=sum(sizes) + 40, d=d)
    cuts = np.cumsum((0, *sizes))
    clients = [normal[cuts[i] : cuts[i + 1]] for i in range(len(sizes))]
    x_test = np.vstack([normal[cuts[-1] :], anom])
    y_test = np.r_[np.zeros(normal.shape[0] - cuts[-1]), np.ones(anom.shape[0])].astype(np.int64)
    if validation:
        return Federation(clients, x_test[::2], y_test[::2], AESpec("mlp", d), x_val=x_test[1::2], y_val=y_test[1::2])
    return Federation(clients, x_test, y_test, AESpec("mlp", d))


def digits_stage_inputs(n: int, seed: int) -> dict:
    """Stage inputs (``prepare`` and ``embed``) from digits of classes 0, 1 and 7: the first ``n``
    shuffled records train (3 parties at random), the rest test; Z standardised on the train rows."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    keep = np.isin(y, [0, 1, 7])
    x, y = x[keep], y[keep]
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(y))
    x, y = x[perm], y[perm]
    mu, sd = x[:n].mean(0), x[:n].std(0) + 1e-9
    prepare = {"X_train": x[:n], "y_train": y[:n], "party_train": rng.integers(0, 3, n),
               "X_test": x[n:], "y_test": y[n:]}
    return {"prepare": prepare, "embed": {"Z_train": (x[:n] - mu) / sd, "Z_test": (x[n:] - mu) / sd}}
