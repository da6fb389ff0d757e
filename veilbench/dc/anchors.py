r"""Anchor datasets ``A`` (na × d) shared by all parties and never seen by the analyst (spec §1.2).

=============== ==================================================================================
kind            rows of ``A``
=============== ==================================================================================
``uniform``     ``U[lo, hi]`` per entry with ``lo, hi`` the global min/max of the training matrix
                (``U[0,1]`` for data scaled to [0,1], as in public DC code) [lit]
``minmax``      ``U[min_j, max_j]`` per feature ``j`` [lit]
``gaussian``    ``N(mean_j, sd_j²)`` per feature, independent [assume]
``smote``       the real class-balanced sources plus SMOTE samples ``x_s + u (x_nb − x_s)``,
                ``u ~ U(0,1)``, ``x_nb`` one of the ``min(k_nn, n_c − 1)`` nearest same-class
                sources of ``x_s``; a synthetic row takes its source's label [paper, §9 clipping]
``real``        the real sources only (``na = na_smote``, RQ4) [paper]
=============== ==================================================================================

Random anchors carry the label ``-1`` (no label). When a class has a single source, SMOTE cannot
interpolate; its synthetic rows are then jittered copies ``x_s + N(0, (jitter·sd)²)`` (``sd`` the
per-feature sd of all sources) and the class is listed in ``AnchorSet.fallback_classes``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from veilbench.dc.kernel import knn_indices
from veilbench.random import as_rng
from veilbench.validation import ValidationError, check_array, check_labels

ANCHOR_KINDS = ("uniform", "minmax", "gaussian", "smote", "real")


@dataclass(frozen=True)
class AnchorSet:
    """``X`` (na × d) anchor rows, ``y`` (na,) labels (−1 = unlabelled), SMOTE diagnostics."""

    X: np.ndarray
    y: np.ndarray
    k_nn_used: dict[int, int] = field(default_factory=dict)
    fallback_classes: list[int] = field(default_factory=list)


def balanced_counts(total: int, classes: np.ndarray) -> dict[int, int]:
    """Split ``total`` over ``classes`` as evenly as possible (the first ``total mod C`` get one more)."""
    base, extra = divmod(int(total), classes.size)
    return {int(c): base + int(i < extra) for i, c in enumerate(classes)}


def select_sources(y: np.ndarray, n_source: int, seed: int | np.random.Generator | None) -> np.ndarray:
    """Indices of ``n_source`` class-balanced records drawn without replacement from labels ``y`` (n,)."""
    labels = check_labels(y, "y")
    classes = np.unique(labels)
    if n_source < classes.size:
        raise ValidationError(
            f"n_smote_source: must be ≥ the number of classes ({classes.size}) for class-balanced sources, "
            f"got {n_source}"
        )
    rng = as_rng(seed, "dc.anchor-sources")
    picks = []
    for c, count in balanced_counts(n_source, classes).items():
        pool = np.flatnonzero(labels == c)
        if count > pool.size:
            raise ValidationError(f"n_smote_source: class {c} has only {pool.size} records, {count} requested")
        picks.append(rng.choice(pool, size=count, replace=False))
    return np.sort(np.concatenate(picks))


def smote_anchor(
    sources: np.ndarray,
    source_labels: np.ndarray,
    n_anchor: int,
    k_nn: int = 10,
    seed: int | np.random.Generator | None = None,
    jitter: float = 0.05,
) -> AnchorSet:
    """Real sources (n_s × d) + SMOTE rows up to ``n_anchor`` rows, class-balanced (spec §1.2, §9)."""
    xs = check_array(sources, "sources", ndim=2)
    ys = check_labels(source_labels, "source_labels", n=xs.shape[0])
    if n_anchor < xs.shape[0]:
        raise ValidationError(f"n_anchor: must be ≥ the number of SMOTE sources ({xs.shape[0]}), got {n_anchor}")
    rng = as_rng(seed, "dc.smote")
    classes = np.unique(ys)
    sd = xs.std(axis=0)
    rows, labels, k_used, fallback = [xs], [ys], {}, []
    for c, target in balanced_counts(n_anchor, classes).items():
        src = xs[ys == c]
        n_new = max(target - src.shape[0], 0)
        if n_new == 0:
            continue
        base = rng.integers(src.shape[0], size=n_new)
        k = min(int(k_nn), src.shape[0] - 1)
        k_used[c] = k
        if k == 0:
            fallback.append(c)
            new = src[base] + rng.normal(scale=jitter * sd, size=(n_new, xs.shape[1]))
        else:
            nb = knn_indices(src, k)[base, rng.integers(k, size=n_new)]
            new = src[base] + rng.uniform(size=(n_new, 1)) * (src[nb] - src[base])
        rows.append(new)
        labels.append(np.full(n_new, c, dtype=np.int64))
    return AnchorSet(np.vstack(rows), np.concatenate(labels), k_used, fallback)


def random_anchor(
    kind: str, X: np.ndarray, n_anchor: int, seed: int | np.random.Generator | None = None
) -> AnchorSet:
    """Data-independent-shape anchors of ``kind`` in {uniform, minmax, gaussian} from statistics of ``X`` (n × d)."""
    x = check_array(X, "X", ndim=2)
    rng = as_rng(seed, "dc.random-anchor")
    shape = (int(n_anchor), x.shape[1])
    if kind == "uniform":
        a = rng.uniform(x.min(), x.max(), size=shape)
    elif kind == "minmax":
        a = rng.uniform(x.min(axis=0), x.max(axis=0), size=shape)
    elif kind == "gaussian":
        a = rng.normal(x.mean(axis=0), x.std(axis=0), size=shape)
    else:
        raise ValidationError(f"anchor: must be one of ('uniform', 'minmax', 'gaussian') here, got {kind!r}")
    return AnchorSet(a, np.full(shape[0], -1, dtype=np.int64))
