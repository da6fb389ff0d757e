r"""Client-vectorised local step for parameter-sharing FL on the tabular MLP AE.

The sequential simulator trains C client copies one after the other. Here the C copies are
stacked: every ``Linear`` layer becomes weights ``W`` ``(C, out, in)`` and biases ``b`` ``(C, out)``,
and one batched matrix product :math:`H_c \leftarrow H_c W_c^\top + b_c` advances all clients'
mini-batches at once. Clients are independent because the total loss is
:math:`\sum_c L_c` (client c's parameters only enter :math:`L_c`) and Adam is elementwise;
clients with fewer mini-batches in an epoch are masked out of that step, with per-client Adam
step counts (bias corrections as ``torch.optim.Adam``).

Mini-batch order is drawn from the same ``numpy`` stream, in the same order (client-major,
then epoch), as :func:`veilbench.gca.simulator.sequential_local_step`, so for the same seed
both engines follow the same trajectory up to float summation order. The round loop,
aggregation and evaluation are the simulator's (:func:`veilbench.gca.simulator.run_parameter_sharing`
with :func:`vectorized_local_step`).
Only ``kind="mlp"`` models are supported, and only schedules under which StepLR never fires
within a round (fresh Adam per round, as in the simulator; e.g. the paper's step size 1,000).
"""

from __future__ import annotations

import numpy as np

from veilbench.gca.federation import PARAMETER_SHARING, FedConfig, Federation, RunResult, initial_model
from veilbench.gca.simulator import run_parameter_sharing
from veilbench.validation import ValidationError

BETA1, BETA2, ADAM_EPS = 0.9, 0.999, 1e-8


def _layer_shapes(model) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    import torch

    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    return [(tuple(m.weight.shape), tuple(m.bias.shape)) for m in linears]


def _stack(vector: np.ndarray, shapes, n_clients: int) -> list:
    """Split a flat ``(P,)`` global vector into per-layer tensors repeated for every client."""
    import torch

    vec = torch.as_tensor(vector, dtype=torch.float32)
    out, offset = [], 0
    for w_shape, b_shape in shapes:
        for shape in (w_shape, b_shape):
            n = int(np.prod(shape))
            out.append(vec[offset : offset + n].reshape(shape).expand(n_clients, *shape).clone().requires_grad_(True))
            offset += n
    return out


def _forward(params: list, x):
    """MLP forward of all clients, ``x`` (C, B, d) → (C, B, d); ReLU after every layer but latent and output."""
    import torch

    h = x
    n_layers = len(params) // 2
    for k in range(n_layers):
        w, b = params[2 * k], params[2 * k + 1]
        h = torch.baddbmm(b[:, None, :], h, w.transpose(1, 2))
        if k not in (n_layers // 2 - 1, n_layers - 1):
            h = torch.relu(h)
    return h


def _local_round(global_vec, shapes, xs, cfg: FedConfig, rng: np.random.Generator, prox: bool):
    """All clients' ``cfg.local_epochs`` epochs from ``global_vec``; returns ``(local (C, P), steps (C,))``."""
    import torch

    c = len(xs)
    bsz = cfg.batch_size
    perms = [[rng.permutation(x.shape[0]) for _ in range(cfg.local_epochs)] for x in xs]
    n_batches = np.array([-(-x.shape[0] // bsz) for x in xs])
    d = xs[0].shape[1]
    padded = torch.zeros(c, max(x.shape[0] for x in xs), d)
    for i, x in enumerate(xs):
        padded[i, : x.shape[0]] = x
    params = _stack(global_vec, shapes, c)
    center = [p.detach().clone() for p in params] if prox else None
    m = [torch.zeros_like(p) for p in params]
    v = [torch.zeros_like(p) for p in params]
    t = torch.zeros(c)
    steps = np.zeros(c, dtype=np.int64)
    for e in range(cfg.local_epochs):
        for s in range(int(n_batches.max())):
            idx = np.zeros((c, bsz), dtype=np.int64)
            mask = np.zeros((c, bsz), dtype=np.float32)
            for i in range(c):
                part = perms[i][e][s * bsz : (s + 1) * bsz]
                idx[i, : part.size] = part
                mask[i, : part.size] = 1.0
            active = torch.from_numpy(mask.sum(1) > 0)
            mask_t = torch.from_numpy(mask)
            xb = torch.gather(padded, 1, torch.from_numpy(idx)[:, :, None].expand(c, bsz, d))
            sse = ((xb - _forward(params, xb)) ** 2).sum(2)
            loss_c = (sse * mask_t).sum(1) / mask_t.sum(1).clamp(min=1.0)
            if prox:
                loss_c = loss_c + cfg.prox_mu * sum(((p - q) ** 2).flatten(1).sum(1) for p, q in zip(params, center))
            grads = torch.autograd.grad(loss_c.sum(), params)
            t = t + active.float()
            with torch.no_grad():
                bc1 = 1.0 - BETA1 ** t.clamp(min=1.0)
                bc2 = 1.0 - BETA2 ** t.clamp(min=1.0)
                for p, g, m_k, v_k in zip(params, grads, m, v):
                    shape = (c,) + (1,) * (p.dim() - 1)
                    act = active.view(shape)
                    m_k.copy_(torch.where(act, BETA1 * m_k + (1 - BETA1) * g, m_k))
                    v_k.copy_(torch.where(act, BETA2 * v_k + (1 - BETA2) * g * g, v_k))
                    denom = (v_k.sqrt() / bc2.sqrt().view(shape)) + ADAM_EPS
                    p.sub_(torch.where(act, (cfg.lr / bc1.view(shape)) * m_k / denom, torch.zeros_like(p)))
            steps += active.numpy().astype(np.int64)
    local = torch.cat([p.detach().flatten(1) for p in params], dim=1).double().numpy()
    return local, steps


def vectorized_local_step(spec):
    """A :data:`~veilbench.gca.simulator.LocalStep` advancing all clients at once (module doc)."""
    shapes = _layer_shapes(initial_model(spec, 0))

    def step(global_vec, xs, cfg, rng, prox):
        return _local_round(global_vec, shapes, xs, cfg, rng, prox)

    return step


def run_parameter_sharing_vectorized(method: str, fed: Federation, cfg: FedConfig, seed: int) -> RunResult:
    """Same protocol and outputs as :func:`veilbench.gca.simulator.run_parameter_sharing`, clients batched."""
    if method not in PARAMETER_SHARING:
        raise ValidationError(f"method: must be one of {PARAMETER_SHARING}, got {method!r}")
    if fed.spec.kind != "mlp":
        raise ValidationError(f"spec.kind: the vectorised engine supports 'mlp' only, got {fed.spec.kind!r}")
    per_round = cfg.local_epochs * (1 if cfg.lr_step_unit == "epoch" else max(-(-fed.sizes // cfg.batch_size)))
    if per_round >= cfg.lr_step_size:
        raise ValidationError(
            f"lr_step_size: the vectorised engine has no StepLR; need > {per_round} scheduler steps per round "
            f"so the schedule never fires, got {cfg.lr_step_size}")
    return run_parameter_sharing(method, fed, cfg, seed, local_step=vectorized_local_step)
