"""DC data-free reference (random IR release) and the control attacker (no release)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from veilbench.dc import family
from veilbench.families.base import STAGES, is_data_free

from .test_family_stages import FAST

RANDOM = {**FAST, "obfuscation": "random", "d_tilde": 10}


def _stages(inputs: dict, params: family.Params, seed: int) -> dict:
    state = dict(inputs)
    for stage in STAGES[:-1]:
        state[stage] = getattr(family, stage)(state, params, seed).arrays
    state["metrics"] = family.evaluate(state, params, seed).metrics
    return state


def _other_values(inputs: dict) -> dict:
    """Same records' labels and parties, different feature values."""
    rng = np.random.default_rng(11)
    prep = dict(inputs["prepare"])
    prep["X_train"] = rng.uniform(0, 1, size=prep["X_train"].shape)
    prep["X_test"] = rng.uniform(0, 1, size=prep["X_test"].shape)
    return {"prepare": prep, "embed": inputs["embed"]}


def test_random_release_never_reads_the_data(digits_inputs):
    params = family.Params(**RANDOM)
    a = family.release(digits_inputs, params, seed=2).saved_arrays()
    b = family.release(_other_values(digits_inputs), params, seed=2).saved_arrays()
    c = family.release(digits_inputs, params, seed=3).saved_arrays()
    for key in ("ir_train", "ir_anchor", "ir_test"):
        assert np.array_equal(a[key], b[key]), key
        assert not np.array_equal(a[key], c[key]), key
    assert not np.array_equal(a["xfam_pool"], b["xfam_pool"])  # the private records did change


def test_random_release_utility_is_at_chance_and_a_real_release_is_not(digits_inputs):
    free = _stages(digits_inputs, family.Params(**RANDOM), seed=0)["metrics"]
    real = _stages(digits_inputs, family.Params(**{**RANDOM, "obfuscation": "pca"}), seed=0)["metrics"]
    # 10 digit classes: chance is about 0.1
    assert abs(free["utility_accuracy"] - 0.1) < 0.06
    assert real["utility_accuracy"] > free["utility_accuracy"] + 0.3
    # the attacks learn nothing from a random release: no advantage over the control (a regression
    # fitted on noise only adds variance to the mean guess, so the MSE advantage is ≤ 0)
    assert free["privacy_reconstruction_mse_advantage"] < 0.02
    assert free["privacy_linkage_rate_advantage"] <= 0.02


def test_control_attack_never_sees_the_release(digits_inputs):
    """Replacing every released IR by noise changes the attacks' scores, never the control's."""
    params = family.Params(**{**FAST, "obfuscation": "pca"})
    state = _stages(digits_inputs, params, seed=1)
    rng = np.random.default_rng(5)
    noised = dict(state["release"])
    for key in ("ir_train", "ir_anchor", "ir_test"):
        noised[key] = rng.normal(size=noised[key].shape)
    att = family.attack({**state, "release": noised}, params, seed=1).arrays
    assert np.array_equal(att["control_reconstructions"], state["attack"]["control_reconstructions"])
    assert not np.array_equal(att["reconstructions"], state["attack"]["reconstructions"])
    again = family.evaluate({**state, "release": noised, "attack": att}, params, seed=1).metrics
    for key in ("privacy_reconstruction_accuracy_best", "privacy_reconstruction_mse", "privacy_linkage_rate"):
        assert again[f"{key}_control"] == state["metrics"][f"{key}_control"], key


def test_control_guesses_the_leaked_anchor_mean():
    x = np.arange(12, dtype=float).reshape(4, 3)
    out = family.control_reconstruction(x, 5)
    assert out.shape == (5, 3) and np.allclose(out, x.mean(axis=0))
    with pytest.raises(family.ValidationError, match="x_leaked"):
        family.control_reconstruction(np.zeros((0, 3)), 2)


def test_an_exact_inversion_has_advantage_one(digits_inputs):
    params = family.Params(n_estimators=30, attacks=("lr", "pinv"), anchor="gaussian", n_anchor=300,
                           obfuscation="orthogonal", d_tilde=64, method="lki")
    m = _stages(digits_inputs, params, seed=0)["metrics"]
    assert m["privacy_reconstruction_mse_advantage"] == pytest.approx(1.0, abs=1e-9)
    assert m["privacy_reconstruction_mse_control"] > 0.01
    assert m["privacy_linkage_rate_advantage"] >= 0.9
    expected = (m["privacy_reconstruction_accuracy_best"] - m["privacy_reconstruction_accuracy_best_control"]) / (
        1 - m["privacy_reconstruction_accuracy_best_control"])
    assert m["privacy_reconstruction_accuracy_best_advantage"] == pytest.approx(expected)


def test_central_has_a_control_and_local_has_no_privacy_metrics(digits_inputs):
    central = _stages(digits_inputs, family.Params(**{**FAST, "method": "central"}), seed=0)["metrics"]
    assert central["privacy_reconstruction_mse"] == 0.0
    assert central["privacy_reconstruction_mse_advantage"] == 1.0
    assert math.isfinite(central["privacy_linkage_rate_control"])
    local = _stages(digits_inputs, family.Params(**{**FAST, "method": "local"}), seed=0)["metrics"]
    assert not any(k.endswith(("_control", "_advantage")) for k in local)


def test_random_release_is_declared_data_free_and_named():
    params = family.Params(**RANDOM)
    assert is_data_free(family.DATA_FREE, params.model_dump())
    assert not is_data_free(family.DATA_FREE, family.Params(**FAST).model_dump())
    assert params.variant == "Random release (NKI)"
