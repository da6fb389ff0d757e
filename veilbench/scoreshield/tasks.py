"""Downstream task metrics shared by both ScoreShield regimes (spec §4.4, §5.3.2).

All read a released similarity matrix and labels and return ``{metric_name: value}`` with the
pipeline's metric names (``utility_*``), so the vector and Gram cells are directly comparable.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from veilbench.families.base import StageOutput

from veilbench.metrics.retrieval import mean_average_precision, recall_at_k
from veilbench.metrics.verification import accuracy_at_threshold, equal_error_rate, roc_auc, tar_at_far
from veilbench.privacy.audit import AuditResult
from veilbench.scoreshield.params import EPSILON_CAP, Params
from veilbench.validation import check_labels

FAR_TARGETS: tuple[float, ...] = (1e-2, 1e-3)


def far_tag(far: float) -> str:
    """1e-2 → ``"1e-2"`` (metric-name suffix)."""
    return f"{far:.0e}".replace("e-0", "e-")


def verification_metrics(scores: np.ndarray, genuine: np.ndarray, threshold: float, upper: float) -> dict[str, float]:
    """Accuracy and balanced accuracy at τ, ROC AUC, EER, TAR@FAR (strict and non-strict).

    scores, genuine : (P,) pair scores and same-label flags; ``upper`` is the top of the score
    range (1 for feasible releases, ∞ for unclipped noisy ones; see
    :func:`veilbench.metrics.verification.tar_at_far`).
    """
    out = {
        "utility_verification_accuracy": accuracy_at_threshold(scores, genuine, threshold),
        "utility_verification_balanced_accuracy": accuracy_at_threshold(scores, genuine, threshold, balanced=True),
        "utility_roc_auc": roc_auc(scores, genuine),
        "utility_eer": equal_error_rate(scores, genuine),
    }
    for far in FAR_TARGETS:
        for strict, tag in ((True, "strict"), (False, "nonstrict")):
            out[f"utility_tar_at_far_{far_tag(far)}_{tag}"] = tar_at_far(scores, genuine, far, strict, upper).tar
    return out


def retrieval_metrics(
    topk: np.ndarray, ranking: np.ndarray, query_labels: np.ndarray, item_labels: np.ndarray
) -> dict[str, float]:
    """Recall@k (hit rate), mAP and kNN top-1 accuracy (majority vote over the top k, ties →
    the label met first in rank order) from (q, k) ``topk`` and (q, m) ``ranking``."""
    yq = check_labels(query_labels, "query_labels", n=np.asarray(topk).shape[0])
    yi = check_labels(item_labels, "item_labels")
    hits = 0
    for row, y in zip(np.asarray(topk), yq, strict=True):
        labels = yi[row[row >= 0]]
        if labels.size:
            values, first, counts = np.unique(labels, return_index=True, return_counts=True)
            best = values[np.lexsort((first, -counts))[0]]
            hits += int(best == y)
    return {
        "utility_recall_at_k": recall_at_k(topk, yq, yi),
        "utility_map": mean_average_precision(ranking, yq, yi),
        "utility_knn_accuracy": hits / yq.size,
    }


def similarity_spearman(released: np.ndarray, clean: np.ndarray) -> float:
    """Spearman ρ between released and clean off-diagonal similarities (i < j) of two n × n Grams.

    A constant release carries no ordering and scores 0 (instead of an undefined ρ).
    """
    from scipy.stats import spearmanr

    iu = np.triu_indices(clean.shape[0], k=1)
    a, b = np.asarray(released)[iu], np.asarray(clean)[iu]
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return 0.0
    return float(spearmanr(a, b).statistic)


def audit_info(res: AuditResult) -> dict[str, object]:
    """JSON-able summary of an audit (threshold ``None`` when no region gave a bound)."""
    t = res.threshold if np.isfinite(res.threshold) else None
    out = {"threshold": t, "direction": res.direction, "tpr_lower": res.tpr_lower, "fpr_upper": res.fpr_upper,
           "n_samples": res.n_samples, "audit_alpha": res.alpha}
    if res.plan is not None:
        out.update(res.plan.as_dict())
    return out


def privacy_from_attack(attack_arrays: Mapping[str, np.ndarray]) -> dict[str, float]:
    """Copy the ``privacy_*`` scalars the attack stage saved as 1-element arrays."""
    return {k: float(np.asarray(v).ravel()[0]) for k, v in attack_arrays.items() if k.startswith("privacy_")}


def audit_output(lower: float, info: dict[str, Any], params: Params) -> StageOutput:
    """The ``attack`` stage's output of either regime from its audit: the ε lower bound ``lower``
    beside the claimed ε (spec §6), whether it exceeds it and, when the audit planned its run count,
    what that count can decide (:mod:`veilbench.privacy.audit`); saved as 1-element arrays too,
    which ``evaluate`` reads (:func:`privacy_from_attack`). A ``clean`` release separates the
    neighbours perfectly: its bound is ε = ∞, reported as :data:`EPSILON_CAP`."""
    if params.mechanism == "clean":
        info["note"] = (
            f"the unnoised release separates the neighbours perfectly: ε = ∞; the finite-sample audit "
            f"gave {lower:.3g}, reported as the cap {EPSILON_CAP:g}"
        )
        lower = EPSILON_CAP
    claimed = params.claimed_epsilon()
    info.setdefault("audit_alpha", params.audit_alpha)
    metrics = {
        "privacy_epsilon_lower_bound": float(lower),
        "privacy_epsilon_claimed": float(claimed),
        "privacy_audit_flagged": float(lower > claimed),
    }
    if "max_certifiable_epsilon" in info:  # what the audit's run count can decide (veilbench.privacy.audit)
        metrics.update(privacy_audit_max_certifiable_epsilon=float(info["max_certifiable_epsilon"]),
                       privacy_audit_power_half_noise=float(info["power_half_noise"]),
                       privacy_audit_decidable=float(info["audit_decidable"]),
                       privacy_audit_releases=float(info["audit_releases"]))
    return StageOutput(arrays={k: np.array([v]) for k, v in metrics.items()}, metrics=metrics, info=info)
