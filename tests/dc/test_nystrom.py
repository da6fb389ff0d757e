"""Nyström NKI converges to exact NKI as its rank grows (issue 5 "Large anchors")."""

from __future__ import annotations

import numpy as np
import pytest

from veilbench.dc.kernel import NKI
from veilbench.dc.linear import orth
from veilbench.dc.nystrom import NystromNKI


def min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine of the largest principal angle between Col(a) and Col(b) (1 = same subspace)."""
    return float(np.linalg.svd(orth(a).T @ orth(b), compute_uv=False).min())


@pytest.fixture(scope="module")
def reps():
    rng = np.random.default_rng(0)
    base = rng.normal(size=(120, 8))
    return [base @ rng.normal(size=(8, 5)) + 0.3 * rng.normal(size=(120, 5)) for _ in range(3)]


@pytest.mark.parametrize("center", [False, True])
def test_nystrom_converges_to_exact_nki(reps, center):
    exact = NKI(gamma=0.1, center=center).fit(reps)
    x_new = reps[1][:30] + 0.1
    cosines = []
    for rank in (10, 60, 110):
        approx = NystromNKI(rank=rank, gamma=0.1, center=center, seed=1).fit(reps)
        cosines.append(min_cosine(approx.transform(x_new, 1), exact.transform(x_new, 1)))
    assert cosines[0] < cosines[1] < cosines[2]
    full = NystromNKI(rank=120, gamma=0.1, center=center, seed=1).fit(reps)
    assert min_cosine(full.Z_, exact.Z_) > 1 - 1e-9
    # with every anchor a landmark the features equal exact NKI's up to a rotation of Z
    rotation = np.linalg.lstsq(full.Z_, exact.Z_, rcond=None)[0]
    np.testing.assert_allclose(full.transform(x_new, 1) @ rotation, exact.transform(x_new, 1), atol=1e-7)
    if center:
        np.testing.assert_allclose(full.Z_.sum(axis=0), 0.0, atol=1e-10)
