"""Anchor construction, Haar sampling and the release mechanisms (spec §2–§3)."""

from __future__ import annotations

import numpy as np
import pytest

from veilbench.anchornoise.anchor import anchor_scale_value, check_anchor, make_anchor
from veilbench.anchornoise.mechanisms import GDPMechanism, sample_transform, synthetic_anchor_uploads
from veilbench.validation import ValidationError


@pytest.mark.parametrize("scale", ["sqrt_r", "unit"])
def test_anchor_is_centered_with_orthogonal_columns_of_norm_s(scale):
    r, d = 25, 7
    a = make_anchor(r, d, scale, seed=3)
    s = anchor_scale_value(r, scale)
    assert a.shape == (r, d)
    np.testing.assert_allclose(a.sum(axis=0), 0.0, atol=1e-12 * s * r)
    np.testing.assert_allclose(a.T @ a, s**2 * np.eye(d), atol=1e-10 * s**2)
    _, s_seen = check_anchor(a)
    assert s_seen == pytest.approx(s)


def test_anchor_exists_at_the_boundary_r_equals_d_plus_one():
    a = make_anchor(5, 4, "unit", seed=0)
    check_anchor(a)


def test_haar_sampling_mean_zero_and_orthogonal():
    d, draws = 3, 3000
    rng = np.random.default_rng(7)
    os_ = np.stack([sample_transform(d, 5.0, rng)[0] for _ in range(draws)])
    np.testing.assert_allclose(np.einsum("nij,nkj->nik", os_, os_), np.broadcast_to(np.eye(d), os_.shape), atol=1e-12)
    # E[O] = 0 entrywise; each entry has variance 1/d, so the mean's sd is ~0.01 here
    assert np.max(np.abs(os_.mean(axis=0))) < 0.05
    # Haar: the first column is uniform on the sphere, so E[O_00²] = 1/d
    assert np.mean(os_[:, 0, 0] ** 2) == pytest.approx(1 / d, abs=0.03)
    # both connected components of O(d) are hit about equally
    assert np.mean(np.linalg.det(os_) > 0) == pytest.approx(0.5, abs=0.05)


def test_cgdp_shares_one_transform_igdp_does_not(release_factory):
    X, party, _, _, c = release_factory("cgdp")
    assert c.B is None and c.A is None
    assert np.allclose(c.O, c.O[0]) and np.allclose(c.Psi, c.Psi[0])
    np.testing.assert_allclose(c.Y_train, X @ c.O[0] + c.Psi[0], atol=1e-12)
    _, _, _, _, i = release_factory("igdp")
    assert not np.allclose(i.O[0], i.O[1])
    for k in range(i.O.shape[0]):
        np.testing.assert_allclose(i.Y_train[party == k], X[party == k] @ i.O[k] + i.Psi[k], atol=1e-12)


def test_anchor_noise_touches_only_the_anchor(release_factory):
    v = 0.7
    X, party, Xt, pt, rel = release_factory("aa", v=v, r=400, m=3)
    for k in range(3):
        np.testing.assert_allclose(rel.Y_train[party == k], X[party == k] @ rel.O[k] + rel.Psi[k], atol=1e-12)
        np.testing.assert_allclose(rel.Y_test_noisy[pt == k], Xt[pt == k] @ rel.O[k] + rel.Psi[k], atol=1e-12)
        resid = rel.B[k] - (rel.A @ rel.O[k] + rel.Psi[k])
        assert resid.std() == pytest.approx(v, rel=0.1)
    np.testing.assert_array_equal(rel.Y_test_noisy, rel.Y_test_clean)


def test_data_noise_on_train_and_noisy_test_only(release_factory):
    sigma = 0.5
    X, party, Xt, pt, rel = release_factory("aa", sigma=sigma, n_per=300, m=3)
    for k in range(3):
        np.testing.assert_allclose(rel.B[k], rel.A @ rel.O[k] + rel.Psi[k], atol=1e-10)
        np.testing.assert_allclose(rel.Y_test_clean[pt == k], Xt[pt == k] @ rel.O[k] + rel.Psi[k], atol=1e-12)
    resid = np.concatenate([rel.Y_train[party == k] - X[party == k] @ rel.O[k] - rel.Psi[k] for k in range(3)])
    assert resid.std() == pytest.approx(sigma, rel=0.05)
    assert not np.allclose(rel.Y_test_noisy, rel.Y_test_clean)


def test_release_is_reproducible_and_participant_streams_are_independent(release_factory):
    X, party, Xt, pt, a = release_factory("aa", v=0.3)
    _, _, _, _, b = release_factory("aa", v=0.3)
    np.testing.assert_array_equal(a.B, b.B)
    # participant 0's draws do not depend on what participant 1 holds
    X2 = X.copy()
    X2[party == 1] += 1.0
    c = GDPMechanism("aa", v=0.3, r=30).release(X2, party, Xt, pt, seed=0)
    np.testing.assert_array_equal(c.O[0], a.O[0])
    np.testing.assert_array_equal(c.B[0], a.B[0])


def _bad_anchor(kind):
    a = make_anchor(20, 4, "sqrt_r", seed=0)
    if kind == "scaled_column":
        a[:, 0] *= 2
    elif kind == "uncentered":
        a = a + 1.0
    elif kind == "too_few_rows":
        a = a[:4]
    return a


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda: make_anchor(4, 4), "r"),
        (lambda: make_anchor(10, 0), "d"),
        (lambda: make_anchor(10, 3, "half"), "anchor_scale"),
        (lambda: check_anchor(_bad_anchor("scaled_column")), "anchor"),
        (lambda: check_anchor(_bad_anchor("uncentered")), "anchor"),
        (lambda: check_anchor(_bad_anchor("too_few_rows")), "anchor"),
    ],
)
def test_bad_anchor_inputs(call, field):
    with pytest.raises(ValidationError, match=rf"^{field}:"):
        call()


_X = np.random.default_rng(0).normal(size=(12, 4))
_P = np.arange(12) % 3


@pytest.mark.parametrize(
    "mech, kwargs, field",
    [
        (dict(kind="aa", v=-0.1), {}, "v"),
        (dict(kind="aa", sigma=-1.0), {}, "sigma"),
        (dict(kind="aa", translation_scale=-1.0), {}, "translation_scale"),
        (dict(kind="dcx"), {}, "kind"),
        (dict(kind="cgdp", v=1.0), {}, "v"),
        (dict(kind="aa", r=4), {}, "r"),
        (dict(kind="aa"), dict(anchor=_bad_anchor("scaled_column")), "anchor"),
        (dict(kind="aa"), dict(anchor=make_anchor(20, 3)), "anchor"),
        (dict(kind="aa"), dict(party=_P[:-1]), "party"),
        (dict(kind="aa"), dict(party=np.where(_P == 1, 2, _P)), "party"),
        (dict(kind="aa"), dict(party_test=np.array([0, 5])), "party_test"),
        (dict(kind="aa"), dict(X_test=np.ones((2, 3))), "X_test"),
        (dict(kind="aa"), dict(X=np.full((12, 4), np.nan)), "X"),
    ],
)
def test_bad_release_inputs(mech, kwargs, field):
    args = dict(X=_X, party=_P, X_test=_X[:2], party_test=_P[:2], seed=0) | kwargs
    with pytest.raises(ValidationError, match=rf"^{field}:"):
        GDPMechanism(**mech).release(**args)


def test_synthetic_uploads_match_the_model():
    B, O, Psi = synthetic_anchor_uploads(3, 20, 4, 0.0, seed=1)
    # centered anchor: row means are the translations, and B̄_iᵀB̄_i = r O_iᵀ O_i = r I
    np.testing.assert_allclose(B.mean(axis=1), Psi, atol=1e-12)
    Bc = B - B.mean(axis=1, keepdims=True)
    np.testing.assert_allclose(np.einsum("mrd,mre->mde", Bc, Bc), np.broadcast_to(20 * np.eye(4), (3, 4, 4)), atol=1e-9)
    with pytest.raises(ValidationError, match="^v:"):
        synthetic_anchor_uploads(3, 20, 4, -1.0, seed=1)
