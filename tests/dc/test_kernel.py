"""NKI, graph regularisation and the centering constraint (spec §2.5–§2.8)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from veilbench.dc.kernel import NKI, anchor_graph_laplacian, rbf_kernel
from veilbench.dc.linear import orth
from veilbench.linalg.procrustes import haar_orthogonal


def anchor_reps(seed: int = 0, n_a: int = 60, d: int = 4, n_parties: int = 3) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(n_a, d))
    return [np.tanh(base @ rng.normal(size=(d, d))) + 0.05 * rng.normal(size=(n_a, d)) for _ in range(n_parties)]


def smallest_eigen_sum(m: np.ndarray, k: int) -> float:
    return float(np.sum(np.linalg.eigvalsh(m)[:k]))


def test_nki_minimises_the_theorem_2_objective():
    """tr(Z*ᵀ M_λ Z*) equals the sum of the d̂ smallest eigenvalues of M_λ = λ Σ (K_k + λI)^{-1}."""
    reps = anchor_reps()
    lam, gamma = 0.5, 0.7
    nki = NKI(n_components=3, gamma=gamma, lam=lam).fit(reps)
    m = lam * sum(np.linalg.inv(rbf_kernel(a, a, gamma) + lam * np.eye(60)) for a in reps)
    assert np.trace(nki.Z_.T @ m @ nki.Z_) == pytest.approx(smallest_eigen_sum(m, 3), rel=1e-9)
    np.testing.assert_allclose(nki.Z_.T @ nki.Z_, np.eye(3), atol=1e-10)


def test_nki_anchor_images_follow_the_hat_matrix_identity():
    """g_k(Ã(k)) = K_k S_k Z* = Z* − λ S_k Z* = Z* − λ Γ_k."""
    reps = anchor_reps(1)
    nki = NKI(lam=2.0, gamma=0.5).fit(reps)
    for k, a in enumerate(reps):
        np.testing.assert_allclose(nki.transform(a, k), nki.Z_ - 2.0 * nki.Gamma_[k], atol=1e-10)


def test_parties_differing_by_a_rigid_motion_get_identical_nki_features():
    """The RBF kernel is invariant to x ↦ x Q + b, so every party's g_k∘f_k is the same map."""
    rng = np.random.default_rng(2)
    anchor, x = rng.normal(size=(50, 5)), rng.normal(size=(20, 5))
    motions = [(haar_orthogonal(5, rng), rng.normal(size=5)) for _ in range(3)]
    nki = NKI(gamma=0.2).fit([anchor @ q + b for q, b in motions])
    out = [nki.transform(x @ q + b, k) for k, (q, b) in enumerate(motions)]
    for o in out[1:]:
        np.testing.assert_allclose(o, out[0], atol=1e-9)


@pytest.mark.parametrize("graph", [None, "gl", "tsl"])
def test_centering_constraint_holds_exactly(graph):
    reps = anchor_reps(3)
    labels = np.arange(60) % 4
    nki = NKI(n_components=4, gamma=0.5, graph=graph, center=True).fit(reps, anchor_labels=labels)
    np.testing.assert_allclose(nki.Z_.sum(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(nki.Z_.T @ nki.Z_, np.eye(4), atol=1e-10)


def test_centered_solution_is_optimal_on_the_centered_subspace():
    """Z* minimises tr(ZᵀMZ) over ZᵀZ = I, 1ᵀZ = 0: compare with an explicit projector P M P."""
    reps = anchor_reps(4)
    nki = NKI(n_components=2, gamma=0.5, center=True).fit(reps)
    m = sum(np.linalg.inv(rbf_kernel(a, a, 0.5) + np.eye(60)) for a in reps)
    t = np.linalg.svd(np.eye(60) - 1.0 / 60)[0][:, :59]  # orthonormal basis of 1^⊥
    assert np.trace(nki.Z_.T @ m @ nki.Z_) == pytest.approx(smallest_eigen_sum(t.T @ m @ t, 2), rel=1e-9)


@pytest.mark.parametrize("graph", ["gl", "tsl"])
def test_graph_regularised_nki_minimises_the_graph_objective(graph):
    """Z* minimises tr(Zᵀ(M/tr M + μ B/tr B)Z) over ZᵀZ = I, B the anchor-graph Laplacian (spec §2.6–2.7).

    The graph term enters with a plus sign: anchors that are kNN neighbours get close features.
    The same Z* is therefore not optimal for the objective with the graph term subtracted.
    """
    reps = anchor_reps(9)
    labels = np.arange(60) % 3
    lam, gamma, mu = 0.5, 0.7, 2.0
    nki = NKI(n_components=3, gamma=gamma, lam=lam, graph=graph, mu=mu, k_nn=5).fit(reps, anchor_labels=labels)
    m = lam * sum(np.linalg.inv(rbf_kernel(a, a, gamma) + lam * np.eye(60)) for a in reps)
    b = anchor_graph_laplacian(reps, graph, k_nn=5, anchor_labels=labels)
    plus = m / np.trace(m) + mu * b / np.trace(b)
    minus = m / np.trace(m) - mu * b / np.trace(b)
    assert np.trace(nki.Z_.T @ plus @ nki.Z_) == pytest.approx(smallest_eigen_sum(plus, 3), rel=1e-9)
    assert np.trace(nki.Z_.T @ minus @ nki.Z_) > smallest_eigen_sum(minus, 3) + 1e-3
    # neighbouring anchors end up closer than random pairs of anchors
    w = -b + np.diag(np.diag(b))
    sq = ((nki.Z_[:, None, :] - nki.Z_[None, :, :]) ** 2).sum(-1)
    assert np.sum(w * sq) / np.sum(w) < sq.mean()


def test_graph_laplacians_are_valid_and_tsl_is_label_restricted():
    reps = anchor_reps(5)
    labels = np.arange(60) % 3
    gl = anchor_graph_laplacian(reps, "gl", k_nn=5)
    tsl = anchor_graph_laplacian(reps, "tsl", k_nn=5, anchor_labels=labels)
    for b in (gl, tsl):
        np.testing.assert_allclose(b, b.T)
        np.testing.assert_allclose(b.sum(axis=1), 0.0, atol=1e-12)
        assert np.linalg.eigvalsh(b)[0] > -1e-10
    w_tsl = -tsl + np.diag(np.diag(tsl))
    assert np.all(w_tsl[labels[:, None] != labels[None, :]] == 0)
    assert np.all(w_tsl <= -gl + np.diag(np.diag(gl)) + 1e-15)


def test_graph_with_mu_zero_or_no_same_label_pairs_reduces_to_plain_nki():
    reps = anchor_reps(6)
    plain = NKI(gamma=0.5).fit(reps)
    mu0 = NKI(gamma=0.5, graph="gl", mu=0.0).fit(reps)
    distinct = NKI(gamma=0.5, graph="tsl").fit(reps, anchor_labels=np.arange(60))
    assert distinct.graph_skipped_
    for other in (mu0, distinct):
        cos = np.linalg.svd(orth(plain.Z_).T @ orth(other.Z_), compute_uv=False)
        np.testing.assert_allclose(cos, 1.0, atol=1e-8)


def test_residual_objective_differs_from_paper_objective():
    reps = anchor_reps(7)
    paper = NKI(gamma=0.5).fit(reps)
    residual = NKI(gamma=0.5, objective="residual").fit(reps)
    m = sum(np.linalg.matrix_power(np.linalg.inv(rbf_kernel(a, a, 0.5) + np.eye(60)), 2) for a in reps)
    assert np.trace(residual.Z_.T @ m @ residual.Z_) == pytest.approx(smallest_eigen_sum(m, 4), rel=1e-9)
    assert not np.allclose(np.abs(paper.Z_.T @ residual.Z_), np.eye(4), atol=1e-3)


def test_median_gamma_is_per_party_and_scale_aware():
    reps = anchor_reps(8)
    nki = NKI(gamma="median").fit([reps[0], 10.0 * reps[0]])
    assert nki.gammas_[0] == pytest.approx(100.0 * nki.gammas_[1])


def test_fit_records_the_table1_step_times():
    rng = np.random.default_rng(3)
    reps = [rng.normal(size=(60, 4)) for _ in range(2)]
    t0 = time.process_time()
    nki = NKI(graph="gl").fit(reps)
    total = time.process_time() - t0
    assert list(nki.step_seconds_) == ["kernel", "inverse", "graph", "eigen", "gamma"]
    assert all(v >= 0 for v in nki.step_seconds_.values())
    assert sum(nki.step_seconds_.values()) <= total
