"""NKI, graph regularisation and the centering constraint (spec §2.5–§2.8)."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest
from scipy.spatial.distance import pdist

from veilbench.dc.kernel import (
    NKI,
    anchor_graph_laplacian,
    gamma_from_median_sq,
    knn_indices,
    median_gamma,
    median_sq_distance,
    rbf_kernel,
)
from veilbench.dc.linear import orth
from veilbench.linalg.procrustes import haar_orthogonal
from veilbench.validation import ValidationError


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


def brute_force_laplacian(reps, kind, k_nn, labels=None):
    """Spec §2.7 written out loop by loop: kNN by sorting (distance, index) pairs, ties to the lower index."""
    n = reps[0].shape[0]
    k = min(k_nn, n - 1)
    w = np.zeros((n, n))
    for a in reps:
        w_hat = np.zeros((n, n))
        for i in range(n):
            near = sorted((float(np.sum((a[i] - a[j]) ** 2)), j) for j in range(n) if j != i)[:k]
            for _, j in near:
                if kind == "gl" or labels[i] == labels[j]:
                    w_hat[i, j] = 1.0
        w += (w_hat + w_hat.T) / 2
    w /= len(reps)
    return np.diag(w.sum(axis=1)) - w


@pytest.mark.parametrize("kind, k_nn, n_parties", [("gl", 3, 3), ("tsl", 4, 3), ("gl", 100, 3), ("gl", 3, 1)])
def test_graph_laplacian_matches_a_brute_force_construction(kind, k_nn, n_parties):
    """Exact entries: ŵ = 1 on kNN pairs (same label for TSL), symmetrised by halves, averaged over parties."""
    reps = anchor_reps(10, n_a=25, n_parties=n_parties)
    labels = np.arange(25) % 3
    b = anchor_graph_laplacian(reps, kind, k_nn=k_nn, anchor_labels=labels)
    np.testing.assert_allclose(b, brute_force_laplacian(reps, kind, k_nn, labels), rtol=0, atol=1e-15)


def test_graph_laplacian_uses_ten_neighbours_by_default():
    reps = anchor_reps(16, n_a=30, n_parties=2)
    np.testing.assert_allclose(anchor_graph_laplacian(reps, "gl"), brute_force_laplacian(reps, "gl", 10), atol=1e-15)


def test_tsl_labels_must_be_one_per_anchor():
    reps = anchor_reps(17, n_a=30, n_parties=2)
    for labels in (np.arange(29) % 3, np.arange(31) % 3):
        with pytest.raises(ValidationError, match=r"^anchor_labels: expected 30 labels \(one per row\), got (29|31)$"):
            anchor_graph_laplacian(reps, "tsl", k_nn=3, anchor_labels=labels)


def test_knn_breaks_distance_ties_by_the_lower_anchor_index():
    """On an evenly spaced line the two neighbours of an interior point are tied; the lower index comes first."""
    n = 40
    line = np.c_[np.arange(n, dtype=float), np.zeros(n)]
    one = knn_indices(line, 1)[:, 0]
    np.testing.assert_array_equal(one, np.r_[1, np.arange(n - 1)])
    two = knn_indices(line, 2)
    np.testing.assert_array_equal(two[1:-1], np.c_[np.arange(n - 2), np.arange(2, n)])
    assert knn_indices(line, 100).shape == (n, n - 1)


def test_median_heuristic_gamma_from_the_pairwise_distances():
    """γ_k = 1/(2·median ‖a_i − a_j‖²) over pairs i < j; median_distances_ is the root of that median."""
    reps = anchor_reps(11, n_a=31)
    nki = NKI(gamma="median").fit(reps)
    for k, a in enumerate(reps):
        med2 = float(np.median(pdist(a, "sqeuclidean")))
        assert nki.gammas_[k] == pytest.approx(1.0 / (2.0 * med2), rel=1e-12)
        assert nki.median_distances_[k] == pytest.approx(np.sqrt(med2), rel=1e-12)
        assert median_gamma(a) == pytest.approx(1.0 / (2.0 * med2), rel=1e-12)
    # a fixed γ is used as given; the median distances are still recorded
    fixed = NKI(gamma=0.3).fit(reps)
    assert fixed.gammas_ == [0.3, 0.3, 0.3]
    assert fixed.median_distances_ == pytest.approx(nki.median_distances_, rel=1e-12)


def test_median_heuristic_edge_cases():
    """γ = 1/(2m²) for any m² > 0 (also below 1); γ = 1 when all anchors coincide or there is one row."""
    assert gamma_from_median_sq(0.25) == 2.0
    assert gamma_from_median_sq(4.0) == 0.125
    assert gamma_from_median_sq(0.0) == 1.0
    assert median_sq_distance(np.ones((1, 3))) == 0.0
    assert median_sq_distance(np.array([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]])) == 18.0  # pairs 25, 1, 18
    assert median_gamma(np.ones((5, 2))) == 1.0


def test_nki_defaults_are_the_paper_settings():
    """γ = 1, λ = 1, μ = 1, 10 neighbours, no graph, no centering, the Theorem 2 objective, d̂ = d̃."""
    nki = NKI()
    assert (nki.n_components, nki.gamma, nki.lam, nki.graph, nki.mu, nki.k_nn, nki.center, nki.objective) == (
        None, 1.0, 1.0, None, 1.0, 10, False, "paper"
    )
    reps = anchor_reps(12)
    fitted = nki.fit(reps)
    assert fitted.Z_.shape == (60, 4) and fitted.gammas_ == [1.0, 1.0, 1.0]
    assert fitted.graph_skipped_ is False


@pytest.mark.parametrize(
    "params, message",
    [
        (dict(gamma=0.0), "gamma: must lie in (0.0, inf], got 0.0"),
        (dict(gamma="mean"), "gamma: expected a number, got 'mean'"),
        (dict(lam=0.0), "lam: must lie in (0.0, inf], got 0.0"),
        (dict(mu=-0.5), "mu: must lie in [0.0, inf], got -0.5"),
        (dict(k_nn=0), "k_nn: must lie in [1, inf], got 0"),
        (dict(objective="dual"), "objective: must be 'paper' or 'residual', got 'dual'"),
        (dict(graph="knn"), "graph: must be 'gl' or 'tsl', got 'knn'"),
        (dict(graph="tsl"), "anchor_labels: graph='tsl' needs the anchors' labels (e.g. SMOTE anchors), got None"),
        (dict(center=True, n_components=60), "n_components: d̂ must lie in [1, 59]"),
    ],
)
def test_nki_rejects_bad_parameters_naming_field_and_range(params, message):
    with pytest.raises(ValidationError, match="^" + re.escape(message)):
        NKI(**params).fit(anchor_reps(13))


def test_tsl_rejects_unlabelled_anchors():
    labels = np.arange(60) % 3
    labels[7] = -1
    with pytest.raises(ValidationError, match="^anchor_labels: graph='tsl' needs every anchor labelled"):
        NKI(graph="tsl").fit(anchor_reps(13), anchor_labels=labels)


def test_smallest_admissible_parameters_are_accepted():
    """k_nn = 1, μ between 0 and 1, d̂ = na − 1 with centering and d̂ = na without are all valid."""
    reps = anchor_reps(14, n_a=20)
    labels = np.arange(20) % 2
    assert NKI(graph="gl", k_nn=1, mu=0.5).fit(reps).graph_skipped_ is False
    assert NKI(graph="tsl", k_nn=1, mu=0.5).fit(reps, anchor_labels=labels).Z_.shape == (20, 4)
    assert NKI(n_components=19, center=True).fit(reps).Z_.shape == (20, 19)
    assert NKI(n_components=20).fit(reps).Z_.shape == (20, 20)


def test_mu_zero_switches_the_graph_off_so_tsl_needs_no_labels():
    reps = anchor_reps(15)
    plain = NKI(gamma=0.5).fit(reps)
    off = NKI(gamma=0.5, graph="tsl", mu=0.0).fit(reps)
    assert off.graph_skipped_ is False
    np.testing.assert_allclose(np.abs(off.Z_.T @ plain.Z_), np.eye(4), atol=1e-8)


def test_a_single_one_way_knn_edge_is_enough_for_the_graph_term():
    """TSL with one same-label pair (0, 1) where 1 is 0's nearest neighbour but not vice versa: tr B = 1,
    and the graph term is used (Z* minimises the graph objective), not skipped."""
    pos = np.array([0.0, 1.0, 1.4, 3.0, 4.7, 6.5, 8.4, 10.4])
    reps = [np.c_[pos, np.zeros(8)], np.c_[np.zeros(8), pos]]
    labels = np.array([0, 0, 1, 2, 3, 4, 5, 6])
    b = anchor_graph_laplacian(reps, "tsl", k_nn=1, anchor_labels=labels)
    assert np.trace(b) == 1.0
    nki = NKI(n_components=2, gamma=0.5, graph="tsl", k_nn=1, mu=1.0).fit(reps, anchor_labels=labels)
    assert nki.graph_skipped_ is False
    m = sum(np.linalg.inv(rbf_kernel(a, a, 0.5) + np.eye(8)) for a in reps)
    plus = m / np.trace(m) + b / np.trace(b)
    assert np.trace(nki.Z_.T @ plus @ nki.Z_) == pytest.approx(smallest_eigen_sum(plus, 2), rel=1e-9)
