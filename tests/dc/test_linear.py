"""Known-answer tests of MPP, GEP, ODC and LKI (spec §2.1–§2.4)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

from veilbench.dc.linear import GEP, LKI, MPP, ODC, orth
from veilbench.linalg.procrustes import haar_orthogonal


def principal_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosines of the principal angles between Col(a) and Col(b)."""
    return np.linalg.svd(orth(a).T @ orth(b), compute_uv=False)


@pytest.fixture(scope="module")
def digits_pca():
    x, y = load_digits(return_X_y=True)
    z = PCA(8, random_state=0).fit_transform(x / 16.0)
    return z[:900], y[:900], z[900:1300], y[900:1300]


@pytest.mark.parametrize("method", [MPP, GEP, LKI, ODC])
def test_parties_differing_by_invertible_map_integrate_to_central_accuracy(digits_pca, method):
    """f_k(x) = x M_k with invertible M_k (orthogonal for ODC): X̂ = X T for one invertible T,
    so an affine-invariant classifier (LDA) on the collaboration features matches Central."""
    x_tr, y_tr, x_te, y_te = digits_pca
    rng = np.random.default_rng(1)
    n_parties, d = 3, x_tr.shape[1]
    maps = [haar_orthogonal(d, rng) if method is ODC else rng.normal(size=(d, d)) for _ in range(n_parties)]
    anchor = rng.normal(size=(60, d)) * x_tr.std(0)
    integ = method().fit([anchor @ m for m in maps])
    parts = np.array_split(np.arange(x_tr.shape[0]), n_parties)
    collab = np.vstack([integ.transform(x_tr[p] @ maps[k], k) for k, p in enumerate(parts)])
    central = LinearDiscriminantAnalysis().fit(x_tr, y_tr).score(x_te, y_te)
    lda = LinearDiscriminantAnalysis().fit(collab, y_tr)
    for k in range(n_parties):
        test_k = integ.transform(x_te @ maps[k], k)
        np.testing.assert_allclose(test_k, integ.transform(x_te @ maps[0], 0), atol=1e-8)
        assert abs(lda.score(test_k, y_te) - central) <= 0.005


def test_gep_equals_lki_up_to_per_column_scale():
    """Full-rank blocks: G_GEP(k) = ± G_LKI(k) diag(1/σ_j), σ_j the top singular values of W_Q."""
    rng = np.random.default_rng(2)
    base = rng.normal(size=(80, 7))
    reps = [base @ rng.normal(size=(7, 5)) + 0.3 * rng.normal(size=(80, 5)) for _ in range(3)]
    gep, lki = GEP().fit(reps), LKI().fit(reps)
    assert gep.ridge_used_ == 0.0
    x_new = rng.normal(size=(20, 5))
    for k in range(3):
        g, l = gep.transform(x_new, k), lki.transform(x_new, k)
        scale = np.sum(g * l, axis=0) / np.sum(l * l, axis=0)
        np.testing.assert_allclose(np.abs(scale), 1.0 / lki.singular_values_, rtol=1e-6)
        np.testing.assert_allclose(g, l * scale, atol=1e-8)


def test_lki_target_is_orthonormal_and_attains_its_optimal_objective():
    rng = np.random.default_rng(3)
    reps = [rng.normal(size=(50, 4)) for _ in range(3)]
    lki = LKI(n_components=4).fit(reps)
    np.testing.assert_allclose(lki.Z_.T @ lki.Z_, np.eye(4), atol=1e-10)
    attained = sum(np.linalg.norm(a @ g - lki.Z_) ** 2 for a, g in zip(reps, lki.G_, strict=True))
    assert attained == pytest.approx(lki.objective_, rel=1e-8)
    # any other orthonormal target does no better
    other = np.linalg.qr(rng.normal(size=(50, 4)))[0]
    worse = sum(np.linalg.norm(a @ np.linalg.pinv(a) @ other - other) ** 2 for a in reps)
    assert worse > lki.objective_


def test_lki_handles_rank_deficient_blocks_where_gep_needs_a_ridge():
    rng = np.random.default_rng(4)
    a = rng.normal(size=(40, 3))
    deficient = np.hstack([a, a[:, :1]])  # rank 3, 4 columns
    reps = [deficient, rng.normal(size=(40, 4))]
    lki = LKI(n_components=3).fit(reps)
    assert np.all(np.isfinite(lki.transform(deficient, 0)))
    assert GEP(n_components=3).fit(reps).ridge_used_ > 0


def test_mpp_target_spans_top_left_singular_space():
    rng = np.random.default_rng(5)
    reps = [rng.normal(size=(30, 3)) for _ in range(2)]
    mpp = MPP(n_components=2).fit(reps)
    u = np.linalg.svd(np.hstack(reps))[0][:, :2]
    np.testing.assert_allclose(principal_cosines(mpp.Z_, u), 1.0, atol=1e-10)
