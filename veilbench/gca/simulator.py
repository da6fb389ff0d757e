r"""Deterministic in-process federated simulator for the GCA benchmark (spec §1, §3.3, §5).

Every client holds a shard :math:`D_i` of normal records ``(N_i, d_x)``; all clients take part
in every round (full participation). Protocols:

* ``single``: each client trains its own AE (one persistent Adam), ``local_epochs`` epochs per
  round; evaluated per round with each client's model and threshold;
* ``centralized``: one AE on the pooled records, ``local_epochs`` epochs per round; threshold
  from the pooled training errors;
* ``fedavg`` / ``fedprox`` / ``fednova`` / ``dpfedavg``: one round loop
  (:func:`run_parameter_sharing`): every client trains a copy of the global model for
  ``local_epochs`` epochs with a fresh Adam — the *local step*, pluggable: one client after the
  other (:func:`sequential_local_step`) or all clients batched
  (:func:`veilbench.gca.vectorized.vectorized_local_step`) — then the server applies the rule of
  :mod:`veilbench.gca.aggregation` (:func:`aggregate`); the *global* model is evaluated once per
  round with per-client thresholds;
* ``gca``: see :mod:`veilbench.gca.gca` (evaluated after every reconstruction epoch).

Results keep the full curves (every evaluation point with its round/epoch) so
:mod:`veilbench.gca.selection` can apply the paper's or a matched protocol. Options, results,
evaluation and seed streams live in :mod:`veilbench.gca.federation` (re-exported here).
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np

from veilbench.gca import aggregation
from veilbench.gca.federation import (  # noqa: F401 - re-exported: the simulator's public names
    BYTES_PER_FLOAT,
    METHODS,
    PARAMETER_SHARING,
    CurveRecorder,
    FedConfig,
    Federation,
    Method,
    RunResult,
    Upload,
    batch_stream,
    evaluate_clients,
    initial_model,
    make_optimizer,
    noise_stream,
)
from veilbench.gca.gca import run_gca
from veilbench.gca.models import count_params
from veilbench.gca.training import flat_params, reconstruction_epoch, set_flat_params
from veilbench.validation import ValidationError

#: ``local_step(global_vec (P,), xs, cfg, rng, prox) -> (local (C, P) float64, steps (C,))``: every
#: client's ``cfg.local_epochs`` epochs from the global parameters (``prox``: with the FedProx term).
LocalStep = Callable[[np.ndarray, list, FedConfig, np.random.Generator, bool], tuple[np.ndarray, np.ndarray]]


def run_single(fed: Federation, cfg: FedConfig, seed: int) -> RunResult:
    """Single-Client baseline: isolated clients, one persistent Adam each, shared init."""
    xs, xt = fed.tensors()
    rng = batch_stream(seed)
    init = initial_model(fed.spec, seed)
    models = [copy.deepcopy(init) for _ in xs]
    opts = [make_optimizer(m.parameters(), cfg) for m in models]
    curve = CurveRecorder()
    steps = np.zeros(len(xs), dtype=np.int64)
    for r in range(1, cfg.rounds + 1):
        for i, (m, o, x) in enumerate(zip(models, opts, xs)):
            for _ in range(cfg.local_epochs):
                steps[i] += reconstruction_epoch(m, o, x, cfg.batch_size, rng)
        curve.add(r, cfg.local_epochs, evaluate_clients(models, xs, xt, fed.y_test, cfg.quantile))
    return RunResult("single", points_per_round=1, bytes_up_per_round=0, bytes_down_per_round=0,
                     local_steps=steps, final_models=models, **curve.arrays())


def run_centralized(fed: Federation, cfg: FedConfig, seed: int) -> RunResult:
    """Centralized reference: one AE on the pooled shards, threshold from pooled training errors."""
    import torch

    xs, xt = fed.tensors()
    pooled = torch.cat(xs)
    rng = batch_stream(seed)
    model = initial_model(fed.spec, seed)
    opt = make_optimizer(model.parameters(), cfg)
    curve = CurveRecorder()
    steps = 0
    for r in range(1, cfg.rounds + 1):
        for _ in range(cfg.local_epochs):
            steps += reconstruction_epoch(model, opt, pooled, cfg.batch_size, rng)
        curve.add(r, cfg.local_epochs, evaluate_clients([model], [pooled], xt, fed.y_test, cfg.quantile))
    return RunResult("centralized", points_per_round=1, bytes_up_per_round=0, bytes_down_per_round=0,
                     local_steps=np.array([steps]), info={"pooled_data_bytes": int(pooled.numel()) * BYTES_PER_FLOAT},
                     final_models=[model], **curve.arrays())


def dp_noise_multiplier(cfg: FedConfig, weights: np.ndarray) -> float:
    """Noise std over L2 sensitivity of :math:`\\sum_i p_i \\Delta_i`: :math:`(\\sigma/C)/(c\\,\\max_i p_i)`.

    Sensitivity under adding/removing one client's (clipped) update with the weights held fixed
    [A]: :math:`c \\max_i p_i` (= c/C for equal shards, giving a multiplier of σ/c).
    """
    return float((cfg.dp_sigma / weights.shape[0]) / (cfg.dp_clip * weights.max()))


def local_training(model, x, cfg: FedConfig, rng: np.random.Generator, prox_center=None) -> int:
    """One client's part of a parameter-sharing round: ``cfg.local_epochs`` reconstruction epochs of
    ``model`` on ``x`` ``(N_i, d_x)`` with a fresh Adam (plus the FedProx term when ``prox_center``
    is the global ``(P,)`` tensor); returns the optimiser steps :math:`\tau_i`."""
    opt = make_optimizer(model.parameters(), cfg)
    return sum(reconstruction_epoch(model, opt, x, cfg.batch_size, rng, prox_center, cfg.prox_mu)
               for _ in range(cfg.local_epochs))


def sequential_local_step(spec) -> LocalStep:
    """A :data:`LocalStep` training the clients one after the other on one working copy of the AE
    (a fresh Adam per client per round; mini-batches drawn client-major, then epoch)."""
    import torch

    work = initial_model(spec, 0)  # parameters overwritten from the global vector every round

    def step(global_vec, xs, cfg, rng, prox):
        center = torch.from_numpy(global_vec) if prox else None
        local = np.empty((len(xs), global_vec.shape[0]), dtype=np.float64)
        taus = np.zeros(len(xs), dtype=np.int64)
        for i, x in enumerate(xs):
            set_flat_params(work, global_vec)
            taus[i] = local_training(work, x, cfg, rng, center)
            local[i] = flat_params(work)
        return local, taus

    return step


def aggregate(method: str, global_vec: np.ndarray, local: np.ndarray, weights: np.ndarray, steps: np.ndarray,
              cfg: FedConfig, noise_rng: np.random.Generator) -> np.ndarray:
    """The server rule of ``method`` (:mod:`veilbench.gca.aggregation`): FedNova's normalised
    average, DP-FedAvg's clipped noisy average, else (FedAvg, FedProx) the weighted average."""
    if method == "fednova":
        return aggregation.fednova(global_vec, local, weights, steps.astype(np.float64))
    if method == "dpfedavg":
        return aggregation.dp_fedavg(global_vec, local, weights, cfg.dp_clip, cfg.dp_sigma, noise_rng)
    if method in ("fedavg", "fedprox"):
        return aggregation.fedavg(global_vec, local, weights)
    raise ValidationError(f"method: must be one of {PARAMETER_SHARING}, got {method!r}")


def run_parameter_sharing(method: str, fed: Federation, cfg: FedConfig, seed: int,
                          local_step: Callable[..., LocalStep] = sequential_local_step) -> RunResult:
    """FedAvg, FedProx, FedNova or DP-FedAvg (spec §5): the one round loop of every engine;
    ``local_step(spec)`` builds the engine's :data:`LocalStep`. The global model is evaluated once
    per round."""
    if method not in PARAMETER_SHARING:
        raise ValidationError(f"method: must be one of {PARAMETER_SHARING}, got {method!r}")
    xs, xt = fed.tensors()
    rng, noise_rng = batch_stream(seed), noise_stream(seed)
    global_model = initial_model(fed.spec, seed)
    step = local_step(fed.spec)
    weights = aggregation.sample_weights(fed.sizes)
    curve = CurveRecorder()
    total_steps = np.zeros(len(xs), dtype=np.int64)
    local = np.zeros((len(xs), count_params(global_model)))
    for r in range(1, cfg.rounds + 1):
        g = flat_params(global_model)
        local, taus = step(g, xs, cfg, rng, method == "fedprox")
        total_steps += taus
        set_flat_params(global_model, aggregate(method, g, local, weights, taus, cfg, noise_rng).astype(np.float32))
        curve.add(r, cfg.local_epochs, evaluate_clients([global_model], xs, xt, fed.y_test, cfg.quantile))
    payload = len(xs) * local.shape[1] * BYTES_PER_FLOAT
    return RunResult(
        method, points_per_round=1, bytes_up_per_round=payload, bytes_down_per_round=payload,
        local_steps=total_steps, victim_params=local[0].astype(np.float32),
        dp_noise_multiplier=dp_noise_multiplier(cfg, weights) if method == "dpfedavg" else None,
        final_models=[global_model], **curve.arrays(),
    )


def run_protocol(method: Method, fed: Federation, cfg: FedConfig, seed: int) -> RunResult:
    """Run ``method`` on ``fed`` with ``cfg``; the same ``seed`` gives identical results."""
    if method == "single":
        return run_single(fed, cfg, seed)
    if method == "centralized":
        return run_centralized(fed, cfg, seed)
    if method == "gca":
        return run_gca(fed, cfg, seed)
    if method in PARAMETER_SHARING:
        return run_parameter_sharing(method, fed, cfg, seed)
    raise ValidationError(f"method: must be one of {METHODS}, got {method!r}")
