r"""Verification (same / different) metrics from similarity scores of labelled pairs.

A verification problem is a set of pairs with score :math:`s_k` (higher = more similar) and a
flag :math:`g_k` (genuine = same identity/class). Decisions accept a pair when its score passes a
threshold τ, either *strictly* (``s > τ``) or *non-strictly* (``s ≥ τ``); the two conventions only
differ on ties, which matter once a release clips scores onto the endpoint 1 (ScoreShield spec
§4.4, §5.1.1). Definitions:

* FAR(τ) = #{impostor accepted}/#impostors, TAR(τ) = #{genuine accepted}/#genuines;
* TAR@FAR=α: the largest TAR over thresholds τ ∈ [−1, 1] with FAR(τ) ≤ α; when no such τ exists
  (non-strict rule with more than α of the impostors tied at the top) the target is *infeasible*
  and TAR is reported as 0 (spec §8 convention);
* ROC AUC = P(s_gen > s_imp) + ½ P(s_gen = s_imp) (Mann–Whitney, ties count one half);
* EER: the error rate where FAR = 1 − TAR on the ROC curve, linearly interpolated.

These functions are generic: any family scoring labelled pairs can use them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from veilbench.validation import ValidationError, check_array, check_in_range, check_labels


def pair_scores(
    scores: np.ndarray, row_labels: np.ndarray, col_labels: np.ndarray, *, exclude_diagonal: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Flatten a score matrix into pair scores and genuine flags.

    Parameters
    ----------
    scores : (q, n) array, ``scores[i, j]`` the similarity of row item i and column item j.
    row_labels : (q,) int labels; col_labels : (n,) int labels.
    exclude_diagonal : keep only pairs i < j (for a symmetric Gram of one collection, q = n).

    Returns ``(s, genuine)``, both 1-d of the same length: ``genuine[k]`` is True when the pair's
    labels agree.
    """
    s = check_array(scores, "scores", ndim=2)
    yr = check_labels(row_labels, "row_labels", n=s.shape[0])
    yc = check_labels(col_labels, "col_labels", n=s.shape[1])
    same = yr[:, None] == yc[None, :]
    if exclude_diagonal:
        if s.shape[0] != s.shape[1]:
            raise ValidationError(f"scores: exclude_diagonal needs a square matrix, got shape {s.shape}")
        iu = np.triu_indices(s.shape[0], k=1)
        return s[iu], same[iu]
    return s.ravel(), same.ravel()


def _split(scores: np.ndarray, genuine: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = check_array(scores, "scores", ndim=1)
    g = np.asarray(genuine)
    if g.shape != s.shape or g.dtype != bool:
        raise ValidationError(f"genuine: expected a boolean array of shape {s.shape}, got {g.dtype} {g.shape}")
    if g.all() or not g.any():
        raise ValidationError("genuine: need at least one genuine and one impostor pair")
    return s[g], s[~g]


def accuracy_at_threshold(
    scores: np.ndarray, genuine: np.ndarray, threshold: float, strict: bool = True, balanced: bool = False
) -> float:
    """Accuracy of "accept iff s > τ" (``strict``) or "s ≥ τ" over all pairs.

    With ``balanced`` the mean of TAR and 1 − FAR instead (insensitive to the usual surplus of
    impostor pairs).
    """
    gen, imp = _split(scores, genuine)
    tau = check_in_range(threshold, "threshold")
    acc_gen = np.sum(gen > tau) if strict else np.sum(gen >= tau)
    rej_imp = np.sum(imp <= tau) if strict else np.sum(imp < tau)
    if balanced:
        return float((acc_gen / gen.size + rej_imp / imp.size) / 2.0)
    return float((acc_gen + rej_imp) / (gen.size + imp.size))


def roc_auc(scores: np.ndarray, genuine: np.ndarray) -> float:
    """Mann–Whitney AUC = P(s_gen > s_imp) + ½ P(s_gen = s_imp) (:func:`veilbench.metrics.anomaly.roc_auc`
    with genuine pairs as the positive class)."""
    from veilbench.metrics.anomaly import roc_auc as _roc_auc

    gen, imp = _split(scores, genuine)
    labels = np.r_[np.ones(gen.size, dtype=np.int64), np.zeros(imp.size, dtype=np.int64)]
    return _roc_auc(np.concatenate([gen, imp]), labels)


def roc_curve_points(scores: np.ndarray, genuine: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(FAR, TAR) at every distinct threshold of the rule "accept iff s ≥ τ", from (0,0) to (1,1)."""
    gen, imp = _split(scores, genuine)
    thresholds = np.unique(np.concatenate([gen, imp]))[::-1]
    gen_s, imp_s = np.sort(gen), np.sort(imp)
    tar = (gen.size - np.searchsorted(gen_s, thresholds, side="left")) / gen.size
    far = (imp.size - np.searchsorted(imp_s, thresholds, side="left")) / imp.size
    return np.concatenate([[0.0], far]), np.concatenate([[0.0], tar])


def equal_error_rate(scores: np.ndarray, genuine: np.ndarray) -> float:
    """EER: the FAR (= 1 − TAR) where the ROC crosses the anti-diagonal, linearly interpolated."""
    far, tar = roc_curve_points(scores, genuine)
    frr = 1.0 - tar
    diff = far - frr  # increases from −1 to +1 along the curve
    k = int(np.argmax(diff >= 0))
    if diff[k] == 0 or k == 0:
        return float(far[k])
    t = -diff[k - 1] / (diff[k] - diff[k - 1])
    return float(far[k - 1] + t * (far[k] - far[k - 1]))


@dataclass(frozen=True)
class TarAtFar:
    """TAR at a target FAR: the rate, the threshold used and whether the target was feasible."""

    tar: float
    far: float
    threshold: float
    feasible: bool


def tar_at_far(
    scores: np.ndarray, genuine: np.ndarray, target_far: float, strict: bool = True, upper: float = 1.0
) -> TarAtFar:
    """Largest TAR over thresholds τ ≤ ``upper`` with FAR(τ) ≤ ``target_far``, under one endpoint rule.

    ``upper`` is the top of the score range (1 for cosines and clipped releases, ``np.inf`` for
    unbounded noisy scores). With k = ⌊α · N_imp⌋ impostors allowed and v the (k+1)-th largest
    impostor score:

    * strict ("s > τ"): τ = v accepts at most k impostors; at v = ``upper`` nothing is accepted
      (TAR 0 but feasible: the paper's "0.00" cells); v > ``upper`` is infeasible;
    * non-strict ("s ≥ τ"): any τ ∈ (v, upper] works, the best being the smallest score above v;
      when v ≥ ``upper`` (more than k impostors tied at the top) no τ is feasible.

    Infeasible targets report TAR = 0 with ``feasible=False`` (spec §8 convention).
    """
    gen, imp = _split(scores, genuine)
    alpha = check_in_range(target_far, "target_far", 0.0, 1.0)
    top = check_in_range(upper, "upper", -1.0, None)
    k = int(np.floor(alpha * imp.size + 1e-9))
    if k >= imp.size:
        return TarAtFar(1.0, 1.0, -np.inf, True)
    v = float(np.sort(imp)[::-1][k])
    if v > top or (not strict and v >= top):
        return TarAtFar(0.0, 0.0, v, False)
    if strict:
        return TarAtFar(float(np.mean(gen > v)), float(np.mean(imp > v)), v, True)
    above = np.concatenate([gen[gen > v], imp[imp > v]])
    tau = min(float(above.min()), top) if above.size else top
    return TarAtFar(float(np.mean(gen >= tau)), float(np.mean(imp >= tau)), tau, True)
