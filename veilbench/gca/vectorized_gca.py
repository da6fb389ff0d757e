r"""GCA's client training vectorised over clients: C tabular AEs stacked, two persistent Adams each.

:func:`veilbench.gca.gca.run_gca` trains its C clients one after the other: client i's MLP AE
(:func:`veilbench.gca.models.tabular_ae`) keeps two Adam + StepLR optimisers for the whole run
(spec §3.3), ``rec_i`` over :math:`\theta_{E_i} \cup \theta_{D_i}` and ``al_i`` over
:math:`\theta_{E_i}` only. :class:`StackedGCAClients` holds the same state with the clients
*stacked*: their parameters in one :class:`~veilbench.gca.vectorized.StackedBuffer` (block j of
parameter j is ``(C, *shape_j)``; the encoder's parameters come first in ``parameters()`` order,
so the encoder of every client is the prefix :math:`[0, C P_E)` of the flat buffer) and each
optimiser as a :class:`~veilbench.gca.stacked_adam.RowStackedAdam` over that buffer (``rec``) or
its encoder prefix (``al``), whose rows keep their own step count :math:`t_c`, learning rate and
scheduler count: the clients of unequal shards take :math:`\lceil N_c/B\rceil` steps per epoch
each, so their bias corrections :math:`1-\beta^{t_c}` differ.

One epoch of every client (spec §4.3), client c on its mini-batches :math:`B_{c,k}`:

* reconstruction, on :math:`(\theta_{E_c}, \theta_{D_c})` through ``rec``:
  :math:`L_{rec} = \frac{1}{|B|}\sum_b \|x_b - D_c(E_c(x_b))\|_2^2`, gradients from
  :class:`~veilbench.gca.vectorized.StackedGradient` (written-out MLP backward, batched products);
* alignment, on :math:`\theta_{E_c}` only through ``al`` (the decoder is untouched):
  :math:`z_b = E_c(x_b)`, :math:`a_b = \arg\min_k \|z_b - \mu_k\|` from
  ``torch.cdist(z, mu) ** 2`` (no gradient), :math:`L_{align} = \frac{1}{|B|}\sum_b
  w_{a_b}\|z_b - \mu_{a_b}\|_2^2` (:func:`veilbench.gca.gca.alignment_loss`), so
  :math:`\partial L/\partial z_b = 2\,(\tfrac{1}{|B|} w_{a_b})(z_b - \mu_{a_b})`, back-propagated
  through the encoder only (:meth:`StackedGradient.backward`).

The mini-batches are the sequential loop's draws: client by client, one ``rng.permutation``
:math:`N_c` each (:func:`~veilbench.gca.vectorized.round_batches`). The clients then step in
lockstep, each one its own k-th batch at step k; the rows are kept ordered by batches per epoch,
longest first, so the clients still running at step k are the first :math:`a_k` rows (a client
whose epoch is over is out of the gradient pass and the optimiser), and clients whose k-th batches
differ in size (a last, partial batch) get separate gradient calls (a padded batch would change
the summation order). Every operation is, per client, the one the sequential loop's autograd and
``torch.optim.Adam(foreach=True)`` perform, so the two give the same parameters to the bit (the
tests compare with ``torch.equal``); the batched ``torch.cdist`` equals the per-client one, so the
assignments :math:`a_b` agree too.

The modules of :meth:`StackedGCAClients.models` share their parameters' memory with the stacked
buffer: like ``run_gca``'s models they always hold the current parameters (copy them to freeze).
"""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np

from veilbench.gca.federation import FedConfig
from veilbench.gca.models import AESpec
from veilbench.gca.stacked_adam import RowStackedAdam
from veilbench.gca.training import n_batches
from veilbench.gca.vectorized import StackedBuffer, StackedGradient, round_batches, step_groups
from veilbench.validation import ValidationError

STATE_GROUPS = ("reconstruction", "alignment")


class StackedGCAClients:
    """C clients' tabular AEs and their two persistent Adam + StepLR optimisers, stacked (module doc).

    With ``models[i]``, ``rec[i] = make_optimizer(models[i].parameters(), cfg)`` and
    ``al[i] = make_optimizer(models[i].encoder.parameters(), cfg)`` kept by a sequential loop,
    :meth:`reconstruction_epoch` is ``for i: reconstruction_epoch(models[i], rec[i], xs[i], B, rng)``,
    :meth:`alignment_epoch` is ``for i: alignment_epoch(models[i], al[i], xs[i], mu, w, B, rng)`` and
    :meth:`client_reconstruction_epoch` is one client's ``reconstruction_epoch``, to the bit.

    ``models``: the clients' initial AEs (list of C :func:`~veilbench.gca.models.tabular_ae`
    modules of one ``d_x``; copied, never modified); ``cfg``: the run's :class:`FedConfig`
    (``batch_size``, ``lr``, ``lr_step_size``, ``lr_gamma``, ``lr_step_unit`` are read).
    """

    def __init__(self, models: list, cfg: FedConfig) -> None:
        import torch

        self._torch = torch
        if not isinstance(models, (list, tuple)) or not models:
            raise ValidationError(f"models: need a non-empty list of tabular AEs, got {type(models).__name__}")
        if int(cfg.batch_size) < 1:
            raise ValidationError(f"batch_size: must be a positive integer, got {cfg.batch_size!r}")
        d_x = getattr(models[0], "input_dim", None)
        if not isinstance(d_x, int) or d_x < 1:
            raise ValidationError(f"models[0]: expected the tabular MLP AE (models.tabular_ae), got "
                                  f"{type(models[0]).__name__} without a positive input_dim")
        self.cfg = cfg
        self.n_clients = len(models)
        self.spec = AESpec("mlp", d_x)
        self._grad = StackedGradient(self.spec)
        shapes = self._grad.shapes
        for i, m in enumerate(models):
            got = [tuple(p.shape) for p in m.parameters()] if hasattr(m, "parameters") else None
            if got != shapes or self._grad._mlp_plan(m) != self._grad.plan:
                raise ValidationError(
                    f"models[{i}]: expected the tabular MLP AE (models.tabular_ae) on {d_x} features, parameter "
                    f"shapes {shapes}; got {type(m).__name__} with {got}")
        self.n_encoder_layers = sum(isinstance(layer, torch.nn.Linear) for layer in self._grad.template.encoder)
        sizes = [int(np.prod(s)) for s in shapes]
        n_enc = sum(sizes[: 2 * self.n_encoder_layers])
        self._buf = StackedBuffer(shapes, np.zeros(sum(sizes), dtype=np.float32), self.n_clients)
        with torch.no_grad():
            for r, m in enumerate(models):
                for v, p in zip(self._buf.views, m.parameters()):
                    v[r].copy_(p)
        c = self.n_clients
        self._opts = {
            "reconstruction": RowStackedAdam(self._buf.theta, self._buf.grad, c, sizes, cfg.lr, cfg.lr_step_size,
                                             cfg.lr_gamma, cfg.lr_step_unit),
            "alignment": RowStackedAdam(self._buf.theta[: c * n_enc], self._buf.grad[: c * n_enc], c,
                                        sizes[: 2 * self.n_encoder_layers], cfg.lr, cfg.lr_step_size,
                                        cfg.lr_gamma, cfg.lr_step_unit),
        }
        self._order = np.arange(c)  # stacked row r holds client _order[r]
        self._row = np.arange(c)  # client i sits in row _row[i]
        self._modules = [copy.deepcopy(m) for m in models]
        self._alias()

    # ----------------------------------------------------------------- epochs

    def reconstruction_epoch(self, xs: list, rng: np.random.Generator) -> np.ndarray:
        """One epoch of :math:`L_{rec}` for every client on its shard ``xs[i]`` ``(N_i, d_x)``
        (float32 tensors); returns the steps taken, ``(C,)`` int64 (:math:`\\lceil N_i/B\\rceil`)."""
        return self._epoch(xs, rng, "reconstruction", None)

    def alignment_epoch(self, xs: list, mu, w, rng: np.random.Generator) -> np.ndarray:
        """One epoch of :math:`L_{align}` (encoder only) for every client, centroids ``mu`` ``(K, D_z)``
        and weights ``w`` ``(K,)`` (float32 tensors, constants); returns the steps, ``(C,)`` int64."""
        torch = self._torch
        mu, w = torch.as_tensor(mu), torch.as_tensor(w)
        if mu.dim() != 2 or mu.shape[0] < 1 or mu.shape[1] != self.spec.latent_dim or mu.dtype != torch.float32:
            raise ValidationError(f"mu: expected float32 (K, {self.spec.latent_dim}) centroids with K >= 1, got "
                                  f"{mu.dtype} {tuple(mu.shape)}")
        if w.shape != (mu.shape[0],) or w.dtype != torch.float32:
            raise ValidationError(f"w: expected float32 weights, one per centroid ({mu.shape[0]},), got "
                                  f"{w.dtype} {tuple(w.shape)}")
        return self._epoch(xs, rng, "alignment", (mu, w))

    def client_reconstruction_epoch(self, i: int, x, rng: np.random.Generator) -> int:
        """One epoch of :math:`L_{rec}` of client ``i`` alone on ``x`` ``(N_i, d_x)``, with its persistent
        reconstruction optimiser; returns its steps."""
        if not 0 <= int(i) < self.n_clients:
            raise ValidationError(f"i: client index must lie in [0, {self.n_clients}), got {i!r}")
        x = self._check_x(x, "x")
        rows, counts = round_batches(np.array([x.shape[0]]), replace(self.cfg, local_epochs=1), rng)
        self._train(x, rows, counts, int(self._row[int(i)]), "reconstruction", None)
        return int((counts[:, 0] > 0).sum())

    def _epoch(self, xs, rng, phase: str, target) -> np.ndarray:
        if not isinstance(xs, (list, tuple)) or len(xs) != self.n_clients:
            raise ValidationError(f"xs: expected one shard per client ({self.n_clients}), got "
                                  f"{len(xs) if isinstance(xs, (list, tuple)) else type(xs).__name__}")
        xs = [self._check_x(x, f"xs[{i}]") for i, x in enumerate(xs)]
        sizes = np.array([x.shape[0] for x in xs])
        steps = np.array([n_batches(n, self.cfg.batch_size) for n in sizes], dtype=np.int64)
        self._arrange(steps)
        rows, counts = round_batches(sizes, replace(self.cfg, local_epochs=1), rng)  # the clients' draws, in order
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        rows = rows[:, self._order] + offsets[self._order][None, :, None]
        self._train(self._torch.cat(xs), rows, counts[:, self._order], 0, phase, target)
        return steps

    def _train(self, pool, rows: np.ndarray, counts: np.ndarray, lo: int, phase: str, target) -> None:
        """Rows ``lo..lo+R-1`` (``counts`` ``(T, R)``, sorted by steps, longest first) take their
        batches ``pool[rows[k, r, :counts[k, r]]]`` in lockstep, then end their epoch."""
        torch = self._torch
        opt = self._opts[phase]
        n_par = len(self._buf.views) if phase == "reconstruction" else 2 * self.n_encoder_layers
        block = pool[torch.from_numpy(rows)]  # (T, R, B, d_x)
        running = (counts > 0).sum(1)
        weights = torch.from_numpy(np.float32(1.0) / np.maximum(counts, 1).astype(np.float32))[:, :, None]
        for k in range(rows.shape[0]):
            a = int(running[k])
            views = [v[lo : lo + a] for v in self._buf.views[:n_par]]
            grads = [g[lo : lo + a] for g in self._buf.grad_views[:n_par]]
            if (counts[k, :a] == counts[k, 0]).all():
                self._gradients(views, block[k, :a, : int(counts[k, 0])], weights[k, :a], target, grads)
            else:
                for idx, s in step_groups(counts[k, :a]):
                    sel = torch.from_numpy(idx)
                    sub = [v[sel] for v in views]
                    out = [p.new_empty(p.shape) for p in sub]
                    self._gradients(sub, block[k, sel, :s], weights[k, sel], target, out)
                    for g, g_sub in zip(grads, out):
                        g[sel] = g_sub
            opt.step(lo, lo + a)
        opt.end_epoch(lo, lo + rows.shape[1])

    def _gradients(self, params: list, xb, wb, target, out: list) -> None:
        """Per-row gradients of the phase's loss into ``out``: ``target`` None → :math:`L_{rec}`
        (all parameters), ``(mu, w)`` → :math:`L_{align}` (encoder parameters only)."""
        torch = self._torch
        if target is None:
            self._grad.grads_into(params, xb, wb, out)
            return
        mu, w = target
        with torch.no_grad():
            hs = self._grad.forward(params, xb, self.n_encoder_layers)
            z = hs[-1]  # (a, s, D_z)
            assign = (torch.cdist(z, mu.expand(z.shape[0], *mu.shape)) ** 2).argmin(2)
            coef = (wb * w[assign]).mul_(2.0)  # 2 (1/|B|) w_{a_b}, (a, s): autograd's products
            delta = z.sub_(mu[assign]).mul_(coef[:, :, None])  # dL/dz in place: z is not read again
            self._grad.backward(params, hs, delta, out)

    # ------------------------------------------------------------ state

    def models(self) -> list:
        """The clients' AEs (``nn.Module``, client order), their parameters views of the stacked buffer:
        they follow later training (copy :func:`~veilbench.gca.training.flat_params` into a fresh
        module to freeze or export one; a deep copy or pickle of one of them carries the whole buffer)."""
        return list(self._modules)

    def state_dict(self) -> dict:
        """Everything a resumed run needs, in client order, as tensors: ``params`` ``(C, P)`` float32
        (``parameters()`` order) and per optimiser (``reconstruction`` over all P, ``alignment``
        over the encoder's :math:`P_E`): ``exp_avg``, ``exp_avg_sq`` ``(C, ·)``, ``steps`` and ``lrs``
        ``(C,)`` float64, ``scheduler_steps`` ``(C,)`` int64. ``torch.save(weights_only=True)``-able."""
        torch = self._torch
        rec = self._opts["reconstruction"]
        rows = torch.from_numpy(self._row)

        def per_client(opt, flat):
            return torch.cat(opt.block_views(flat), dim=1)[rows].clone()

        state = {"params": per_client(rec, self._buf.theta)}
        for name, opt in self._opts.items():
            state[name] = {"exp_avg": per_client(opt, opt.exp_avg), "exp_avg_sq": per_client(opt, opt.exp_avg_sq),
                           "steps": torch.from_numpy(opt.steps[self._row].copy()),
                           "lrs": torch.from_numpy(opt.lrs[self._row].copy()),
                           "scheduler_steps": torch.from_numpy(opt.scheduler_steps[self._row].copy())}
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`'s output; every shape and dtype is checked before anything is
        written (the modules keep their identity)."""
        torch = self._torch
        c = self.n_clients
        if not isinstance(state, dict):
            raise ValidationError(f"state: expected the dict of state_dict(), got {type(state).__name__}")
        self._check_state(state.get("params"), "state['params']", (c, self._buf.theta.numel() // c), torch.float32)
        kinds = {"exp_avg": torch.float32, "exp_avg_sq": torch.float32, "steps": torch.float64,
                 "lrs": torch.float64, "scheduler_steps": torch.int64}
        for name, opt in self._opts.items():
            group = state.get(name)
            if not isinstance(group, dict):
                raise ValidationError(f"state['{name}']: missing the optimiser's state (a dict of {sorted(kinds)})")
            for key, dtype in kinds.items():
                shape = (c, opt.exp_avg.numel() // c) if key.startswith("exp_avg") else (c,)
                self._check_state(group.get(key), f"state['{name}']['{key}']", shape, dtype)
        order = torch.from_numpy(self._order)
        with torch.no_grad():
            self._scatter(self._opts["reconstruction"], self._buf.theta, state["params"][order])
            for name, opt in self._opts.items():
                for key in ("exp_avg", "exp_avg_sq"):
                    self._scatter(opt, getattr(opt, key), state[name][key][order])
                for key in ("steps", "lrs", "scheduler_steps"):
                    getattr(opt, key)[:] = state[name][key].numpy()[self._order]

    # ------------------------------------------------------------ helpers

    def _check_x(self, x, name: str):
        torch = self._torch
        if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[0] < 1 or x.shape[1] != self.spec.input_dim \
                or x.dtype != torch.float32:
            got = f"{x.dtype} {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValidationError(f"{name}: expected a float32 tensor (n >= 1, {self.spec.input_dim}), got {got}")
        return x

    def _check_state(self, value, name: str, shape: tuple, dtype) -> None:
        torch = self._torch
        if not isinstance(value, torch.Tensor) or tuple(value.shape) != shape or value.dtype != dtype:
            got = f"{value.dtype} {tuple(value.shape)}" if isinstance(value, torch.Tensor) else type(value).__name__
            raise ValidationError(f"{name}: expected a {dtype} tensor of shape {shape}, got {got}")

    def _scatter(self, opt: RowStackedAdam, flat, rows) -> None:
        """Write ``rows`` ``(C, P)`` (stacked-row order) into ``flat`` in ``opt``'s block layout."""
        lo = 0
        for view, n in zip(opt.block_views(flat), opt.row_sizes):
            view.copy_(rows[:, lo : lo + n])
            lo += n

    def _arrange(self, steps: np.ndarray) -> None:
        """Keep the rows sorted by the clients' ``steps`` per epoch, longest first (stable): permute
        every stacked tensor and per-row count once when the order changes."""
        torch = self._torch
        order = np.argsort(-steps, kind="stable")
        if np.array_equal(order, self._order):
            return
        src = torch.from_numpy(self._row[order])  # current row of each client, in the new order
        rec = self._opts["reconstruction"]
        with torch.no_grad():
            for opt, flat in [(rec, self._buf.theta)] + [(o, t) for o in self._opts.values()
                                                         for t in (o.exp_avg, o.exp_avg_sq)]:
                for view in opt.block_views(flat):
                    view.copy_(view[src])
        for opt in self._opts.values():
            for arr in (opt.steps, opt.lrs, opt.scheduler_steps):
                arr[:] = arr[src.numpy()]
        self._order, self._row = order, np.argsort(order)
        self._alias()

    def _alias(self) -> None:
        """Point every module's parameters at its client's row of the stacked buffer."""
        for i, m in enumerate(self._modules):
            for p, v in zip(m.parameters(), self._buf.views):
                p.data = v[int(self._row[i])]
