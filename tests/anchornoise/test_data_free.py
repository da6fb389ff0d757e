"""Anchor-noise data-free reference (random uploads) and the control attacker (no uploads)."""

from __future__ import annotations

import numpy as np
import pytest

from veilbench.anchornoise import family as F
from veilbench.anchornoise.mechanisms import GDPMechanism
from veilbench.families.base import is_data_free
from veilbench.validation import ValidationError

from .test_family_stages import digits_inputs, run_cell  # noqa: F401  (fixture)


def test_random_mechanism_never_reads_the_data(release_factory):
    _, party, _, pt, rel = release_factory("random", seed=3)
    rng = np.random.default_rng(1)
    other = GDPMechanism("random").release(rng.normal(size=rel.Y_train.shape), party,
                                           rng.normal(size=rel.Y_test_clean.shape), pt, seed=3)
    for key in ("Y_train", "Y_test_noisy", "Y_test_clean"):
        assert np.array_equal(getattr(rel, key), getattr(other, key)), key
    assert rel.B is None
    _, _, _, _, reseeded = release_factory("random", seed=4)
    assert not np.array_equal(rel.Y_train, reseeded.Y_train)


def test_random_release_utility_at_chance_and_no_advantage(digits_inputs):  # noqa: F811
    free, params = run_cell(digits_inputs, mechanism="random")
    real, _ = run_cell(digits_inputs, mechanism="dc", r=100)
    mf, mr = free["evaluate"].metrics, real["evaluate"].metrics
    assert abs(mf["utility_balanced_accuracy"] - 0.1) < 0.06  # 10 digit classes
    assert mr["utility_balanced_accuracy"] > mf["utility_balanced_accuracy"] + 0.5
    assert mf["privacy_linkage_max_advantage"] < 0.02
    assert mf["privacy_relative_error_min_advantage"] < 0.02
    # the exact inversion of noise-free DC: advantage 1 for both metrics
    assert mr["privacy_linkage_max_advantage"] == 1.0
    assert mr["privacy_relative_error_min_advantage"] == pytest.approx(1.0, abs=1e-9)
    assert is_data_free(F.DATA_FREE, params.model_dump())


def test_control_attack_never_sees_the_uploads(digits_inputs):  # noqa: F811
    outs, params = run_cell(digits_inputs, v=1.0, r=100)
    feed = {**digits_inputs, **{s: o.saved_arrays() for s, o in outs.items() if s != "evaluate"}}
    noised = dict(feed["release"])
    rng = np.random.default_rng(2)
    for key in ("Y_train", "B"):
        noised[key] = rng.normal(size=noised[key].shape)
    att = F.attack({**feed, "release": noised}, params, 0).arrays
    assert np.array_equal(att["control_reconstructions"], feed["attack"]["control_reconstructions"])
    assert not np.array_equal(att["recon__op"], feed["attack"]["recon__op"])
    m = outs["evaluate"].metrics
    again = F.evaluate({**feed, "attack": att}, params, 0).metrics
    for key in ("privacy_linkage_max_control", "privacy_relative_error_min_control"):
        assert again[key] == m[key]
    assert m["privacy_relative_error_min_control"] > 0.99  # a constant guess explains no variance
    expected = (m["privacy_linkage_max"] - m["privacy_linkage_max_control"]) / (1 - m["privacy_linkage_max_control"])
    assert m["privacy_linkage_max_advantage"] == pytest.approx(expected)


def test_control_guesses_the_colluders_mean_and_random_takes_no_noise():
    x = np.arange(6, dtype=float).reshape(3, 2)
    assert np.allclose(F.control_reconstruction(x, 4), [[2.0, 3.0]] * 4)
    with pytest.raises(ValidationError, match="colluder_records"):
        F.control_reconstruction(np.zeros((0, 2)), 1)
    with pytest.raises(ValueError, match="sigma"):
        F.Params(mechanism="random", sigma=1.0)
    with pytest.raises(ValidationError, match="sigma: the data-free"):
        GDPMechanism("random", sigma=1.0).release(x, np.zeros(3, dtype=np.int64), x, np.zeros(3, dtype=np.int64), 0)
