"""Nyström NKI converges to exact NKI as its rank grows."""

from __future__ import annotations

import numpy as np
import pytest

from veilbench.dc.kernel import NKI, rbf_kernel
from veilbench.dc.linear import orth
from veilbench.dc.nystrom import NystromNKI


def min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine of the largest principal angle between Col(a) and Col(b) (1 = same subspace)."""
    return float(np.linalg.svd(orth(a).T @ orth(b), compute_uv=False).min())


@pytest.fixture(scope="module")
def reps():
    rng = np.random.default_rng(0)
    base = rng.normal(size=(120, 8))
    return [base @ rng.normal(size=(8, 5)) + 0.3 * rng.normal(size=(120, 5)) for _ in range(3)]


@pytest.mark.parametrize("center", [False, True])
def test_nystrom_converges_to_exact_nki(reps, center):
    exact = NKI(gamma=0.1, center=center).fit(reps)
    x_new = reps[1][:30] + 0.1
    cosines = []
    for rank in (10, 60, 110):
        approx = NystromNKI(rank=rank, gamma=0.1, center=center, seed=1).fit(reps)
        cosines.append(min_cosine(approx.transform(x_new, 1), exact.transform(x_new, 1)))
    assert cosines[0] < cosines[1] < cosines[2]
    full = NystromNKI(rank=120, gamma=0.1, center=center, seed=1).fit(reps)
    assert min_cosine(full.Z_, exact.Z_) > 1 - 1e-9
    # with every anchor a landmark the features equal exact NKI's up to a rotation of Z
    rotation = np.linalg.lstsq(full.Z_, exact.Z_, rcond=None)[0]
    np.testing.assert_allclose(full.transform(x_new, 1) @ rotation, exact.transform(x_new, 1), atol=1e-7)
    if center:
        np.testing.assert_allclose(full.Z_.sum(axis=0), 0.0, atol=1e-10)


def reference_nystrom(reps, rank, gamma, lam, center, seed, d_hat):
    """The fit as first written: full thin SVDs of every ``L_k`` and of the stacked ``V`` → (Z, [B_k])."""
    from veilbench.dc.nystrom import _inv_sqrt_psd
    from veilbench.random import as_rng

    j = np.sort(as_rng(seed, "dc.nystrom-landmarks").choice(reps[0].shape[0], size=rank, replace=False))
    factors, blocks = [], []
    for a in reps:
        c = rbf_kernel(a, a[j], gamma)
        w_isqrt = _inv_sqrt_psd(c[j], 1e-10)
        u, s, vt = np.linalg.svd(c @ w_isqrt, full_matrices=False)
        factors.append((w_isqrt, u, s, vt))
        blocks.append(u * (s / np.sqrt(s**2 + lam)))
    v_all = np.hstack(blocks)
    if center:
        v_all = v_all - v_all.mean(axis=0)
    z = np.linalg.svd(v_all, full_matrices=False)[0][:, :d_hat]
    bs = []
    for w_isqrt, u, s, vt in factors:
        g = (z - u @ ((s**2 / (s**2 + lam))[:, None] * (u.T @ z))) / lam
        bs.append(w_isqrt @ (vt.T @ (s[:, None] * (u.T @ g))))
    return z, bs


def flip(z: np.ndarray) -> np.ndarray:
    """Column signs making each column's largest-magnitude entry positive."""
    return np.sign(z[np.argmax(np.abs(z), axis=0), np.arange(z.shape[1])])


@pytest.mark.parametrize(("rank", "gamma", "center"), [(40, 0.1, False), (40, 0.1, True), (110, 1.0, False)])
def test_fit_equals_the_full_svd_formulation(reps, rank, gamma, center):
    """Z_ and the features equal the full-SVD fit to 1e-10, once Z's column signs (arbitrary in an SVD) are fixed."""
    z, bs = reference_nystrom(reps, rank, gamma, 1.0, center, 1, 5)
    fitted = NystromNKI(rank=rank, gamma=gamma, center=center, seed=1).fit(reps)
    signs = flip(z)
    np.testing.assert_array_equal(flip(fitted.Z_), np.ones(5))
    np.testing.assert_allclose(fitted.Z_, z * signs, atol=1e-10)
    x_new = reps[1][:30] + 0.1
    ref = rbf_kernel(x_new, reps[1][fitted.landmarks_], gamma) @ bs[1]
    np.testing.assert_allclose(fitted.transform(x_new, 1), ref * signs, atol=1e-10)


def test_rank_deficient_stack_keeps_the_leading_subspace(reps):
    """Two identical parties with rank 3 give rank(V) = 3 < d̂ = 5: the leading 3 directions equal the
    full-SVD fit's, the rest completes an orthonormal Z (any completion is optimal)."""
    parties = [reps[0], reps[0]]
    z, _ = reference_nystrom(parties, 3, 0.1, 1.0, False, 1, 5)
    fitted = NystromNKI(rank=3, gamma=0.1, seed=1).fit(parties)
    np.testing.assert_allclose(fitted.Z_.T @ fitted.Z_, np.eye(5), atol=1e-10)
    np.testing.assert_allclose(fitted.Z_[:, :3], z[:, :3] * flip(z[:, :3]), atol=1e-10)


@pytest.mark.parametrize(("rank", "center"), [(40, False), (40, True), (110, False)])
def test_krylov_solver_equals_the_dense_one(reps, rank, center):
    """The block Krylov solver (no V formed) gives the dense solver's Z and features: the same
    subspace and, after the rotation between the two bases, the same features."""
    dense = NystromNKI(rank=rank, gamma=0.1, center=center, seed=1, solver="dense").fit(reps)
    krylov = NystromNKI(rank=rank, gamma=0.1, center=center, seed=1, solver="krylov", tol=1e-12, block=4).fit(reps)
    assert (dense.solver_, krylov.solver_) == ("dense", "krylov") and krylov.residual_ <= 1e-12
    assert min_cosine(krylov.Z_, dense.Z_) > 1 - 1e-10
    np.testing.assert_allclose(krylov.Z_.T @ krylov.Z_, np.eye(5), atol=1e-10)
    x_new = reps[2][:30] - 0.05
    rotation = np.linalg.lstsq(krylov.Z_, dense.Z_, rcond=None)[0]
    np.testing.assert_allclose(krylov.transform(x_new, 2) @ rotation, dense.transform(x_new, 2), atol=1e-8)
    if center:
        np.testing.assert_allclose(krylov.Z_.sum(axis=0), 0.0, atol=1e-10)


def test_krylov_tolerance_and_space_limit_are_honoured(reps):
    loose = NystromNKI(rank=60, gamma=0.1, seed=1, solver="krylov", tol=1e-2, block=2).fit(reps)
    tight = NystromNKI(rank=60, gamma=0.1, seed=1, solver="krylov", tol=1e-11, block=2).fit(reps)
    capped = NystromNKI(rank=60, gamma=0.1, seed=1, solver="krylov", tol=1e-14, block=2, max_dim=6).fit(reps)
    assert loose.residual_ <= 1e-2 and tight.residual_ <= 1e-11 < loose.residual_
    assert capped.residual_ > 1e-11, "a 6-dimensional space cannot resolve 5 eigenvectors to 1e-11"
    assert min_cosine(tight.Z_, NystromNKI(rank=60, gamma=0.1, seed=1, solver="dense").fit(reps).Z_) > 1 - 1e-9


def test_auto_solver_switches_on_the_dense_cost(reps, monkeypatch):
    import veilbench.dc.nystrom as nystrom

    assert NystromNKI(rank=40, gamma=0.1, seed=1).fit(reps).solver_ == "dense"
    monkeypatch.setattr(nystrom, "DENSE_FLOPS", 1.0)
    assert NystromNKI(rank=40, gamma=0.1, seed=1).fit(reps).solver_ == "krylov"
