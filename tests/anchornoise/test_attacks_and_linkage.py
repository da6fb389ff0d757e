"""Collusion attacks (spec §5), exact-recovery and data-noise claims (§7), linkage metric (§6.1)."""

from __future__ import annotations

import numpy as np
import pytest

from veilbench.anchornoise.attacks import CollusionBundle, attack_name, run_attacks
from veilbench.anchornoise.gpm import GeneralizedPowerMethod
from veilbench.anchornoise.linkage import deduplicated_linkage
from veilbench.metrics.linkage import linkage_rate, relative_reconstruction_error
from veilbench.validation import ValidationError


def _attack(rel, party, colluders=(0,)):
    bundle = CollusionBundle.from_private(np.array(colluders), rel.O, rel.Psi, rel.A)
    if rel.B is None:
        return run_attacks(rel.Y_train, party, bundle)
    gpm = GeneralizedPowerMethod().fit(rel.B)
    return run_attacks(rel.Y_train, party, bundle, rel.B, gpm.rotations_, gpm.template_)


def test_noiseless_dc_is_exactly_inverted(release_factory):
    X, party, _, _, rel = release_factory("aa", v=0.0, m=4, d=6, r=30)
    recon, rows = _attack(rel, party)
    assert set(recon) == {"mp__pinv", "mp__inverse_regression", "op", "amc__colluder", "amc__anchor"}
    np.testing.assert_array_equal(rows, np.flatnonzero(party != 0))
    for name, xhat in recon.items():
        assert relative_reconstruction_error(xhat, X[rows]) < 1e-12, name
        assert deduplicated_linkage(xhat, X[rows], np.arange(rows.size)).rate == 1.0, name


def test_cgdp_colluder_inverse_is_exact_and_igdp_is_not(release_factory):
    X, party, _, _, rel = release_factory("cgdp", m=3)
    recon, rows = _attack(rel, party)
    assert set(recon) == {"colluder_inverse"}
    np.testing.assert_allclose(recon["colluder_inverse"], X[rows], atol=1e-10)
    X, party, _, _, rel = release_factory("igdp", m=3)
    recon, rows = _attack(rel, party)
    assert relative_reconstruction_error(recon["colluder_inverse"], X[rows]) > 1.0


def test_op_on_data_noise_recovers_the_transform_leaving_only_the_noise(release_factory):
    sigma = 0.4
    X, party, _, _, rel = release_factory("aa", sigma=sigma, m=3, n_per=400, d=5, r=30)
    recon, rows = _attack(rel, party)
    resid = recon["op"] - X[rows]
    # (X_j O_j + σN_j − Ψ_j) O_jᵀ − X_j = σ N_j O_jᵀ: iid N(0, σ²) again (rotation invariance)
    np.testing.assert_allclose(np.cov(resid.T), sigma**2 * np.eye(5), atol=0.2 * sigma**2)


def test_data_noise_equivalence_aa_vs_cgdp(release_factory):
    """Claim 2: aligned AA + data noise and C-GDP + data noise give the same residual law."""
    sigma = 0.5
    covs = []
    for kind in ("aa", "cgdp"):
        X, party, _, _, rel = release_factory(kind, sigma=sigma, m=3, n_per=400, d=5, r=30, seed=11)
        if kind == "aa":
            gpm = GeneralizedPowerMethod().fit(rel.B)
            aligned = gpm.transform(rel.Y_train, party)
        else:
            aligned = rel.Y_train - rel.Psi[0]
        q = np.linalg.lstsq(X, aligned, rcond=None)[0]
        covs.append(np.cov((aligned - X @ q).T))
    for c in covs:
        np.testing.assert_allclose(c, sigma**2 * np.eye(5), atol=0.2 * sigma**2)


def test_anchor_noise_lowers_op_linkage(release_factory):
    rates = []
    for v in (0.0, 20.0):
        X, party, _, _, rel = release_factory("aa", v=v, m=3, n_per=60, d=6, r=30, seed=3)
        recon, rows = _attack(rel, party)
        rates.append(deduplicated_linkage(recon["op"], X[rows], np.arange(rows.size)).rate)
    assert rates[0] == 1.0 and rates[1] < 0.5


def test_two_colluders_calibrate_amc(release_factory):
    X, party, _, _, rel = release_factory("aa", v=0.0, m=4, d=5, r=30)
    recon, rows = _attack(rel, party, colluders=(0, 2))
    np.testing.assert_array_equal(rows, np.flatnonzero((party != 0) & (party != 2)))
    np.testing.assert_allclose(recon["amc__colluder"], X[rows], atol=1e-9)


@pytest.mark.parametrize("colluders", [(), (0, 1, 2, 3), (0, 0), (5,), (-1,)])
def test_bad_colluder_sets(release_factory, colluders):
    _, _, _, _, rel = release_factory("aa", m=4)
    with pytest.raises(ValidationError, match="^colluders:"):
        CollusionBundle.from_private(np.array(colluders, dtype=int), rel.O, rel.Psi, rel.A)


def test_anchor_attacks_need_the_analyst_state(release_factory):
    _, party, _, _, rel = release_factory("aa", m=3)
    bundle = CollusionBundle.from_private(np.array([0]), rel.O, rel.Psi, rel.A)
    with pytest.raises(ValidationError, match="rotations"):
        run_attacks(rel.Y_train, party, bundle, rel.B)


def test_attack_name():
    assert attack_name("mp__pinv") == "mp" and attack_name("op") == "op"


# ---- linkage on hand-made pools -------------------------------------------------------------

POOL = np.array([[0.0, 0.0], [0.0, 0.0], [5.0, 5.0], [9.0, 0.0]])


@pytest.mark.parametrize(
    "recon, truth, dedup_rate, shared_rate",
    [
        # the reconstruction sits on a duplicated record: a hit once duplicates are merged,
        # a miss under the shared unique-nearest rule (the tie makes it ambiguous)
        ([[0.1, 0.0]], [1], 1.0, 0.0),
        ([[0.1, 0.0]], [0], 1.0, 0.0),
        # clear hit on a unique record, and a clear miss
        ([[5.0, 4.9]], [2], 1.0, 1.0),
        ([[8.9, 0.1]], [2], 0.0, 0.0),
        # equidistant between two distinct records: a tie, never a hit
        ([[7.0, 2.5]], [2], 0.0, 0.0),
        ([[0.0, 0.1], [5.0, 5.0], [0.0, 9.0]], [1, 2, 3], 2 / 3, 1 / 3),
    ],
)
def test_linkage_with_duplicates(recon, truth, dedup_rate, shared_rate):
    recon, truth = np.array(recon), np.array(truth)
    d = deduplicated_linkage(recon, POOL, truth)
    assert d.rate == pytest.approx(dedup_rate)
    assert d.n_pool == 3 and d.chance == pytest.approx(1 / 3)
    assert linkage_rate(recon, POOL, truth).rate == pytest.approx(shared_rate)


@pytest.mark.parametrize("truth", [np.array([4]), np.array([-1]), np.array([0.5])])
def test_linkage_bad_true_index(truth):
    with pytest.raises(ValidationError, match="^true_index:"):
        deduplicated_linkage(np.zeros((1, 2)), POOL, truth)
