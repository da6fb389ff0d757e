"""Cross-family arrays of Gram cells: documented shapes, and E Eᵀ = G on the clean Gram."""

from __future__ import annotations

import numpy as np
import pytest

from veilbench.scoreshield import family
from veilbench.scoreshield.gram import cosine_gram, spectral_embedding
from veilbench.validation import ValidationError

from .test_family_stages import gram_params

XFAM = ("xfam_attack_rep", "xfam_attack_group", "xfam_attack_index", "xfam_pool", "xfam_utility_rep_train",
        "xfam_utility_y_train", "xfam_utility_rep_test", "xfam_utility_y_test")


def _release_integrate(inputs: dict, params: family.Params, seed: int) -> tuple[dict, dict]:
    rel = family.release(inputs, params, seed)
    integ = family.integrate({**inputs, "release": rel.saved_arrays()}, params, seed)
    assert not set(XFAM) & set(integ.arrays)  # the view is the typed field, saved under these names
    return rel.saved_arrays(), integ.saved_arrays()


@pytest.mark.parametrize("mechanism", ["clean", "noisy", "newton"])
def test_gram_cell_xfam_shapes(tiny_inputs, mechanism):
    params = gram_params(mechanism, n_records=40)
    rel, out = _release_integrate(tiny_inputs, params, seed=2)
    n, d = 40, tiny_inputs["embed"]["Z_train"].shape[1]
    assert set(XFAM) <= set(out)
    assert out["xfam_attack_rep"].shape == (n, d) and out["xfam_attack_rep"].dtype == np.float64
    assert out["xfam_attack_group"].dtype == np.int64 and not out["xfam_attack_group"].any()
    assert np.array_equal(out["xfam_attack_index"], np.arange(n))
    z = tiny_inputs["embed"]["Z_train"][rel["record_index"]]
    assert np.allclose(out["xfam_pool"], z / np.linalg.norm(z, axis=1, keepdims=True))
    n_tr, n_te = out["xfam_utility_rep_train"].shape[0], out["xfam_utility_rep_test"].shape[0]
    assert (n_tr, n_te) == (28, 12)
    assert out["xfam_utility_rep_train"].shape[1] == out["xfam_utility_rep_test"].shape[1] == d
    assert out["xfam_utility_y_train"].dtype == np.int64 and out["xfam_utility_y_test"].shape == (n_te,)
    # the split partitions the records: every embedding row appears once, with its own label
    rows = np.vstack([out["xfam_utility_rep_train"], out["xfam_utility_rep_test"]])
    labels = np.concatenate([out["xfam_utility_y_train"], out["xfam_utility_y_test"]])
    order = np.lexsort(rows.T[::-1])
    ref = np.lexsort(out["xfam_attack_rep"].T[::-1])
    assert np.array_equal(rows[order], out["xfam_attack_rep"][ref])
    assert np.array_equal(labels[order], rel["labels"][ref])


def test_clean_gram_spectral_embedding_reproduces_gram(tiny_inputs):
    rel, out = _release_integrate(tiny_inputs, gram_params("clean", n_records=40), seed=0)
    emb = out["xfam_attack_rep"]
    assert np.allclose(emb @ emb.T, rel["gram"], atol=1e-10)
    assert np.allclose(rel["gram"], cosine_gram(out["xfam_pool"]))


def test_spectral_embedding_truncates_and_drops_negative_eigenvalues():
    rng = np.random.default_rng(0)
    v = np.linalg.qr(rng.standard_normal((6, 6)))[0]
    lam = np.array([5.0, 3.0, 1.0, 0.5, -0.5, -2.0])
    g = (v * lam) @ v.T
    emb = spectral_embedding(g, 3)
    assert emb.shape == (6, 3)
    assert np.allclose(emb @ emb.T, (v[:, :3] * lam[:3]) @ v[:, :3].T)
    full = spectral_embedding(g, 10)  # k capped at n; negative eigenvalues give zero columns
    assert full.shape == (6, 6) and np.allclose(full[:, 4:], 0.0)
    with pytest.raises(ValidationError, match="k"):
        spectral_embedding(g, 0)
