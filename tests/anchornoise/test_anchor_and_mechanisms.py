"""Anchor construction, Haar sampling and the release mechanisms (spec §2–§3)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from veilbench.anchornoise.anchor import anchor_scale_value, check_anchor, make_anchor
from veilbench.anchornoise.mechanisms import (
    PARTY_STREAM,
    GDPMechanism,
    sample_transform,
    synthetic_anchor_uploads,
)
from veilbench.linalg.procrustes import haar_orthogonal
from veilbench.random import stream
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


def test_gdp_mechanism_defaults_are_the_spec_assumptions():
    """kind 'aa', no anchor or data noise, r = 200 anchor rows of scale √r, s_Ψ = 5."""
    mech = GDPMechanism()
    assert (mech.kind, mech.v, mech.sigma, mech.r, mech.anchor_scale, mech.translation_scale) == (
        "aa", 0.0, 0.0, 200, "sqrt_r", 5.0
    )
    rel = mech.release(_X, _P, _X[:2], _P[:2], seed=0)
    assert rel.A.shape == (200, 4)
    np.testing.assert_allclose(rel.A.T @ rel.A, 200.0 * np.eye(4), atol=1e-9)  # s_A² = r
    for k in range(3):  # no anchor noise, no data noise
        np.testing.assert_allclose(rel.B[k], rel.A @ rel.O[k] + rel.Psi[k], atol=1e-10)
        np.testing.assert_allclose(rel.Y_train[_P == k], _X[_P == k] @ rel.O[k] + rel.Psi[k], atol=1e-12)
    np.testing.assert_array_equal(rel.Y_test_noisy, rel.Y_test_clean)


def test_translation_is_centred_gaussian_with_scale_s_psi():
    """Ψ ~ N(0, s_Ψ² I_d): entries of many draws have mean ≈ 0 and sd ≈ s_Ψ; s_Ψ = 0 gives Ψ = 0."""
    rng = np.random.default_rng(8)
    psi = np.stack([sample_transform(3, 2.0, rng)[1] for _ in range(4000)])
    assert psi.shape == (4000, 3)
    assert np.max(np.abs(psi.mean(axis=0))) < 0.12  # sd of the mean ≈ 0.03
    np.testing.assert_allclose(psi.std(axis=0), 2.0, rtol=0.05)
    np.testing.assert_array_equal(sample_transform(3, 0.0, rng)[1], np.zeros(3))


def test_synthetic_uploads_anchor_noise_is_v_times_standard_normal():
    """Same seed: the ground truth is the same for every v and B(v) − B(0) = v W with W standard normal."""
    B0, O0, P0 = synthetic_anchor_uploads(3, 400, 4, 0.0, seed=2)
    B1, O1, P1 = synthetic_anchor_uploads(3, 400, 4, 0.3, seed=2)
    B2, _, _ = synthetic_anchor_uploads(3, 400, 4, 0.6, seed=2)
    np.testing.assert_array_equal(O0, O1)
    np.testing.assert_array_equal(P0, P1)
    np.testing.assert_allclose(B2 - B0, 2.0 * (B1 - B0), atol=1e-12)
    assert (B1 - B0).std() == pytest.approx(0.3, rel=0.05)
    assert (B1 - B0).mean() == pytest.approx(0.0, abs=0.02)


def test_synthetic_uploads_defaults_are_sqrt_r_scale_and_s_psi_5():
    default = synthetic_anchor_uploads(2, 20, 3, 0.1, seed=4)
    explicit = synthetic_anchor_uploads(2, 20, 3, 0.1, seed=4, scale="sqrt_r", translation_scale=5.0)
    for a, b in zip(default, explicit, strict=True):
        np.testing.assert_array_equal(a, b)
    B, _, _ = synthetic_anchor_uploads(2, 20, 3, 0.0, seed=4, scale="unit")
    Bc = B - B.mean(axis=1, keepdims=True)
    np.testing.assert_allclose(np.einsum("mrd,mre->mde", Bc, Bc), np.broadcast_to(np.eye(3), (2, 3, 3)), atol=1e-9)


def test_random_release_never_reads_the_records(release_factory):
    """The data-free reference: standard normal uploads of the right shapes, the same for any X; no anchor."""
    X, party, Xt, pt, rel = release_factory("random", m=3, n_per=400, d=5)
    shifted = GDPMechanism("random", r=30).release(X + 100.0, party, Xt - 7.0, pt, seed=0)
    for name in ("Y_train", "Y_test_noisy", "Y_test_clean", "O", "Psi"):
        np.testing.assert_array_equal(getattr(rel, name), getattr(shifted, name))
    assert rel.B is None and rel.A is None
    assert rel.Y_train.shape == X.shape and rel.Y_test_clean.shape == Xt.shape
    np.testing.assert_array_equal(rel.Y_test_noisy, rel.Y_test_clean)
    assert rel.Y_train.mean() == pytest.approx(0.0, abs=0.05)
    assert rel.Y_train.std() == pytest.approx(1.0, rel=0.05)
    # each participant draws its own records: participant 0's rows differ from participant 1's
    assert not np.allclose(rel.Y_train[party == 0][:5], rel.Y_train[party == 1][:5])


def test_noisy_test_protocol_adds_fresh_sigma_noise_to_test_records():
    sigma = 0.4
    m, d = 3, 6
    rng = np.random.default_rng(3)
    X, party = rng.normal(size=(30, d)), np.arange(30) % m
    Xt, pt = rng.normal(size=(3000, d)), np.arange(3000) % m
    rel = GDPMechanism("igdp", sigma=sigma).release(X, party, Xt, pt, seed=5)
    for k in range(m):
        np.testing.assert_allclose(rel.Y_test_clean[pt == k], Xt[pt == k] @ rel.O[k] + rel.Psi[k], atol=1e-12)
    noise = rel.Y_test_noisy - rel.Y_test_clean
    assert noise.std() == pytest.approx(sigma, rel=0.03)
    assert noise.mean() == pytest.approx(0.0, abs=0.02)
    train = np.concatenate([rel.Y_train[party == k] - X[party == k] @ rel.O[k] - rel.Psi[k] for k in range(m)])
    assert not np.allclose(train[:10], noise[:10])  # fresh draws, not the training noise


def test_a_given_anchor_is_used_as_is():
    a = make_anchor(11, 4, "unit", seed=9)
    rel = GDPMechanism("aa", r=200).release(_X, _P, _X[:2], _P[:2], seed=0, anchor=a)
    np.testing.assert_array_equal(rel.A, a)
    for k in range(3):
        np.testing.assert_allclose(rel.B[k], a @ rel.O[k] + rel.Psi[k], atol=1e-12)


def test_only_the_anchor_mechanism_uploads_an_anchor():
    for kind in ("cgdp", "igdp", "random"):
        rel = GDPMechanism(kind).release(_X, _P, _X[:2], _P[:2], seed=0)
        assert rel.B is None and rel.A is None
        assert rel.O.shape == (3, 4, 4) and rel.Psi.shape == (3, 4)


def test_unsigned_participant_indices_are_accepted():
    signed = GDPMechanism("igdp").release(_X, _P, _X[:2], _P[:2], seed=0)
    unsigned = GDPMechanism("igdp").release(_X, _P.astype(np.uint8), _X[:2], _P[:2].astype(np.uint16), seed=0)
    np.testing.assert_array_equal(signed.Y_train, unsigned.Y_train)
    np.testing.assert_array_equal(signed.Y_test_clean, unsigned.Y_test_clean)


@pytest.mark.parametrize(
    "mech, kwargs, message",
    [
        (dict(kind="dcx"), {}, "kind: must be one of ('cgdp', 'igdp', 'aa', 'random'), got 'dcx'"),
        (dict(kind="aa", v=-0.1), {}, "v: must lie in [0.0, inf], got -0.1"),
        (dict(kind="aa", sigma=-1.0), {}, "sigma: must lie in [0.0, inf], got -1.0"),
        (dict(kind="aa", translation_scale=-1.0), {}, "translation_scale: must lie in [0.0, inf], got -1.0"),
        (dict(kind="igdp", v=0.5), {}, "v: anchor noise needs kind 'aa' (an anchor upload), got v = 0.5 with 'igdp'"),
        (dict(kind="random", sigma=0.5), {}, "sigma: the data-free 'random' release adds no data noise, got sigma = 0.5"),
        (dict(kind="aa"), dict(X_test=np.ones((2, 3))), "X_test: expected 4 columns like X, got 3"),
        (dict(kind="aa"), dict(anchor=make_anchor(20, 3)), "anchor: expected 4 columns like X, got 3"),
        (dict(kind="aa"), dict(party=np.where(_P == 1, 2, _P)), "party: every participant 0 … 2 needs at least one record"),
        (dict(kind="aa"), dict(party_test=np.array([0, 3])), "party_test: must lie in [0, 2], got max 3"),
        (dict(kind="aa"), dict(party=_P[:-1]), "party: expected 12 integer participant indices, got shape (11,) int64"),
        (dict(kind="aa"), dict(party=_P.astype(float)), "party: expected 12 integer participant indices, got shape (12,) float64"),
        (dict(kind="aa"), dict(party=_P - 1), "party: participant indices must be ≥ 0, got -1"),
        (dict(kind="aa"), dict(party_test=np.array([0, -2])), "party_test: participant indices must be ≥ 0, got -2"),
    ],
)
def test_release_messages_name_the_field_and_the_allowed_values(mech, kwargs, message):
    args = dict(X=_X, party=_P, X_test=_X[:2], party_test=_P[:2], seed=0) | kwargs
    with pytest.raises(ValidationError, match="^" + re.escape(message) + "$"):
        GDPMechanism(**mech).release(**args)


def test_participant_draws_follow_the_documented_stream_order():
    """Participant i draws from stream((seed, i), PARTY_STREAM), in this order: O_i (Haar), Ψ_i = s_Ψ·z,
    W_i (r × d), the training noise N_i, then the noisy-test noise; so a seed fixes every bit of a release."""
    v, sigma, s_psi = 0.3, 0.2, 2.0
    rng0 = np.random.default_rng(21)
    X, party = rng0.normal(size=(12, 4)), np.arange(12) % 3
    Xt, pt = rng0.normal(size=(6, 4)), np.arange(6) % 3
    a = make_anchor(9, 4, "sqrt_r", seed=1)
    rel = GDPMechanism("aa", v=v, sigma=sigma, translation_scale=s_psi).release(X, party, Xt, pt, seed=7, anchor=a)
    for i in range(3):
        rng = stream((7, i), PARTY_STREAM)
        o = haar_orthogonal(4, rng)
        psi = s_psi * rng.standard_normal(4)
        w, n_train, n_test = rng.standard_normal((9, 4)), rng.standard_normal((4, 4)), rng.standard_normal((2, 4))
        np.testing.assert_array_equal(rel.O[i], o)
        np.testing.assert_allclose(rel.Psi[i], psi, rtol=1e-15, atol=0)
        np.testing.assert_allclose(rel.B[i], a @ o + psi + v * w, atol=1e-12)
        np.testing.assert_allclose(rel.Y_train[party == i], X[party == i] @ o + psi + sigma * n_train, atol=1e-12)
        np.testing.assert_allclose(rel.Y_test_clean[pt == i], Xt[pt == i] @ o + psi, atol=1e-12)
        np.testing.assert_allclose(rel.Y_test_noisy[pt == i], Xt[pt == i] @ o + psi + sigma * n_test, atol=1e-12)


def test_synthetic_uploads_follow_their_named_stream():
    """One stream 'anchornoise.synthetic-uploads' of the seed: the anchor, then (O_i, Ψ_i, W_i) per participant."""
    B, O, Psi = synthetic_anchor_uploads(2, 10, 3, 0.4, seed=3, scale="unit", translation_scale=1.5)
    rng = stream(3, "anchornoise.synthetic-uploads")
    a = make_anchor(10, 3, "unit", rng)
    for i in range(2):
        o = haar_orthogonal(3, rng)
        psi = 1.5 * rng.standard_normal(3)
        w = rng.standard_normal((10, 3))
        np.testing.assert_array_equal(O[i], o)
        np.testing.assert_allclose(Psi[i], psi, rtol=1e-15, atol=0)
        np.testing.assert_allclose(B[i], a @ o + psi + 0.4 * w, atol=1e-12)


def test_zero_translation_scale_gives_a_pure_rotation():
    rel = GDPMechanism("igdp", translation_scale=0.0).release(_X, _P, _X[:2], _P[:2], seed=0)
    np.testing.assert_array_equal(rel.Psi, np.zeros((3, 4)))
    for k in range(3):
        np.testing.assert_allclose(rel.Y_train[_P == k], _X[_P == k] @ rel.O[k], atol=1e-12)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(X=_X[:, 0]), "X: expected a 2-d array, got shape (12,)"),
        (dict(X_test=_X[0]), "X_test: expected a 2-d array, got shape (4,)"),
        (dict(X_test=np.array([[0.0, 1.0, np.inf, 2.0]]), party_test=_P[:1]),
         "X_test: contains 1 NaN or infinite value(s); all entries must be finite"),
    ],
)
def test_release_rejects_records_that_are_not_finite_matrices(kwargs, message):
    args = dict(X=_X, party=_P, X_test=_X[:2], party_test=_P[:2], seed=0) | kwargs
    with pytest.raises(ValidationError, match="^" + re.escape(message) + "$"):
        GDPMechanism("aa").release(**args)


def test_random_release_draws_the_uploads_from_the_participant_stream():
    """After its (unused) O_i and Ψ_i, participant i's stream gives its training uploads, then its test uploads."""
    rng0 = np.random.default_rng(22)
    X, party = rng0.normal(size=(12, 4)), np.arange(12) % 3
    Xt, pt = rng0.normal(size=(6, 4)), np.arange(6) % 3
    rel = GDPMechanism("random").release(X, party, Xt, pt, seed=7)
    for i in range(3):
        rng = stream((7, i), PARTY_STREAM)
        o = haar_orthogonal(4, rng)
        psi = 5.0 * rng.standard_normal(4)
        np.testing.assert_array_equal(rel.O[i], o)
        np.testing.assert_allclose(rel.Psi[i], psi, rtol=1e-15, atol=0)
        np.testing.assert_array_equal(rel.Y_train[party == i], rng.standard_normal((4, 4)))
        test_draws = rng.standard_normal((2, 4))
        np.testing.assert_array_equal(rel.Y_test_clean[pt == i], test_draws)
        np.testing.assert_array_equal(rel.Y_test_noisy[pt == i], test_draws)
