"""Local training primitives: loss/score formula, mini-batches, StepLR granularity, FedProx term."""

import numpy as np
import pytest

from veilbench.gca.models import AESpec
from veilbench.gca.training import (
    LocalOptimizer,
    anomaly_scores,
    flat_params,
    minibatches,
    n_batches,
    reconstruction_epoch,
)


def _model():
    return AESpec("mlp", 5).build(np.random.default_rng(0))


def test_anomaly_score_is_sum_of_squared_errors():
    import torch

    model = _model()
    x = torch.randn(7, 5)
    with torch.no_grad():
        expected = ((x - model(x)) ** 2).sum(1).double().numpy()
    assert np.allclose(anomaly_scores(model, x, batch_size=3), expected)


def test_minibatches_cover_every_row_once():
    batches = minibatches(23, 5, np.random.default_rng(0))
    assert len(batches) == n_batches(23, 5) == 5
    assert sorted(np.concatenate(batches).tolist()) == list(range(23))


@pytest.mark.parametrize("unit,expected_lr", [("step", 1e-3 * 0.1 ** 3), ("epoch", 1e-3 * 0.1)])
def test_steplr_granularity(unit, expected_lr):
    import torch

    model = _model()
    opt = LocalOptimizer.create(model.parameters(), 1e-3, step_size=1, gamma=0.1, unit=unit)
    steps = reconstruction_epoch(model, opt, torch.randn(25, 5), 10, np.random.default_rng(0))
    assert steps == 3
    assert opt.optimizer.param_groups[0]["lr"] == pytest.approx(expected_lr)


def test_fedprox_term_keeps_the_model_closer_to_the_centre():
    import torch

    x = torch.randn(40, 5)
    drift = {}
    for mu in (0.0, 10.0):
        model = _model()
        centre = torch.from_numpy(flat_params(model))
        opt = LocalOptimizer.create(model.parameters(), 1e-2)
        rng = np.random.default_rng(1)
        for _ in range(5):
            reconstruction_epoch(model, opt, x, 10, rng, prox_center=centre, prox_mu=mu)
        drift[mu] = float(np.linalg.norm(flat_params(model) - centre.numpy()))
    assert drift[10.0] < drift[0.0]
