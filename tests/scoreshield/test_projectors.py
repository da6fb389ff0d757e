"""Gram projectors: feasibility, optimality against an SDP, non-expansiveness, bad inputs."""

from __future__ import annotations

import numpy as np
import pytest

from veilbench.scoreshield.gram import PROJECTORS, GaussianGramMechanism, cosine_gram, symmetric_gaussian
from veilbench.scoreshield.newton import nearest_correlation_newton
from veilbench.scoreshield.projectors import aap, dykstra, project_box, project_psd, sym
from veilbench.validation import ValidationError


def unit_rows(rng, n, d):
    x = rng.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def noisy_gram(seed, n=8, d=3, sigma=0.6):
    rng = np.random.default_rng(seed)
    g = cosine_gram(unit_rows(rng, n, d))
    return g, g + symmetric_gaussian(n, sigma, rng)


def sdp_projection(g_noisy):
    import cvxpy as cp

    n = g_noisy.shape[0]
    x = cp.Variable((n, n), symmetric=True)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(x - g_noisy)), [x >> 0, cp.diag(x) == 1])
    prob.solve(solver=cp.CLARABEL)
    return np.asarray(x.value)


TOL = {"aap": 1e-3, "dykstra": 1e-6, "newton": 1e-9, "clip": None, "eigclip": 1e-9}


@pytest.mark.parametrize("name", sorted(PROJECTORS))
@pytest.mark.parametrize("seed", [0, 1])
def test_feasibility_residuals(name, seed):
    _, gt = noisy_gram(seed, n=12, sigma=1.0)
    res = PROJECTORS[name](gt)
    f = res.feasibility
    assert f.max_diag_err <= 1e-9 if name != "aap" else f.max_diag_err <= 1e-3
    assert f.max_offdiag_excess <= 1e-9
    assert np.allclose(res.gram, res.gram.T)
    if TOL[name] is not None:
        assert f.min_eig >= -TOL[name]
    assert f.min_eig == pytest.approx(np.linalg.eigvalsh(res.gram)[0])
    assert res.iterations >= 1 or name == "newton"


def test_aap_finalize_exactly_feasible():
    _, gt = noisy_gram(3, n=15, sigma=1.5)
    res = aap(gt, finalize=True)
    assert res.feasibility.max_diag_err < 1e-12 and res.feasibility.min_eig > -1e-10
    assert res.n_eigh == res.iterations + 1


def test_aap_stopping_rule():
    _, gt = noisy_gram(4, n=10, sigma=1.0)
    loose, tight = aap(gt, tol=1e-3), aap(gt, tol=1e-8, max_iter=5000)
    assert loose.converged and tight.converged and loose.iterations < tight.iterations
    capped = aap(gt, tol=1e-12, max_iter=3)
    assert capped.iterations == 3 and not capped.converged
    # One more averaged step from the converged point barely moves it.
    x = tight.gram
    step = 0.5 * project_psd(x) + 0.5 * project_box(x)
    assert np.linalg.norm(step - x) / np.linalg.norm(x) < 1e-8


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_exact_projectors_match_sdp(seed):
    _, gt = noisy_gram(seed, n=8)
    x_sdp = sdp_projection(gt)
    newton = nearest_correlation_newton(gt).gram
    dyk = dykstra(gt, tol=1e-10, max_iter=20000).gram
    obj_sdp = np.linalg.norm(x_sdp - gt)
    for x in (newton, dyk):
        assert np.abs(x - x_sdp).max() < 1e-4
        assert np.linalg.norm(x - gt) <= obj_sdp + 1e-6
    # AAP lands in E_n but is not the metric projection in general.
    assert np.linalg.norm(aap(gt).gram - gt) >= np.linalg.norm(newton - gt) - 1e-6


def test_exact_projection_never_increases_error_many_seeds():
    """The clean Gram lies in E_n, so ‖P(G̃) − G‖_F ≤ ‖G̃ − G‖_F on every draw."""
    for seed in range(60):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(5, 16))
        sigma = float(rng.choice([0.05, 0.3, 1.0, 3.0]))
        g, gt = noisy_gram(seed, n=n, d=int(rng.integers(1, 5)), sigma=sigma)
        p = nearest_correlation_newton(gt).gram
        assert np.linalg.norm(p - g) <= np.linalg.norm(gt - g) + 1e-9, seed
    for seed in range(5):
        g, gt = noisy_gram(100 + seed, n=10, sigma=1.0)
        assert np.linalg.norm(dykstra(gt, tol=1e-9, max_iter=20000).gram - g) <= np.linalg.norm(gt - g) + 1e-6


def test_newton_fixed_point_and_variational_inequality():
    """A feasible input is its own projection; ⟨G̃ − X, Y − X⟩ ≤ 0 for every Y ∈ E_n."""
    g, gt = noisy_gram(7, n=10, sigma=0.8)
    assert np.abs(nearest_correlation_newton(g).gram - g).max() < 1e-7
    x = nearest_correlation_newton(gt).gram
    rng = np.random.default_rng(0)
    worst = max(float(np.sum((gt - x) * (cosine_gram(unit_rows(rng, 10, int(rng.integers(1, 11)))) - x)))
                for _ in range(300))
    assert worst <= 1e-7
    # Moving towards another feasible point only increases the distance; clip-only leaves E_n.
    c = PROJECTORS["clip"](gt).gram
    y = cosine_gram(unit_rows(rng, 10, 10))
    assert np.linalg.norm(x - gt) <= np.linalg.norm(0.5 * (x + y) - gt)
    assert np.linalg.eigvalsh(c)[0] < -1e-3


def test_symmetric_noise_variances():
    z = np.stack([symmetric_gaussian(4, 2.0, np.random.default_rng(s)) for s in range(4000)])
    assert np.allclose(z, np.transpose(z, (0, 2, 1)))
    assert np.var(z[:, 0, 0]) == pytest.approx(4.0, rel=0.1)
    assert np.var(z[:, 0, 1]) == pytest.approx(2.0, rel=0.1)


def test_gram_mechanism_sigma_by_adjacency():
    from veilbench.privacy.calibration import analytic_sigma

    rec = GaussianGramMechanism(1.0, 1e-5, adjacency="record")
    out = GaussianGramMechanism(1.0, 1e-5, adjacency="output", sensitivity=1.0)
    assert rec.sigma_for(50) == pytest.approx(analytic_sigma(2 * np.sqrt(2 * 49), 1.0, 1e-5))
    assert out.sigma_for(50) == out.sigma_for(500) == pytest.approx(analytic_sigma(1.0, 1.0, 1e-5))


BAD = [
    (lambda: cosine_gram(np.ones((3, 2))), "x"),
    (lambda: cosine_gram(np.array([[1.0, 0.0], [np.nan, 0.0]])), "x"),
    (lambda: aap(np.array([[1.0, 0.5], [0.2, 1.0]])), "g_noisy"),
    (lambda: nearest_correlation_newton(np.array([[1.0, 0.5], [0.2, 1.0]])), "g_noisy"),
    (lambda: dykstra(np.array([[1.0, np.nan], [np.nan, 1.0]])), "g_noisy"),
    (lambda: PROJECTORS["clip"](np.ones((2, 3))), "g_noisy"),
    (lambda: aap(np.eye(3), tol=0.0), "tol"),
    (lambda: aap(np.eye(3), max_iter=0), "max_iter"),
    (lambda: GaussianGramMechanism(0.0, 1e-5), "epsilon"),
    (lambda: GaussianGramMechanism(-1.0, 1e-5), "epsilon"),
    (lambda: GaussianGramMechanism(1.0, 1.5), "delta"),
    (lambda: GaussianGramMechanism(1.0, 1e-5, adjacency="edge"), "adjacency"),
    (lambda: GaussianGramMechanism(1.0, 1e-5, adjacency="output", sensitivity=0.0), "sensitivity"),
    (lambda: symmetric_gaussian(3, -1.0, 0), "sigma"),
]


@pytest.mark.parametrize(("call", "field"), BAD)
def test_bad_inputs_name_the_field(call, field):
    with pytest.raises(ValidationError, match=field):
        call()


def test_projections_of_sym_input_are_symmetric_and_order_free():
    """Permuting records commutes with every projector (they are permutation-equivariant)."""
    _, gt = noisy_gram(11, n=9, sigma=0.7)
    perm = np.random.default_rng(0).permutation(9)
    for name in ("newton", "eigclip", "clip"):
        a = PROJECTORS[name](gt).gram[np.ix_(perm, perm)]
        b = PROJECTORS[name](gt[np.ix_(perm, perm)]).gram
        assert np.abs(a - b).max() < 1e-7, name
    assert np.allclose(sym(gt), gt)
