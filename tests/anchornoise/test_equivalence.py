"""Claim 2 (spec §7) on data: AA-I-GDP + data noise and C-GDP + data noise leave residuals of one law."""

from __future__ import annotations

import numpy as np
import pytest

from veilbench.anchornoise.equivalence import data_noise_equivalence, rigid_fit_residual


def test_data_noise_equivalence_same_law_and_detects_a_different_sigma():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(600, 5)) * np.array([3.0, 2.0, 1.0, 1.0, 0.5])
    party = np.arange(600) % 3
    res = data_noise_equivalence(X, party, sigma=0.5, r=40, seed=1)
    assert res["residual_variance_aa"] == pytest.approx(0.25, rel=0.1)
    assert res["residual_variance_cgdp"] == pytest.approx(0.25, rel=0.1)
    assert res["ks_pvalue"] > 1e-3
    # the KS check has power: σ = 0.5 vs σ = 0.8 residuals are told apart
    from scipy.stats import ks_2samp

    from veilbench.anchornoise.mechanisms import GDPMechanism

    wide, narrow = (
        rigid_fit_residual(X, GDPMechanism("cgdp", sigma=s).release(X, party, X[:1], party[:1], 2).Y_train).ravel()
        for s in (0.8, 0.5)
    )
    assert ks_2samp(wide, narrow).pvalue < 1e-6
