r"""One-class anomaly-detection metrics: quantile threshold, accuracy and ROC AUC.

A detector gives each record an anomaly score :math:`s(x)` (higher = more anomalous; for an
autoencoder :math:`s(x) = \|x - D(E(x))\|_2^2`). Following the GCA spec §1.4:

* threshold :math:`\tau = Q_q(\{s(x): x \in D_{\mathrm{train}}\})`, the ``q``-quantile
  (default 0.75) of the scores on the (normal-only) training records;
* prediction: anomalous iff :math:`s(x) > \tau`; accuracy = fraction of test records whose
  prediction equals the label (0 = normal, 1 = anomaly);
* ROC AUC: the threshold-free probability that a random anomaly scores above a random normal
  record (ties count one half), i.e. the Mann–Whitney statistic :math:`U/(n_0 n_1)`.

Generic: nothing here knows about autoencoders or federations.
"""

from __future__ import annotations

import numpy as np

from veilbench.validation import ValidationError, check_array, check_in_range, check_labels


def quantile_threshold(train_scores: np.ndarray, q: float = 0.75) -> float:
    """Return :math:`\\tau = Q_q(s)` of the training scores ``(n,)`` (numpy linear interpolation)."""
    s = check_array(train_scores, "train_scores", ndim=1)
    q = check_in_range(q, "q", 0.0, 1.0)
    return float(np.quantile(s, q))


def _binary_labels(y_true: np.ndarray, n: int) -> np.ndarray:
    y = check_labels(y_true, "y_true", n=n)
    if not np.all((y == 0) | (y == 1)):
        raise ValidationError(f"y_true: labels must be 0 (normal) or 1 (anomaly), got values {np.unique(y)[:5]}")
    return y


def anomaly_accuracy(test_scores: np.ndarray, y_true: np.ndarray, threshold: float) -> float:
    """Accuracy of the rule ``anomalous iff score > threshold``.

    ``test_scores`` (m,) float, ``y_true`` (m,) in {0, 1} (1 = anomaly); returns a float in [0, 1].
    """
    s = check_array(test_scores, "test_scores", ndim=1)
    y = _binary_labels(y_true, s.shape[0])
    thr = check_in_range(threshold, "threshold")
    return float(np.mean((s > thr).astype(np.int64) == y))


def roc_auc(test_scores: np.ndarray, y_true: np.ndarray) -> float:
    """ROC AUC of scores ``(m,)`` against labels ``(m,)`` in {0, 1}: the Mann–Whitney
    :math:`U / (n_0 n_1)` = P(s_anomaly > s_normal) + ½ P(tie), by :func:`sklearn.metrics.roc_auc_score`.

    The one ROC AUC of the project (verification's pair AUC calls it). Needs both classes present.
    """
    from sklearn.metrics import roc_auc_score

    s = check_array(test_scores, "test_scores", ndim=1)
    y = _binary_labels(y_true, s.shape[0])
    n1 = int(y.sum())
    n0 = y.size - n1
    if n0 == 0 or n1 == 0:
        raise ValidationError(f"y_true: ROC AUC needs both classes, got {n0} normal and {n1} anomalous")
    return float(roc_auc_score(y, s))
