"""Small synthetic instances shared by the anchor-noise tests."""

from __future__ import annotations

import numpy as np
import pytest

from veilbench.anchornoise.mechanisms import GDPMechanism


def make_release(kind="aa", v=0.0, sigma=0.0, m=4, n_per=40, d=6, r=30, seed=0):
    """Gaussian-cluster data X (m·n_per × d), parties round-robin, and its release."""
    rng = np.random.default_rng(seed + 12345)
    X = rng.normal(size=(m * n_per, d)) + rng.integers(0, 3, size=(m * n_per, 1))
    party = np.arange(m * n_per) % m
    Xt = rng.normal(size=(2 * m, d))
    pt = np.arange(2 * m) % m
    rel = GDPMechanism(kind, v=v, sigma=sigma, r=r).release(X, party, Xt, pt, seed=seed)
    return X, party, Xt, pt, rel


@pytest.fixture
def release_factory():
    return make_release
