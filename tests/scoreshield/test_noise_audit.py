"""The white-box noise audit through ScoreShield's own stages: a mechanism that adds σ/2 is flagged in every
private cell kind (score vectors, Gram, text, CF, record-adjacency risk cells, embedding noise) at ε = 8 and
ε = 32, where the black-box audit cannot decide; the correct mechanism is not. The audit reads the noise
before clipping or projection, the independent entries of a symmetrised Gram, and the ledger gets the
record-level multiplier of output-adjacency Grams."""

from __future__ import annotations

import math

import numpy as np
import pytest

from veilbench.privacy.calibration import analytic_sigma, gaussian_epsilon
from veilbench.privacy.noise_audit import METRIC_PREFIX, audit_noise_arrays, noise_arrays
from veilbench.scoreshield import baselines, family, gram, gram_stages, vector, vector_stages
from veilbench.scoreshield.sensitivity import gram_record_sensitivity

FLAG = f"{METRIC_PREFIX}flagged"

GRAM = dict(regime="gram", adjacency="output", gram_sensitivity=1.0, n_records=40)
CELL_KINDS = {
    "vector": dict(mechanism="gaussian", n_queries=20),
    "gram": dict(mechanism="newton", **GRAM),
    "gram-unprojected": dict(mechanism="noisy", **GRAM),
    "text": dict(mechanism="eigclip", gram_source="text", text_encoder="tfidf", **GRAM),
    "cf": dict(mechanism="newton", gram_source="movielens", **{**GRAM, "n_records": 30}),
    "risk-record": dict(mechanism="newton", **{**GRAM, "adjacency": "record", "n_records": 50}),
    "embedding-noise": dict(mechanism="embedding_noise", **GRAM),
}


def run_release_evaluate(inputs: dict, params: family.Params, seed: int = 0) -> dict:
    """release → integrate → evaluate (the attack stage's black-box audit is not needed here)."""
    state = dict(inputs)
    for stage in ("release", "integrate"):
        state[stage] = getattr(family, stage)(state, params, seed).arrays
    out = family.evaluate(state, params, seed)
    return {"release": state["release"], "metrics": out.metrics}


def half_noise(monkeypatch) -> None:
    """Break every ScoreShield mechanism: the noise drawn is half the σ it is called with."""
    perturb, sym_gauss, embed = vector.perturb_scores, gram.symmetric_gaussian, gram_stages.noisy_embeddings
    monkeypatch.setattr(vector, "perturb_scores", lambda s, sigma, *a, **k: perturb(s, sigma / 2, *a, **k))
    monkeypatch.setattr(gram, "symmetric_gaussian", lambda n, sigma, *a, **k: sym_gauss(n, sigma / 2, *a, **k))
    monkeypatch.setattr(gram_stages, "noisy_embeddings", lambda x, sigma, rng: embed(x, sigma / 2, rng))


def half_calibration(monkeypatch) -> None:
    """Break the calibration instead: every ScoreShield mechanism is given, and reports, σ/2."""
    for module in (vector, gram, baselines):
        real = module.calibrate_sigma
        monkeypatch.setattr(module, "calibrate_sigma", lambda *a, _real=real, **k: _real(*a, **k) / 2)


@pytest.mark.parametrize("eps", [8.0, 32.0])
@pytest.mark.parametrize("kind", list(CELL_KINDS))
def test_half_noise_is_flagged_in_every_private_cell_kind_and_correct_noise_is_not(tiny_inputs, monkeypatch, kind, eps):
    params = family.Params(epsilon=eps, **CELL_KINDS[kind])
    ok = run_release_evaluate(tiny_inputs, params)["metrics"]
    assert ok[FLAG] == 0.0, {k: v for k, v in ok.items() if k.startswith(METRIC_PREFIX)}
    assert ok[f"{METRIC_PREFIX}epsilon_lower"] <= eps <= ok[f"{METRIC_PREFIX}epsilon_upper"]
    assert ok[f"{METRIC_PREFIX}power_half_sigma"] >= 0.95 and ok[f"{METRIC_PREFIX}decidable"] == 1.0
    assert ok[f"{METRIC_PREFIX}epsilon_claimed"] == eps
    with monkeypatch.context() as m:
        half_noise(m)
        broken = run_release_evaluate(tiny_inputs, params)["metrics"]
    assert broken[FLAG] == 1.0 and broken[f"{METRIC_PREFIX}epsilon_lower"] > eps
    assert broken[f"{METRIC_PREFIX}sigma_upper"] < ok[f"{METRIC_PREFIX}sigma_expected"]
    with monkeypatch.context() as m:
        half_calibration(m)
        miscalibrated = run_release_evaluate(tiny_inputs, params)["metrics"]
    assert miscalibrated[FLAG] == 1.0 and miscalibrated[f"{METRIC_PREFIX}epsilon_lower"] > eps


@pytest.mark.parametrize("mechanism", ["clean", "identity", "identity_noise"])
def test_releases_without_a_privacy_claim_are_not_audited(tiny_inputs, mechanism):
    for opts in (dict(n_queries=20), GRAM):
        res = run_release_evaluate(tiny_inputs, family.Params(mechanism=mechanism, epsilon=8.0, **opts))
        assert not any(k.startswith(METRIC_PREFIX) for k in res["metrics"])
        assert "dp_noise_sum_sq" not in res["release"]


def test_no_false_flag_and_every_half_noise_flagged_over_40_seeds(tiny_inputs):
    """Correct noise: 0 flags over 40 seeds of each release (α = 10⁻⁴ each); half noise: 40 of 40."""
    for opts in (dict(mechanism="gaussian", n_queries=10), dict(mechanism="noisy", **{**GRAM, "n_records": 30})):
        params = family.Params(epsilon=8.0, **opts)
        regime = vector_stages if params.regime == "vector" else gram_stages
        flags, caught = 0, 0
        for seed in range(40):
            rel = regime.release(tiny_inputs, params, seed).arrays
            mech_sigma, sens = _sigma_sensitivity(params, rel)
            flags += audit_noise_arrays(rel, mech_sigma, sens, 8.0, params.delta).flagged
            half = {k: v for k, v in rel.items()}
            half.update(dp_noise_sum_sq=rel["dp_noise_sum_sq"] / 4, dp_noise_sample=rel["dp_noise_sample"] / 2)
            caught += audit_noise_arrays(half, mech_sigma, sens, 8.0, params.delta).flagged
        assert (flags, caught) == (0, 40), opts


def _sigma_sensitivity(params: family.Params, rel: dict) -> tuple[float, float]:
    if params.regime == "vector":
        mech = vector_stages.mechanism(params, rel["scores"].shape[0])
        return mech.sigma, mech.sensitivity
    n = rel["gram"].shape[0]
    return gram_stages.mechanism(params).sigma_for(n), gram_stages.mechanism(params).sensitivity_for(n)


def test_the_audit_reads_the_noise_before_clipping_and_projection(tiny_inputs):
    """At ε = 1 a third of the scores are clipped and the projection shrinks G̃ − G: auditing the outputs
    instead of the noise would flag the correct mechanism; the stages' noise arrays do not."""
    for opts, out in ((dict(mechanism="gaussian", n_queries=20), "scores"), (dict(mechanism="newton", **GRAM), "gram")):
        params = family.Params(epsilon=1.0, **opts)
        res = run_release_evaluate(tiny_inputs, params)
        assert res["metrics"][FLAG] == 0.0
        rel = res["release"]
        sigma, sens = _sigma_sensitivity(params, rel)
        if out == "scores":
            clean, _, _ = vector_stages.clean_scores(tiny_inputs, params)
            wrong = rel["scores"] - clean
        else:
            x, _, _ = gram_stages.records(tiny_inputs, params, 0)
            wrong = gram.gram_noise_entries(rel["gram"] - gram.cosine_gram(x))
        assert audit_noise_arrays(noise_arrays(wrong), sigma, sens, 1.0, params.delta).flagged, out


def test_gram_noise_entries_are_the_independent_entries_on_z_scale():
    """diag(W) and √2·triu(W): n(n + 1)/2 entries, each N(0, σ²) and uncorrelated, for W = sym(Z)."""
    n, sigma, draws = 5, 1.7, 20_000
    w = gram.symmetric_gaussian(n, sigma, 0, size=(draws,))
    entries = np.stack([gram.gram_noise_entries(m) for m in w])
    assert entries.shape == (draws, n * (n + 1) // 2)
    assert np.allclose(entries.var(axis=0), sigma**2, rtol=0.05)
    corr = np.corrcoef(entries.T) - np.eye(entries.shape[1])
    assert np.abs(corr).max() < 0.05
    iu = np.triu_indices(n, 1)
    assert np.array_equal(entries[0], np.concatenate([np.diag(w[0]), math.sqrt(2) * w[0][iu]]))


def test_output_adjacency_gram_release_states_its_record_level_multiplier(tiny_inputs):
    """The ledger entry's record_noise_multiplier = σ/(2√(2(n − 1))): at n = 40 and ε = 2 (Δ = 1) a
    record gets over 30 times ε."""
    params = family.Params(mechanism="noisy", epsilon=2.0, **GRAM)
    out = family.release(tiny_inputs, params, 0)
    sigma = analytic_sigma(1.0, 2.0, params.delta)
    (entry,) = out.ledger
    assert entry.noise_multiplier == pytest.approx(sigma, rel=1e-12)
    z_rec = entry.record_noise_multiplier
    assert z_rec == pytest.approx(sigma / (2 * math.sqrt(2 * 39)), rel=1e-12)
    assert z_rec == pytest.approx(sigma / gram_record_sensitivity(40), rel=1e-12)
    assert gaussian_epsilon(z_rec, 1.0, params.delta) > 30 * 2.0
    assert entry.adjacency == "output" and (entry.epsilon, entry.delta, entry.count) == (2.0, params.delta, 1)
    # the record's columns show the same numbers
    assert out.saved_metrics()["dp_record_noise_multiplier"] == z_rec
    rec = family.release(tiny_inputs, family.Params(mechanism="noisy", epsilon=2.0, **{**GRAM, "adjacency": "record"}), 0)
    (rec_entry,) = rec.ledger
    assert rec_entry.record_noise_multiplier == pytest.approx(rec_entry.noise_multiplier, rel=1e-12)
    assert rec_entry.adjacency == "record"
    vec = family.release(tiny_inputs, family.Params(mechanism="gaussian", epsilon=2.0, n_queries=5), 0)
    (vec_entry,) = vec.ledger
    assert vec_entry.adjacency == "record" and vec_entry.record_noise_multiplier is None
    assert vec_entry.count == 5 and "dp_record_noise_multiplier" not in vec.saved_metrics()
