"""Sensitivity formulas: worst-case neighbours attain them, random neighbours never exceed them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from veilbench.scoreshield.sensitivity import (
    gram_record_sensitivity,
    replace_row,
    vector_sensitivity,
    worst_case_gram_pair,
)
from veilbench.validation import ValidationError


def unit_rows(rng, n, d):
    x = rng.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_vector_worst_case_attains_two():
    rng = np.random.default_rng(0)
    x = unit_rows(rng, 6, 4)
    q = x[2]
    xp = replace_row(x, 2, -x[2])
    assert np.linalg.norm(x @ q - xp @ q) == pytest.approx(2.0) == vector_sensitivity()


def test_vector_random_neighbours_within_bound():
    rng = np.random.default_rng(1)
    for _ in range(200):
        x = unit_rows(rng, 5, 3)
        q = unit_rows(rng, 1, 3)[0]
        xp = replace_row(x, int(rng.integers(5)), unit_rows(rng, 1, 3)[0])
        assert np.linalg.norm(x @ q - xp @ q) <= vector_sensitivity() + 1e-12


def test_public_margin_and_joint_queries():
    assert vector_sensitivity(public_margin=0.3) == pytest.approx(1.3)
    assert vector_sensitivity(n_queries=9) == pytest.approx(6.0)
    # Scores restricted to [-m, 1]: the largest change between two admissible scores is 1 + m.
    m = 0.25
    assert 1.0 - (-m) == pytest.approx(vector_sensitivity(public_margin=m))


@pytest.mark.parametrize("n", [2, 3, 10, 50])
def test_gram_worst_case_attains_formula(n):
    x, xp = worst_case_gram_pair(n)
    diff = np.linalg.norm(x @ x.T - xp @ xp.T)
    assert diff == pytest.approx(2.0 * math.sqrt(2.0 * (n - 1))) == pytest.approx(gram_record_sensitivity(n))


def test_gram_brute_force_row_replacement_within_bound():
    rng = np.random.default_rng(2)
    n, d = 12, 3
    worst = 0.0
    for _ in range(300):
        x = unit_rows(rng, n, d)
        i = int(rng.integers(n))
        # Adversarial-ish candidates: random, the flipped row, and the flipped mean direction.
        mean = x.sum(0) / np.linalg.norm(x.sum(0))
        for new in (unit_rows(rng, 1, d)[0], -x[i], -mean):
            xp = replace_row(x, i, new)
            dg = x @ x.T - xp @ xp.T
            assert np.allclose(np.diag(dg), 0.0)
            worst = max(worst, float(np.linalg.norm(dg)))
    assert worst <= gram_record_sensitivity(n) + 1e-9
    assert worst > 0.5 * gram_record_sensitivity(n)


@pytest.mark.parametrize(("call", "field"), [
    (lambda: gram_record_sensitivity(1), "n"),
    (lambda: vector_sensitivity(public_margin=1.5), "public_margin"),
    (lambda: vector_sensitivity(n_queries=0), "n_queries"),
    (lambda: replace_row(np.ones((3, 2)), 0, np.array([1.0, 0.0])), "x"),
    (lambda: replace_row(np.eye(3), 0, np.array([1.0, 1.0, 0.0])), "new_row"),
    (lambda: replace_row(np.eye(3), 5, np.array([1.0, 0.0, 0.0])), "i"),
])
def test_bad_inputs(call, field):
    with pytest.raises(ValidationError, match=field):
        call()
