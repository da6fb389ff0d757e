"""veilbench.metrics.anomaly: threshold, accuracy and ROC AUC."""

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from veilbench.metrics.anomaly import anomaly_accuracy, quantile_threshold, roc_auc
from veilbench.validation import ValidationError


def test_quantile_threshold_flags_a_quarter_of_training_scores():
    s = np.arange(1, 101, dtype=float)
    tau = quantile_threshold(s, 0.75)
    assert np.mean(s > tau) == pytest.approx(0.25)


def test_accuracy_hand_case():
    scores = np.array([0.1, 0.2, 0.9, 0.3, 0.8])
    y = np.array([0, 0, 1, 1, 0])
    # rule score > 0.5: predictions 0,0,1,0,1 -> correct on rows 0,1,2
    assert anomaly_accuracy(scores, y, 0.5) == pytest.approx(3 / 5)


def test_auc_matches_sklearn_with_ties():
    rng = np.random.default_rng(0)
    s = rng.integers(0, 5, 200).astype(float)
    y = rng.integers(0, 2, 200)
    assert roc_auc(s, y) == pytest.approx(roc_auc_score(y, s))


def test_auc_perfect_and_reversed():
    y = np.array([0, 0, 1, 1])
    assert roc_auc(np.array([0.0, 1, 2, 3]), y) == 1.0
    assert roc_auc(np.array([3.0, 2, 1, 0]), y) == 0.0


@pytest.mark.parametrize(
    "call,field",
    [
        (lambda: quantile_threshold(np.ones(3), 1.5), "q"),
        (lambda: quantile_threshold(np.ones((3, 2))), "train_scores"),
        (lambda: anomaly_accuracy(np.ones(3), np.array([0, 1, 2]), 0.5), "y_true"),
        (lambda: anomaly_accuracy(np.ones(3), np.array([0, 1]), 0.5), "y_true"),
        (lambda: roc_auc(np.ones(3), np.zeros(3, int)), "y_true"),
        (lambda: roc_auc(np.array([1.0, np.nan]), np.array([0, 1])), "test_scores"),
    ],
)
def test_bad_input_names_field(call, field):
    with pytest.raises(ValidationError, match=field):
        call()
