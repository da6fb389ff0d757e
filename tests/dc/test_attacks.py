"""Reconstruction attacks from leaked anchor pairs (spec §5)."""

from __future__ import annotations

import numpy as np
import pytest

from veilbench.dc.attacks import LRAttack, MLPAttack, PINVAttack, make_attack


@pytest.fixture(scope="module")
def linear_setup():
    rng = np.random.default_rng(0)
    d = 6
    leaked = rng.normal(size=(25, d))
    private = rng.normal(size=(15, d))
    shift = rng.normal(size=d)
    return rng, leaked, private, shift


@pytest.mark.parametrize("attack", [LRAttack, PINVAttack])
def test_invertible_linear_obfuscation_is_inverted_exactly(linear_setup, attack):
    rng, leaked, private, shift = linear_setup
    f0 = rng.normal(size=(6, 6))
    obf = lambda x: (x - shift) @ f0  # noqa: E731 - affine obfuscation, as PCA's x ↦ (x − μ)V
    att = attack().fit(obf(leaked), leaked)
    np.testing.assert_allclose(att.reconstruct(obf(private)), private, atol=1e-8)


def test_pinv_recovers_a_dimension_reducing_linear_map(linear_setup):
    rng, leaked, private, shift = linear_setup
    f0 = rng.normal(size=(6, 3))
    att = PINVAttack().fit((leaked - shift) @ f0, leaked)
    np.testing.assert_allclose(att.forward_, f0, atol=1e-10)
    # reconstructions are exact on the part of x that f0 keeps (the row space of f0ᵀ)
    proj = f0 @ np.linalg.pinv(f0)
    rec = att.reconstruct((private - shift) @ f0)
    np.testing.assert_allclose((rec - leaked.mean(0)) @ proj, (private - leaked.mean(0)) @ proj, atol=1e-8)


def test_too_few_pairs_do_not_recover_the_map(linear_setup):
    rng, leaked, private, shift = linear_setup
    f0 = rng.normal(size=(6, 6))
    att = LRAttack().fit((leaked[:4] - shift) @ f0, leaked[:4])
    assert not np.allclose(att.reconstruct((private - shift) @ f0), private, atol=1e-3)


def test_mlp_beats_the_mean_guess_on_a_linear_map(linear_setup):
    rng, _, _, _ = linear_setup
    f0 = rng.normal(size=(6, 4))
    x = rng.normal(size=(300, 6))
    att = MLPAttack(hidden=32, max_iter=300, seed=0).fit(x[:250] @ f0, x[:250])
    rec = att.reconstruct(x[250:] @ f0)
    assert np.mean((rec - x[250:]) ** 2) < 0.7 * np.mean((x[250:] - x[:250].mean(0)) ** 2)
    np.testing.assert_allclose(make_attack("mlp", seed=0, hidden=32, max_iter=300).fit(x[:250] @ f0, x[:250])
                               .reconstruct(x[250:] @ f0), rec)
