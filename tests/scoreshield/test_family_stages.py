"""The four ScoreShield stages run end to end on tiny digits inputs and are seed-deterministic."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from pydantic import ValidationError as PydanticValidationError

from veilbench.families.base import STAGES
from veilbench.scoreshield import family


def run_cell(inputs: dict, params: family.Params, seed: int) -> dict:
    """Run the four stages feeding arrays forward; check the contract's types on the way."""
    state = dict(inputs)
    outs = {}
    for stage in STAGES:
        out = getattr(family, stage)(state, params, seed)
        json.dumps(out.info, allow_nan=False)
        assert all(isinstance(v, float) for v in out.metrics.values()), stage
        assert all(isinstance(a, np.ndarray) and a.dtype.kind in "biuf" for a in out.arrays.values()), stage
        state[stage] = out.arrays
        outs[stage] = out
    return outs


@pytest.mark.parametrize("mechanism", ["clean", "noisy", "gaussian", "identity", "identity_noise"])
def test_vector_stages_finite_and_deterministic(tiny_inputs, mechanism):
    params = family.Params(mechanism=mechanism, epsilon=8.0, n_queries=40, audit_releases=2000)
    a = run_cell(tiny_inputs, params, seed=3)
    b = run_cell(tiny_inputs, params, seed=3)
    m = a["evaluate"].metrics
    assert m == b["evaluate"].metrics
    for name in ("utility_verification_accuracy", "utility_roc_auc", "utility_recall_at_k", "utility_map",
                 "privacy_epsilon_lower_bound", "privacy_epsilon_claimed"):
        assert name in m and math.isfinite(m[name]), name
    assert all(math.isfinite(v) for v in m.values())
    assert 0.0 <= m["utility_roc_auc"] <= 1.0
    assert a["integrate"].arrays["topk"].shape == (40, params.top_k)
    assert a["release"].arrays["scores"].shape == (40, 240)


def test_vector_utility_ordering(tiny_inputs):
    """Clean beats a private release, which beats nothing; more ε gives more utility."""
    auc = {}
    for mech, eps in (("clean", 1.0), ("gaussian", 0.5), ("gaussian", 50.0), ("identity", 1.0)):
        p = family.Params(mechanism=mech, epsilon=eps, n_queries=40, audit_releases=200)
        auc[(mech, eps)] = run_cell(tiny_inputs, p, seed=0)["evaluate"].metrics
    assert auc[("clean", 1.0)]["utility_roc_auc"] > 0.8
    assert auc[("identity", 1.0)]["utility_roc_auc"] == pytest.approx(0.5)
    assert auc[("gaussian", 50.0)]["utility_roc_auc"] > auc[("gaussian", 0.5)]["utility_roc_auc"]
    assert auc[("clean", 1.0)]["utility_map"] > auc[("gaussian", 0.5)]["utility_map"]
    assert auc[("gaussian", 0.5)]["release_clipped_fraction"] > auc[("gaussian", 50.0)]["release_clipped_fraction"]
    assert auc[("clean", 1.0)]["privacy_epsilon_lower_bound"] == family.EPSILON_CAP


def test_vector_release_sigma_and_seed_dependence(tiny_inputs):
    p = family.Params(mechanism="gaussian", epsilon=2.0, n_queries=10)
    r1 = family.release(tiny_inputs, p, seed=1)
    r2 = family.release(tiny_inputs, p, seed=2)
    assert r1.info["sigma"] > 0
    assert not np.array_equal(r1.arrays["scores"], r2.arrays["scores"])
    assert r1.arrays["scores"].min() >= -1.0 and r1.arrays["scores"].max() <= 1.0
    margin = family.release(tiny_inputs, family.Params(mechanism="gaussian", epsilon=2.0, n_queries=10, public_margin=0.5), 1)
    assert margin.info["sigma"] == pytest.approx(r1.info["sigma"] * 1.5 / 2.0, rel=1e-6)


@pytest.mark.parametrize(
    ("field", "value"),
    [("epsilon", 0.0), ("epsilon", -1.0), ("delta", 1.0), ("delta", 0.0), ("mechanism", "laplace"),
     ("calibrator", "rdp"), ("public_margin", 1.5), ("n_queries", 0), ("top_k", 0), ("threshold", 2.0),
     ("unknown_option", 1)],
)
def test_bad_params_name_the_field(field, value):
    with pytest.raises(PydanticValidationError, match=field):
        family.Params(**{field: value})


GRAM_MECHS = ["clean", "noisy", "identity", "identity_noise", "embedding_noise", "aap", "dykstra", "newton", "clip",
              "eigclip"]


def gram_params(mechanism, **kw):
    base = dict(regime="gram", mechanism=mechanism, epsilon=4.0, adjacency="output", gram_sensitivity=1.0,
                n_records=40, audit_releases=500, dykstra_max_iter=300, aap_max_iter=300)
    base.update(kw)
    return family.Params(**base)


@pytest.mark.parametrize("mechanism", GRAM_MECHS)
def test_gram_stages_finite_and_deterministic(tiny_inputs, mechanism):
    params = gram_params(mechanism)
    a = run_cell(tiny_inputs, params, seed=5)
    b = run_cell(tiny_inputs, params, seed=5)
    m = a["evaluate"].metrics
    assert m == b["evaluate"].metrics
    for name in ("utility_roc_auc", "utility_recall_at_k", "utility_map", "utility_clustering_nmi",
                 "utility_clustering_ari", "utility_gram_mse", "privacy_epsilon_lower_bound", "privacy_epsilon_claimed"):
        assert name in m and math.isfinite(m[name]), name
    assert all(math.isfinite(v) for v in m.values())
    g = a["release"].arrays["gram"]
    assert g.shape == (40, 40) and np.allclose(g, g.T)
    if mechanism not in ("noisy", "clip"):
        assert m["release_min_eig"] > -1e-3 and m["release_max_diag_err"] < 1e-3
    if mechanism in ("aap", "dykstra", "newton", "clip", "eigclip"):
        assert set(a["release"].info["projection"]) >= {"iterations", "n_eigh", "min_eig", "max_diag_err",
                                                         "max_offdiag_excess"}
    assert m["privacy_epsilon_lower_bound"] <= m["privacy_epsilon_claimed"] or mechanism == "clean"


def test_gram_projection_helps_and_identity_is_the_reference(tiny_inputs):
    res = {mech: run_cell(tiny_inputs, gram_params(mech, epsilon=2.0), seed=0)["evaluate"].metrics
           for mech in ("noisy", "newton", "identity", "clean")}
    assert res["newton"]["utility_gram_mse"] < res["noisy"]["utility_gram_mse"]
    assert res["identity"]["utility_gram_mse"] == pytest.approx(res["identity"]["reference_identity_gram_mse"])
    assert res["clean"]["utility_gram_mse"] == 0.0
    assert res["clean"]["utility_clustering_nmi"] > res["identity"]["utility_clustering_nmi"]


def test_gram_record_adjacency_uses_row_sensitivity(tiny_inputs):
    out = family.release(tiny_inputs, gram_params("noisy", adjacency="record"), seed=0)
    assert out.info["sensitivity"] == pytest.approx(2.0 * math.sqrt(2.0 * 39))
    same_rows = family.release(tiny_inputs, gram_params("newton", adjacency="record"), seed=0)
    assert np.array_equal(out.arrays["record_index"], same_rows.arrays["record_index"])


@pytest.mark.parametrize(("kw", "field"), [
    (dict(regime="gram", mechanism="gaussian"), "mechanism"),
    (dict(regime="vector", mechanism="aap"), "mechanism"),
    (dict(regime="gram", mechanism="aap", adjacency="edge"), "adjacency"),
    (dict(regime="gram", mechanism="aap", gram_sensitivity=0.0), "gram_sensitivity"),
    (dict(regime="gram", mechanism="aap", n_records=2), "n_records"),
    (dict(regime="gram", mechanism="aap", aap_tol=0.0), "aap_tol"),
    (dict(sensitivity=1.0, public_margin=0.5), "sensitivity"),
])
def test_bad_gram_params_name_the_field(kw, field):
    with pytest.raises(PydanticValidationError, match=field):
        family.Params(**kw)


def test_non_unit_or_nan_embeddings_rejected(tiny_inputs):
    from veilbench.validation import ValidationError

    bad = {"prepare": tiny_inputs["prepare"], "embed": dict(tiny_inputs["embed"])}
    z = bad["embed"]["Z_train"].copy()
    z[3] = np.nan
    bad["embed"]["Z_train"] = z
    for params in (family.Params(n_queries=5), gram_params("newton")):
        with pytest.raises(ValidationError, match="Z_train"):
            family.release(bad, params, seed=0)
    zero = dict(bad["embed"], Z_train=np.where(np.arange(240)[:, None] == 0, 0.0, tiny_inputs["embed"]["Z_train"]))
    with pytest.raises(ValidationError, match="Z_train"):
        family.release({"prepare": tiny_inputs["prepare"], "embed": zero}, family.Params(n_queries=5), seed=0)


def test_movielens_gram_cell_adds_cf_metrics(tiny_inputs):
    res = {}
    for mech in ("clean", "identity", "newton"):
        p = gram_params(mech, gram_source="movielens", n_records=30, epsilon=8.0)
        out = run_cell(tiny_inputs, p, seed=0)
        res[mech] = out["evaluate"].metrics
        assert out["release"].arrays["gram"].shape == (30, 30)
    for m in res.values():
        assert 0.3 < m["utility_cf_rmse"] < 1.5 and 0.0 < m["utility_cf_ndcg_at_10"] <= 1.0
    assert res["clean"]["utility_cf_rmse"] < res["identity"]["utility_cf_rmse"]
    with pytest.raises(PydanticValidationError, match="gram_source"):
        family.Params(gram_source="movielens")


def test_text_gram_cell_tfidf(tiny_inputs):
    from veilbench.scoreshield.text import PARAPHRASE_GROUPS

    res = {mech: run_cell(tiny_inputs, gram_params(mech, gram_source="text", text_encoder="tfidf", epsilon=8.0),
                          seed=0)["evaluate"].metrics for mech in ("clean", "identity", "newton")}
    n_sent = sum(len(g) for g in PARAPHRASE_GROUPS)
    assert res["clean"]["utility_similarity_spearman"] == pytest.approx(1.0)
    assert res["identity"]["utility_similarity_spearman"] == 0.0
    assert res["clean"]["utility_map"] > res["identity"]["utility_map"]
    assert -1.0 <= res["newton"]["utility_similarity_spearman"] <= 1.0
    assert n_sent >= 40


@pytest.mark.slow  # loads the bundled MiniLM model; the text Gram path runs in test-fast with tfidf (above)
def test_text_gram_cell_minilm_offline(tiny_inputs):
    """The bundled MiniLM encoder separates the paraphrase groups; the release keeps the structure."""
    clean = run_cell(tiny_inputs, gram_params("clean", gram_source="text", text_encoder="minilm"), seed=0)
    m = clean["evaluate"].metrics
    assert m["utility_map"] > 0.9 and m["utility_roc_auc"] > 0.95
    newton = run_cell(tiny_inputs, gram_params("newton", gram_source="text", text_encoder="minilm", epsilon=32.0), seed=0)
    assert newton["evaluate"].metrics["utility_similarity_spearman"] > 0.3


def test_index_tiebreak_pitfall_on_clipped_release(tiny_inputs):
    """At small ε most scores clip to 1; index order then fills the top-k with the first gallery rows."""
    picks = {}
    for tb in ("index", "random"):
        p = family.Params(mechanism="gaussian", epsilon=0.5, n_queries=30, tiebreak=tb, audit_releases=200)
        out = run_cell(tiny_inputs, p, seed=0)
        picks[tb] = out["integrate"].arrays["topk"]
        assert out["integrate"].info["boundary_tie_fraction"] > 0.9
    assert picks["index"].max() < 60  # 240 gallery rows, but only the lowest indices are ever returned
    assert np.unique(picks["random"]).size > 150


def test_gram_risk_metrics(tiny_inputs):
    """Unnormalised ‖Ĝ − G‖_F², the naive expectation σ²n(n + 1)/2 and the spec's per-mechanism prediction."""
    n = 40
    res = {mech: run_cell(tiny_inputs, gram_params(mech, epsilon=2.0, adjacency="record"), seed=1)
           for mech in ("noisy", "newton", "aap", "clean")}
    m = {mech: out["evaluate"].metrics for mech, out in res.items()}
    sigma = res["noisy"]["release"].metrics["release_sigma"]
    for mech in ("noisy", "newton", "aap"):
        assert m[mech]["risk_frobenius_sq"] == pytest.approx(m[mech]["utility_gram_mse"] * n * n)
        assert m[mech]["risk_noisy_expected_frobenius_sq"] == pytest.approx(sigma**2 * n * (n + 1) / 2)
    assert m["noisy"]["risk_frobenius_sq"] == pytest.approx(m["noisy"]["risk_noisy_expected_frobenius_sq"], rel=0.2)
    assert m["noisy"]["risk_predicted_frobenius_sq"] == m["noisy"]["risk_noisy_expected_frobenius_sq"]
    assert m["newton"]["risk_predicted_frobenius_sq"] == pytest.approx(2 * math.sqrt(2) * sigma * n**1.5)
    assert m["newton"]["risk_frobenius_sq"] < m["noisy"]["risk_frobenius_sq"]
    assert "risk_predicted_frobenius_sq" not in m["aap"]  # AAP is not the metric projection
    assert m["clean"]["risk_frobenius_sq"] == 0.0 and "risk_noisy_expected_frobenius_sq" not in m["clean"]
