"""Re-dealing training records to participants and the public-PCA feature dimension (cell options)."""

from __future__ import annotations

import numpy as np
import pytest

from veilbench.anchornoise.participants import assign_participants, reduce_dimension
from veilbench.validation import ValidationError


def rng(seed=0):
    return np.random.default_rng(seed)


def test_redeal_is_balanced_seeded_and_ascending():
    party = np.repeat([7, 8], 50)  # prepare's two parties are ignored when n_participants is set
    rows, holder = assign_participants(party, rng(0), n_participants=3)
    assert np.array_equal(rows, np.arange(100))  # every record used, ascending
    assert np.bincount(holder).tolist() in ([34, 33, 33],)
    again = assign_participants(party, rng(0), n_participants=3)
    other = assign_participants(party, rng(1), n_participants=3)
    assert np.array_equal(again[1], holder) and not np.array_equal(other[1], holder)
    # holders are not the prepare parties (a random re-deal mixes them)
    assert {tuple(np.unique(party[holder == i])) for i in range(3)} == {(7, 8)}


def test_fixed_records_per_participant():
    party = np.arange(120) % 4
    rows, holder = assign_participants(party, rng(0), n_participants=5, records_per_participant=20)
    assert rows.size == 100 and np.unique(rows).size == 100 and np.all(np.diff(rows) > 0)
    assert np.bincount(holder).tolist() == [20] * 5
    # without a re-deal, n_i records are kept inside each prepare party
    rows, holder = assign_participants(party, rng(0), records_per_participant=10)
    assert np.bincount(holder).tolist() == [10] * 4
    assert np.array_equal(party[rows], holder)


def test_default_keeps_prepare_parties():
    party = np.array([5, 3, 3, 9, 5])
    rows, holder = assign_participants(party, rng(0))
    assert np.array_equal(rows, np.arange(5)) and holder.tolist() == [1, 0, 0, 2, 1]


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(n_participants=5, records_per_participant=30), "n_participants"),
        (dict(n_participants=200), "n_participants"),
        (dict(records_per_participant=26), "records_per_participant"),
    ],
)
def test_too_few_records(kwargs, field):
    with pytest.raises(ValidationError, match=rf"^{field}:.*got"):
        assign_participants(np.arange(100) % 4, rng(0), **kwargs)


def test_reduce_dimension_keeps_the_top_principal_axes():
    g = rng(3)
    Z = g.normal(size=(80, 6)) * np.array([5.0, 4.0, 3.0, 0.3, 0.2, 0.1]) + 2.0
    Zt = g.normal(size=(10, 6))
    z, zt = reduce_dimension(Z, Zt, 3)
    assert z.shape == (80, 3) and zt.shape == (10, 3)
    cov = np.cov(z, rowvar=False)
    assert np.allclose(cov, np.diag(np.diag(cov)), atol=1e-10)  # uncorrelated axes
    top = np.sort(np.linalg.eigvalsh(np.cov(Z, rowvar=False)))[::-1][:3]
    assert np.allclose(np.sort(np.diag(cov))[::-1], top)  # the top-3 variances are kept
    assert np.allclose(z.mean(axis=0), 0.0, atol=1e-12)
    same, same_t = reduce_dimension(Z, Zt, 6)
    assert same is not None and np.array_equal(same, Z) and np.array_equal(same_t, Zt)  # p ≤ max_dim: as is
    with pytest.raises(ValidationError, match=r"^max_dim:.*got 5"):
        reduce_dimension(Z[:4], Zt, 5)
