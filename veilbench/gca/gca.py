r"""GCA: Global Centroid Alignment rounds (spec §4, Algorithm 1).

Per round r, for every client i (all participate):

1. **Reconstruction**: ``recon_epochs`` epochs of :math:`L_{rec}` on encoder+decoder (persistent
   Adam); after each epoch *all* clients are evaluated (paper's protocol, spec §1.4).
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
"""

from __future__ import annotations

import numpy as np

from veilbench.gca.clustering import centroid_weights, fit_centroids
from veilbench.gca.communication import upload_size
from veilbench.gca.federation import (
    BYTES_PER_FLOAT,
    CurveRecorder,
    FedConfig,
    Federation,
    RunResult,
    Upload,
    evaluate_clients,
    batch_stream,
    initial_model,
    make_optimizer,
)
from veilbench.gca.training import encode, reconstruction_epoch, run_epoch
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


def alignment_epoch(model, opt, x, mu, w, batch_size: int, rng: np.random.Generator) -> int:
    """One epoch of :func:`alignment_loss` stepping ``opt`` (built on the encoder only); returns steps."""
    return run_epoch(model, opt, x, batch_size, rng, lambda xb: alignment_loss(model.encode(xb), mu, w))


def client_initial_model(spec, seed: int, client: int, mode: str):
    """Client ``client``'s initial AE: the run's shared init (``shared``, :func:`initial_model`) or
    its own draw from stream ``"gca.init-client"`` of ``(seed, client)`` (``independent``)."""
    if mode == "shared":
        return initial_model(spec, seed)
    if mode != "independent":
        raise ValidationError(f"client_init: must be 'shared' or 'independent', got {mode!r}")
    return spec.build(stream((int(seed), int(client)), "gca.init-client"))


def init_client_models(fed: Federation, cfg: FedConfig, seed: int) -> list:
    """One AE per client: copies of one seeded init (``shared``) or one init per client (``independent``)."""
    return [client_initial_model(fed.spec, seed, i, cfg.client_init) for i in range(len(fed.clients))]


def run_gca(fed: Federation, cfg: FedConfig, seed: int) -> RunResult:
    """Run ``cfg.rounds`` GCA rounds on ``fed`` (see the module doc); deterministic given ``seed``."""
    import torch

    xs, xt = fed.tensors()
    rng = batch_stream(seed)
    models = init_client_models(fed, cfg, seed)
    rec_opts = [make_optimizer(m.parameters(), cfg) for m in models]
    al_opts = [make_optimizer(m.encoder.parameters(), cfg) for m in models]
    curve, align_curve = CurveRecorder(), []
    steps = np.zeros(len(xs), dtype=np.int64)
    bytes_up, bytes_down, dropped, k_used, counts, weights = [], [], [], [], [], []
    for r in range(1, cfg.rounds + 1):
        for e in range(1, cfg.recon_epochs + 1):
            for i, (m, o, x) in enumerate(zip(models, rec_opts, xs)):
                steps[i] += reconstruction_epoch(m, o, x, cfg.batch_size, rng)
            curve.add(r, e, evaluate_clients(models, xs, xt, fed.y_test, cfg.quantile))
        uploads = [upload_codes(m, x, cfg.upload_fraction, rng) for m, x in zip(models, xs)]
        codes = np.concatenate([z for _, z in uploads])
        k = min(cfg.n_clusters, codes.shape[0])
        cent = fit_centroids(codes, k, cfg.clustering, int(rng.integers(2**31)), cfg.covariance_type,
                             cfg.reg_covar, cfg.gmm_n_init)
        mu = torch.as_tensor(cent.mu, dtype=torch.float32)
        w_k = centroid_weights(cent.counts, cfg.weighting)
        counts.append(cent.counts.tolist())
        weights.append(w_k.tolist())
        w = torch.as_tensor(w_k, dtype=torch.float32)
        bytes_up.append(codes.size * BYTES_PER_FLOAT)
        bytes_down.append(len(xs) * (cent.mu.size + cent.counts.size) * BYTES_PER_FLOAT)
        dropped.append(cent.n_dropped)
        k_used.append(k)
        for e in range(cfg.align_epochs):
            for i, (m, o, x) in enumerate(zip(models, al_opts, xs)):
                steps[i] += alignment_epoch(m, o, x, mu, w, cfg.batch_size, rng)
            align_curve.append(evaluate_clients(models[:1], xs[:1], xt, fed.y_test, cfg.quantile)[0])
    for _ in range(cfg.attack_extra_epochs):
        reconstruction_epoch(models[0], rec_opts[0], xs[0], cfg.batch_size, rng)
    victim_codes = upload_codes(models[0], xs[0], cfg.upload_fraction, rng)[1]
    return RunResult(
        "gca", points_per_round=cfg.recon_epochs, bytes_up_per_round=int(max(bytes_up)),
        bytes_down_per_round=int(max(bytes_down)), local_steps=steps, victim_codes=victim_codes,
        final_models=models, last_upload=Upload.from_clients(uploads),
        align_accuracy=np.array(align_curve),
        info={"n_dropped_components": dropped, "n_clusters_used": k_used, "centroid_counts": counts,
              "centroid_weights": weights},
        **curve.arrays(),
    )
