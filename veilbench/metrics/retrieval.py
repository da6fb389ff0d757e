r"""Ranking and retrieval metrics from a score matrix, with an explicit tie-break.

For a query i with scores :math:`s_{ij}` over n gallery items, the ranking orders j by
decreasing score. Ties are broken by a *seeded random* key (``tiebreak="random"``) or by the
smaller index (``"index"``, the paper's rule, whose pitfall is that clipped releases produce
many exact ties at 1 and the top-k then follows index order; ScoreShield spec §3.2, §8).

Metrics, with rel_ij = 1 when item j is relevant to query i (same label):

* Recall@K (hit rate, spec §5.3.2): the fraction of queries with at least one relevant item in
  their top K;
* average precision AP_i = (1/R_i) Σ_r P@r · rel_{i,π_i(r)} over the full ranking π_i with
  R_i relevant items; mAP averages AP_i over queries with R_i > 0.

Thresholded top-k (spec §3.2): only items with score ≥ τ are eligible, the top
min(k, #eligible) are returned and the rest of the row is padded with −1.
"""

from __future__ import annotations

import numpy as np

from veilbench.random import as_rng
from veilbench.validation import ValidationError, check_array, check_labels


def rank_items(
    scores: np.ndarray,
    seed: int | np.random.Generator | None = 0,
    tiebreak: str = "random",
    exclude_self: bool = False,
) -> np.ndarray:
    """Per-row ranking of columns by decreasing score.

    Parameters
    ----------
    scores : (q, n) array.
    seed : seed of the random tie-break key (ignored for ``tiebreak="index"``).
    tiebreak : ``"random"`` (one uniform key per entry) or ``"index"`` (smaller column first).
    exclude_self : for a square Gram, drop item i from row i's ranking (result (q, n − 1)).

    Returns an int64 (q, n) (or (q, n − 1)) array of column indices, best first.
    """
    s = check_array(scores, "scores", ndim=2)
    if tiebreak == "random":
        key = as_rng(seed, "retrieval.tiebreak").random(s.shape)
    elif tiebreak == "index":
        key = np.broadcast_to(np.arange(s.shape[1], dtype=float), s.shape)
    else:
        raise ValidationError(f"tiebreak: must be one of ['index', 'random'], got {tiebreak!r}")
    order = np.lexsort((key, -s), axis=1)
    if not exclude_self:
        return order
    if s.shape[0] != s.shape[1]:
        raise ValidationError(f"scores: exclude_self needs a square matrix, got shape {s.shape}")
    keep = order != np.arange(s.shape[0])[:, None]
    return order[keep].reshape(s.shape[0], s.shape[1] - 1)


def thresholded_topk(scores: np.ndarray, ranking: np.ndarray, k: int, threshold: float | None = None) -> np.ndarray:
    """First ``k`` columns of ``ranking`` whose score is ≥ ``threshold`` (all if None); −1 pads.

    scores : (q, n); ranking : (q, m) from :func:`rank_items`. Returns int64 (q, k).
    """
    s = check_array(scores, "scores", ndim=2)
    r = np.asarray(ranking)
    if r.ndim != 2 or r.shape[0] != s.shape[0] or r.dtype.kind not in "iu":
        raise ValidationError(f"ranking: expected an integer array with {s.shape[0]} rows, got {r.dtype} {r.shape}")
    if not 1 <= k <= r.shape[1]:
        raise ValidationError(f"k: must lie in [1, {r.shape[1]}], got {k}")
    top = r[:, :k].astype(np.int64)
    if threshold is not None:
        eligible = np.take_along_axis(s, top, axis=1) >= threshold
        top = np.where(eligible, top, -1)
    return top


def _relevance(ranking: np.ndarray, query_labels: np.ndarray, item_labels: np.ndarray) -> np.ndarray:
    r = np.asarray(ranking)
    yq = check_labels(query_labels, "query_labels", n=r.shape[0])
    yi = check_labels(item_labels, "item_labels")
    if r.size and (r.max() >= yi.size):
        raise ValidationError(f"ranking: indices must be < {yi.size} (number of item labels)")
    valid = r >= 0
    return valid & (yi[np.where(valid, r, 0)] == yq[:, None])


def recall_at_k(topk: np.ndarray, query_labels: np.ndarray, item_labels: np.ndarray) -> float:
    """Hit rate: fraction of queries whose (q, K) ``topk`` holds ≥ 1 same-label item (−1 = empty)."""
    return float(np.mean(_relevance(topk, query_labels, item_labels).any(axis=1)))


def mean_average_precision(ranking: np.ndarray, query_labels: np.ndarray, item_labels: np.ndarray) -> float:
    """mAP over the full (q, m) ``ranking``; queries without relevant items are skipped."""
    rel = _relevance(ranking, query_labels, item_labels).astype(float)
    n_rel = rel.sum(axis=1)
    has = n_rel > 0
    if not has.any():
        raise ValidationError("query_labels: no query has a relevant item, mAP undefined")
    prec = np.cumsum(rel, axis=1) / np.arange(1, rel.shape[1] + 1)
    ap = (prec * rel).sum(axis=1)[has] / n_rel[has]
    return float(ap.mean())
