"""The four pipeline stages on a small digits instance (family contract, spec §10 setup)."""

from __future__ import annotations

import numpy as np
import pydantic
import pytest
from sklearn.datasets import load_digits

from veilbench.anchornoise import family as F
from veilbench.families.base import StageOutput
from veilbench.stages import STAGES
from veilbench.validation import ValidationError

HEADLINE = (
    "utility_balanced_accuracy",
    "privacy_linkage_max",
    "privacy_relative_error_min",
    "linkage_chance",
    "n_pool",
    "gpm_iterations",
    "gpm_rotation_error",
)


@pytest.fixture(scope="module")
def digits_inputs():
    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(0)
    idx = rng.permutation(X.shape[0])[:700]
    X, y = X[idx] / 16.0, y[idx]
    tr, te = slice(0, 500), slice(500, 700)
    prep = {
        "X_train": X[tr], "y_train": y[tr], "party_train": np.arange(500) % 4 + 10,  # labels need not start at 0
        "X_test": X[te], "y_test": y[te],
    }
    return {"prepare": prep, "embed": {"Z_train": X[tr], "Z_test": X[te]}}


def run_cell(inputs, seed=0, **options) -> tuple[dict[str, StageOutput], F.Params]:
    params = F.Params(**options)
    feed = dict(inputs)
    outs = {}
    for stage in STAGES:
        outs[stage] = getattr(F, stage)(feed, params, seed)
        for arr in outs[stage].saved_arrays().values():
            assert isinstance(arr, np.ndarray) and arr.dtype != object
        feed[stage] = outs[stage].saved_arrays()
    return outs, params


def test_anchor_noise_cell_metrics_are_sensible_and_reproducible(digits_inputs):
    outs, params = run_cell(digits_inputs, v=1.0, r=100)
    m = outs["evaluate"].metrics
    assert set(HEADLINE) <= set(m)
    assert {"privacy_linkage_mp", "privacy_linkage_op", "privacy_linkage_amc"} <= set(m)
    assert all(isinstance(v, float) and np.isfinite(v) for v in m.values())
    assert m["privacy_linkage_max"] == max(m["privacy_linkage_mp"], m["privacy_linkage_op"], m["privacy_linkage_amc"])
    z, party = digits_inputs["embed"]["Z_train"], digits_inputs["prepare"]["party_train"]
    assert m["n_pool"] == np.unique(z[party != party.min()], axis=0).shape[0]  # colluder = first participant
    assert m["linkage_chance"] == pytest.approx(1 / m["n_pool"])
    assert m["linkage_chance"] < m["privacy_linkage_max"] <= 1.0
    # a sub-pool that still holds the true source can only make the unique nearest row easier to hit
    assert m["privacy_linkage_max"] <= m["privacy_linkage_own_pool_max"] <= 1.0
    assert m["gpm_translation_error"] > 0 and m["v_over_anchor_scale"] == pytest.approx(1.0 / 10.0)
    assert 0.5 < m["utility_balanced_accuracy"] <= 1.0
    assert m["gpm_iterations"] >= 1 and 0 < m["gpm_rotation_error"] < 1.0
    assert m["participants"] == 4.0
    assert outs["evaluate"].info["test_protocol"] == "noisy"
    # no data noise: both test protocols coincide
    assert m["utility_balanced_accuracy_noisy_test"] == m["utility_balanced_accuracy_clean_test"]
    again, _ = run_cell(digits_inputs, v=1.0, r=100)
    assert again["evaluate"].metrics == m
    other, _ = run_cell(digits_inputs, seed=1, v=1.0, r=100)
    assert other["evaluate"].metrics != m


def test_noiseless_dc_cell_is_exactly_inverted(digits_inputs):
    outs, _ = run_cell(digits_inputs, mechanism="dc", r=100)
    m = outs["evaluate"].metrics
    assert m["privacy_linkage_max"] == 1.0 and m["privacy_linkage_op"] == 1.0 and m["privacy_linkage_mp"] == 1.0
    assert m["privacy_relative_error_min"] < 1e-12
    assert m["gpm_iterations"] == 1 and m["gpm_rotation_error"] < 1e-10
    assert m["gpm_certificate"] >= -1e-9 and m["gpm_certified"] == 1.0


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_data_noise_protocols_and_unaligned_control(digits_inputs):
    outs, _ = run_cell(digits_inputs, mechanism="cgdp", sigma=1.0, test_protocol="clean")
    m = outs["evaluate"].metrics
    assert m["utility_balanced_accuracy"] == m["utility_balanced_accuracy_clean_test"]
    assert m["utility_balanced_accuracy_clean_test"] > m["utility_balanced_accuracy_noisy_test"]
    assert {k for k in m if k.startswith("privacy_linkage_")} == {
        "privacy_linkage_colluder_inverse", "privacy_linkage_max", "privacy_linkage_own_pool_max",
        "privacy_linkage_max_control", "privacy_linkage_max_advantage",
    }
    assert m["gpm_rotation_error"] < 1e-12  # one shared transform needs no alignment
    outs, _ = run_cell(digits_inputs, mechanism="aa_data_noise", sigma=1.0, r=100)
    m = outs["evaluate"].metrics
    assert m["utility_balanced_accuracy_clean_test"] > m["utility_balanced_accuracy_noisy_test"]
    assert m["gpm_iterations"] == 1 and m["gpm_rotation_error"] < 1e-10  # clean anchors
    outs, _ = run_cell(digits_inputs, mechanism="igdp", classifier="mlp")
    m = outs["evaluate"].metrics
    assert m["privacy_linkage_max"] < 0.05 and m["gpm_rotation_error"] > 0.5 and m["gpm_iterations"] == 0


@pytest.mark.parametrize(
    "options, field",
    [
        (dict(v=-1.0), "v"),
        (dict(mechanism="cgdp", v=1.0), "v"),
        (dict(sigma=-0.1), "sigma"),
        (dict(r=1), "r"),
        (dict(test_protocol="both"), "test_protocol"),
        (dict(mechanism="aa"), "mechanism"),
        (dict(mechanism="dc", sigma=0.5), "sigma"),
        (dict(mechanism="aa_anchor_noise", sigma=0.5), "sigma"),
        (dict(mechanism="aa_data_noise", v=1.0), "v"),
        (dict(n_colluders=0), "n_colluders"),
        (dict(gpm_tol=0.0), "gpm_tol"),
        (dict(epsilon=1.0), "epsilon"),
        (dict(n_participants=1), "n_participants"),
        (dict(records_per_participant=0), "records_per_participant"),
        (dict(max_dim=0), "max_dim"),
    ],
)
def test_bad_params(options, field):
    with pytest.raises(pydantic.ValidationError, match=field):
        F.Params(**options)


@pytest.mark.parametrize(
    "options, stage, field",
    [
        (dict(r=64), "release", "r"),
        (dict(r=40, max_dim=40), "release", "r"),
        (dict(n_colluders=4), "attack", "colluders"),
        (dict(n_participants=6, records_per_participant=100), "release", "n_participants"),
    ],
)
def test_cells_that_cannot_run_fail_with_the_field(digits_inputs, options, stage, field):
    params = F.Params(**options)
    feed = dict(digits_inputs)
    with pytest.raises(ValidationError, match=rf"^{field}:"):
        for name in ("release", "integrate", "attack"):
            feed[name] = getattr(F, name)(feed, params, 0).saved_arrays()
            assert name != stage, f"{name} should have failed"


def test_stages_round_trip_through_stage_files(digits_inputs, tmp_path):
    """Arrays saved as .npz (no pickles) and JSON manifests give the same metrics as in memory."""
    from veilbench.io import read_bundle, write_bundle

    params = F.Params(v=0.5, r=100)
    feed = dict(digits_inputs)
    for stage in STAGES:
        out = getattr(F, stage)(feed, params, 3)
        write_bundle(tmp_path / stage, out.saved_arrays(), {"stage": stage, "info": out.info, "metrics": out.metrics})
        feed[stage], manifest = read_bundle(tmp_path / stage)
    in_memory, _ = run_cell(digits_inputs, seed=3, v=0.5, r=100)
    assert manifest["metrics"] == pytest.approx(in_memory["evaluate"].metrics)
    assert manifest["info"]["test_protocol"] == "noisy"


def test_redealt_participants_reduced_dimension_and_cross_family_arrays(digits_inputs):
    """n_participants / records_per_participant / max_dim reach every stage; the cross-family view
    (attack side from release, utility side from integrate) is consistent."""
    outs, _ = run_cell(digits_inputs, mechanism="dc", r=40, n_participants=3, records_per_participant=60, max_dim=12)
    rel, integ, m = outs["release"].saved_arrays(), outs["integrate"].saved_arrays(), outs["evaluate"].metrics
    assert outs["release"].crossfamily.utility is None and outs["integrate"].crossfamily.attack is None
    assert m["participants"] == 3.0 and np.bincount(rel["party_index_train"]).tolist() == [60, 60, 60]
    assert outs["release"].info["d"] == 12 and rel["Y_train"].shape == (180, 12)
    assert m["n_pool"] == 120 and m["privacy_linkage_max"] == 1.0  # 2 non-colluders × 60; DC is exactly inverted
    names = ("xfam_attack_rep", "xfam_attack_group", "xfam_attack_index", "xfam_pool")
    rep, group, index, pool = (rel[k] for k in names)
    assert rep.dtype == pool.dtype == np.float64 and group.dtype == index.dtype == np.int64
    assert rep.shape == (180, 12) and group.shape == index.shape == (180,) and pool.shape == (180, 12)
    assert set(group.tolist()) == {0, 1, 2} and index.min() >= 0 and index.max() < pool.shape[0]
    for i in range(3):  # each row is participant i's upload Y = X O_i + 1Ψ_iᵀ of pool row index
        rows = group == i
        assert np.allclose((rep[rows] - rel["private_Psi"][i]) @ rel["private_O"][i].T, pool[index[rows]])
    # the pool rows are the chosen training records projected on the top-12 principal axes
    z = digits_inputs["embed"]["Z_train"]
    zc = z - z.mean(axis=0)
    top12 = zc[rel["train_rows"]] @ np.linalg.svd(zc)[2][:12].T
    assert np.allclose(np.abs(pool), np.abs(top12))  # equal up to the sign of each principal axis
    ut = {k[len("xfam_utility_"):]: v for k, v in integ.items() if k.startswith("xfam_utility_")}
    assert set(ut) == {"rep_train", "y_train", "rep_test", "y_test"}
    assert ut["rep_train"].shape == (180, 12) and ut["rep_test"].shape == (200, 12)
    assert ut["y_train"].shape == (180,) and ut["y_test"].shape == (200,)
    assert ut["y_train"].dtype == ut["y_test"].dtype == np.int64 and ut["rep_test"].dtype == np.float64
    labels = digits_inputs["prepare"]["y_train"][rel["train_rows"]]
    assert np.array_equal(ut["y_train"], labels)  # digits: codes 0 … 9 = the labels
    assert np.array_equal(ut["rep_train"], integ["Yhat_train"])


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_data_noise_cells_report_the_equivalence_statistic(digits_inputs):
    outs, _ = run_cell(digits_inputs, mechanism="aa_data_noise", sigma=0.5, r=100)
    m = outs["evaluate"].metrics
    assert m["equivalence_sigma_squared"] == 0.25
    n, d = digits_inputs["embed"]["Z_train"].shape
    expected = 0.25 * (1 - d * (d + 1) / 2 / (n * d))  # σ² less the rigid fit's d(d−1)/2 + d degrees of freedom
    for kind in ("aa", "cgdp"):
        assert m[f"equivalence_residual_variance_{kind}"] == pytest.approx(expected, rel=0.03)
    assert m["equivalence_ks_pvalue"] > 1e-3 and 0 <= m["equivalence_ks_statistic"] < 0.05
    assert not any(k.startswith("equivalence_") for k in run_cell(digits_inputs, v=0.5, r=100)[0]["evaluate"].metrics)
