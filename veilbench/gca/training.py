r"""Local training and scoring primitives shared by every protocol (spec §3.3, §1.4, §4.3).

* Reconstruction loss (Eq. 2) on a mini-batch :math:`B`:
  :math:`L_{rec} = \frac{1}{|B|}\sum_{b} \|x_b - D(E(x_b))\|_2^2`, optionally plus the FedProx
  term :math:`\mu \|\theta - \theta^{(r)}\|_2^2` (squared L2 over all parameters, spec §11.4).
* Anomaly score :math:`s(x) = \|x - D(E(x))\|_2^2` (sum over coordinates).
* Optimiser: Adam (lr 1e-3) with StepLR(step_size, gamma) stepped per epoch (default) or per
  optimiser step (spec §3.3: configurable, recorded).

Data are ``torch.float32`` tensors of flat rows ``(n, d_x)``; mini-batch order comes from a
``numpy.random.Generator`` so that a seed fixes every shuffle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

#: Rows per forward pass when scoring or encoding without gradients: a batch whose activations stay in
#: cache (a conv AE's 2 000-row batch spills them); rows are scored independently, so the value changes
#: the time only (``reports/bench/gca_rounds.json``).
SCORE_BATCH = 256


def _torch():
    import torch

    return torch


@dataclass
class LocalOptimizer:
    """Adam plus StepLR on a parameter list; ``unit`` says when the scheduler steps."""

    optimizer: object
    scheduler: object
    unit: Literal["epoch", "step"]

    @classmethod
    def create(
        cls,
        params,
        lr: float,
        step_size: int = 1000,
        gamma: float = 0.1,
        unit: Literal["epoch", "step"] = "epoch",
    ) -> "LocalOptimizer":
        torch = _torch()
        opt = torch.optim.Adam(list(params), lr=lr, foreach=True)
        return cls(opt, torch.optim.lr_scheduler.StepLR(opt, step_size=step_size, gamma=gamma), unit)

    def step(self) -> None:
        self.optimizer.step()
        if self.unit == "step":
            self.scheduler.step()

    def end_epoch(self) -> None:
        if self.unit == "epoch":
            self.scheduler.step()

    def state_dict(self) -> dict:
        """Adam's moments and step counts and the scheduler's position (a checkpoint's copy)."""
        return {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])


def flat_params(model) -> np.ndarray:
    """All parameters of ``model`` concatenated in ``parameters()`` order, ``(P,)`` float32."""
    torch = _torch()
    with torch.no_grad():
        return torch.nn.utils.parameters_to_vector(model.parameters()).detach().cpu().numpy().copy()


def set_flat_params(model, vector: np.ndarray) -> None:
    """Copy a ``(P,)`` vector (same order as :func:`flat_params`) into ``model``'s parameters.

    Copies (``vector_to_parameters`` would make the parameters views of ``vector``'s memory).
    """
    torch = _torch()
    vec = torch.as_tensor(np.asarray(vector), dtype=torch.float32)
    params = list(model.parameters())
    if params and params[0].device != vec.device:
        vec = vec.to(params[0].device)
    offset = 0
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(vec[offset : offset + p.numel()].view_as(p))
            offset += p.numel()


def minibatches(n: int, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Index arrays of one shuffled epoch over ``n`` rows: ``ceil(n / batch_size)`` batches."""
    perm = rng.permutation(n)
    return [perm[i : i + batch_size] for i in range(0, n, batch_size)]


def n_batches(n: int, batch_size: int) -> int:
    """Mini-batches per epoch, :math:`\\lceil n / B \\rceil`."""
    return -(-int(n) // int(batch_size))


def reconstruction_epoch(
    model,
    opt: LocalOptimizer,
    x,
    batch_size: int,
    rng,
    prox_center=None,
    prox_mu: float = 0.0,
) -> int:
    """One epoch of :math:`L_{rec}` (+ FedProx term when ``prox_center`` is a ``(P,)`` tensor).

    ``x``: ``(n, d_x)`` tensor; ``rng``: a generator or the epoch's drawn batches (:func:`run_epoch`). Updates ``model`` in place through ``opt``; returns the number of
    optimiser steps taken (:math:`\\lceil n/B \\rceil`).
    """
    torch = _torch()
    params = list(model.parameters())

    def loss_fn(xb):
        loss = ((xb - model(xb)) ** 2).sum(1).mean()
        if prox_center is not None and prox_mu > 0:
            loss = loss + prox_mu * ((torch.nn.utils.parameters_to_vector(params) - prox_center) ** 2).sum()
        return loss

    return run_epoch(model, opt, x, batch_size, rng, loss_fn)


def run_epoch(model, opt: LocalOptimizer, x, batch_size: int, rng, loss_fn) -> int:
    """One epoch of mini-batch steps on ``loss_fn(x_batch)`` through ``opt``; returns the step count.

    ``rng``: the generator the epoch's shuffle is drawn from (:func:`minibatches`), or that epoch's
    batches already drawn (a list of index arrays), so that clients trained side by side see the
    batches the one-after-the-other loop would have drawn."""
    model.train()
    steps = 0
    for idx in (rng if isinstance(rng, list) else minibatches(x.shape[0], batch_size, rng)):
        loss = loss_fn(x[idx if x.device.type == "cpu" else _torch().from_numpy(idx).to(x.device)])
        opt.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        steps += 1
    opt.end_epoch()
    return steps


def anomaly_scores(model, x, batch_size: int = SCORE_BATCH) -> np.ndarray:
    """:math:`s(x) = \\|x - D(E(x))\\|_2^2` for every row of ``x`` ``(n, d_x)``; returns ``(n,)`` float64."""
    torch = _torch()
    model.eval()
    out = []
    with torch.no_grad():
        for i in range(0, x.shape[0], batch_size):
            xb = x[i : i + batch_size]
            out.append(((xb - model(xb)) ** 2).sum(1))
    return torch.cat(out).double().cpu().numpy()


def encode(model, x, batch_size: int = SCORE_BATCH) -> np.ndarray:
    """Latent codes :math:`E(x)` of ``x`` ``(n, d_x)`` in eval mode without gradients, ``(n, D_z)`` float32."""
    torch = _torch()
    model.eval()
    with torch.no_grad():
        return torch.cat([model.encode(x[i : i + batch_size]) for i in range(0, x.shape[0], batch_size)]).cpu().numpy()
