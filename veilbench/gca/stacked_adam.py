r"""Adam with a StepLR on one flat parameter buffer, visited in cache-sized chunks.

For the flat float32 buffers :math:`\theta, g` (the C stacked client copies of a model,
:class:`veilbench.gca.vectorized.StackedBuffer`) and the step count :math:`t` shared by every
element, one step is Adam (Kingma & Ba 2015, Alg. 1) with torch's defaults
:math:`\beta = (0.9, 0.999)`, :math:`\epsilon = 10^{-8}`, no weight decay:

.. math::
    m \leftarrow m + (1-\beta_1)(g - m), \quad v \leftarrow \beta_2 v + (1-\beta_2) g^2, \quad
    \theta \leftarrow \theta - \frac{\eta}{1-\beta_1^t}\,
    \frac{m}{\sqrt{v}/\sqrt{1-\beta_2^t} + \epsilon}.

Every element goes through the operations of ``torch.optim.Adam(foreach=True)`` on CPU, in its
order and with its Python-float scalars (``lerp_``, ``mul_``, ``addcmul_``, ``sqrt``, ``div_``,
``add_``, ``addcdiv_``), so the result is that optimiser's to the bit; the update being
elementwise, visiting the buffer chunk by chunk (all seven operations on one chunk, then the
next) changes only the memory traffic: a chunk's moments and temporaries stay in cache.

The learning rate follows ``torch.optim.lr_scheduler.StepLR``: :math:`\eta \leftarrow \eta\gamma`
at every ``step_size``-th scheduler step, the scheduler stepping after every optimiser step
(``unit="step"``) or at every :meth:`end_epoch` (``unit="epoch"``), as
:class:`veilbench.gca.training.LocalOptimizer` does.
"""

from __future__ import annotations

from typing import Literal

from veilbench.validation import ValidationError

BETAS = (0.9, 0.999)
EPS = 1e-8
#: Elements per chunk: the chunk's parameter, gradient, two moments and one temporary (5 x 1 MiB)
#: stay in a last-level cache, and a chunk is long enough to amortise the per-operation overhead
#: of its seven calls; a multiple of every SIMD width.
CHUNK = 1 << 18


class StackedAdam:
    """Adam + StepLR (module doc) updating ``param`` ``(n,)`` in place from ``grad`` ``(n,)``.

    ``step(segments)`` reads the current ``grad`` and updates the flat ranges ``segments``
    ``[(lo, hi), ...]`` (default: all of ``param``); elements outside them keep their parameter and
    moments, the step count advances for all. ``end_epoch()`` marks the end of an epoch. ``chunk``:
    elements per chunk (positive).
    """

    def __init__(self, param, grad, lr: float, step_size: int = 1000, gamma: float = 0.1,
                 unit: Literal["epoch", "step"] = "epoch", chunk: int = CHUNK) -> None:
        import torch

        if param.dim() != 1 or grad.shape != param.shape:
            raise ValidationError(f"param: expected a flat tensor with a gradient of its shape, got "
                                  f"{tuple(param.shape)} and {tuple(grad.shape)}")
        if int(chunk) < 1:
            raise ValidationError(f"chunk: must be a positive number of elements, got {chunk}")
        if unit not in ("epoch", "step"):
            raise ValidationError(f"unit: must be 'epoch' or 'step', got {unit!r}")
        self.param, self.grad = param, grad
        self.exp_avg, self.exp_avg_sq = torch.zeros_like(param), torch.zeros_like(param)
        self.chunk = int(chunk)
        self._tmp = torch.empty(min(self.chunk, param.numel()), dtype=param.dtype)
        self.lr, self.step_size, self.gamma, self.unit = float(lr), int(step_size), float(gamma), unit
        self.t = 0.0  # optimiser steps taken (torch keeps it as a float tensor and reads .item())
        self._sched_steps = 0

    def step(self, segments: list[tuple[int, int]] | None = None) -> None:
        import torch

        beta1, beta2 = BETAS
        self.t += 1.0
        step_size = (self.lr / (1 - beta1**self.t)) * -1
        bias_correction2_sqrt = (1 - beta2**self.t) ** 0.5
        n = self.param.numel()
        chunks = [(lo, min(lo + self.chunk, end)) for start, end in (segments or [(0, n)])
                  for lo in range(start, end, self.chunk)]
        for lo, hi in chunks:
            p, g = self.param[lo:hi], self.grad[lo:hi]
            m, v, d = self.exp_avg[lo:hi], self.exp_avg_sq[lo:hi], self._tmp[: hi - lo]
            m.lerp_(g, 1 - beta1)
            v.mul_(beta2)
            v.addcmul_(g, g, value=1 - beta2)
            torch.sqrt(v, out=d)
            d.div_(bias_correction2_sqrt)
            d.add_(EPS)
            p.addcdiv_(m, d, value=step_size)
        if self.unit == "step":
            self._schedule()

    def end_epoch(self) -> None:
        if self.unit == "epoch":
            self._schedule()

    def _schedule(self) -> None:
        self._sched_steps += 1
        if self._sched_steps % self.step_size == 0:
            self.lr = self.lr * self.gamma
