"""Study helpers (spec §10): v grids, phase transition rows, matched-linkage read-out."""

from __future__ import annotations

import numpy as np
import pytest

from veilbench.anchornoise.studies import (
    balanced_accuracy_at_linkage,
    data_noise_equivalence,
    phase_transition,
    rigid_fit_residual,
    synthetic_anchor_uploads,
    v_grid,
)
from veilbench.validation import ValidationError


def test_v_grid_scales_with_sqrt_r():
    assert v_grid(100, [0.0, 0.1]) == pytest.approx([0.0, 1.0])
    assert v_grid(100, [0.1], "unit") == pytest.approx([0.1])
    with pytest.raises(ValidationError, match="^ratios:"):
        v_grid(100, [-0.1])


def test_synthetic_uploads_match_the_model():
    B, O, Psi = synthetic_anchor_uploads(3, 20, 4, 0.0, seed=1)
    # centered anchor: row means are the translations, and B̄_iᵀB̄_i = r O_iᵀ O_i = r I
    np.testing.assert_allclose(B.mean(axis=1), Psi, atol=1e-12)
    Bc = B - B.mean(axis=1, keepdims=True)
    np.testing.assert_allclose(np.einsum("mrd,mre->mde", Bc, Bc), np.broadcast_to(20 * np.eye(4), (3, 4, 4)), atol=1e-9)
    with pytest.raises(ValidationError, match="^v:"):
        synthetic_anchor_uploads(3, 20, 4, -1.0, seed=1)


def test_phase_transition_rows_show_error_growing_with_v():
    rows = phase_transition([0.0, 0.5, 8.0], m=3, r=40, d=4, seed=2, max_iter=100)
    assert [r["v"] for r in rows] == [0.0, 0.5, 8.0]
    assert rows[0]["rotation_error"] < 1e-12 and rows[0]["certified"] == 1.0 and rows[0]["translation_error"] < 1e-12
    assert rows[0]["rotation_error"] < rows[1]["rotation_error"] < rows[2]["rotation_error"]
    # the residual translation is v·‖w̄_i‖ with E‖w̄_i‖² = d/r
    assert rows[2]["translation_error"] == pytest.approx(rows[2]["translation_error_predicted"], rel=0.6)


def test_balanced_accuracy_at_linkage_interpolates_in_any_order():
    assert balanced_accuracy_at_linkage([0.3, 0.05, 0.2], [0.9, 0.6, 0.8], target=0.125) == pytest.approx(0.7)
    with pytest.raises(ValidationError, match="^target:"):
        balanced_accuracy_at_linkage([0.3, 0.2], [0.9, 0.8], target=0.124)
    with pytest.raises(ValidationError, match="lengths differ"):
        balanced_accuracy_at_linkage([0.3, 0.2], [0.9], target=0.25)


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
