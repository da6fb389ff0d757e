"""Party allocation (spec §1.1): the dataset partition, or a seeded re-allocation into K parties."""

from __future__ import annotations

import numpy as np
import pytest

from veilbench.dc.parties import allocate_parties
from veilbench.validation import ValidationError

CANDIDATES = np.setdiff1d(np.arange(100), [3, 17, 42])  # records left after removing anchor sources
DATASET_PARTY = np.arange(100) % 4


@pytest.mark.parametrize("k", [1, 2, 5, 8])
def test_reallocation_gives_k_disjoint_parties_of_n_candidates(k):
    parts = allocate_parties(CANDIDATES, DATASET_PARTY, n_parties=k, n_per_party=9, seed=0)
    assert len(parts) == k
    assert all(p.size == 9 and np.all(np.diff(p) > 0) for p in parts)
    union = np.concatenate(parts)
    assert np.unique(union).size == union.size
    assert np.isin(union, CANDIDATES).all()


def test_reallocation_is_seeded_and_nested_over_k():
    small = allocate_parties(CANDIDATES, DATASET_PARTY, 2, 10, seed=5)
    large = allocate_parties(CANDIDATES, DATASET_PARTY, 6, 10, seed=5)
    again = allocate_parties(CANDIDATES, DATASET_PARTY, 6, 10, seed=5)
    other = allocate_parties(CANDIDATES, DATASET_PARTY, 6, 10, seed=6)
    for a, b in zip(small, large[:2], strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(large, again, strict=True):
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(a, b) for a, b in zip(large, other, strict=True))


def test_reallocation_without_n_deals_every_candidate():
    parts = allocate_parties(CANDIDATES, DATASET_PARTY, n_parties=7, n_per_party=None, seed=1)
    sizes = [p.size for p in parts]
    assert sum(sizes) == CANDIDATES.size and max(sizes) - min(sizes) <= 1
    np.testing.assert_array_equal(np.sort(np.concatenate(parts)), CANDIDATES)


def test_dataset_partition_is_kept_when_k_is_none():
    parts = allocate_parties(CANDIDATES, DATASET_PARTY, n_parties=None, n_per_party=None, seed=0)
    assert len(parts) == 4
    for k, p in enumerate(parts):
        assert np.all(DATASET_PARTY[p] == k)
        assert p.size == np.sum(DATASET_PARTY[CANDIDATES] == k)


@pytest.mark.parametrize(
    ("k", "n", "field"),
    [(20, 5, "n_parties"), (0, 5, "n_parties"), (None, 30, "n_per_party")],
)
def test_too_many_records_requested_names_the_field(k, n, field):
    with pytest.raises(ValidationError, match=field):
        allocate_parties(CANDIDATES, DATASET_PARTY, n_parties=k, n_per_party=n, seed=0)
