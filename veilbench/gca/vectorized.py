r"""Client-vectorised local step for parameter-sharing FL: stacked clients, one Adam.

The sequential local step (:func:`veilbench.gca.simulator.sequential_local_step`) trains C client
copies of the global model :math:`\theta^{(r)}` one after the other. Here the C copies are *stacked*:
one flat buffer of :math:`C \cdot P` elements (:class:`StackedBuffer`) seen as one tensor of shape
``(C, *shape)`` per parameter, advanced together:

* **Gradient.** Client c's loss on its k-th mini-batch :math:`B_{c,k}` (Eq. 2 of the spec) is
  :math:`L_c(\theta_c) = \sum_{b \in B_{c,k}} w_{c,k}\, \|x_b - f(\theta_c; x_b)\|_2^2` with
  :math:`w_{c,k} = 1/|B_{c,k}|`; :class:`StackedGradient` returns every
  :math:`\nabla_{\theta_c} L_c` at once (batched matrix products for the MLP AE, ``torch.func``
  ``vmap(grad)`` for other modules). Clients whose batches have the same size share one call;
  the FedProx term adds :math:`2\mu(\theta_c - \theta^{(r)})` (:math:`\mu\|\theta_c-\theta^{(r)}\|_2^2`,
  spec §11.4).
* **Optimiser.** Adam with the run's StepLR (:class:`veilbench.gca.stacked_adam.StackedAdam`,
  torch's ``Adam(foreach=True)`` to the bit, as :class:`~veilbench.gca.training.LocalOptimizer`
  builds it for the sequential step) over the flat buffer. Adam is elementwise, so it equals C
  independent Adams *provided every client has taken the same number of steps*: the buffer has
  one step count, shared by the C clients. The clients therefore step in
  lockstep from the round's fresh optimiser: client c's trajectory is its first
  :math:`\tau_c = E\lceil N_c/B\rceil` steps (its E epochs back to back, the order of the
  sequential step) and its row is copied out right after step :math:`\tau_c`. Each step of client c
  is thus exactly its k-th step of a fresh Adam, bias corrections :math:`1-\beta_{1,2}^{k}`
  included; no masked optimiser is needed. A StepLR stepped per optimiser step fires at the same k
  for every client, so it is exact too; one stepped per epoch is exact when every client has the
  same batches per epoch, or when it never fires within a round (``local_epochs <= lr_step_size``);
  other settings are refused.
* **Running clients only.** The rows are ordered by :math:`\tau_c`, longest first, so the clients
  still running at step k are the first :math:`a_k = |\{c : \tau_c > k\}|` rows of every
  parameter's view: the gradient pass and the optimiser touch only those (each parameter's first
  :math:`a_k` rows, :meth:`StackedBuffer.segments`; Adam being elementwise, the other rows' state
  is simply left as it is). A round thus costs :math:`\sum_c \tau_c` client-steps, as the
  sequential step does, instead of :math:`C \max_c \tau_c` (a long-tail partition's clients
  differ in :math:`\tau_c` several-fold).

Mini-batch order is drawn from the same ``numpy`` stream, in the same order (client-major, then
epoch), as the sequential step. On the MLP AE every operation is the one the sequential step's
autograd and Adam perform, element for element, so both engines give the same parameters (to the
bit on the platforms tested; the tests allow 1e-5). The round loop, aggregation and evaluation are
the simulator's (:func:`veilbench.gca.simulator.run_parameter_sharing` with
:func:`vectorized_local_step`).
"""

from __future__ import annotations

import numpy as np

from veilbench.gca.federation import PARAMETER_SHARING, FedConfig, Federation, RunResult, initial_model
from veilbench.gca.simulator import run_parameter_sharing
from veilbench.gca.stacked_adam import StackedAdam
from veilbench.gca.training import n_batches
from veilbench.validation import ValidationError


def round_batches(sizes: np.ndarray, cfg: FedConfig, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    r"""Every client's mini-batches of one round as one padded index array.

    Client c (``sizes[c]`` = :math:`N_c` rows) draws ``cfg.local_epochs`` permutations of its rows
    from ``rng`` (clients in order, then epochs: the sequential step's draws); epoch e is cut into
    :math:`\lceil N_c/B\rceil` batches of ``B = cfg.batch_size`` rows (the last one shorter) and
    the epochs follow each other. Returns ``(rows (T, C, B) int64, counts (T, C) int64)`` with
    :math:`T = \max_c \tau_c`: client c's k-th batch is ``rows[k, c, :counts[k, c]]`` (row indices
    into its shard); ``counts[k, c] = 0`` once its :math:`\tau_c` steps are done.
    """
    bsz, epochs = int(cfg.batch_size), int(cfg.local_epochs)
    nb = np.array([n_batches(n, bsz) for n in sizes])
    total = int(nb.max()) * epochs
    rows = np.zeros((total, len(sizes), bsz), dtype=np.int64)
    counts = np.zeros((total, len(sizes)), dtype=np.int64)
    for c, n in enumerate(sizes):
        n = int(n)
        perm = np.full((epochs, nb[c] * bsz), -1, dtype=np.int64)
        for e in range(epochs):
            perm[e, :n] = rng.permutation(n)
        perm = perm.reshape(epochs * nb[c], bsz)
        rows[: len(perm), c] = np.maximum(perm, 0)
        counts[: len(perm), c] = (perm >= 0).sum(1)
    return rows, counts


def step_groups(counts: np.ndarray) -> list[tuple[np.ndarray, int]]:
    """The clients of one step grouped by batch size: ``[(clients (C_s,), s), ...]`` for every
    distinct non-zero count ``s`` in ``counts`` ``(C,)``; finished clients (count 0) are in none."""
    return [(np.flatnonzero(counts == s), int(s)) for s in np.unique(counts) if s > 0]


def check_schedule(sizes: np.ndarray, cfg: FedConfig) -> None:
    """Refuse a per-epoch StepLR that would fire within a round on clients with different batch counts
    (the stacked optimiser has one schedule; module doc)."""
    nb = {n_batches(n, cfg.batch_size) for n in sizes}
    if cfg.lr_step_unit == "epoch" and len(nb) > 1 and cfg.local_epochs > cfg.lr_step_size:
        raise ValidationError(
            f"lr_step_size: with a per-epoch StepLR and clients of different batch counts the vectorised engine "
            f"needs local_epochs <= lr_step_size (no decay within a round); got lr_step_size={cfg.lr_step_size}, "
            f"local_epochs={cfg.local_epochs}")


class StackedGradient:
    """Per-client gradients of the reconstruction loss for stacked copies of one template module.

    ``grads(params, xb, wb)``: ``params`` the stacked tensors ``(C, *shape)`` in the template's
    ``parameters()`` order, ``xb`` ``(C, B, d_x)`` mini-batches, ``wb`` ``(C, B)`` row weights (or
    ``(C, 1)``: one per client);
    returns :math:`\\nabla_{\\theta_c} \\sum_b w_{c,b}\\|x_{c,b} - f(\\theta_c; x_{c,b})\\|_2^2` for
    every c, one ``(C, *shape)`` tensor per parameter. Two implementations of the same maths:

    * an MLP (encoder and decoder ``nn.Sequential`` of ``Linear`` and ``ReLU`` layers, e.g. the
      tabular AE) gets the backward pass written out with batched matrix products
      (``torch.baddbmm``/``torch.bmm``): for a layer :math:`z = h W^\\top + b` with upstream
      gradient :math:`\\delta = \\partial L/\\partial z` ``(C, B, out)``,
      :math:`\\partial L/\\partial W = \\delta^\\top h`, :math:`\\partial L/\\partial b = \\sum_b \\delta_b`,
      :math:`\\partial L/\\partial h = \\delta W`, a ReLU passing :math:`\\delta` where its output is
      positive; the output gradient is :math:`2 w_b (f(x_b) - x_b)`. No autograd graph, no vmap.
    * any other module (the conv AE) uses ``torch.func``:
      ``vmap(grad(loss), in_dims=(0, 0, 0))`` with ``functional_call`` on the template.

    The written-out MLP pass performs, per client, the products and ReLU masks autograd performs
    for ``nn.Linear``/``nn.ReLU``, so it reproduces the sequential step's gradients to the bit on
    the platforms tested, without autograd's or vmap's per-operation overhead. The batched
    convolutions of the ``torch.func`` path sum in another order: gradients agree to float
    rounding, and over many steps the two trajectories can drift further apart at isolated
    parameters (a ReLU flipping on a near-zero pre-activation).
    """

    def __init__(self, spec) -> None:
        import torch

        self._torch = torch
        self.template = initial_model(spec, 0)  # its parameter values are never read
        self.shapes = [tuple(p.shape) for p in self.template.parameters()]
        self.plan = self._mlp_plan(self.template)
        self._work = None  # (shape key, layer outputs, input gradients) of the last MLP pass
        self.grads = self._mlp_grads if self.plan is not None else self._func_grads()

    def _mlp_plan(self, template) -> list[bool] | None:
        """Per Linear layer, whether a ReLU follows it; None when the module is not such an MLP."""
        nn = self._torch.nn
        layers = [*getattr(template, "encoder", []), *getattr(template, "decoder", [])]
        if getattr(template, "latent_shape", None) is not None or not layers or not isinstance(layers[0], nn.Linear):
            return None
        relu_after, linears = [], []
        for layer in layers:
            if isinstance(layer, nn.Linear) and layer.bias is not None:
                relu_after.append(False)
                linears.append(layer)
            elif isinstance(layer, nn.ReLU) and not relu_after[-1]:
                relu_after[-1] = True
            else:
                return None
        order = [id(p) for layer in linears for p in (layer.weight, layer.bias)]
        return relu_after if order == [id(p) for p in template.parameters()] else None

    def _workspace(self, n_clients: int, rows: int, like) -> tuple[list, list]:
        """Activation buffers ``(C, rows, width)`` of every layer output and every hidden-layer input
        gradient, reused while the shape stays the same (the last shape only is kept)."""
        key = (n_clients, rows)
        if self._work is None or self._work[0] != key:
            widths = [self.shapes[2 * k][0] for k in range(len(self.plan))]  # out features of layer k
            ins = [self.shapes[2 * k][1] for k in range(len(self.plan))]
            self._work = (key, [like.new_empty(n_clients, rows, w) for w in widths],
                          [like.new_empty(n_clients, rows, w) for w in ins])
        return self._work[1], self._work[2]

    def _mlp_grads(self, params: list, xb, wb, out: list | None = None) -> list:
        torch = self._torch
        if out is None:
            out = [p.new_empty(p.shape) for p in params]
        with torch.no_grad():
            hs = self.forward(params, xb, len(self.plan))
            delta = hs[-1].sub_(xb).mul_((2.0 * wb)[:, :, None])  # (f(x) - x) 2w in place: the output is not read again
            self.backward(params, hs, delta, out)
        return out

    def forward(self, params: list, xb, layers: int) -> list:
        """The MLP's first ``layers`` Linear layers (with their ReLUs) on ``xb`` ``(C, B, d_x)``,
        no autograd: ``[xb, h_1, ..., h_layers]``, :math:`h_k` ``(C, B, width_k)`` in the reused
        workspace (valid until the next pass of the same shape)."""
        torch = self._torch
        outs, _ = self._workspace(xb.shape[0], xb.shape[1], xb)
        hs, h = [xb], xb
        for k in range(layers):
            h = torch.baddbmm(params[2 * k + 1][:, None, :], h, params[2 * k].transpose(1, 2), out=outs[k])
            if self.plan[k]:
                h = h.relu_()
            hs.append(h)
        return hs

    def backward(self, params: list, hs: list, delta, out: list) -> None:
        """Gradients of the first ``len(hs) - 1`` layers from :math:`\\delta = \\partial L/\\partial h_{last}`
        ``(C, B, width)`` (overwritten), with ``hs`` from :meth:`forward`: layer k's weight and bias
        gradients into ``out[2k]``, ``out[2k + 1]`` (class doc)."""
        torch = self._torch
        _, dins = self._workspace(delta.shape[0], delta.shape[1], delta)
        for k in range(len(hs) - 2, -1, -1):
            torch.bmm(delta.transpose(1, 2), hs[k], out=out[2 * k])
            torch.sum(delta, 1, out=out[2 * k + 1])
            if k > 0:
                delta = torch.bmm(delta, params[2 * k], out=dins[k])
                if self.plan[k - 1]:  # ReLU backward: delta where the output is > 0 (autograd's kernel)
                    torch.ops.aten.threshold_backward.grad_input(delta, hs[k], 0.0, grad_input=delta)

    def _func_grads(self):
        from torch.func import functional_call, grad, vmap

        template = self.template
        names = [name for name, _ in template.named_parameters()]

        def loss(params, xb, wb):
            recon = functional_call(template, dict(zip(names, params)), (xb,))
            return (wb * ((xb - recon) ** 2).sum(1)).sum()

        batched = vmap(grad(loss), in_dims=(0, 0, 0))
        return lambda params, xb, wb: list(batched(tuple(params), xb, wb))

    def grads_into(self, params: list, xb, wb, out: list) -> None:
        """:attr:`grads` written into ``out``, one ``(C, *shape)`` tensor per parameter."""
        if self.plan is not None:
            self._mlp_grads(params, xb, wb, out)
        else:
            for o, g in zip(out, self.grads(params, xb, wb)):
                o.copy_(g)

    def stack(self, global_vec: np.ndarray, n_clients: int) -> "StackedBuffer":
        """``n_clients`` copies of the flat ``(P,)`` ``global_vec`` in one :class:`StackedBuffer`."""
        return StackedBuffer(self.shapes, global_vec, n_clients)


class StackedBuffer:
    """C copies of a model's parameters in one flat float32 buffer, with a gradient buffer of the same layout.

    ``theta`` and ``grad`` are ``(C·P,)``, laid out parameter by parameter: parameter j (shape
    :math:`s_j`, :math:`n_j` elements, ``parameters()`` order) is the contiguous block
    ``[C·o_j, C·(o_j + n_j))``, :math:`o_j = \\sum_{i<j} n_i`, seen as ``views[j]``
    (``grad_views[j]``) of shape ``(C, *s_j)``; row c of every view is client c's copy. The
    optimiser updates the flat buffers, the gradient pass reads and writes the views.
    """

    def __init__(self, shapes: list[tuple], global_vec: np.ndarray, n_clients: int) -> None:
        import torch

        sizes = [int(np.prod(shape)) for shape in shapes]
        vec = torch.as_tensor(np.asarray(global_vec), dtype=torch.float32)
        if vec.shape != (sum(sizes),):
            raise ValidationError(f"global_vec: expected shape ({sum(sizes)},), got {tuple(vec.shape)}")
        self.n_clients = int(n_clients)
        self.theta = torch.empty(self.n_clients * vec.shape[0], dtype=torch.float32)
        self.grad = torch.zeros_like(self.theta)
        self.views, self.grad_views = [], []
        offset = 0
        for shape, n in zip(shapes, sizes):
            block = slice(self.n_clients * offset, self.n_clients * (offset + n))
            view = self.theta[block].view(self.n_clients, *shape)
            view.copy_(vec[offset : offset + n].view(shape).expand_as(view))
            self.views.append(view)
            self.grad_views.append(self.grad[block].view(self.n_clients, *shape))
            offset += n

    def segments(self, active: int) -> list[tuple[int, int]]:
        """The flat ranges ``[(lo, hi), ...]`` of the first ``active`` clients' rows, one per parameter
        block: ``[C·o_j, C·o_j + active·n_j)``."""
        out, offset = [], 0
        for view in self.views:
            n = view[0].numel()
            out.append((self.n_clients * offset, self.n_clients * offset + active * n))
            offset += n
        return out

    def rows(self, clients: np.ndarray) -> np.ndarray:
        """The flat ``(P,)`` parameter vectors of ``clients`` ``(k,)``, ``(k, P)`` float64."""
        import torch

        sel = torch.from_numpy(np.asarray(clients, dtype=np.int64))
        return torch.cat([v[sel].flatten(1) for v in self.views], dim=1).double().numpy()


def _local_round(model: StackedGradient, global_vec, xs, cfg: FedConfig, rng: np.random.Generator, prox: bool):
    """All clients' ``cfg.local_epochs`` epochs from ``global_vec``; returns ``(local (C, P) float64, steps (C,))``.

    The batches are drawn in the clients' order (:func:`round_batches`), then the clients are
    stacked longest-running first, so that step k works on the first :math:`a_k` rows only
    (module doc). Each step computes the gradient once per group of running clients with the same
    batch size (:func:`step_groups`), on exactly their rows: a padded batch would change the
    summation order of the batched products and so the last bits, which the chaotic Adam
    trajectory of a ReLU network amplifies. With one group (equal shards, no partial batch) the
    step is one call on the stacked views themselves, writing into the gradient buffer.
    """
    torch = model._torch
    n_clients = len(xs)
    sizes = np.array([x.shape[0] for x in xs])
    check_schedule(sizes, cfg)
    rows, counts = round_batches(sizes, cfg, rng)
    taus = (counts > 0).sum(0).astype(np.int64)
    per_epoch = n_batches(int(sizes.max()), cfg.batch_size)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    order = np.argsort(-taus, kind="stable")  # stacked row r holds client order[r]
    rows, counts = rows[:, order] + offsets[order][None, :, None], counts[:, order]
    running = (taus[order][None, :] > np.arange(rows.shape[0])[:, None]).sum(1)  # a_k, (T,)
    pool, index = torch.cat(list(xs)), torch.from_numpy(rows)
    # 1/|B_ck| as a float32 division, one weight per client and step: (T, C, 1)
    weights = torch.from_numpy(np.float32(1.0) / np.maximum(counts, 1).astype(np.float32))[:, :, None]
    buf = model.stack(global_vec, n_clients)
    center = buf.theta.clone() if prox and cfg.prox_mu > 0 else None
    opt = StackedAdam(buf.theta, buf.grad, cfg.lr, cfg.lr_step_size, cfg.lr_gamma, cfg.lr_step_unit)
    local = np.empty((n_clients, global_vec.shape[0]), dtype=np.float64)
    for k in range(rows.shape[0]):
        a = int(running[k])
        if k % per_epoch == 0:  # the running clients' next per_epoch batches in one gather, (per_epoch, a, B, d_x)
            block = pool[index[k : k + per_epoch, :a]]
        xk = block[k % per_epoch, :a]
        views, grad_views = [v[:a] for v in buf.views], [g[:a] for g in buf.grad_views]
        if (counts[k, :a] == counts[k, 0]).all():
            s = int(counts[k, 0])
            model.grads_into(views, xk[:, :s], weights[k, :a], grad_views)
        else:
            for idx, s in step_groups(counts[k, :a]):
                sel = torch.from_numpy(idx)
                sub = model.grads([v[sel] for v in views], xk[sel, :s], weights[k, sel])
                for g, g_sub in zip(grad_views, sub):
                    g[sel] = g_sub
        segments = None if a == n_clients else buf.segments(a)
        if center is not None:  # FedProx: + mu * 2 (theta_c - theta^(r)), rounded as autograd does
            for lo, hi in segments or [(0, buf.theta.numel())]:
                buf.grad[lo:hi].add_((buf.theta[lo:hi] - center[lo:hi]).mul_(2.0).mul_(cfg.prox_mu))
        opt.step(segments)
        if (k + 1) % per_epoch == 0:
            opt.end_epoch()
        if k + 1 == rows.shape[0] or running[k + 1] < a:  # stacked rows running[k+1]..a-1 took their last step
            done = np.arange(int(running[k + 1]) if k + 1 < rows.shape[0] else 0, a)
            local[order[done]] = buf.rows(done)
    return local, taus


def vectorized_local_step(spec):
    """A :data:`~veilbench.gca.simulator.LocalStep` advancing all clients at once (module doc)."""
    model = StackedGradient(spec)

    def step(global_vec, xs, cfg, rng, prox):
        return _local_round(model, global_vec, xs, cfg, rng, prox)

    return step


def run_parameter_sharing_vectorized(method: str, fed: Federation, cfg: FedConfig, seed: int,
                                     checkpoints=None) -> RunResult:
    """Same protocol and outputs as :func:`veilbench.gca.simulator.run_parameter_sharing`, clients batched
    (on the CPU)."""
    if method not in PARAMETER_SHARING:
        raise ValidationError(f"method: must be one of {PARAMETER_SHARING}, got {method!r}")
    if cfg.device != "cpu":
        raise ValidationError(f"device: the vectorised engine runs on the CPU only, got {cfg.device!r}")
    check_schedule(fed.sizes, cfg)
    return run_parameter_sharing(method, fed, cfg, seed, local_step=vectorized_local_step, checkpoints=checkpoints)
