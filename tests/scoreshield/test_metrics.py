"""Shared verification, retrieval and clustering metrics against brute force and scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest

from veilbench.metrics.clustering import clustering_agreement, spectral_clustering_from_gram
from veilbench.metrics.retrieval import mean_average_precision, rank_items, recall_at_k, thresholded_topk
from veilbench.metrics.verification import (
    accuracy_at_threshold,
    equal_error_rate,
    pair_scores,
    roc_auc,
    tar_at_far,
)
from veilbench.validation import ValidationError


def scored_pairs(seed, n=400, shift=1.0, rounding=None):
    rng = np.random.default_rng(seed)
    genuine = rng.random(n) < 0.3
    s = rng.standard_normal(n) + shift * genuine
    if rounding is not None:
        s = np.round(s, rounding)
    return s, genuine


@pytest.mark.parametrize("rounding", [None, 1])
def test_auc_matches_sklearn_with_ties(rounding):
    from sklearn.metrics import roc_auc_score

    for seed in range(5):
        s, g = scored_pairs(seed, rounding=rounding)
        assert roc_auc(s, g) == pytest.approx(roc_auc_score(g, s), abs=1e-12)


def test_eer_limits_and_sklearn_curve():
    from sklearn.metrics import roc_curve

    s = np.array([0.1, 0.2, 0.3, 0.8, 0.9])
    g = np.array([False, False, False, True, True])
    assert equal_error_rate(s, g) == 0.0
    s, g = scored_pairs(0, n=4000, shift=0.0)
    assert equal_error_rate(s, g) == pytest.approx(0.5, abs=0.05)
    s, g = scored_pairs(1, n=4000, shift=2.0)
    fpr, tpr, _ = roc_curve(g, s)
    k = np.argmin(np.abs(fpr - (1 - tpr)))
    assert equal_error_rate(s, g) == pytest.approx(fpr[k], abs=0.01)


def brute_tar(s, g, far, strict, upper=np.inf):
    best, feasible = 0.0, False
    cands = np.unique(np.concatenate([s, [upper]]))
    cands = cands[cands <= upper]
    for t in cands:
        acc = s > t if strict else s >= t
        if np.mean(acc[~g]) <= far:
            feasible = True
            best = max(best, float(np.mean(acc[g])))
    if not strict:  # τ just above a score value
        for t in cands:
            t2 = np.nextafter(t, np.inf)
            if t2 <= upper and np.mean(s[~g] >= t2) <= far:
                feasible = True
                best = max(best, float(np.mean(s[g] >= t2)))
    return best, feasible


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("far", [0.0, 0.01, 0.1, 0.5])
def test_tar_at_far_matches_brute_force(strict, far):
    for seed in range(3):
        s, g = scored_pairs(seed, n=300, rounding=1)
        s = np.clip(s / 3, -1, 1)
        res = tar_at_far(s, g, far, strict=strict)
        tar, feasible = brute_tar(s, g, far, strict, upper=1.0)
        assert res.tar == pytest.approx(tar) and res.feasible == feasible
        assert res.far <= far + 1e-12


def test_tar_at_far_endpoint_semantics_with_clipped_impostors():
    """30% of impostors clipped to 1: FAR 0.1 is infeasible for "≥", TAR 0 (feasible) for ">"."""
    imp = np.concatenate([np.ones(30), np.linspace(-1, 0.5, 70)])
    gen = np.concatenate([np.ones(50), np.linspace(0, 0.9, 50)])
    s = np.concatenate([gen, imp])
    g = np.arange(s.size) < gen.size
    strict, nonstrict = tar_at_far(s, g, 0.1, strict=True), tar_at_far(s, g, 0.1, strict=False)
    assert strict.feasible and strict.tar == 0.0
    assert not nonstrict.feasible and nonstrict.tar == 0.0
    both = [tar_at_far(s, g, 0.5, strict=b) for b in (True, False)]
    assert both[0].tar == both[1].tar > 0.5
    # Unbounded (unclipped) scores: the top of the range is not an endpoint.
    assert tar_at_far(s + 0.5, g, 0.1, strict=True, upper=np.inf).feasible


def test_accuracy_at_threshold_strict_and_balanced():
    s = np.array([0.5, 0.7, 0.5, 0.1, 0.2, 0.3])
    g = np.array([True, True, False, False, False, False])
    assert accuracy_at_threshold(s, g, 0.5, strict=True) == pytest.approx(5 / 6)
    assert accuracy_at_threshold(s, g, 0.5, strict=False) == pytest.approx(5 / 6)
    assert accuracy_at_threshold(s, g, 0.4, strict=True) == pytest.approx(5 / 6)
    assert accuracy_at_threshold(s, g, 0.6, balanced=True) == pytest.approx((0.5 + 1.0) / 2)


def test_pair_scores_shapes():
    s = np.arange(9.0).reshape(3, 3)
    flat, gen = pair_scores(s, np.array([0, 0, 1]), np.array([0, 0, 1]), exclude_diagonal=True)
    assert flat.tolist() == [1.0, 2.0, 5.0] and gen.tolist() == [True, False, False]
    flat, gen = pair_scores(s[:2], np.array([0, 1]), np.array([0, 1, 1]))
    assert flat.size == 6 and gen.sum() == 3


def test_rank_items_tiebreaks():
    s = np.array([[0.5, 1.0, 1.0, 1.0, 0.2]])
    assert rank_items(s, tiebreak="index")[0].tolist() == [1, 2, 3, 0, 4]
    firsts = [rank_items(s, seed=k)[0, 0] for k in range(600)]
    counts = np.bincount(firsts, minlength=5)
    assert counts[0] == counts[4] == 0 and counts[1:4].min() > 150  # uniform over the tied items
    assert np.array_equal(rank_items(s, seed=3), rank_items(s, seed=3))
    g = np.array([[1.0, 0.2, 0.9], [0.2, 1.0, 0.1], [0.9, 0.1, 1.0]])
    assert rank_items(g, seed=0, exclude_self=True).tolist() == [[2, 1], [0, 2], [0, 1]]


def test_thresholded_topk_pads():
    s = np.array([[0.9, 0.1, 0.5], [0.0, 0.2, 0.1]])
    r = rank_items(s, tiebreak="index")
    assert thresholded_topk(s, r, 2, threshold=0.4).tolist() == [[0, 2], [-1, -1]]
    assert thresholded_topk(s, r, 2).tolist() == [[0, 2], [1, 2]]


def test_recall_and_map_against_brute_force():
    from sklearn.metrics import average_precision_score

    rng = np.random.default_rng(0)
    s = rng.random((20, 30))
    yq, yi = rng.integers(3, size=20), rng.integers(3, size=30)
    r = rank_items(s, seed=0)
    aps = [average_precision_score(yi == yq[i], s[i]) for i in range(20)]
    assert mean_average_precision(r, yq, yi) == pytest.approx(np.mean(aps))
    top = thresholded_topk(s, r, 3)
    brute = np.mean([np.any(yi[np.argsort(-s[i])[:3]] == yq[i]) for i in range(20)])
    assert recall_at_k(top, yq, yi) == pytest.approx(brute)


def test_spectral_clustering_recovers_blocks():
    y = np.repeat([0, 1, 2], 10)
    g = np.where(y[:, None] == y[None, :], 0.9, -0.3)
    np.fill_diagonal(g, 1.0)
    pred = spectral_clustering_from_gram(g, 3, seed=0)
    assert clustering_agreement(y, pred) == {"nmi": pytest.approx(1.0), "ari": pytest.approx(1.0)}
    shuffled = np.random.default_rng(0).permutation(y)
    assert clustering_agreement(y, shuffled)["ari"] < 0.2


@pytest.mark.parametrize(("call", "field"), [
    (lambda: roc_auc(np.ones(3), np.array([True, True, True])), "genuine"),
    (lambda: roc_auc(np.array([1.0, np.nan]), np.array([True, False])), "scores"),
    (lambda: tar_at_far(np.ones(2), np.array([True, False]), 1.5), "target_far"),
    (lambda: rank_items(np.ones((2, 2)), tiebreak="name"), "tiebreak"),
    (lambda: thresholded_topk(np.ones((2, 3)), np.zeros((2, 3), int), 4), "k"),
    (lambda: spectral_clustering_from_gram(np.eye(3), 5), "n_clusters"),
    (lambda: spectral_clustering_from_gram(np.eye(3), 2, transform="exp"), "transform"),
    (lambda: pair_scores(np.ones((2, 3)), [0, 1], [0, 1, 1], exclude_diagonal=True), "scores"),
])
def test_bad_inputs(call, field):
    with pytest.raises(ValidationError, match=field):
        call()
