"""Item-based CF from a (released) item–item Gram: baselines, metric properties, real data."""

from __future__ import annotations

import numpy as np
import pytest

from veilbench.scoreshield.cf import (
    cf_metrics,
    item_embeddings,
    load_movielens,
    ndcg_at_k,
    predict,
    rmse,
    synthetic_ratings,
)
from veilbench.scoreshield.gram import GaussianGramMechanism, cosine_gram
from veilbench.scoreshield.newton import nearest_correlation_newton
from veilbench.validation import ValidationError


@pytest.fixture(scope="module")
def ratings():
    return synthetic_ratings(seed=0)


def user_mean_rmse(r):
    out = []
    for u, _, y in r.test:
        own = r.train[r.train[:, 0] == u, 2]
        out.append((own.mean() if own.size else r.train[:, 2].mean()) - y)
    return float(np.sqrt(np.mean(np.square(out))))


def test_identity_gram_falls_back_to_user_means(ratings):
    """Ĝ = I gives every neighbour weight 0, so r̂_ui = μ_u: the user-mean baseline exactly."""
    pred = predict(np.eye(ratings.n_items), ratings)
    assert rmse(pred, ratings.test[:, 2]) == pytest.approx(user_mean_rmse(ratings))


def test_clean_gram_beats_baselines_and_projection_beats_noise(ratings):
    x = item_embeddings(ratings)
    assert np.allclose(np.linalg.norm(x, axis=1), 1.0)
    clean = cf_metrics(cosine_gram(x), ratings)
    ident = cf_metrics(np.eye(ratings.n_items), ratings)
    assert clean["utility_cf_rmse"] < ident["utility_cf_rmse"]
    assert clean["utility_cf_ndcg_at_10"] > ident["utility_cf_ndcg_at_10"] - 0.02
    mech = GaussianGramMechanism(4.0, 1e-5, adjacency="output", sensitivity=1.0)
    noisy_rmse, proj_rmse = [], []
    for seed in range(3):
        g_noisy = mech.release(x, seed).noisy
        noisy_rmse.append(cf_metrics(g_noisy, ratings)["utility_cf_rmse"])
        proj_rmse.append(cf_metrics(nearest_correlation_newton(g_noisy).gram, ratings)["utility_cf_rmse"])
    assert np.mean(proj_rmse) < np.mean(noisy_rmse)


def test_ndcg_properties():
    users = np.array([0, 0, 0, 1, 1])
    items = np.array([0, 1, 2, 0, 1])
    truth = np.array([5.0, 3.0, 1.0, 2.0, 4.0])
    assert ndcg_at_k(users, items, truth, truth) == pytest.approx(1.0)
    assert ndcg_at_k(users, items, -truth, truth) < 0.8
    with pytest.raises(ValidationError, match="users"):
        ndcg_at_k(np.array([0, 1]), np.array([0, 0]), truth[:2], truth[:2])


def test_predictions_stay_in_rating_range(ratings):
    rng = np.random.default_rng(0)
    wild = rng.standard_normal((ratings.n_items, ratings.n_items)) * 10
    pred = predict((wild + wild.T) / 2, ratings)
    assert pred.min() >= 1.0 and pred.max() <= 5.0


def test_bad_gram_shape(ratings):
    with pytest.raises(ValidationError, match="gram"):
        predict(np.eye(3), ratings)
    with pytest.raises(ValidationError, match="k"):
        predict(np.eye(ratings.n_items), ratings, k=0)


def test_movielens_loads_offline():
    r = load_movielens(n_items=30, seed=0)
    assert r.n_items == 30 and r.n_users > 100
    assert r.train.shape[0] > 4 * r.test.shape[0] * 0.8
    assert r.train[:, 2].min() >= 0.5 and r.train[:, 2].max() <= 5.0
    m = cf_metrics(cosine_gram(item_embeddings(r)), r)
    assert 0.5 < m["utility_cf_rmse"] < 1.5 and 0.0 < m["utility_cf_ndcg_at_10"] <= 1.0
