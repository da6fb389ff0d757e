"""The four DC stages run in order on tiny digits inputs; metrics are finite, sensible, reproducible."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import ValidationError as PydanticValidationError

from tasks.stage_reads import stage_reads, stage_view
from veilbench.dc import family
from veilbench.dc.obfuscation import make_obfuscator, party_seed
from veilbench.families.base import STAGES
from veilbench.validation import ValidationError

from .conftest import make_inputs


def run_cell(inputs: dict, params: family.Params, seed: int) -> dict[str, float]:
    """The four stages in order, each seeing only what the family declares it reads (as the pipeline runs them)."""
    state = dict(inputs)
    out = None
    for stage in STAGES:
        out = getattr(family, stage)(*stage_view(state, params, stage_reads(family, stage), f"dc.{stage}"), seed)
        for arr in out.arrays.values():
            assert arr.dtype != object
        state[stage] = out.arrays
    return out.metrics


FAST = {"n_estimators": 30, "attacks": ("lr", "pinv"), "n_anchor": 150, "n_smote_source": 40}


@pytest.mark.parametrize(
    "options",
    [
        {"method": "nki", "graph": "tsl", "center": True},
        {"method": "lki", "obfuscation": "kpca", "anchor": "minmax"},
        {"method": "nki", "nystrom_rank": 60, "kernel_gamma": "median", "features": "embed"},
        {"method": "gep", "anchor": "real", "n_anchor": 60},
        {"method": "mpp", "obfuscation": "orthogonal", "anchor": "gaussian", "classifier": "logreg"},
    ],
)
def test_stages_give_sensible_reproducible_metrics(digits_inputs, options):
    params = family.Params(**{**FAST, **options})
    metrics = run_cell(digits_inputs, params, seed=3)
    for name in ("utility_accuracy", "utility_accuracy_central", "utility_accuracy_local",
                 "privacy_reconstruction_accuracy_best", "privacy_reconstruction_mse",
                 "privacy_linkage_rate", "privacy_linkage_rate_chance"):
        assert math.isfinite(metrics[name]), name
    assert 0.0 <= metrics["privacy_reconstruction_accuracy_best"] <= 1.0
    # a 10-class problem: collaboration must clearly beat chance (0.1) and Central must beat Local
    assert metrics["utility_accuracy"] > 0.3
    assert metrics["utility_accuracy_central"] > metrics["utility_accuracy_local"]
    assert metrics["privacy_reconstruction_mse"] > 0
    assert run_cell(digits_inputs, params, seed=3) == metrics


def test_default_params_run_and_mlp_attack_counts(digits_inputs):
    metrics = run_cell(digits_inputs, family.Params(n_estimators=30, mlp_max_iter=50), seed=0)
    assert {"privacy_reconstruction_accuracy_mlp", "privacy_reconstruction_accuracy_lr"} <= set(metrics)
    best = max(metrics[f"privacy_reconstruction_accuracy_{a}"] for a in ("lr", "pinv", "mlp"))
    assert metrics["privacy_reconstruction_accuracy_best"] == best


def test_invertible_obfuscation_leaks_every_record_end_to_end(digits_inputs):
    """d̃ = d random orthogonal f_k and full-rank leaked random anchors: LR/PINV invert f_k exactly."""
    params = family.Params(n_estimators=30, attacks=("lr", "pinv"), anchor="gaussian", n_anchor=300,
                           obfuscation="orthogonal", d_tilde=64, method="lki")
    metrics = run_cell(digits_inputs, params, seed=0)
    assert metrics["privacy_reconstruction_mse"] < 1e-12
    assert metrics["privacy_linkage_rate"] >= 0.9
    assert metrics["privacy_linkage_rate"] > 100 * metrics["privacy_linkage_rate_chance"]


def test_own_readout_equals_joint_with_one_party():
    inputs = make_inputs(n_train=200, n_parties=1, seed=4)
    joint = run_cell(inputs, family.Params(**FAST, method="lki"), seed=0)
    own = run_cell(inputs, family.Params(**FAST, method="lki", readout="own"), seed=0)
    assert own == joint


def test_release_keeps_sources_out_of_parties(digits_inputs):
    params = family.Params(**FAST)
    out = family.release(digits_inputs, params, seed=1)
    rel = out.arrays
    assert np.intersect1d(rel["record_index"], rel["source_index"]).size == 0
    assert rel["source_index"].size == params.n_smote_source
    assert rel["ir_anchor"].shape == (4, params.n_anchor, params.d_tilde)
    assert rel["ir_test"].shape == (4, digits_inputs["prepare"]["X_test"].shape[0], params.d_tilde)
    # class-balanced anchor labels: counts differ by at most one
    counts = np.bincount(rel["anchor_labels"])
    assert counts.max() - counts.min() <= 1


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"d_tilde": 300, "n_anchor": 200}, "d_tilde"),
        ({"center": True, "method": "lki"}, "center"),
        ({"graph": "tsl", "anchor": "uniform"}, "graph"),
        ({"n_smote_source": 300, "n_anchor": 200}, "n_smote_source"),
        ({"nystrom_rank": 500, "n_anchor": 200}, "nystrom_rank"),
        ({"kernel_gamma": -1.0}, "kernel_gamma"),
        ({"lam": 0.0}, "lam"),
        ({"obfuscation": "tsne"}, "obfuscation"),
        ({"unknown": 1}, "unknown"),
    ],
)
def test_bad_params_name_the_field(options, field):
    with pytest.raises(PydanticValidationError, match=field):
        family.Params(**options)


def test_n_per_party_subsamples_each_party_and_rejects_too_many(digits_inputs):
    rel = family.release(digits_inputs, family.Params(**FAST, n_per_party=30), seed=2).arrays
    assert np.bincount(rel["party"]).tolist() == [30, 30, 30, 30]
    with pytest.raises(ValueError, match="n_per_party"):
        family.release(digits_inputs, family.Params(**FAST, n_per_party=500), seed=2)


def test_target_party_out_of_range_is_rejected(digits_inputs):
    params = family.Params(**FAST, target_party=7)
    state = dict(digits_inputs)
    state["release"] = family.release(state, params, 0).arrays
    with pytest.raises(ValueError, match="target_party"):
        family.attack(state, params, 0)


def test_n_parties_reallocates_into_k_parties_end_to_end(digits_inputs):
    """The dataset has 4 parties; n_parties = 6 re-allocates disjoint non-source records (spec §1.1)."""
    params = family.Params(**FAST, n_parties=6, n_per_party=25, method="lki")
    state = dict(digits_inputs)
    rel = family.release(state, params, seed=1).arrays
    assert np.bincount(rel["party"]).tolist() == [25] * 6
    assert np.unique(rel["record_index"]).size == 150
    assert np.intersect1d(rel["record_index"], rel["source_index"]).size == 0
    assert rel["ir_anchor"].shape[0] == 6 and rel["ir_test"].shape[0] == 6
    state["release"] = rel
    out = family.integrate(state, params, seed=1).arrays
    assert out["collab_test"].shape[0] == 6
    with pytest.raises(ValueError, match="n_parties"):
        family.release(digits_inputs, family.Params(**FAST, n_parties=20, n_per_party=25), seed=1)


def test_central_and_local_cells_match_the_references_of_an_integrating_cell(digits_inputs):
    """Same seed ⇒ same records: a central/local cell's utility equals the integrating cell's reference."""
    shared = {**FAST, "n_parties": 3, "n_per_party": 30}
    lki = run_cell(digits_inputs, family.Params(**shared, method="lki"), seed=2)
    central = run_cell(digits_inputs, family.Params(**shared, method="central"), seed=2)
    local = run_cell(digits_inputs, family.Params(**shared, method="local"), seed=2)
    assert central["utility_accuracy"] == lki["utility_accuracy_central"]
    assert local["utility_accuracy"] == lki["utility_accuracy_local"]
    # Central shares the raw records: the "reconstruction" is exact and links every target
    assert central["privacy_reconstruction_mse"] == 0.0
    assert central["privacy_linkage_rate"] == 1.0
    assert central["privacy_reconstruction_accuracy_best"] > lki["privacy_reconstruction_accuracy_best"]
    assert not any(name.startswith("privacy_") for name in local)


def test_cross_family_arrays_have_the_protocol_shapes(digits_inputs):
    params = family.Params(**FAST, n_parties=3, n_per_party=30, d_tilde=8, method="nki")
    state = dict(digits_inputs)
    rel = family.release(state, params, seed=0).saved_arrays()
    state["release"] = rel
    integ = family.integrate(state, params, seed=0).saved_arrays()
    n_r, p = 90, digits_inputs["prepare"]["X_train"].shape[1]
    m = digits_inputs["prepare"]["X_test"].shape[0]
    expected = {
        "xfam_attack_rep": ((n_r, 8), np.float64), "xfam_attack_group": ((n_r,), np.int64),
        "xfam_attack_index": ((n_r,), np.int64), "xfam_pool": ((n_r, p), np.float64),
    }
    expected_integ = {
        "xfam_utility_rep_train": ((n_r, 8), np.float64), "xfam_utility_y_train": ((n_r,), np.int64),
        "xfam_utility_rep_test": ((3 * m, 8), np.float64), "xfam_utility_y_test": ((3 * m,), np.int64),
    }
    for arrays, spec in ((rel, expected), (integ, expected_integ)):
        for name, (shape, dtype) in spec.items():
            assert arrays[name].shape == shape and arrays[name].dtype == dtype, name
    # each rep row is its party's f_k (PCA fitted on that party's records) of the pool row it indexes
    for k in range(3):
        rows = rel["xfam_attack_group"] == k
        pool = rel["xfam_pool"][rel["xfam_attack_index"][rows]]
        f_k = make_obfuscator("pca", 8, pool.shape[0], p, party_seed(0, k))
        np.testing.assert_allclose(f_k.fit_transform(pool), rel["xfam_attack_rep"][rows], atol=1e-10)
    np.testing.assert_array_equal(integ["xfam_utility_y_test"][:m], digits_inputs["prepare"]["y_test"])
    np.testing.assert_array_equal(integ["xfam_utility_rep_test"][m : 2 * m], integ["collab_test"][1])


def test_variant_names_the_paper_roster_and_is_dumped():
    cases = {
        ("nki", "tsl", True): "NKI+TSL+Center", ("nki", "gl", False): "NKI+GL", ("nki", "none", False): "NKI",
        ("lki", "none", False): "LKI", ("central", "none", False): "Central", ("local", "none", False): "Local",
    }
    for (method, graph, center), name in cases.items():
        params = family.Params(method=method, graph=graph, center=center)
        assert params.variant == name
        assert params.model_dump()["variant"] == name


def test_no_attacks_and_no_references_skip_those_metrics(digits_inputs):
    metrics = run_cell(digits_inputs, family.Params(**{**FAST, "attacks": ()}, references=False, method="lki"), 0)
    assert set(metrics) == {"utility_accuracy"}
    central = run_cell(digits_inputs, family.Params(**{**FAST, "attacks": ()}, references=False, method="central"), 0)
    assert set(central) == {"utility_accuracy", "utility_accuracy_central"}


def test_baselines_record_no_obfuscation_and_others_need_one():
    assert family.Params(method="central", obfuscation="kpca").obfuscation is None
    assert family.Params(method="local").model_dump()["obfuscation"] is None
    with pytest.raises(PydanticValidationError, match="obfuscation"):
        family.Params(method="lki", obfuscation=None)


def test_n_test_scores_a_seeded_subset_of_the_test_split(digits_inputs):
    params = family.Params(**FAST, n_test=50)
    rel = family.release(digits_inputs, params, 4)
    m = digits_inputs["prepare"]["X_test"].shape[0]
    assert rel.arrays["ir_test"].shape[:2] == (4, 50) and np.unique(rel.arrays["test_index"]).size == 50
    assert np.array_equal(rel.arrays["test_index"], family.release(digits_inputs, params, 4).arrays["test_index"])
    assert not np.array_equal(rel.arrays["test_index"], family.release(digits_inputs, params, 5).arrays["test_index"])
    whole = family.release(digits_inputs, family.Params(**FAST), 4).arrays
    assert np.array_equal(whole["test_index"], np.arange(m)) and whole["ir_test"].shape[1] == m
    # the subset is what integrate maps and evaluate scores: its labels are the subset's
    integ = family.integrate({**digits_inputs, "release": rel.arrays}, params, 4).saved_arrays()
    y_sub = digits_inputs["prepare"]["y_test"][rel.arrays["test_index"]]
    assert np.array_equal(integ["xfam_utility_y_test"], np.tile(y_sub, 4))
    with pytest.raises(ValidationError, match="n_test"):
        family.release(digits_inputs, family.Params(**FAST, n_test=m + 1), 0)


def test_attack_scores_are_shared_by_every_integrator_and_reported_by_evaluate(digits_inputs):
    """The privacy metrics come from the attack stage, which reads the release only: two integrators
    of one release report the same privacy and different utility."""
    state = dict(digits_inputs)
    lki, nki = family.Params(**FAST, method="lki"), family.Params(**FAST, method="nki")
    state["release"] = family.release(state, lki, 2).arrays
    assert np.array_equal(state["release"]["ir_anchor"], family.release(state, nki, 2).arrays["ir_anchor"])
    att = family.attack(state, lki, 2)
    assert att.arrays["score__privacy_reconstruction_accuracy_best"] == att.metrics["privacy_reconstruction_accuracy_best"]
    reported = {}
    for params in (lki, nki):
        run = {**state, "attack": att.arrays, "integrate": family.integrate(state, params, 2).arrays}
        reported[params.method] = family.evaluate(run, params, 2).metrics
    for name, value in att.metrics.items():
        assert reported["lki"][name] == reported["nki"][name] == value, name
    assert reported["lki"]["utility_accuracy"] != reported["nki"]["utility_accuracy"]
