"""Extraction attack: inversion routine, surrogate, NTMSE/Δcos on hand-made arrays, a tiny end-to-end attack."""

import numpy as np
import pytest

from veilbench.gca.extraction import invert_reconstruction_map, ntmse_delta_cos, train_surrogate, trivial_outputs
from veilbench.gca.models import AESpec
from veilbench.validation import ValidationError


def _projection_map(d=4, k=2, seed=0):
    import torch

    q = np.linalg.qr(np.random.default_rng(seed).standard_normal((d, k)))[0]
    lin = torch.nn.Linear(d, d, bias=False)
    with torch.no_grad():
        lin.weight.copy_(torch.as_tensor(q @ q.T, dtype=torch.float32))
    return lin, q @ q.T


def test_metrics_hand_case():
    targets = np.array([[1.0, 0.0], [0.0, 1.0]])
    reference = np.array([[2.0, 0.0], [0.0, 3.0]])
    # h*: [2,0] (MSE 0.5) and [0,3] (MSE 2): mean 1.25, cos 1. Output [1,1]: MSE 0.5 each, cos 1/√2.
    ntmse, dcos = ntmse_delta_cos(targets, np.array([[1.0, 1.0]]), reference)
    assert ntmse == pytest.approx(0.5 / 1.25)
    assert dcos == pytest.approx(1 / np.sqrt(2) - 1.0)
    assert ntmse_delta_cos(targets, targets, reference)[0] == 0.0


def test_cosine_uses_the_mse_selected_output():
    targets = np.array([[1.0, 0.0]])
    reference = np.array([[0.0, 1.0]])
    outputs = np.array([[10.0, 0.1], [1.0, 1.0]])  # first has cos ≈ 1 but a huge MSE
    _, dcos = ntmse_delta_cos(targets, outputs, reference)
    assert dcos == pytest.approx(1 / np.sqrt(2) - 0.0)


def test_inversion_reaches_fixed_points_of_a_projection():
    lin, proj = _projection_map()
    starts = np.random.default_rng(1).standard_normal((6, 4))
    res = invert_reconstruction_map(lin, starts, lr=1e-2, max_steps=1500, patience=20, min_rel_improvement=0.0)
    assert np.all(res.residuals < 1e-3 * (starts ** 2).sum(1))
    assert np.allclose(res.outputs, res.x_star @ proj.T, atol=1e-5)
    assert np.all(res.steps <= 1500)


def test_batched_starts_are_independent():
    lin, _ = _projection_map(seed=2)
    starts = np.random.default_rng(3).standard_normal((3, 4))
    batch = invert_reconstruction_map(lin, starts, max_steps=150)
    for i in range(3):
        one = invert_reconstruction_map(lin, starts[i : i + 1], max_steps=150)
        assert np.allclose(one.x_star[0], batch.x_star[i], atol=1e-6)
        assert one.steps[0] == batch.steps[i]


def test_early_stopping_rule_stops_every_start_after_patience():
    lin, _ = _projection_map()
    starts = np.random.default_rng(4).standard_normal((5, 4))
    res = invert_reconstruction_map(lin, starts, lr=1e-2, max_steps=100, patience=1, min_rel_improvement=10.0)
    assert np.all(res.steps == 1)
    assert np.all(np.abs(res.x_star - starts) <= 1e-2 + 1e-6)


def test_projection_onto_bounds():
    import torch

    lin = torch.nn.Linear(3, 3)
    with torch.no_grad():
        lin.weight.copy_(0.5 * torch.eye(3))
        lin.bias.fill_(3.0)  # fixed point x = 6, outside [-1, 1]
    res = invert_reconstruction_map(lin, np.zeros((2, 3)), lr=0.1, max_steps=200, bounds=(-1.0, 1.0))
    assert np.all(res.x_star <= 1.0) and np.allclose(res.x_star, 1.0, atol=1e-3)


def test_surrogate_learns_to_reproduce_codes():
    import torch

    spec = AESpec("mlp", 6)
    rng = np.random.default_rng(0)
    codes = (rng.standard_normal((60, 3)) @ rng.standard_normal((3, 16))).astype(np.float32)
    model = train_surrogate(codes, spec, seed=0, max_epochs=60, patience=5)
    fresh = spec.build(np.random.default_rng(0))
    z = torch.from_numpy(codes)
    with torch.no_grad():
        trained = float(((z - model.encode(model.decode(z))) ** 2).sum(1).mean())
        untrained = float(((z - fresh.encode(fresh.decode(z))) ** 2).sum(1).mean())
    assert trained < 0.5 * untrained


def test_whitebox_attack_on_a_tiny_fedavg_model_beats_noise():
    from veilbench.gca.simulator import FedConfig, run_protocol
    from veilbench.gca.training import set_flat_params

    from .helpers import tiny_federation

    fed = tiny_federation((40, 40))
    res = run_protocol("fedavg", fed, FedConfig(rounds=3, local_epochs=5, batch_size=20), seed=0)
    model = fed.spec.build(np.random.default_rng(0))
    set_flat_params(model, res.victim_params)
    starts = np.random.default_rng(0).standard_normal((8, 6))
    inv = invert_reconstruction_map(model, starts, max_steps=60)
    reference = fed.x_test[fed.y_test == 0]
    targets = fed.clients[0]
    attack = ntmse_delta_cos(targets, inv.outputs, reference)
    noise_bank = trivial_outputs("noise", 8, targets.mean(0), reference, np.random.default_rng(1))
    noise = ntmse_delta_cos(targets, noise_bank, reference)
    assert np.all(np.isfinite(attack))
    assert attack[0] < noise[0]
    assert attack[1] > noise[1]


def test_trivial_outputs_shapes():
    rng = np.random.default_rng(0)
    mean = np.arange(3.0)
    pool = np.ones((5, 3))
    assert np.array_equal(trivial_outputs("mean", 4, mean, pool, rng), np.tile(mean, (4, 1)))
    assert np.array_equal(trivial_outputs("heldout", 4, mean, pool, rng), np.ones((4, 3)))
    assert trivial_outputs("noise", 4, mean, pool, rng).shape == (4, 3)


@pytest.mark.parametrize(
    "call,field",
    [
        (lambda: ntmse_delta_cos(np.ones((2, 3)), np.ones((2, 2)), np.ones((2, 3))), "outputs"),
        (lambda: ntmse_delta_cos(np.ones((2, 3)), np.ones((2, 3)), np.ones((2, 4))), "reference"),
        (lambda: ntmse_delta_cos(np.ones((2, 3)), np.ones((2, 3)), np.ones((1, 3))), "reference"),
        (lambda: trivial_outputs("ones", 2, np.zeros(3), np.zeros((1, 3)), np.random.default_rng(0)), "kind"),
        (lambda: train_surrogate(np.zeros((4, 5)), AESpec("mlp", 6), 0, max_epochs=1), "codes"),
        (lambda: invert_reconstruction_map(_projection_map()[0], np.zeros((2, 4)), lr=0.0), "lr"),
    ],
)
def test_bad_input_names_field(call, field):
    with pytest.raises(ValidationError, match=field):
        call()
