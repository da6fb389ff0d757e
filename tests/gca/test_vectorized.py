"""The client-vectorised engine follows the sequential simulator's trajectory."""

from dataclasses import replace

import numpy as np
import pytest

from veilbench.gca.simulator import FedConfig, batch_stream, initial_model, run_parameter_sharing, run_protocol
from veilbench.gca.training import LocalOptimizer, flat_params, minibatches
from veilbench.gca.vectorized import (
    StackedGradient,
    round_batches,
    run_parameter_sharing_vectorized,
    vectorized_local_step,
)
from veilbench.validation import ValidationError

from .helpers import tiny_federation

UNBALANCED = (13, 30, 41)  # 2, 3 and 5 mini-batches of 10: partial batches and clients finishing early
CFG = FedConfig(rounds=3, local_epochs=2, batch_size=10, prox_mu=0.1)


def _max_diff(a, b) -> float:
    return float(np.abs(flat_params(a.final_models[0]) - flat_params(b.final_models[0])).max())


@pytest.mark.parametrize("method", ["fedavg", "fedprox", "fednova", "dpfedavg"])
def test_matches_sequential_on_an_unbalanced_federation(method):
    fed = tiny_federation(UNBALANCED)
    seq = run_protocol(method, fed, CFG, 4)
    vec = run_parameter_sharing_vectorized(method, fed, CFG, 4)
    assert np.array_equal(seq.local_steps, vec.local_steps)
    assert _max_diff(seq, vec) <= 1e-5
    assert np.abs(seq.victim_params - vec.victim_params).max() <= 1e-5
    assert np.allclose(seq.auc, vec.auc, atol=1e-6) and np.allclose(seq.accuracy, vec.accuracy, atol=1e-6)


def test_fedprox_term_is_applied():
    """The equality above is not vacuous for FedProx: the term moves the sequential model."""
    fed = tiny_federation(UNBALANCED)
    prox = run_parameter_sharing_vectorized("fedprox", fed, replace(CFG, prox_mu=1.0), 4)
    avg = run_protocol("fedavg", fed, CFG, 4)
    assert _max_diff(prox, avg) > 1e-4
    assert _max_diff(prox, run_protocol("fedprox", fed, replace(CFG, prox_mu=1.0), 4)) <= 1e-5


@pytest.mark.parametrize("unit,step_size,sizes", [("step", 3, UNBALANCED), ("epoch", 1, (30, 30, 30))])
def test_a_schedule_firing_within_the_round_matches(unit, step_size, sizes):
    fed = tiny_federation(sizes)
    cfg = replace(CFG, local_epochs=3, lr_step_unit=unit, lr_step_size=step_size, lr_gamma=0.1)
    seq = run_protocol("fedavg", fed, cfg, 2)
    assert _max_diff(seq, run_parameter_sharing_vectorized("fedavg", fed, cfg, 2)) <= 1e-5
    assert _max_diff(seq, run_protocol("fedavg", fed, replace(cfg, lr_gamma=1.0), 2)) > 1e-4


def test_rejects_a_per_epoch_schedule_firing_on_unequal_batch_counts():
    fed = tiny_federation(UNBALANCED)
    with pytest.raises(ValidationError, match="lr_step_size"):
        run_parameter_sharing_vectorized("fedavg", fed, replace(CFG, local_epochs=3, lr_step_size=2), 0)
    run_parameter_sharing_vectorized("fedavg", fed, replace(CFG, rounds=1, local_epochs=2, lr_step_size=2), 0)


def test_rejects_an_unknown_method():
    with pytest.raises(ValidationError, match="method"):
        run_parameter_sharing_vectorized("gca", tiny_federation(), CFG, 0)


def test_round_batches_are_the_sequential_draws():
    sizes = np.array(UNBALANCED)
    rows, counts = round_batches(sizes, CFG, np.random.default_rng(7))
    rng = np.random.default_rng(7)
    for c, n in enumerate(sizes):
        expected = [idx for _ in range(CFG.local_epochs) for idx in minibatches(int(n), CFG.batch_size, rng)]
        assert (counts[:, c] > 0).sum() == len(expected)
        for k, idx in enumerate(expected):
            assert np.array_equal(rows[k, c, : counts[k, c]], idx)
    assert counts.shape[0] == 2 * 5 and np.all(counts[4:, 0] == 0)


def _random_stacked(model: StackedGradient, spec, n_clients: int, seed: int):
    """The initial AE in every row plus a different perturbation per client."""
    import torch

    g = torch.Generator().manual_seed(seed)
    base = model.stack(flat_params(initial_model(spec, seed)), n_clients).views
    return [(p + 0.05 * torch.randn(p.shape, generator=g)) for p in base]


def _autograd_grads(spec, params, xb, wb):
    """Per-client reference: the module's own autograd on client c's parameters."""
    import torch

    out = []
    for c in range(xb.shape[0]):
        model = initial_model(spec, 0)
        with torch.no_grad():
            for p, q in zip(model.parameters(), params):
                p.copy_(q[c])
        (wb[c] * ((xb[c] - model(xb[c])) ** 2).sum(1)).sum().backward()
        out.append([p.grad.clone() for p in model.parameters()])
    return [torch.stack([o[i] for o in out]) for i in range(len(params))]


@pytest.mark.parametrize("kind", ["mlp", "conv"])
def test_stacked_gradient_is_each_clients_gradient(kind):
    """The written-out MLP backward and the torch.func path (conv AE) against per-client autograd."""
    import torch

    from veilbench.gca.models import AESpec

    spec = AESpec("mlp", 6) if kind == "mlp" else AESpec("conv", 64, (1, 8, 8), latent_channels=2)
    model = StackedGradient(spec)
    assert (model.plan is not None) == (kind == "mlp")
    params = _random_stacked(model, spec, 3, 0)
    xb = torch.randn(3, 5, spec.input_dim, generator=torch.Generator().manual_seed(1))
    wb = torch.tensor([[0.2] * 5, [0.25] * 4 + [0.0], [1.0 / 3] * 3 + [0.0] * 2])
    got, ref = model.grads(params, xb, wb), _autograd_grads(spec, params, xb, wb)
    for g, r in zip(got, ref):
        assert g.shape == r.shape and torch.allclose(g, r, rtol=1e-5, atol=1e-6)


def test_conv_engine_follows_the_sequential_one():
    """torch.func path on the conv AE: same steps, same model up to float rounding in one round."""
    from veilbench.gca.models import AESpec
    from veilbench.gca.simulator import Federation

    rng = np.random.default_rng(0)
    clients = [rng.standard_normal((n, 64)).astype(np.float32) for n in (7, 12)]
    fed = Federation(clients, rng.standard_normal((6, 64)).astype(np.float32), np.r_[np.zeros(3), np.ones(3)].astype(np.int64),
                     AESpec("conv", 64, (1, 8, 8), latent_channels=2))
    cfg = FedConfig(rounds=1, local_epochs=1, batch_size=5)
    seq = run_parameter_sharing("fedavg", fed, cfg, 1)
    vec = run_parameter_sharing("fedavg", fed, cfg, 1, local_step=vectorized_local_step)
    assert np.array_equal(seq.local_steps, vec.local_steps)
    assert _max_diff(seq, vec) <= 1e-5


def test_local_step_leaves_no_state_between_rounds():
    """A fresh optimiser per round: the same inputs give the same output on a reused step."""
    fed = tiny_federation(UNBALANCED)
    xs, _ = fed.tensors()
    step = vectorized_local_step(fed.spec)
    g = flat_params(initial_model(fed.spec, 3))
    a = step(g, xs, CFG, batch_stream(3), True)
    b = step(g, xs, CFG, batch_stream(3), True)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def test_each_step_computes_and_updates_the_running_clients_only(monkeypatch):
    """A round's gradient passes and optimiser steps cover sum_c tau_c client-steps, as the
    sequential step's do, not C * max_c tau_c: finished clients are out of the stacked work
    (module doc)."""
    import veilbench.gca.vectorized as vectorized

    class CountingAdam(vectorized.StackedAdam):
        def step(self, segments=None):
            updated.append(sum(hi - lo for lo, hi in segments) if segments else self.param.numel())
            super().step(segments)

    monkeypatch.setattr(vectorized, "StackedAdam", CountingAdam)
    fed = tiny_federation(UNBALANCED)
    xs, _ = fed.tensors()
    step = vectorized_local_step(fed.spec)
    model = step.__closure__[0].cell_contents  # the StackedGradient the step reuses
    rows_per_call: list[int] = []
    updated: list[int] = []
    for name in ("grads", "grads_into"):
        inner = getattr(model, name)
        setattr(model, name, lambda *args, inner=inner: (rows_per_call.append(args[1].shape[0]), inner(*args))[1])
    g = flat_params(initial_model(fed.spec, 3))
    _, taus = step(g, xs, CFG, batch_stream(3), False)
    assert sorted(taus) == [4, 6, 10]
    assert sum(rows_per_call) == taus.sum() < len(taus) * taus.max()
    assert sum(updated) == g.size * taus.sum()


def test_stacked_buffer_segments_are_the_first_clients_rows():
    from veilbench.gca.models import AESpec

    spec = AESpec("mlp", 6)
    buf = StackedGradient(spec).stack(flat_params(initial_model(spec, 1)), 3)
    for lo, hi in buf.segments(2):
        buf.theta[lo:hi] = -1.0
    assert (buf.rows(np.arange(2)) == -1.0).all() and not (buf.rows(np.array([2])) == -1.0).any()
    every = buf.segments(3)  # all clients: the blocks end to end, the whole buffer
    assert every[0][0] == 0 and every[-1][1] == buf.theta.numel()
    assert all(hi == lo for (_, hi), (lo, _) in zip(every, every[1:]))


def test_stacked_adam_on_segments_updates_them_as_a_full_step_and_leaves_the_rest():
    import torch

    from veilbench.gca.stacked_adam import StackedAdam

    gen = torch.Generator().manual_seed(1)
    start, g = torch.randn(500, generator=gen), torch.randn(500, generator=gen)
    full, part = start.clone(), start.clone()
    StackedAdam(full, g.clone(), 1e-2, chunk=64).step()
    StackedAdam(part, g.clone(), 1e-2, chunk=64).step([(10, 200), (300, 301)])
    inside = torch.zeros(500, dtype=torch.bool)
    inside[10:200] = inside[300] = True
    assert torch.equal(part[inside], full[inside]) and torch.equal(part[~inside], start[~inside])


def test_stacked_buffer_views_share_the_flat_buffers():
    """Every view is a block of ``theta`` (``grad``): writes through either side are seen by the other."""
    import torch

    from veilbench.gca.models import AESpec

    spec = AESpec("mlp", 6)
    g = flat_params(initial_model(spec, 1))
    buf = StackedGradient(spec).stack(g, 3)
    assert buf.theta.shape == (3 * g.size,) and np.array_equal(buf.rows(np.arange(3)), np.tile(g, (3, 1)))
    for view, p in zip(buf.views, initial_model(spec, 1).parameters()):
        assert view.shape == (3, *p.shape) and view.is_contiguous() and torch.equal(view[2], p.detach())
    buf.views[1][2].fill_(7.0)
    buf.grad_views[1][2].fill_(5.0)
    n0, n1 = buf.views[0].numel(), buf.views[1].numel()
    assert torch.all(buf.theta[n0 + 2 * n1 // 3 : n0 + n1] == 7.0) and int((buf.theta == 7.0).sum()) == n1 // 3
    assert torch.all(buf.grad[n0 + 2 * n1 // 3 : n0 + n1] == 5.0) and int((buf.grad != 0).sum()) == n1 // 3
    assert np.array_equal(buf.rows(np.array([0, 1])), np.tile(g, (2, 1)))
    with pytest.raises(ValidationError, match="global_vec"):
        StackedGradient(spec).stack(g[:-1], 3)


@pytest.mark.parametrize("unit,chunk", [("step", 64), ("epoch", 1000), ("step", 1 << 20)])
def test_stacked_adam_is_torch_adam_to_the_bit(unit, chunk):
    """Chunked or not, the flat Adam + StepLR gives torch.optim.Adam(foreach=True) + StepLR's bits."""
    import torch

    from veilbench.gca.stacked_adam import StackedAdam

    gen = torch.Generator().manual_seed(0)
    start = torch.randn(1003, generator=gen)
    ref = start.clone().requires_grad_(True)
    ref_opt = LocalOptimizer.create([ref], 1e-2, step_size=2, gamma=0.5, unit=unit)
    theta, grad = start.clone(), torch.zeros(1003)
    opt = StackedAdam(theta, grad, 1e-2, step_size=2, gamma=0.5, unit=unit, chunk=chunk)
    for k in range(7):
        grad.copy_(torch.randn(1003, generator=gen) * 10.0 ** (k % 3 - 1))
        ref.grad = grad.clone()
        ref_opt.step()
        opt.step()
        if k % 2:
            ref_opt.end_epoch()
            opt.end_epoch()
        assert torch.equal(theta, ref.detach()), k
    assert opt.lr == ref_opt.optimizer.param_groups[0]["lr"] < 1e-2  # the schedule fired


@pytest.mark.parametrize("kwargs,field", [({"chunk": 0}, "chunk"), ({"unit": "round"}, "unit"),
                                          ({"grad_len": 5}, "param")])
def test_stacked_adam_rejects_bad_input(kwargs, field):
    import torch

    from veilbench.gca.stacked_adam import StackedAdam

    grad = torch.zeros(kwargs.pop("grad_len", 6))
    with pytest.raises(ValidationError, match=field):
        StackedAdam(torch.zeros(6), grad, 1e-3, **kwargs)
