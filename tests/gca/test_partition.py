"""IID and Dirichlet long-tail partitions (spec §1.2–§1.3)."""

import numpy as np
import pytest

from veilbench.gca.partition import dirichlet_longtail_partition, iid_partition, longtail_quotas
from veilbench.validation import ValidationError


def test_iid_near_equal_and_seeded():
    lab = iid_partition(103, 5, seed=1)
    sizes = np.bincount(lab)
    assert sizes.sum() == 103 and sizes.max() - sizes.min() <= 1
    assert np.array_equal(lab, iid_partition(103, 5, seed=1))
    assert not np.array_equal(lab, iid_partition(103, 5, seed=2))


def test_longtail_quotas_sum_and_ratio():
    q = longtail_quotas(1000, 10, 10.0, np.random.default_rng(0))
    assert q.sum() == 1000
    assert q.max() / q.min() == pytest.approx(10.0, rel=0.05)


def test_dirichlet_partition_nonempty_longtail_and_skewed():
    rng = np.random.default_rng(0)
    desc = np.vstack([rng.normal(m, 0.2, (100, 3)) for m in range(6)])
    lab = dirichlet_longtail_partition(desc, 5, seed=3)
    sizes = np.bincount(lab, minlength=5)
    assert sizes.sum() == 600 and sizes.min() >= 5
    assert 5 <= sizes.max() / sizes.min() <= 12
    # non-IID: the client mix of the six blobs is far from uniform
    mix = np.array([np.bincount(lab[i * 100:(i + 1) * 100], minlength=5) for i in range(6)]) / 100.0
    assert np.abs(mix - sizes / 600).max() > 0.3
    assert np.array_equal(lab, dirichlet_longtail_partition(desc, 5, seed=3))


@pytest.mark.parametrize(
    "call,field",
    [
        (lambda: iid_partition(3, 4, 0), "n_clients"),
        (lambda: dirichlet_longtail_partition(np.zeros((10, 2)), 2, 0, alpha=0.0), "alpha"),
        (lambda: dirichlet_longtail_partition(np.zeros((10, 2)), 2, 0, ratio=0.5), "ratio"),
    ],
)
def test_bad_input_names_field(call, field):
    with pytest.raises(ValidationError, match=field):
        call()
