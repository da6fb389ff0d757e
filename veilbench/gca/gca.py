r"""GCA: Global Centroid Alignment rounds (spec §4, Algorithm 1).

Per round r, for every client i (all participate):

1. **Reconstruction**: ``recon_epochs`` epochs of :math:`L_{rec}` on encoder+decoder (persistent
   Adam); after each epoch *all* clients are evaluated on the test and validation pools (paper's
   protocol, spec §1.4; :func:`~veilbench.gca.federation.evaluate_pools`).
   **Upload**: :math:`z_i^{\uparrow} = \{E_i(x_n): n \in I_i\}`, :math:`I_i` a fresh uniform
   sample without replacement of size :math:`\max(1, \lfloor \rho N_i \rfloor)`.
2. **Aggregation** (server): fit a backend with K components to the pooled codes
   ``Z`` ``(U, D_z)`` and broadcast centroids :math:`\mu` ``(K', D_z)`` and counts :math:`N` ``(K',)``
   (:mod:`veilbench.gca.clustering`); weights :math:`w` =
   :func:`~veilbench.gca.clustering.centroid_weights` (inverse-count or uniform). Each round's
   :math:`N` and :math:`w` are kept in ``info["centroid_counts"]`` / ``info["centroid_weights"]``.
3. **Alignment**: ``align_epochs`` epochs of
   :math:`L_{align} = \frac{1}{|B|}\sum_b w_{a_b} \|E_i(x_b) - \mu_{a_b}\|_2^2`,
   :math:`a_b = \arg\min_k \|E_i(x_b) - \mu_k\|_2` recomputed each batch (no gradient through the
   arg-min), encoder only (second persistent Adam); the decoder is untouched. Client 0's
   accuracy after each alignment epoch is the Table 5 diagnostic.

Bytes actually sent per round: ``4·Σ_i |z_i↑|·D_z`` up and ``4·C·K'(D_z+1)`` down.
After the last round the victim (client 0) runs ``attack_extra_epochs`` more reconstruction
epochs and makes one fresh upload: the only data the server-side attack gets (spec §6.3).
The last round's uploads of every client (codes, client, row) are kept as ``last_upload`` for
the cross-family view (:mod:`veilbench.gca.xfam`); the trained AEs as ``final_models``.
Client initialisation: ``shared`` (same init for all clients, default [A]: the run's initial AE
of stream ``"gca.init"``, the one every other method starts from) or ``independent`` (client i
draws from stream ``"gca.init-client"`` of ``(seed, i)``). Shuffles and uploads draw from stream
``"gca.batches"`` (:mod:`veilbench.gca.federation`).

The clients' AEs and their two persistent optimisers form a :class:`SequentialClients` (trained
one after the other); an engine with the same methods may train them together
(:mod:`veilbench.gca.vectorized_gca`). After every round the whole state — the clients, the
batch stream's state, the curves and the server's per-round log — can be saved to
:class:`~veilbench.checkpoints.RoundCheckpoints`; a run that finds round r saved continues at
round r + 1 with the same bits as an uninterrupted run. A run of R rounds is the prefix of a run
of more rounds (nothing before the victim's extra epochs depends on R).
"""

from __future__ import annotations

import numpy as np

from veilbench.gca.clustering import centroid_weights, fit_centroids
from veilbench.gca.communication import upload_size
from veilbench.gca.federation import (
    BYTES_PER_FLOAT,
    CurveRecorder,
    client_map,
    EvalPools,
    FedConfig,
    Federation,
    RunResult,
    Upload,
    batch_stream,
    evaluate_pools,
    initial_model,
    make_optimizer,
)
from veilbench.gca.training import encode, minibatches, reconstruction_epoch, run_epoch
from veilbench.random import stream
from veilbench.validation import ValidationError


def upload_codes(model, x, fraction: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Fresh uniform sample :math:`I` of :func:`upload_size` rows of ``x`` and their codes :math:`E(x_n)`.

    Returns ``(I (n_up,) int64 sorted row indices into x, codes (n_up, D_z) float32)``.
    """
    idx = np.sort(rng.choice(x.shape[0], size=upload_size(x.shape[0], fraction), replace=False))
    return idx.astype(np.int64), encode(model, x[idx])


def alignment_loss(z, mu, w):
    """:math:`\\frac{1}{B}\\sum_b w_{a_b}\\|z_b - \\mu_{a_b}\\|^2`.

    Codes ``z`` (B, D_z), centroids ``mu`` (K, D_z), weights ``w`` (K,); returns a scalar tensor.
    """
    import torch

    d2 = torch.cdist(z, mu) ** 2
    a = d2.detach().argmin(1)
    return (w[a] * ((z - mu[a]) ** 2).sum(1)).mean()


def alignment_epoch(model, opt, x, mu, w, batch_size: int, rng) -> int:
    """One epoch of :func:`alignment_loss` stepping ``opt`` (built on the encoder only); returns steps.
    ``rng``: a generator or the epoch's drawn batches (:func:`veilbench.gca.training.run_epoch`)."""
    return run_epoch(model, opt, x, batch_size, rng, lambda xb: alignment_loss(model.encode(xb), mu, w))


def client_initial_model(spec, seed: int, client: int, mode: str, device: str = "cpu"):
    """Client ``client``'s initial AE: the run's shared init (``shared``, :func:`initial_model`) or
    its own draw from stream ``"gca.init-client"`` of ``(seed, client)`` (``independent``), on ``device``."""
    if mode == "shared":
        return initial_model(spec, seed, device)
    if mode != "independent":
        raise ValidationError(f"client_init: must be 'shared' or 'independent', got {mode!r}")
    return spec.build(stream((int(seed), int(client)), "gca.init-client")).to(device)


def init_client_models(fed: Federation, cfg: FedConfig, seed: int) -> list:
    """One AE per client: copies of one seeded init (``shared``) or one init per client (``independent``)."""
    return [client_initial_model(fed.spec, seed, i, cfg.client_init, cfg.device) for i in range(len(fed.clients))]


class SequentialClients:
    """The clients' AEs, each with its two persistent optimisers (Adam + StepLR over encoder and
    decoder for reconstruction, over the encoder alone for alignment), each trained as in a loop over
    the clients. The epoch's batches are drawn from the run's generator in client order first, so
    the clients may then train side by side on ``cfg.client_threads`` threads with the bits of the
    loop. ``models()`` are the live modules."""

    def __init__(self, models: list, cfg: FedConfig) -> None:
        self._models, self.batch_size, self.threads = list(models), cfg.batch_size, cfg.client_threads
        self.rec_opts = [make_optimizer(m.parameters(), cfg) for m in self._models]
        self.al_opts = [make_optimizer(m.encoder.parameters(), cfg) for m in self._models]

    def models(self) -> list:
        return self._models

    def _batches(self, xs: list, rng: np.random.Generator) -> list[list[np.ndarray]]:
        return [minibatches(x.shape[0], self.batch_size, rng) for x in xs]

    def reconstruction_epoch(self, xs: list, rng: np.random.Generator) -> np.ndarray:
        """One reconstruction epoch of every client; optimiser steps ``(C,)``."""
        batches = self._batches(xs, rng)
        return np.array(client_map(lambda i: reconstruction_epoch(self._models[i], self.rec_opts[i], xs[i],
                                                                  self.batch_size, batches[i]),
                                   list(range(len(xs))), self.threads), dtype=np.int64)

    def alignment_epoch(self, xs: list, mu, w, rng: np.random.Generator) -> np.ndarray:
        """One alignment epoch of every client towards centroids ``mu`` with weights ``w``."""
        batches = self._batches(xs, rng)
        return np.array(client_map(lambda i: alignment_epoch(self._models[i], self.al_opts[i], xs[i], mu, w,
                                                             self.batch_size, batches[i]),
                                   list(range(len(xs))), self.threads), dtype=np.int64)

    def client_reconstruction_epoch(self, i: int, x, rng: np.random.Generator) -> int:
        """One reconstruction epoch of client ``i`` alone, with its own optimiser."""
        return reconstruction_epoch(self._models[i], self.rec_opts[i], x, self.batch_size, rng)

    def state_dict(self) -> dict:
        return {"models": [m.state_dict() for m in self._models], "rec": [o.state_dict() for o in self.rec_opts],
                "align": [o.state_dict() for o in self.al_opts]}

    def load_state_dict(self, state: dict) -> None:
        for m, o_rec, o_al, sm, s_rec, s_al in zip(self._models, self.rec_opts, self.al_opts, state["models"],
                                                   state["rec"], state["align"], strict=True):
            m.load_state_dict(sm)
            o_rec.load_state_dict(s_rec)
            o_al.load_state_dict(s_al)


def make_clients(fed: Federation, cfg: FedConfig, seed: int, engine: str = "sequential"):
    """The clients of a GCA run: :class:`SequentialClients` or (``engine="vectorized"``, MLP AE on the
    CPU) :class:`veilbench.gca.vectorized_gca.StackedGCAClients`, from :func:`init_client_models`."""
    models = init_client_models(fed, cfg, seed)
    if engine == "sequential":
        return SequentialClients(models, cfg)
    if engine == "vectorized":
        from veilbench.gca.vectorized_gca import StackedGCAClients

        return StackedGCAClients(models, cfg)
    raise ValidationError(f"engine: must be 'sequential' or 'vectorized', got {engine!r}")


_LOG_KEYS = ("bytes_up", "bytes_down", "n_dropped_components", "n_clusters_used", "centroid_counts",
             "centroid_weights")


def run_gca(fed: Federation, cfg: FedConfig, seed: int, checkpoints=None, engine: str = "sequential") -> RunResult:
    """Run ``cfg.rounds`` GCA rounds on ``fed`` (see the module doc); deterministic given ``seed``.

    ``checkpoints``: a :class:`~veilbench.checkpoints.RoundCheckpoints` to resume from and save to
    after every round (None: none); ``engine``: how the clients are trained (:func:`make_clients`).
    """
    import torch

    device = cfg.device
    xs, _ = fed.tensors(device)
    pools: EvalPools = fed.pools(device)
    rng = batch_stream(seed)
    clients = make_clients(fed, cfg, seed, engine)
    curve, align_curve = CurveRecorder(), []
    steps = np.zeros(len(xs), dtype=np.int64)
    log: dict[str, list] = {k: [] for k in _LOG_KEYS}
    uploads: list[tuple[np.ndarray, np.ndarray]] = []
    start = 1
    saved = checkpoints.load() if checkpoints is not None else None
    if saved is not None:
        done, state = saved
        clients.load_state_dict(state["clients"])
        rng.bit_generator.state = state["rng"]
        curve, align_curve = CurveRecorder(state["curve"]), list(state["align_curve"])
        steps, log = np.asarray(state["steps"], dtype=np.int64), {k: list(state["log"][k]) for k in _LOG_KEYS}
        uploads = [(np.asarray(i), np.asarray(z)) for i, z in state["last_upload"]]
        start = done + 1
    for r in range(start, cfg.rounds + 1):
        for e in range(1, cfg.recon_epochs + 1):
            steps += clients.reconstruction_epoch(xs, rng)
            curve.add(r, e, evaluate_pools(clients.models(), xs, pools, cfg.quantile, cfg.client_threads))
        uploads = [upload_codes(m, x, cfg.upload_fraction, rng) for m, x in zip(clients.models(), xs)]
        codes = np.concatenate([z for _, z in uploads])
        k = min(cfg.n_clusters, codes.shape[0])
        cent = fit_centroids(codes, k, cfg.clustering, int(rng.integers(2**31)), cfg.covariance_type,
                             cfg.reg_covar, cfg.gmm_n_init)
        w_k = centroid_weights(cent.counts, cfg.weighting)
        mu = torch.as_tensor(cent.mu, dtype=torch.float32).to(device)
        w = torch.as_tensor(w_k, dtype=torch.float32).to(device)
        for key, value in zip(_LOG_KEYS, (codes.size * BYTES_PER_FLOAT,
                                          len(xs) * (cent.mu.size + cent.counts.size) * BYTES_PER_FLOAT,
                                          cent.n_dropped, k, cent.counts.tolist(), w_k.tolist())):
            log[key].append(value)
        for _ in range(cfg.align_epochs):
            steps += clients.alignment_epoch(xs, mu, w, rng)
            align_curve.append(float(evaluate_pools(clients.models()[:1], xs[:1], pools, cfg.quantile)[0, 0]))
        if checkpoints is not None:
            checkpoints.save(r, {"clients": clients.state_dict(), "rng": rng.bit_generator.state,
                                 "curve": curve.state(), "align_curve": align_curve, "steps": steps, "log": log,
                                 "last_upload": [[i, z] for i, z in uploads]})
    for _ in range(cfg.attack_extra_epochs):
        clients.client_reconstruction_epoch(0, xs[0], rng)
    models = clients.models()
    victim_codes = upload_codes(models[0], xs[0], cfg.upload_fraction, rng)[1]
    return RunResult(
        "gca", points_per_round=cfg.recon_epochs, bytes_up_per_round=int(max(log["bytes_up"])),
        bytes_down_per_round=int(max(log["bytes_down"])), local_steps=steps, victim_codes=victim_codes,
        final_models=models, last_upload=Upload.from_clients(uploads),
        align_accuracy=np.array(align_curve),
        info={k: log[k] for k in _LOG_KEYS[2:]},
        **curve.arrays(),
    )
