"""Generalized power method and the alternating baseline (spec §4.3 invariants)."""

from __future__ import annotations

import numpy as np
import pytest

from veilbench.anchornoise.alternating import AlternatingProcrustes
from veilbench.anchornoise.gpm import (
    CERTIFICATE_TOL,
    GeneralizedPowerMethod,
    center_anchors,
    certificate,
    objective,
    polar_step,
    power_iterations,
    random_init,
    rotation_error,
    spectral_init,
    template,
)
from veilbench.anchornoise.studies import synthetic_anchor_uploads
from veilbench.linalg.procrustes import haar_orthogonal
from veilbench.validation import ValidationError


def test_noiseless_instance_one_iteration_exact_and_certified(release_factory):
    X, party, _, _, rel = release_factory("aa", v=0.0, m=5, d=6, r=30)
    gpm = GeneralizedPowerMethod().fit(rel.B)
    assert gpm.n_iter_ == 1 and gpm.converged_
    assert rotation_error(gpm.rotations_, rel.O) < 1e-12
    assert gpm.certified_ and gpm.certificate_ >= -CERTIFICATE_TOL
    # centering removes the translation exactly at v = 0 (A is centered)
    np.testing.assert_allclose(gpm.offsets_, rel.Psi, atol=1e-12)
    # fixed point: one more polar step does not move the rotations
    Bbar, _ = center_anchors(rel.B)
    np.testing.assert_allclose(polar_step(Bbar, template(Bbar, gpm.rotations_)), gpm.rotations_, atol=1e-12)
    # optimal objective is m² s_A² d (all aligned anchors equal A Q)
    assert gpm.objective_trace_[-1] == pytest.approx(5**2 * 30 * 6, rel=1e-12)
    # aligned uploads are X_i Q with one global Q for everybody
    aligned = gpm.transform(rel.Y_train, party)
    q = np.linalg.lstsq(X, aligned, rcond=None)[0]
    np.testing.assert_allclose(aligned, X @ q, atol=1e-9)
    np.testing.assert_allclose(q @ q.T, np.eye(6), atol=1e-9)


def test_certificate_rejects_a_non_optimal_point(release_factory):
    _, _, _, _, rel = release_factory("aa", v=0.0, m=4, d=5, r=30)
    Bbar, _ = center_anchors(rel.B)
    wrong = random_init(4, 5, seed=1)
    assert certificate(Bbar, wrong) < -1e-3


@pytest.mark.parametrize("v", [0.3, 1.2, 3.0])
def test_objective_is_monotone_and_solution_stationary(release_factory, v):
    _, _, _, _, rel = release_factory("aa", v=v, m=4, d=6, r=30, seed=2)
    gpm = GeneralizedPowerMethod(max_iter=200).fit(rel.B)
    trace = gpm.objective_trace_
    assert trace.size == gpm.n_iter_ + 1
    assert np.all(np.diff(trace) >= -1e-12 * trace[-1])
    np.testing.assert_allclose(np.einsum("mij,mkj->mik", gpm.rotations_, gpm.rotations_),
                               np.broadcast_to(np.eye(6), (4, 6, 6)), atol=1e-10)


def test_low_noise_is_certified_and_better_than_random_rotations(release_factory):
    _, _, _, _, rel = release_factory("aa", v=0.3, m=4, d=6, r=60, seed=4)
    gpm = GeneralizedPowerMethod().fit(rel.B)
    assert gpm.converged_ and gpm.certified_
    err = rotation_error(gpm.rotations_, rel.O)
    assert 0 < err < 0.2
    assert rotation_error(random_init(4, 6, seed=0), rel.O) > 0.8


def test_rotation_error_ignores_the_global_rotation(release_factory):
    _, _, _, _, rel = release_factory("aa", m=3, d=4)
    q = haar_orthogonal(4, 9)
    assert rotation_error(np.einsum("mji,jk->mik", rel.O, q), rel.O) < 1e-12


def test_equivariance_under_per_participant_rotations(release_factory):
    _, _, _, _, rel = release_factory("aa", v=0.5, m=4, d=5, r=40, seed=5)
    u = np.stack([haar_orthogonal(5, 100 + i) for i in range(4)])
    a = GeneralizedPowerMethod().fit(rel.B)
    b = GeneralizedPowerMethod().fit(np.einsum("mrd,mde->mre", rel.B, u))
    # R_i → U_iᵀ R_i up to one global rotation; the objective is unchanged
    expected = np.einsum("mdi,mde->mie", u, a.rotations_)
    assert rotation_error(b.rotations_, np.transpose(expected, (0, 2, 1))) < 1e-6
    assert b.objective_trace_[-1] == pytest.approx(a.objective_trace_[-1], rel=1e-9)


def test_alternating_baseline_reaches_the_gpm_objective_at_low_noise(release_factory):
    _, _, _, _, rel = release_factory("aa", v=0.3, m=5, d=6, r=40, seed=6)
    g = GeneralizedPowerMethod(certify=False).fit(rel.B)
    a = AlternatingProcrustes().fit(rel.B)
    assert a.converged_
    assert np.all(np.diff(a.objective_trace_) >= -1e-12 * a.objective_trace_[-1])
    assert a.objective_trace_[-1] == pytest.approx(g.objective_trace_[-1], rel=1e-7)
    assert rotation_error(a.rotations_, g.rotations_.transpose(0, 2, 1)) < 1e-3


def test_ablations_run_and_random_init_agrees_at_low_noise(release_factory):
    _, _, _, _, rel = release_factory("aa", v=0.2, m=4, d=5, r=40, seed=8)
    spectral = GeneralizedPowerMethod().fit(rel.B)
    rand = GeneralizedPowerMethod(init="random", seed=3).fit(rel.B)
    loo = GeneralizedPowerMethod(template="leave_one_out").fit(rel.B)
    assert rand.objective_trace_[-1] == pytest.approx(spectral.objective_trace_[-1], rel=1e-6)
    assert loo.objective_trace_[-1] == pytest.approx(spectral.objective_trace_[-1], rel=1e-6)


def test_max_iter_cap_reports_non_convergence(release_factory):
    _, _, _, _, rel = release_factory("aa", v=3.0, m=4, d=6, r=30, seed=1)
    gpm = GeneralizedPowerMethod(max_iter=1, tol=1e-15, tol_rotation=0.0, init="random", seed=0).fit(rel.B)
    assert gpm.n_iter_ == 1 and not gpm.converged_


def test_objective_matches_quadratic_form(release_factory):
    _, _, _, _, rel = release_factory("aa", v=0.5, m=3, d=4, r=20)
    Bbar, _ = center_anchors(rel.B)
    R = random_init(3, 4, seed=2)
    big = np.concatenate(list(Bbar), axis=1)
    S = np.concatenate(list(R), axis=0)
    assert objective(Bbar, R) == pytest.approx(np.trace(S.T @ big.T @ big @ S), rel=1e-12)


@pytest.mark.parametrize(
    "est, B, field",
    [
        (GeneralizedPowerMethod(), np.ones((3, 4)), "B"),
        (GeneralizedPowerMethod(), np.ones((2, 3, 4)), "B"),
        (GeneralizedPowerMethod(init="ones"), np.ones((2, 6, 4)), "init"),
        (GeneralizedPowerMethod(template="median"), np.ones((2, 6, 4)), "template"),
        (GeneralizedPowerMethod(tol=0.0), np.ones((2, 6, 4)), "tol"),
        (AlternatingProcrustes(max_iter=0), np.ones((2, 6, 4)), "max_iter"),
        (AlternatingProcrustes(tol_rotation=-1.0), np.ones((2, 6, 4)), "tol_rotation"),
    ],
)
def test_bad_solver_inputs(est, B, field):
    with pytest.raises(ValidationError, match=rf"^{field}:"):
        est.fit(B)


@pytest.mark.parametrize("v_rel", [0.0, 0.07, 0.14, 0.3, 1.0])
@pytest.mark.parametrize("seed", [0, 1])
def test_two_participants_are_solved_exactly(v_rel, seed):
    r, d = 40, 5
    B, _, _ = synthetic_anchor_uploads(2, r, d, v_rel * np.sqrt(r), seed)
    Bbar, _ = center_anchors(B)
    # f* = ‖B̄₁‖² + ‖B̄₂‖² + 2‖B̄₁ᵀB̄₂‖_* (von Neumann), computed without any solver
    f_star = np.sum(Bbar**2) + 2 * np.linalg.norm(Bbar[0].T @ Bbar[1], "nuc")
    gpm = GeneralizedPowerMethod().fit(B)
    assert gpm.n_iter_ == 0 and gpm.converged_ and gpm.objective_trace_.shape == (1,)
    assert gpm.objective_trace_[-1] == pytest.approx(f_star, rel=1e-10)
    assert gpm.certified_
    alt = AlternatingProcrustes().fit(B)
    assert gpm.objective_trace_[-1] >= alt.objective_trace_[-1] * (1 - 1e-12)


def test_two_participant_iteration_can_stall_in_the_wrong_reflection_component():
    # the benchmark cell (m, r, d, v/s_A) = (2, 100, 16, 0.14) that motivated the closed form
    B, _, _ = synthetic_anchor_uploads(2, 100, 16, 0.14 * np.sqrt(100), 0)
    Bbar, _ = center_anchors(B)
    R, trace, _, _ = power_iterations(Bbar, spectral_init(Bbar), 1e-10, 1e-8, 500)
    exact = GeneralizedPowerMethod().fit(B)
    assert trace[-1] < exact.objective_trace_[-1] * (1 - 1e-4)
    assert certificate(Bbar, R) < -1e-3
    sign = np.linalg.det(R[1] @ R[0].T) * np.linalg.det(exact.rotations_[1] @ exact.rotations_[0].T)
    assert sign == pytest.approx(-1.0)
