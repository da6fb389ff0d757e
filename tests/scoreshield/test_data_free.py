"""Data-free ScoreShield references: identity_noise never reads the data and shares the Gaussian noise."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError as PydanticValidationError

from veilbench.families.base import is_data_free
from veilbench.scoreshield import family
from veilbench.scoreshield.gram import cosine_gram

from .test_family_stages import gram_params, run_cell


def _other_data(inputs: dict) -> dict:
    """A different data set of the same shapes: other embeddings, other labels."""
    rng = np.random.default_rng(99)
    embed = {k: rng.normal(size=v.shape) for k, v in inputs["embed"].items()}
    prepare = dict(inputs["prepare"], y_train=rng.permutation(inputs["prepare"]["y_train"]))
    return {"prepare": prepare, "embed": embed}


@pytest.mark.parametrize(
    "params",
    [
        family.Params(mechanism="identity_noise", epsilon=2.0, n_queries=20),
        gram_params("identity_noise", epsilon=2.0),
        gram_params("identity_noise", epsilon=2.0, projector="none", adjacency="record"),
    ],
    ids=["vector", "gram-newton", "gram-unprojected-record"],
)
def test_identity_noise_never_reads_the_data(tiny_inputs, params):
    key = "scores" if params.regime == "vector" else "gram"
    a = family.release(tiny_inputs, params, seed=4).arrays[key]
    b = family.release(_other_data(tiny_inputs), params, seed=4).arrays[key]
    c = family.release(tiny_inputs, params, seed=5).arrays[key]
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)  # it is random: the seed matters, the data do not


def test_gram_identity_noise_draws_the_gaussian_cells_noise(tiny_inputs):
    """I_n + sym(Z) − I_n equals the noisy cell's G̃ − G: the same Z, so cells are paired by seed."""
    noisy = family.release(tiny_inputs, gram_params("noisy", epsilon=2.0), seed=7)
    free = family.release(tiny_inputs, gram_params("identity_noise", epsilon=2.0, projector="none"), seed=7)
    x = tiny_inputs["embed"]["Z_train"][noisy.arrays["record_index"]]
    g = cosine_gram(x / np.linalg.norm(x, axis=1, keepdims=True))
    assert np.allclose(free.arrays["gram"] - np.eye(g.shape[0]), noisy.arrays["gram"] - g)
    assert free.info["sigma"] == noisy.info["sigma"] > 0


def test_vector_identity_noise_is_the_gaussian_noise_on_zero_scores(tiny_inputs):
    noisy = family.release(tiny_inputs, family.Params(mechanism="noisy", epsilon=2.0, n_queries=20), seed=1)
    free = family.release(tiny_inputs, family.Params(mechanism="identity_noise", epsilon=2.0, n_queries=20), seed=1)
    q = tiny_inputs["embed"]["Z_test"][:20]
    gal = tiny_inputs["embed"]["Z_train"]
    clean = (q / np.linalg.norm(q, axis=1, keepdims=True)) @ (gal / np.linalg.norm(gal, axis=1, keepdims=True)).T
    assert np.allclose(free.arrays["scores"], np.clip(noisy.arrays["scores"] - clean, -1.0, 1.0))


def test_identity_noise_is_feasible_claims_zero_and_spends_nothing(tiny_inputs):
    out = run_cell(tiny_inputs, gram_params("identity_noise", epsilon=2.0), seed=0)
    m = out["evaluate"].metrics
    assert m["release_min_eig"] > -1e-6 and m["release_max_diag_err"] < 1e-6  # projected by Newton
    assert m["privacy_epsilon_claimed"] == 0.0 and m["privacy_epsilon_lower_bound"] == 0.0
    assert out["release"].ledger == [] and not any(k.startswith("dp_") for k in out["release"].saved_metrics())
    vec = run_cell(tiny_inputs, family.Params(mechanism="identity_noise", epsilon=2.0, n_queries=20,
                                              audit_releases=2000), seed=0)
    assert vec["release"].ledger == [] and not any(k.startswith("dp_") for k in vec["release"].saved_metrics())
    assert vec["evaluate"].metrics["privacy_epsilon_lower_bound"] < 0.5  # audited: nothing to distinguish


def test_data_free_release_is_at_chance_while_gaussian_at_large_epsilon_is_not(tiny_inputs):
    free = run_cell(tiny_inputs, gram_params("identity_noise", epsilon=64.0), seed=0)["evaluate"].metrics
    real = run_cell(tiny_inputs, gram_params("newton", epsilon=64.0), seed=0)["evaluate"].metrics
    assert abs(free["utility_roc_auc"] - 0.5) < 0.1
    assert real["utility_roc_auc"] > free["utility_roc_auc"] + 0.2


def test_projector_only_for_gram_identity_noise():
    with pytest.raises(PydanticValidationError, match="projector"):
        family.Params(regime="gram", mechanism="newton", projector="aap")
    with pytest.raises(PydanticValidationError, match="projector"):
        family.Params(mechanism="identity_noise", projector="newton")
    with pytest.raises(PydanticValidationError, match="projector"):
        family.Params(regime="gram", mechanism="identity_noise", projector="sdp")


def test_family_declares_its_data_free_cells():
    assert is_data_free(family.DATA_FREE, {"mechanism": "identity_noise", "epsilon": 8.0})
    assert is_data_free(family.DATA_FREE, {"mechanism": "identity"})
    assert not is_data_free(family.DATA_FREE, {"mechanism": "newton", "epsilon": 8.0})
    assert not is_data_free(family.DATA_FREE, {"epsilon": 8.0})
