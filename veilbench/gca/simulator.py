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

Results keep the full curves (every evaluation point with its round/epoch, on the test and the
validation pools) so :mod:`veilbench.gca.selection` can apply the validation, the paper's or a
matched protocol. Every runner takes an optional :class:`~veilbench.checkpoints.RoundCheckpoints`:
it saves its whole state after each round and, finding round r saved, continues at r + 1 with
the bits of an uninterrupted run. DP-FedAvg's runs record the noise the server actually added
(its sum of squares, element count and first elements per round) for the white-box noise audit.
Options, results, evaluation and seed streams live in :mod:`veilbench.gca.federation`
(re-exported here).
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
    EvalPools,
    FedConfig,
    Federation,
    Method,
    RunResult,
    Upload,
    batch_stream,
    client_map,
    evaluate_clients,
    evaluate_pools,
    initial_model,
    make_optimizer,
    noise_stream,
)
from veilbench.gca.gca import run_gca
from veilbench.gca.models import count_params
from veilbench.gca.training import flat_params, minibatches, reconstruction_epoch, set_flat_params
from veilbench.validation import ValidationError

#: ``local_step(global_vec (P,), xs, cfg, rng, prox) -> (local (C, P) float64, steps (C,))``: every
#: client's ``cfg.local_epochs`` epochs from the global parameters (``prox``: with the FedProx term).
LocalStep = Callable[[np.ndarray, list, FedConfig, np.random.Generator, bool], tuple[np.ndarray, np.ndarray]]


def _resume(checkpoints):
    """``(first round to run, saved state or None)`` of a runner's checkpoints."""
    saved = checkpoints.load() if checkpoints is not None else None
    return (1, None) if saved is None else (saved[0] + 1, saved[1])


def run_single(fed: Federation, cfg: FedConfig, seed: int, checkpoints=None) -> RunResult:
    """Single-Client baseline: isolated clients, one persistent Adam each, shared init."""
    xs, _ = fed.tensors(cfg.device)
    pools = fed.pools(cfg.device)
    rng = batch_stream(seed)
    init = initial_model(fed.spec, seed, cfg.device)
    models = [copy.deepcopy(init) for _ in xs]
    opts = [make_optimizer(m.parameters(), cfg) for m in models]
    curve = CurveRecorder()
    steps = np.zeros(len(xs), dtype=np.int64)
    start, state = _resume(checkpoints)
    if state is not None:
        for m, o, sm, so in zip(models, opts, state["models"], state["opts"], strict=True):
            m.load_state_dict(sm)
            o.load_state_dict(so)
        rng.bit_generator.state, curve, steps = state["rng"], CurveRecorder(state["curve"]), np.asarray(state["steps"])
    for r in range(start, cfg.rounds + 1):
        for i, (m, o, x) in enumerate(zip(models, opts, xs)):
            for _ in range(cfg.local_epochs):
                steps[i] += reconstruction_epoch(m, o, x, cfg.batch_size, rng)
        curve.add(r, cfg.local_epochs, evaluate_pools(models, xs, pools, cfg.quantile))
        if checkpoints is not None:
            checkpoints.save(r, {"models": [m.state_dict() for m in models], "opts": [o.state_dict() for o in opts],
                                 "rng": rng.bit_generator.state, "curve": curve.state(), "steps": steps})
    return RunResult("single", points_per_round=1, bytes_up_per_round=0, bytes_down_per_round=0,
                     local_steps=steps, final_models=models, **curve.arrays())


def run_centralized(fed: Federation, cfg: FedConfig, seed: int, checkpoints=None) -> RunResult:
    """Centralized reference: one AE on the pooled shards, threshold from pooled training errors."""
    import torch

    xs, _ = fed.tensors(cfg.device)
    pools = fed.pools(cfg.device)
    pooled = torch.cat(xs)
    rng = batch_stream(seed)
    model = initial_model(fed.spec, seed, cfg.device)
    opt = make_optimizer(model.parameters(), cfg)
    curve = CurveRecorder()
    steps = 0
    start, state = _resume(checkpoints)
    if state is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        rng.bit_generator.state, curve, steps = state["rng"], CurveRecorder(state["curve"]), int(state["steps"])
    for r in range(start, cfg.rounds + 1):
        for _ in range(cfg.local_epochs):
            steps += reconstruction_epoch(model, opt, pooled, cfg.batch_size, rng)
        curve.add(r, cfg.local_epochs, evaluate_pools([model], [pooled], pools, cfg.quantile))
        if checkpoints is not None:
            checkpoints.save(r, {"model": model.state_dict(), "opt": opt.state_dict(), "rng": rng.bit_generator.state,
                                 "curve": curve.state(), "steps": steps})
    return RunResult("centralized", points_per_round=1, bytes_up_per_round=0, bytes_down_per_round=0,
                     local_steps=np.array([steps]), info={"pooled_data_bytes": int(pooled.numel()) * BYTES_PER_FLOAT},
                     final_models=[model], **curve.arrays())


def dp_noise_multiplier(cfg: FedConfig, weights: np.ndarray) -> float:
    """Noise std over L2 sensitivity of :math:`\\sum_i p_i \\Delta_i`: :math:`(\\sigma/C)/(c\\,\\max_i p_i)`.

    Sensitivity under adding/removing one client's (clipped) update with the weights held fixed
    [A]: :math:`c \\max_i p_i` (= c/C for equal shards, giving a multiplier of σ/c).
    """
    return float((cfg.dp_sigma / weights.shape[0]) / (cfg.dp_clip * weights.max()))


def local_training(model, x, cfg: FedConfig, rng, prox_center=None) -> int:
    """One client's part of a parameter-sharing round: ``cfg.local_epochs`` reconstruction epochs of
    ``model`` on ``x`` ``(N_i, d_x)`` with a fresh Adam (plus the FedProx term when ``prox_center``
    is the global ``(P,)`` tensor); returns the optimiser steps :math:`\tau_i`. ``rng``: a generator
    or the client's epochs' batches already drawn (a list per epoch)."""
    opt = make_optimizer(model.parameters(), cfg)
    drawn = rng if isinstance(rng, list) else [rng] * cfg.local_epochs
    return sum(reconstruction_epoch(model, opt, x, cfg.batch_size, epoch, prox_center, cfg.prox_mu)
               for epoch in drawn)


def sequential_local_step(spec) -> LocalStep:
    """A :data:`LocalStep` training each client on a working copy of the AE (a fresh Adam per client
    per round). The mini-batches are drawn client-major, then epoch, before any client trains, so the
    clients may train side by side (``cfg.client_threads`` threads, one working copy each) with the
    bits of the one-after-the-other loop."""
    import torch

    work: list = []  # built on the run's device at the first round; parameters overwritten from the global vector

    def step(global_vec, xs, cfg, rng, prox):
        threads = max(1, min(cfg.client_threads, len(xs)))
        while len(work) < threads:
            work.append(initial_model(spec, 0, cfg.device))
        center = torch.from_numpy(global_vec).to(cfg.device) if prox else None
        drawn = [[minibatches(x.shape[0], cfg.batch_size, rng) for _ in range(cfg.local_epochs)] for x in xs]
        local = np.empty((len(xs), global_vec.shape[0]), dtype=np.float64)
        taus = np.zeros(len(xs), dtype=np.int64)

        def train(t: int) -> None:  # working copy t trains clients t, t + threads, …
            for i in range(t, len(xs), threads):
                set_flat_params(work[t], global_vec)
                taus[i] = local_training(work[t], xs[i], cfg, drawn[i], center)
                local[i] = flat_params(work[t])

        client_map(train, list(range(threads)), threads)
        return local, taus

    return step


def aggregate(method: str, global_vec: np.ndarray, local: np.ndarray, weights: np.ndarray, steps: np.ndarray,
              cfg: FedConfig, noise_rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None]:
    """The server rule of ``method`` (:mod:`veilbench.gca.aggregation`): FedNova's normalised
    average, DP-FedAvg's clipped noisy average, else (FedAvg, FedProx) the weighted average;
    returns ``(new global (P,), the noise added (P,) or None)``."""
    if method == "fednova":
        return aggregation.fednova(global_vec, local, weights, steps.astype(np.float64)), None
    if method == "dpfedavg":
        mean, noise = aggregation.clipped_mean_and_noise(global_vec, local, weights, cfg.dp_clip, cfg.dp_sigma,
                                                         noise_rng, 1)
        return mean + noise[0], noise[0]
    if method in ("fedavg", "fedprox"):
        return aggregation.fedavg(global_vec, local, weights), None
    raise ValidationError(f"method: must be one of {PARAMETER_SHARING}, got {method!r}")


#: First noise elements of each DP-FedAvg round kept for the white-box audit's normality test.
NOISE_SAMPLE = 256


def run_parameter_sharing(method: str, fed: Federation, cfg: FedConfig, seed: int,
                          local_step: Callable[..., LocalStep] = sequential_local_step, checkpoints=None) -> RunResult:
    """FedAvg, FedProx, FedNova or DP-FedAvg (spec §5): the one round loop of every engine;
    ``local_step(spec)`` builds the engine's :data:`LocalStep`. The global model is evaluated once
    per round. DP-FedAvg's ``info`` keeps, per round, the sum of squares and count of the noise
    elements the server added and its first :data:`NOISE_SAMPLE` elements (``dp_noise``)."""
    if method not in PARAMETER_SHARING:
        raise ValidationError(f"method: must be one of {PARAMETER_SHARING}, got {method!r}")
    xs, _ = fed.tensors(cfg.device)
    pools = fed.pools(cfg.device)
    rng, noise_rng = batch_stream(seed), noise_stream(seed)
    global_model = initial_model(fed.spec, seed, cfg.device)
    step = local_step(fed.spec)
    weights = aggregation.sample_weights(fed.sizes)
    curve = CurveRecorder()
    total_steps = np.zeros(len(xs), dtype=np.int64)
    victim = np.zeros(count_params(global_model), dtype=np.float32)
    noise_log: dict[str, list] = {"sum_sq": [], "count": [], "sample": []}
    start, state = _resume(checkpoints)
    if state is not None:
        set_flat_params(global_model, state["global"])
        rng.bit_generator.state, noise_rng.bit_generator.state = state["rng"], state["noise_rng"]
        curve, total_steps, victim = CurveRecorder(state["curve"]), np.asarray(state["steps"]), state["victim"]
        noise_log = {k: list(v) for k, v in state["noise"].items()}
    for r in range(start, cfg.rounds + 1):
        g = flat_params(global_model)
        local, taus = step(g, xs, cfg, rng, method == "fedprox")
        total_steps += taus
        new, noise = aggregate(method, g, local, weights, taus, cfg, noise_rng)
        set_flat_params(global_model, new.astype(np.float32))
        victim = local[0].astype(np.float32)
        if noise is not None:
            noise_log["sum_sq"].append(float(noise @ noise))
            noise_log["count"].append(int(noise.size))
            noise_log["sample"].append(noise[:NOISE_SAMPLE].copy())
        curve.add(r, cfg.local_epochs, evaluate_pools([global_model], xs, pools, cfg.quantile))
        if checkpoints is not None:
            checkpoints.save(r, {"global": flat_params(global_model), "rng": rng.bit_generator.state,
                                 "noise_rng": noise_rng.bit_generator.state, "curve": curve.state(),
                                 "steps": total_steps, "victim": victim, "noise": noise_log})
    payload = len(xs) * victim.shape[0] * BYTES_PER_FLOAT
    info = {}
    if method == "dpfedavg":
        info["dp_noise"] = {"sum_sq": noise_log["sum_sq"], "count": noise_log["count"],
                            "sample": np.array(noise_log["sample"]).reshape(len(noise_log["count"]), -1),
                            "std": cfg.dp_sigma / len(xs)}
    return RunResult(
        method, points_per_round=1, bytes_up_per_round=payload, bytes_down_per_round=payload,
        local_steps=total_steps, victim_params=victim,
        dp_noise_multiplier=dp_noise_multiplier(cfg, weights) if method == "dpfedavg" else None,
        info=info, final_models=[global_model], **curve.arrays(),
    )


def run_protocol(method: Method, fed: Federation, cfg: FedConfig, seed: int, checkpoints=None,
                 engine: str = "sequential") -> RunResult:
    """Run ``method`` on ``fed`` with ``cfg``; the same ``seed`` gives identical results.

    ``checkpoints``: a :class:`~veilbench.checkpoints.RoundCheckpoints` to resume from and save to after
    every round; ``engine``: ``"sequential"`` or ``"vectorized"`` (clients batched: parameter-sharing
    methods and GCA on the MLP AE, on the CPU)."""
    if engine not in ("sequential", "vectorized"):
        raise ValidationError(f"engine: must be 'sequential' or 'vectorized', got {engine!r}")
    if method == "single":
        return run_single(fed, cfg, seed, checkpoints)
    if method == "centralized":
        return run_centralized(fed, cfg, seed, checkpoints)
    if method == "gca":
        return run_gca(fed, cfg, seed, checkpoints, engine)
    if method in PARAMETER_SHARING:
        if engine == "vectorized":
            from veilbench.gca.vectorized import run_parameter_sharing_vectorized

            return run_parameter_sharing_vectorized(method, fed, cfg, seed, checkpoints)
        return run_parameter_sharing(method, fed, cfg, seed, checkpoints=checkpoints)
    raise ValidationError(f"method: must be one of {METHODS}, got {method!r}")
