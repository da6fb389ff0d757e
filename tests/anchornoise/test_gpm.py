"""Generalized power method and the alternating baseline (spec §4.3 invariants)."""

from __future__ import annotations

import numpy as np
import pytest

from veilbench.anchornoise.alternating import AlternatingProcrustes
from veilbench.anchornoise.gpm import (
    CERTIFICATE_TOL,
    GeneralizedPowerMethod,
    RelaxationSchedule,
    block_sweep,
    center_anchors,
    certificate,
    certificate_matrix,
    consensus_rate,
    escape_direction,
    excess_rank_energy,
    objective,
    polar,
    polar_near,
    polar_step,
    power_iterations,
    random_init,
    rotation_error,
    spectral_init,
    staircase_escape,
    template,
    young_omega,
)
import veilbench.anchornoise.gpm.iteration as gpm_iteration
from veilbench.anchornoise.mechanisms import synthetic_anchor_uploads
from veilbench.linalg.procrustes import haar_orthogonal, polar_factor
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
    gpm = GeneralizedPowerMethod(max_iter=200, escape=False).fit(rel.B)  # one run: one monotone trace
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
        (GeneralizedPowerMethod(update="sor"), np.ones((2, 6, 4)), "update"),
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
    R, trace, _, _ = power_iterations(Bbar, spectral_init(Bbar, hollow=False), 1e-10, 1e-8, 500)
    exact = GeneralizedPowerMethod().fit(B)
    assert trace[-1] < exact.objective_trace_[-1] * (1 - 1e-4)
    assert certificate(Bbar, R) < -1e-3
    sign = np.linalg.det(R[1] @ R[0].T) * np.linalg.det(exact.rotations_[1] @ exact.rotations_[0].T)
    assert sign == pytest.approx(-1.0)


def _hard_instance(m=4, r=24, d=6, v_rel=0.6, seed=3):
    B, O, _ = synthetic_anchor_uploads(m, r, d, v_rel * np.sqrt(r), seed)
    return center_anchors(B)[0], O


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_block_update_is_the_exact_block_maximiser(seed):
    Bbar, _ = _hard_instance(seed=seed)
    rng = np.random.default_rng(seed)
    R = random_init(4, 6, rng)
    for i in range(4):
        T_minus = template(Bbar, R) - Bbar[i] @ R[i]
        G = Bbar[i].T @ T_minus

        def f_block(Q, i=i):
            Rq = R.copy()
            Rq[i] = Q
            return objective(Bbar, Rq)

        # f(R_i) = ‖B̄_i‖² + ‖T_{-i}‖² + 2 tr(R_iᵀ G_i): linear in R_i
        q = haar_orthogonal(6, rng)
        assert f_block(q) == pytest.approx(np.sum(Bbar[i] ** 2) + np.sum(T_minus**2) + 2 * np.sum(q * G), rel=1e-12)
        best = f_block(polar_factor(G))
        assert best >= f_block(R[i]) * (1 - 1e-12)
        assert all(best >= f_block(haar_orthogonal(6, rng)) for _ in range(50))
        # small perturbations of the maximiser along O(d) do not improve it either
        for _ in range(20):
            k = rng.normal(size=(6, 6)) * 1e-3
            assert best >= f_block(polar_factor(G) @ polar_factor(np.eye(6) + k - k.T)) * (1 - 1e-13)


@pytest.mark.parametrize("omega", [1.0, 1.5, 1.9, 3.0])
def test_over_relaxed_sweeps_never_lower_the_objective(omega):
    rng = np.random.default_rng(7)
    for seed in range(3):
        Bbar, _ = _hard_instance(seed=seed, v_rel=[0.1, 0.6, 2.0][seed])
        R = random_init(4, 6, rng)
        T = template(Bbar, R)
        f = [float(np.sum(T**2))]
        for _ in range(15):
            R, T = block_sweep(Bbar, R, T, omega)
            f.append(float(np.sum(T**2)))
            np.testing.assert_allclose(T, template(Bbar, R), atol=1e-9)  # the in-place template stays exact
        assert np.all(np.diff(f) >= -1e-12 * f[-1])
        np.testing.assert_allclose(np.einsum("mij,mkj->mik", R, R), np.broadcast_to(np.eye(6), R.shape), atol=1e-10)


def test_the_safeguard_rejects_an_over_relaxed_block_that_would_lower_the_objective():
    # ω = 3 (outside the schedule's range) overshoots near a block optimum: find a state (after a few
    # ω = 1 sweeps from random starts) whose unguarded first block lowers f
    rng = np.random.default_rng(11)
    Bbar, _ = _hard_instance(seed=1)
    for _ in range(50):
        R = random_init(4, 6, rng)
        R = block_sweep(Bbar, R, template(Bbar, R))[0]
        G = Bbar[0].T @ (template(Bbar, R) - Bbar[0] @ R[0])
        over = polar_factor(R[0] + 3.0 * (polar_factor(G) - R[0]))
        if np.sum(over * G) < np.sum(R[0] * G):
            break
    else:
        pytest.fail("no overshooting state found")
    unguarded = R.copy()
    unguarded[0] = over
    assert objective(Bbar, unguarded) < objective(Bbar, R)
    R1, T1 = block_sweep(Bbar, R, template(Bbar, R), 3.0)
    assert objective(Bbar, R1) >= objective(Bbar, R)


def test_noiseless_optimum_is_a_fixed_point_of_the_sweep_and_certified(release_factory):
    _, _, _, _, rel = release_factory("aa", v=0.0, m=4, d=5, r=30, seed=3)
    Bbar, _ = center_anchors(rel.B)
    R0 = spectral_init(Bbar)  # hollowed start: exact at v = 0
    assert rotation_error(R0, rel.O) < 1e-12
    for omega in (1.0, 1.7):
        R, T = block_sweep(Bbar, R0, template(Bbar, R0), omega)
        np.testing.assert_allclose(R, R0, atol=1e-12)
    assert certificate(Bbar, R) >= -CERTIFICATE_TOL
    assert objective(Bbar, R) == pytest.approx(4**2 * 30 * 5, rel=1e-12)


@pytest.mark.parametrize("m", [3, 4, 16])
def test_consensus_rate_is_the_sweep_rate_near_a_noiseless_optimum(m):
    # v = 0, R_i = P(I + ε(K_i − K_iᵀ))·O_iᵀ: the objective gap of ω = 1 sweeps shrinks like ρ_m² per
    # sweep (geometric mean over sweeps 2…6: ρ_m has a complex pair for m > 3, so single ratios oscillate)
    B, O, _ = synthetic_anchor_uploads(m, 20, 3, 0.0, 4)
    Bbar, _ = center_anchors(B)
    rng = np.random.default_rng(m)
    R = np.stack([polar_factor(np.eye(3) + 3e-2 * (k - k.T)) @ o.T for k, o in zip(rng.normal(size=(m, 3, 3)), O)])
    f_star = m**2 * 20 * 3  # ‖Σ_j A Q‖² with ‖A‖² = s_A² d = r d
    T = template(Bbar, R)
    gaps = []
    for _ in range(6):
        R, T = block_sweep(Bbar, R, T)
        gaps.append(f_star - float(np.sum(T**2)))
    assert (gaps[5] / gaps[1]) ** (1 / 8) == pytest.approx(consensus_rate(m), rel=0.1)


def test_consensus_rate_and_young_omega_closed_forms():
    # m = 2: one block update aligns the pair exactly; Young: ω* = 1 at μ = 0, → 2 as μ → 1
    assert consensus_rate(2) == pytest.approx(0.0, abs=1e-12)
    assert all(0 < consensus_rate(m) < 0.2 for m in (3, 5, 16))
    assert young_omega(0.0) == 1.0 and young_omega(0.99) == pytest.approx(2 / 1.1)
    # at ω*, the two roots λ of (λ + ω − 1)² = λ ω² μ² coincide at λ = ω* − 1
    for mu2 in (0.3, 0.9, 0.999):
        w = young_omega(mu2)
        lam = np.roots([1.0, 2 * (w - 1) - w**2 * mu2, (w - 1) ** 2])
        np.testing.assert_allclose(lam.real, w - 1, rtol=1e-6, atol=1e-6)


def test_schedule_switches_only_past_the_consensus_rate_then_applies_young():
    rho = consensus_rate(4)
    fast = RelaxationSchedule(4)
    gains = []
    for t in range(1, 8):  # Jacobi gains shrinking faster than ρ_4²: stay Jacobi
        gains.append((0.5 * rho) ** (2 * t))
        fast.update(t, gains)
    assert fast.omega is None
    slow = RelaxationSchedule(4)
    lam = 0.9
    gains = []
    # steady rate λ = 0.9 > ρ_4: switch at t = 2, then ω = 2/(1 + √(1 − λ)), since Young's relation
    # (λ + ω − 1)² = λω²μ² gives μ² = λ at ω = 1
    for t in range(1, 7):
        gains.append(lam ** (2 * t))
        slow.update(t, gains)
        if t == 2:
            assert slow.omega == 1.0
    assert slow.omega == pytest.approx(min(young_omega(lam), 1.9))


@pytest.mark.parametrize("seed", [0, 1])
def test_adaptive_schedule_is_monotone_and_faster_past_the_phase_transition(seed):
    Bbar, _ = _hard_instance(m=5, r=40, d=8, v_rel=0.3, seed=seed)
    R0 = spectral_init(Bbar)
    _, jac, n_jac, _ = power_iterations(Bbar, R0, 1e-10, 1e-8, 400)
    _, ada, n_ada, ok = power_iterations(Bbar, R0, 1e-10, 1e-8, 400, adaptive=True)
    assert ok and np.all(np.diff(ada) >= -1e-12 * ada[-1])
    assert n_ada < n_jac
    gpm = GeneralizedPowerMethod(max_iter=400, escape=False).fit(Bbar)
    np.testing.assert_allclose(gpm.objective_trace_, ada, rtol=1e-12)  # centered input: same run
    assert GeneralizedPowerMethod(max_iter=400, update="jacobi", escape=False).fit(Bbar).n_iter_ == n_jac


def _uncertified_run(seed):
    Bbar, _ = _hard_instance(seed=seed)
    first = GeneralizedPowerMethod(max_iter=400, escape=False).fit(Bbar)
    assert first.converged_ and not first.certified_
    return Bbar, first


@pytest.mark.parametrize("seed", [0, 1])
def test_escape_direction_is_a_second_order_ascent_of_the_lifted_problem(seed):
    Bbar, first = _uncertified_run(seed)
    R = first.rotations_
    cert, u = escape_direction(Bbar, R)
    assert cert == pytest.approx(first.certificate_, rel=1e-9) and np.sum(u**2) == pytest.approx(1.0)
    lam_min = np.linalg.eigvalsh(certificate_matrix(Bbar, R))[0]
    for eps in (1e-3, 1e-2):
        Y = np.stack([polar(np.column_stack([ri, eps * ui])) for ri, ui in zip(R, u)])  # blocks in St(d, d+1)
        np.testing.assert_allclose(np.einsum("mip,mjp->mij", Y, Y), np.broadcast_to(np.eye(6), (4, 6, 6)), atol=1e-12)
        # f(Y(ε)) − f(S) = −ε² uᵀ(Λ − C)u + O(ε³) = ε² |λ_min|
        gain = objective(Bbar, Y) - objective(Bbar, R)
        assert gain / eps**2 == pytest.approx(-lam_min, rel=10 * eps)


def test_escape_never_returns_a_worse_point_and_counts_its_iterations():
    gains = []
    for seed in (0, 1, 5, 10):  # instances of _hard_instance: 5 and 10 reach a better maximum by the lift
        Bbar, first = _uncertified_run(seed)
        gpm = GeneralizedPowerMethod(max_iter=400).fit(Bbar)
        assert gpm.escaped_ and gpm.n_iter_ > first.n_iter_
        assert gpm.objective_trace_.shape == (gpm.n_iter_ + 1,)
        np.testing.assert_allclose(gpm.objective_trace_[: first.n_iter_ + 1], first.objective_trace_, rtol=1e-12)
        assert gpm.objective_ == pytest.approx(objective(Bbar, gpm.rotations_), rel=1e-12)
        assert gpm.objective_ >= first.objective_ * (1 - 1e-12)
        np.testing.assert_allclose(np.einsum("mij,mkj->mik", gpm.rotations_, gpm.rotations_),
                                   np.broadcast_to(np.eye(6), (4, 6, 6)), atol=1e-10)
        gains.append(gpm.objective_ / first.objective_ - 1)
    assert max(gains) > 1e-4  # the lift reaches a better local maximum on some instance


def test_escape_is_skipped_when_certified_or_out_of_budget(release_factory):
    _, _, _, _, rel = release_factory("aa", v=0.3, m=4, d=6, r=60, seed=4)
    assert not GeneralizedPowerMethod().fit(rel.B).escaped_  # certified: nothing to escape
    Bbar, first = _uncertified_run(0)
    # fewer than n/2 iterations left after the n of the first run: no escape
    tight = GeneralizedPowerMethod(max_iter=first.n_iter_ + (first.n_iter_ - 1) // 2).fit(Bbar)
    assert not tight.escaped_ and tight.n_iter_ == first.n_iter_
    roomy = GeneralizedPowerMethod(max_iter=first.n_iter_ + (first.n_iter_ + 1) // 2).fit(Bbar)
    assert roomy.escaped_ and roomy.n_iter_ <= roomy.max_iter
    assert roomy.objective_trace_.shape == (roomy.n_iter_ + 1,) and roomy.objective_ >= first.objective_ * (1 - 1e-12)
    # a budget of one iteration: the lifted run is cut, its rounding is returned unrefined
    u = escape_direction(Bbar, first.rotations_)[1]
    R, trace, n, converged = staircase_escape(Bbar, first.rotations_, u, 1e-10, 1e-8, 1)
    assert (len(trace), n, converged) == (2, 1, False)
    np.testing.assert_allclose(np.einsum("mij,mkj->mik", R, R), np.broadcast_to(np.eye(6), (4, 6, 6)), atol=1e-10)


def test_excess_rank_energy_is_what_rounding_to_rank_d_discards():
    rng = np.random.default_rng(0)
    U = np.linalg.qr(rng.normal(size=(30, 7)))[0]
    V = haar_orthogonal(7, rng)
    sigma = np.array([9.0, 7.0, 5.0, 4.0, 3.0, 2.0, 0.5])
    T = U @ np.diag(sigma) @ V.T  # r × p with p = d + 1 = 7
    assert excess_rank_energy(T, 6) == pytest.approx(0.25, rel=1e-12)
    assert excess_rank_energy(T, 5) == pytest.approx(4.25, rel=1e-12)
    W = np.linalg.svd(T, full_matrices=False)[2][:6].T
    assert np.sum(T**2) - np.sum((T @ W) ** 2) == pytest.approx(excess_rank_energy(T, 6), rel=1e-10)
    assert excess_rank_energy(T @ W @ W.T, 6) == pytest.approx(0.0, abs=1e-12)  # rank d: nothing left


@pytest.mark.parametrize("seed", [13, 21, 23])  # instances whose excess rank peaks before the stop rule
def test_lifted_run_stops_at_the_first_step_that_does_not_raise_the_excess_rank(seed):
    Bbar, first = _uncertified_run(seed)
    u = escape_direction(Bbar, first.rotations_)[1]
    Y0 = np.stack([polar(np.column_stack([ri, ui])) for ri, ui in zip(first.rotations_, u)])
    _, trace, n, converged = power_iterations(Bbar, Y0, 1e-10, 1e-8, 400, adaptive=True, until_rank_peak=True)
    _, full, n_full, _ = power_iterations(Bbar, Y0, 1e-10, 1e-8, 400, adaptive=True)
    assert converged and n < n_full  # on these instances the peak comes before the stop rule
    np.testing.assert_allclose(trace, full[: n + 1], rtol=1e-13)  # same iterates up to the stop
    energy = [excess_rank_energy(template(Bbar, Y0), 6)]
    for k in range(1, n + 1):
        Yk = power_iterations(Bbar, Y0, 1e-10, 1e-8, k, adaptive=True)[0]
        energy.append(excess_rank_energy(template(Bbar, Yk), 6))
    assert np.all(np.diff(energy[:-1]) > 0) and energy[-1] <= energy[-2]


def test_rank_peak_rule_is_inert_on_square_blocks():
    Bbar, _ = _hard_instance(seed=2)
    R0 = spectral_init(Bbar)
    plain = power_iterations(Bbar, R0, 1e-10, 1e-8, 400, adaptive=True)
    watched = power_iterations(Bbar, R0, 1e-10, 1e-8, 400, adaptive=True, until_rank_peak=True)
    assert watched[2] == plain[2] and watched[1] == plain[1]


def test_escape_stopped_at_the_rank_peak_beats_the_baseline_on_its_former_miss():
    # the benchmark's cell (m, r, d, v/s_A) = (16, 200, 16, 0.14), an instance (seed 1) whose
    # certificate fails at the baseline's point: the escape, stopped at the rank peak, still finishes first
    B, _, _ = synthetic_anchor_uploads(16, 200, 16, 0.14 * np.sqrt(200), 1)
    gpm = GeneralizedPowerMethod(max_iter=500).fit(B)
    base = AlternatingProcrustes(max_iter=500).fit(B)
    assert gpm.escaped_ and not gpm.certified_
    assert gpm.n_iter_ < base.n_iter_ and gpm.objective_ >= base.objective_ * (1 - 1e-9)


def test_polar_near_is_the_polar_factor_and_falls_back_far_from_orthogonal():
    rng = np.random.default_rng(3)
    Q = np.stack([haar_orthogonal(8, rng) for _ in range(5)])
    P = np.stack([haar_orthogonal(8, rng) for _ in range(5)])
    near = Q + 1.7 * (polar(Q + 0.05 * rng.normal(size=Q.shape)) - Q)  # an over-relaxed candidate
    np.testing.assert_allclose(polar_near(near), polar(near), atol=1e-13)
    np.testing.assert_allclose(polar_near(3.0 * near), polar(near), atol=1e-13)  # scale-invariant
    wide = np.concatenate([near, 0.1 * rng.normal(size=(5, 8, 1))], axis=2)  # St(d, d+1) blocks
    out = polar_near(wide)
    np.testing.assert_allclose(np.einsum("kip,kjp->kij", out, out), np.broadcast_to(np.eye(8), (5, 8, 8)), atol=1e-13)
    np.testing.assert_allclose(out, polar(wide), atol=1e-13)
    far = Q + P  # singular values spread over (0, 2): the SVD is used
    np.testing.assert_allclose(polar_near(far), polar(far), atol=1e-13)


def test_secant_extrapolation_saves_the_detecting_iteration_at_low_noise():
    # a benchmark cell where the Jacobi phase alone needs 3 contraction steps plus the detecting one
    B, _, _ = synthetic_anchor_uploads(4, 100, 64, 0.035 * np.sqrt(100), 0)
    Bbar, _ = center_anchors(B)
    R0 = spectral_init(Bbar)
    _, jac, n_jac, _ = power_iterations(Bbar, R0, 1e-10, 1e-8, 50)
    _, ext, n_ext, ok = power_iterations(Bbar, R0, 1e-10, 1e-8, 50, adaptive=True)
    assert (n_jac, n_ext) == (4, 3) and ok
    assert np.all(np.diff(ext) >= 0) and ext[1] == pytest.approx(jac[1], rel=1e-14)  # step 1 is Jacobi
    assert ext[-1] >= jac[-1] * (1 - 1e-12)


def test_a_bad_extrapolation_is_rejected_by_the_guard(monkeypatch):
    # candidates replaced by random rotations: the guard f(cand) ≥ f + 2·(Jacobi linear gain) rejects
    # them all, so the run is Ling's Jacobi iteration, step for step
    Bbar, _ = _hard_instance(m=5, r=40, d=8, v_rel=0.05, seed=0)
    R0 = spectral_init(Bbar)
    rng = np.random.default_rng(0)
    monkeypatch.setattr(gpm_iteration, "secant_candidate", lambda *a: random_init(5, 8, rng))
    _, guarded, n, _ = power_iterations(Bbar, R0, 1e-10, 1e-8, 50, adaptive=True)
    _, jac, n_jac, _ = power_iterations(Bbar, R0, 1e-10, 1e-8, 50)
    assert n == n_jac and n > 2
    np.testing.assert_allclose(guarded, jac, rtol=1e-13)


@pytest.mark.parametrize("v_rel, certified", [(0.05, True), (0.6, False)])
def test_lanczos_eigenproblems_agree_with_the_dense_ones(v_rel, certified):
    Bbar, _ = _hard_instance(m=6, r=40, d=8, v_rel=v_rel, seed=2)
    dense, lanczos = spectral_init(Bbar, method="dense"), spectral_init(Bbar, method="lanczos")
    assert rotation_error(lanczos, dense.transpose(0, 2, 1)) < 1e-10  # same start up to a global rotation
    R = GeneralizedPowerMethod(max_iter=400, escape=False, certify=False).fit(Bbar).rotations_
    c_dense, u_dense = escape_direction(Bbar, R, method="dense")
    c_lanczos, u_lanczos = escape_direction(Bbar, R, method="lanczos")
    assert c_lanczos == pytest.approx(c_dense, abs=1e-11) and (c_dense >= -CERTIFICATE_TOL) == certified
    assert certificate(Bbar, R, method="lanczos") == c_lanczos
    if not certified:  # λ_min is simple: the same unit eigenvector up to sign
        assert abs(np.sum(u_dense * u_lanczos)) == pytest.approx(1.0, abs=1e-8)
    with pytest.raises(ValidationError, match="^method:"):
        certificate(Bbar, R, method="qr")


def test_polar_factors_of_a_stack_match_the_checked_polar_factor() -> None:
    from veilbench.linalg.procrustes import polar_factors

    rng = np.random.default_rng(3)
    stack = rng.normal(size=(4, 7, 5))
    np.testing.assert_allclose(polar_factors(stack), np.stack([polar_factor(m) for m in stack]), atol=1e-13)
    wide = polar_factors(rng.normal(size=(5, 7)))  # orthonormal rows
    np.testing.assert_allclose(wide @ wide.T, np.eye(5), atol=1e-13)
