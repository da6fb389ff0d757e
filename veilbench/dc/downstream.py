r"""Downstream classifier and the DC utility metrics (spec §3).

* Classifier ``h``: ``RandomForestClassifier(n_estimators, random_state=seed)`` (paper default, 100
  trees) or ``LogisticRegression`` (option), always seeded with the trial seed.
* **Collaboration accuracy** [assume, spec §3]: ``h`` is trained once on the stacked collaboration
  representations ``(X̂, ŷ)``; party ``k`` maps the shared test set through ``g_k∘f_k`` and scores it
  with ``h``; the metric is the mean over parties.
* ``readout="own"`` (the other reading of the paper's wording, option): party ``k`` trains its own
  ``h_k`` on its rows ``X̂(k)`` only and scores its mapped test set; mean over parties.
* **Local**: mean over parties of an RF trained on the party's own raw records (n_k × d) and scored
  on the raw test set. **Central**: one RF on all parties' raw records.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from veilbench.validation import ValidationError

CLASSIFIERS = ("rf", "logreg")


def make_classifier(kind: Literal["rf", "logreg"], seed: int, n_estimators: int = 100) -> Any:
    """Unfitted classifier ``h`` (single-threaded, seeded)."""
    if kind == "rf":
        from sklearn.ensemble import RandomForestClassifier

        return RandomForestClassifier(n_estimators=n_estimators, random_state=seed, n_jobs=1)
    if kind == "logreg":
        from sklearn.linear_model import LogisticRegression

        return LogisticRegression(max_iter=2000, random_state=seed)
    raise ValidationError(f"classifier: must be one of {list(CLASSIFIERS)}, got {kind!r}")


def collaboration_accuracy(
    collab_train: np.ndarray,
    y_train: np.ndarray,
    party: np.ndarray,
    collab_test: np.ndarray,
    y_test: np.ndarray,
    clf: Any,
    readout: Literal["joint", "own"] = "joint",
) -> tuple[float, list[float]]:
    """Mean over parties of the accuracy on ``collab_test[k]`` (K × m × d̂).

    ``collab_train`` (n × d̂) with labels and parties (n,); ``readout="joint"`` fits one ``h`` on all
    rows, ``"own"`` refits ``clf`` on party ``k``'s rows before scoring ``collab_test[k]``.
    Returns ``(mean accuracy, per-party accuracies)``.
    """
    if readout not in ("joint", "own"):
        raise ValidationError(f"readout: must be 'joint' or 'own', got {readout!r}")
    if readout == "joint":
        clf.fit(collab_train, y_train)
    per_party = []
    for k, test_k in enumerate(collab_test):
        if readout == "own":
            clf.fit(collab_train[party == k], y_train[party == k])
        per_party.append(float(np.mean(clf.predict(test_k) == y_test)))
    return float(np.mean(per_party)), per_party


def local_accuracy(
    x_train: np.ndarray, y_train: np.ndarray, party: np.ndarray, x_test: np.ndarray, y_test: np.ndarray, clf: Any
) -> float:
    """Mean over parties of the accuracy of ``clf`` refitted on each party's raw records."""
    accs = []
    for k in np.unique(party):
        mask = party == k
        clf.fit(x_train[mask], y_train[mask])
        accs.append(float(np.mean(clf.predict(x_test) == y_test)))
    return float(np.mean(accs))


def central_accuracy(
    x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, y_test: np.ndarray, clf: Any
) -> float:
    """Accuracy of ``clf`` fitted on all parties' raw records (an upper bound, no privacy)."""
    clf.fit(x_train, y_train)
    return float(np.mean(clf.predict(x_test) == y_test))
