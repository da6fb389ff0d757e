r"""From the generic ``prepare``/``embed`` stage arrays to a one-class federation (spec §1–§2).

* Features: ``embed``'s ``Z_train``/``Z_test`` (the generic encoder, e.g. standardised on all
  training records), or ``prepare``'s ``X`` standardised with the training *normals'* mean and
  standard deviation (``prepare_standardize``, spec §2.1 step 4), or min–max scaled to
  :math:`[-1, 1]` with the training normals' per-feature range (``prepare_minmax``, vision, §2.2).
* Normal classes: given, or the most frequent training class (ties → smallest label; for
  breast-cancer that is benign). Anomaly classes: given, or every other class.
* Clients train on their *normal* training records only. Partition: ``given`` (``party_train``;
  clients with fewer than 2 normal records are dropped), ``iid`` or ``dirichlet`` (non-IID,
  :mod:`veilbench.gca.partition`) over the normal training records.
* Evaluation pool: test records of the normal (label 0) and anomaly (label 1) classes; with
  ``test_balance="balanced"`` the larger of the two is subsampled without replacement to the size
  of the smaller (stream ``"gca.test-balance"`` of the seed, record order kept), so flagging
  everything scores accuracy 0.5 (spec §2.1–§2.2 use balanced test sets). The pool is then split
  per seed into a validation set and a test set, stratified by label (:func:`validation_rows`,
  stream ``"gca.validation-split"``): checkpoints are selected on the validation set and reported
  on the test set, so nothing is selected on the records a number is reported on.
* Reference bank ℋ for the extraction metrics: the first ``reference_size`` test normals (spec
  §2.1 [A]), taken before balancing; the "random held-out record" trivial attack draws from the
  remaining test normals (or from ℋ when none remain).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from veilbench.families.base import StageInputs
from veilbench.gca.models import AESpec
from veilbench.gca.partition import dirichlet_longtail_partition, iid_partition
from veilbench.gca.federation import Federation
from veilbench.random import stream
from veilbench.validation import ValidationError, check_array, check_labels


@dataclass
class FederatedData:
    """A :class:`Federation` plus the attack's reference bank ``(H, d)``, held-out pool and bookkeeping.

    ``train_features`` ``(n, d)`` / ``test_features`` ``(m, d)``: every training / test record in the
    AE's input space, with their class labels ``train_labels`` ``(n,)`` / ``test_labels`` ``(m,)``;
    ``client_rows[i]``: rows of ``train_features`` forming client i's shard
    (``federation.clients[i] == train_features[client_rows[i]]``).
    """

    federation: Federation
    reference: np.ndarray
    heldout: np.ndarray
    train_mean: np.ndarray
    normal_classes: list[int]
    anomaly_classes: list[int]
    client_ids: list[int]
    train_features: np.ndarray
    train_labels: np.ndarray
    test_features: np.ndarray
    test_labels: np.ndarray
    client_rows: list[np.ndarray]


def _features(inputs: StageInputs, source: str) -> tuple[np.ndarray, np.ndarray]:
    if source == "embed":
        emb = inputs["embed"]
        return (check_array(emb["Z_train"], "embed.Z_train", ndim=2),
                check_array(emb["Z_test"], "embed.Z_test", ndim=2))
    prep = inputs["prepare"]
    return (check_array(prep["X_train"], "prepare.X_train", ndim=2),
            check_array(prep["X_test"], "prepare.X_test", ndim=2))


def _minmax(train: np.ndarray, test: np.ndarray, fit_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = train[fit_rows].min(0), train[fit_rows].max(0)
    span = np.where(hi > lo, hi - lo, 1.0)
    return 2.0 * (train - lo) / span - 1.0, np.clip(2.0 * (test - lo) / span - 1.0, -1.0, 1.0)


def _standardize(train: np.ndarray, test: np.ndarray, fit_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mu, sd = train[fit_rows].mean(0), train[fit_rows].std(0)
    sd = np.where(sd > 0, sd, 1.0)
    return (train - mu) / sd, (test - mu) / sd


def balanced_rows(y01: np.ndarray, seed: int) -> np.ndarray:
    """Sorted row indices keeping every record of the rarer label of ``y01`` ``(m,)`` in {0, 1} and an
    equal-size uniform subsample (stream ``"gca.test-balance"``) of the other."""
    y = check_labels(y01, "y_test")
    rows = [np.flatnonzero(y == c) for c in (0, 1)]
    n = min(r.size for r in rows)
    rng = stream(seed, "gca.test-balance")
    return np.sort(np.concatenate([r if r.size == n else rng.choice(r, size=n, replace=False) for r in rows]))


def validation_rows(y01: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """Sorted positions of the validation rows of a pool with labels ``y01`` ``(m,)`` in {0, 1}: of each
    label's :math:`m_c` rows, :math:`\\lfloor f m_c + 1/2 \\rfloor` drawn uniformly without replacement
    (stream ``"gca.validation-split"``), the rest left for the test set; both sets keep at least one
    row of each label."""
    y = check_labels(y01, "y_test")
    if not 0.0 < fraction < 1.0:
        raise ValidationError(f"validation_fraction: must lie in (0, 1), got {fraction!r}")
    rng = stream(seed, "gca.validation-split")
    picked = []
    for c in (0, 1):
        rows = np.flatnonzero(y == c)
        if rows.size < 2:
            raise ValidationError(
                f"y_test: a validation/test split needs ≥ 2 evaluation records of label {c}, got {rows.size}")
        k = min(max(int(np.floor(fraction * rows.size + 0.5)), 1), rows.size - 1)
        picked.append(rng.choice(rows, size=k, replace=False))
    return np.sort(np.concatenate(picked))


def build_federation(
    inputs: StageInputs,
    *,
    spec_kind: Literal["mlp", "conv"],
    input_source: Literal["embed", "prepare_standardize", "prepare_minmax"],
    normal_classes: list[int] | None,
    anomaly_classes: list[int] | None,
    partition: Literal["given", "iid", "dirichlet"],
    n_clients: int | None,
    dirichlet_alpha: float,
    image_shape: tuple[int, int, int] | None,
    latent_channels: int,
    reference_size: int,
    seed: int,
    test_balance: Literal["all", "balanced"] = "all",
    validation_fraction: float | None = 0.5,
) -> FederatedData:
    """Build the federation of one cell and seed (deterministic in its arguments); ``validation_fraction``
    ``None`` keeps the whole pool as the test set (no validation set)."""
    prep = inputs["prepare"]
    x_tr, x_te = _features(inputs, "embed" if input_source == "embed" else "prepare")
    y_tr = check_labels(prep["y_train"], "prepare.y_train", n=x_tr.shape[0])
    y_te = check_labels(prep["y_test"], "prepare.y_test", n=x_te.shape[0])
    if normal_classes is None:
        values, counts = np.unique(y_tr, return_counts=True)
        normal_classes = [int(values[np.argmax(counts)])]
    normal = np.isin(y_tr, normal_classes)
    if normal.sum() < 2:
        raise ValidationError(
            f"normal_classes: need ≥ 2 training records of classes {normal_classes}, got {normal.sum()}")
    if anomaly_classes is None:
        anomaly_classes = sorted(int(c) for c in np.unique(np.r_[y_tr, y_te]) if c not in normal_classes)
    if set(anomaly_classes) & set(normal_classes):
        raise ValidationError(
            f"anomaly_classes: must not overlap normal_classes {normal_classes}, got {anomaly_classes}")
    if input_source == "prepare_minmax":
        x_tr, x_te = _minmax(x_tr, x_te, normal)
    elif input_source == "prepare_standardize":
        x_tr, x_te = _standardize(x_tr, x_te, normal)
    test_rows = np.isin(y_te, normal_classes) | np.isin(y_te, anomaly_classes)
    y01 = np.isin(y_te[test_rows], anomaly_classes).astype(np.int64)
    if y01.min() == y01.max():
        raise ValidationError(
            f"y_test: the test set needs both normal and anomaly records, got labels {np.unique(y01)}")
    x_normal = x_tr[normal]
    if partition == "given":
        party = check_labels(prep["party_train"], "prepare.party_train", n=x_tr.shape[0])[normal]
    elif n_clients is None:
        raise ValidationError(f"n_clients: required when partition={partition!r}, got None")
    elif partition == "iid":
        party = iid_partition(x_normal.shape[0], n_clients, seed)
    else:
        party = dirichlet_longtail_partition(x_normal, n_clients, seed, alpha=dirichlet_alpha)
    client_ids = [int(c) for c in np.unique(party) if (party == c).sum() >= 2]
    if not client_ids:
        raise ValidationError("party_train: no client holds ≥ 2 normal training records")
    spec = AESpec(spec_kind, x_tr.shape[1], image_shape, latent_channels,
                  "tanh" if input_source == "prepare_minmax" else "none")
    normal_rows = np.flatnonzero(normal)
    client_rows = [normal_rows[party == c] for c in client_ids]
    if test_balance not in ("all", "balanced"):
        raise ValidationError(f"test_balance: must be 'all' or 'balanced', got {test_balance!r}")
    keep = balanced_rows(y01, seed) if test_balance == "balanced" else np.arange(y01.size)
    x_pool, y_pool = x_te[test_rows][keep], y01[keep]
    if validation_fraction is None:
        fed = Federation([x_tr[rows] for rows in client_rows], x_pool, y_pool, spec)
    else:
        is_val = np.zeros(y_pool.size, dtype=bool)
        is_val[validation_rows(y_pool, validation_fraction, seed)] = True
        fed = Federation([x_tr[rows] for rows in client_rows], x_pool[~is_val], y_pool[~is_val], spec,
                         x_val=x_pool[is_val], y_val=y_pool[is_val])
    test_normals = x_te[test_rows][y01 == 0]
    reference = test_normals[:reference_size]
    heldout = test_normals[reference_size:] if test_normals.shape[0] > reference_size else reference
    return FederatedData(fed, reference, heldout, x_normal.mean(0), [int(c) for c in normal_classes],
                         [int(c) for c in anomaly_classes], client_ids, x_tr, y_tr, x_te, y_te, client_rows)
