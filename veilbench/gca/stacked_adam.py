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
        self.t += 1.0
        self._update(segments or [(0, self.param.numel())], self.t, self.lr)
        if self.unit == "step":
            self._schedule()

    def _update(self, segments: list[tuple[int, int]], t: float, lr: float) -> None:
        """One Adam update of the flat ranges ``segments`` at step count ``t`` and learning rate ``lr``."""
        import torch

        beta1, beta2 = BETAS
        step_size = (lr / (1 - beta1**t)) * -1
        bias_correction2_sqrt = (1 - beta2**t) ** 0.5
        chunks = [(lo, min(lo + self.chunk, end)) for start, end in segments for lo in range(start, end, self.chunk)]
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

    def end_epoch(self) -> None:
        if self.unit == "epoch":
            self._schedule()

    def _schedule(self) -> None:
        self._sched_steps += 1
        if self._sched_steps % self.step_size == 0:
            self.lr = self.lr * self.gamma


class RowStackedAdam:
    r"""Adam + StepLR over ``rows`` stacked copies of a model, each row with its own step count and lr.

    ``param``/``grad`` ``(rows·P,)`` have :class:`~veilbench.gca.vectorized.StackedBuffer`'s layout:
    parameter block j (``row_sizes[j]`` = :math:`n_j` elements per row) is
    ``[rows·o_j, rows·(o_j + n_j))``, :math:`o_j = \sum_{i<j} n_i`, row r at ``rows·o_j + r·n_j``.
    Row r keeps the state of an independent ``torch.optim.Adam(foreach=True)`` + StepLR on that
    row's parameters: step count :math:`t_r`, learning rate :math:`\eta_r` and scheduler count
    (:attr:`steps`, :attr:`lrs`, :attr:`scheduler_steps`, all ``(rows,)``). ``step(lo, hi)`` moves
    rows ``lo..hi-1`` by one Adam step each, at its own :math:`t_r + 1` and :math:`\eta_r`
    (bias corrections :math:`1-\beta_{1,2}^{t_r+1}` per row), applying :class:`StackedAdam`'s
    kernel once per run of consecutive rows with equal :math:`(t_r, \eta_r)`; other rows keep
    their parameters, moments and counts. ``end_epoch(lo, hi)`` ends an epoch of those rows.
    """

    def __init__(self, param, grad, rows: int, row_sizes: list[int], lr: float, step_size: int = 1000,
                 gamma: float = 0.1, unit: Literal["epoch", "step"] = "epoch", chunk: int = CHUNK) -> None:
        import numpy as np

        self.rows, self.row_sizes = int(rows), [int(n) for n in row_sizes]
        if self.rows < 1 or min(self.row_sizes, default=0) < 1 or self.rows * sum(self.row_sizes) != param.numel():
            raise ValidationError(f"row_sizes: {rows} rows of blocks {row_sizes} must tile the {param.numel()} "
                                  f"elements of param")
        self._flat = StackedAdam(param, grad, lr, step_size, gamma, unit, chunk)
        self.offsets = np.concatenate([[0], np.cumsum(self.row_sizes)[:-1]]).astype(np.int64) * self.rows
        self.steps = np.zeros(self.rows)  # t_r: float as torch keeps it
        self.lrs = np.full(self.rows, float(lr))
        self.scheduler_steps = np.zeros(self.rows, dtype=np.int64)

    @property
    def exp_avg(self):
        return self._flat.exp_avg

    @property
    def exp_avg_sq(self):
        return self._flat.exp_avg_sq

    def segments(self, lo: int, hi: int) -> list[tuple[int, int]]:
        """Flat ranges of rows ``lo..hi-1`` in every block, adjacent ranges merged (all rows: one range)."""
        out: list[tuple[int, int]] = []
        for start, n in zip(self.offsets, self.row_sizes):
            a, b = int(start + lo * n), int(start + hi * n)
            if out and out[-1][1] == a:
                out[-1] = (out[-1][0], b)
            else:
                out.append((a, b))
        return out

    def step(self, lo: int = 0, hi: int | None = None) -> None:
        hi = self.rows if hi is None else int(hi)
        self.steps[lo:hi] += 1.0
        start = lo
        for r in range(lo + 1, hi + 1):
            if r == hi or self.steps[r] != self.steps[start] or self.lrs[r] != self.lrs[start]:
                self._flat._update(self.segments(start, r), float(self.steps[start]), float(self.lrs[start]))
                start = r
        if self._flat.unit == "step":
            self._schedule(lo, hi)

    def end_epoch(self, lo: int = 0, hi: int | None = None) -> None:
        if self._flat.unit == "epoch":
            self._schedule(lo, self.rows if hi is None else int(hi))

    def _schedule(self, lo: int, hi: int) -> None:
        for r in range(lo, hi):
            self.scheduler_steps[r] += 1
            if self.scheduler_steps[r] % self._flat.step_size == 0:
                self.lrs[r] = float(self.lrs[r]) * self._flat.gamma

    def block_views(self, flat) -> list:
        """``flat`` ``(rows·P,)`` in this layout as one ``(rows, n_j)`` view per block."""
        return [flat[int(o): int(o) + self.rows * n].view(self.rows, n) for o, n in zip(self.offsets, self.row_sizes)]
