"""Anchor generation: SMOTE with k_nn clipping and single-source fallback, random anchors (spec §1.2, §9)."""

from __future__ import annotations

import numpy as np
import pytest

from veilbench.dc.anchors import random_anchor, select_sources, smote_anchor


def segment_distance(p: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    ab = b - a
    t = np.clip((p - a) @ ab / max(ab @ ab, 1e-300), 0.0, 1.0)
    return float(np.linalg.norm(p - (a + t * ab)))


def test_smote_rows_lie_on_same_class_segments_and_are_balanced():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 4)
    src = rng.normal(size=(12, 5)) + 5 * y[:, None]
    anchor = smote_anchor(src, y, n_anchor=30, k_nn=10, seed=1)
    np.testing.assert_array_equal(anchor.X[:12], src)  # the real sources are part of the anchor
    assert np.bincount(anchor.y).tolist() == [10, 10, 10]
    assert anchor.k_nn_used == {0: 3, 1: 3, 2: 3}  # clipped to n_c − 1
    for row, label in zip(anchor.X[12:], anchor.y[12:], strict=True):
        same = src[y == label]
        best = min(segment_distance(row, same[i], same[j]) for i in range(4) for j in range(4) if i != j)
        assert best < 1e-10


def test_smote_single_source_falls_back_to_jitter():
    y = np.arange(4)
    src = np.eye(4)
    anchor = smote_anchor(src, y, n_anchor=12, seed=0)
    assert anchor.fallback_classes == [0, 1, 2, 3]
    assert anchor.X.shape == (12, 4)
    assert np.bincount(anchor.y).tolist() == [3, 3, 3, 3]


def test_select_sources_is_class_balanced_and_seeded():
    y = np.repeat(np.arange(5), 20)
    idx = select_sources(y, 15, seed=3)
    assert np.bincount(y[idx]).tolist() == [3] * 5
    np.testing.assert_array_equal(idx, select_sources(y, 15, seed=3))


@pytest.mark.parametrize("kind", ["uniform", "minmax", "gaussian"])
def test_random_anchors_follow_the_data_statistics(kind):
    rng = np.random.default_rng(0)
    x = rng.uniform(size=(200, 3)) * np.array([1.0, 10.0, 100.0])
    anchor = random_anchor(kind, x, 4000, seed=1)
    assert anchor.X.shape == (4000, 3)
    assert np.all(anchor.y == -1)
    if kind == "minmax":
        assert np.all(anchor.X >= x.min(0)) and np.all(anchor.X <= x.max(0))
    if kind == "uniform":
        assert anchor.X.min() >= x.min() and anchor.X.max() <= x.max()
    if kind == "gaussian":
        np.testing.assert_allclose(anchor.X.mean(0), x.mean(0), rtol=0.1, atol=0.05 * x.std(0).max())
