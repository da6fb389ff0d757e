r"""The cross-family view of a GCA cell (:class:`veilbench.crossfamily.CrossFamilyArrays`).

The lead's cross-family view attacks every family's release with one record-linkage attack and
scores one downstream utility; a GCA cell contributes:

* **Attack** (what the server holds per private training record):
  ``xfam_pool`` ``(n_p, d_x)`` = the clients' shards concatenated in client order (the normal
  training records in the AE's input space); for ``gca`` the *last round's* uploads of every
  client: ``xfam_attack_rep`` ``(U, D_z)`` = the codes :math:`E_i(x_n)`, ``xfam_attack_group``
  ``(U,)`` = the uploading client i (one encoder, hence one decoder, per client) and
  ``xfam_attack_index`` ``(U,)`` = the record's row in ``xfam_pool``; for ``centralized`` the
  server holds the records themselves (rep = pool, one group). Parameter-sharing methods and
  ``single`` release no per-record representation: they emit no view at all (the protocol,
  :func:`veilbench.crossfamily.crossfamily_metrics`, takes both sides or none).
* **Utility** (what the analyst learns from): the latent codes of the final encoders of *every*
  training and test record (all classes, not only the normal class the AEs were trained on)
  with their class labels from ``prepare``. With one shared model (FedAvg-style global model,
  centralized) every record goes through it; with one model per client (``gca``: the aligned
  encoders; ``single``) a client's own records go through its encoder and every other record
  through the encoder of a client drawn uniformly with ``rng([seed, 0x5FA3])``, so the test
  codes mix clients exactly as a shared latent space must allow.

Shapes: rep float64, groups/indices/labels int64.
"""

from __future__ import annotations

import numpy as np

from veilbench.crossfamily import CrossFamilyArrays, LinkageArrays, UtilityArrays
from veilbench.gca.data import FederatedData
from veilbench.gca.federation import RunResult
from veilbench.gca.training import encode
from veilbench.random import stream

UTILITY_STREAM = "gca.xfam-utility"


def attack_arrays(data: FederatedData, result: RunResult) -> LinkageArrays | None:
    """The attack side (pool, codes, uploading client, row in the pool) for ``gca`` and
    ``centralized``; else None."""
    clients = data.federation.clients
    pool = np.concatenate(clients).astype(np.float64)
    if result.last_upload is not None:
        up = result.last_upload
        offsets = np.cumsum([0, *(c.shape[0] for c in clients)])[:-1]
        return LinkageArrays(up.codes.astype(np.float64), up.client.astype(np.int64),
                             (offsets[up.client] + up.row).astype(np.int64), pool)
    if result.method == "centralized":
        return LinkageArrays(pool.copy(), np.zeros(pool.shape[0], dtype=np.int64),
                             np.arange(pool.shape[0], dtype=np.int64), pool)
    return None


def _encode_rows(models: list, x: np.ndarray, owner: np.ndarray) -> np.ndarray:
    """Codes ``(n, D_z)`` float64 of ``x`` ``(n, d_x)``, row j through ``models[owner[j]]``."""
    import torch

    xt = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
    codes = None
    for i, model in enumerate(models):
        rows = np.flatnonzero(owner == i)
        if rows.size == 0:
            continue
        z = encode(model, xt[rows])
        if codes is None:
            codes = np.zeros((x.shape[0], z.shape[1]))
        codes[rows] = z
    return codes


def utility_arrays(data: FederatedData, result: RunResult, seed: int) -> UtilityArrays:
    """The utility side: final-encoder codes of all train and test records with their class labels."""
    models = result.final_models
    rng = stream(seed, UTILITY_STREAM)
    n, m = data.train_features.shape[0], data.test_features.shape[0]
    owner_train = rng.integers(0, len(models), n)
    owner_test = rng.integers(0, len(models), m)
    if len(models) > 1:
        for i, rows in enumerate(data.client_rows):
            owner_train[rows] = i
    return UtilityArrays(
        _encode_rows(models, data.train_features, owner_train),
        np.asarray(data.train_labels, dtype=np.int64),
        _encode_rows(models, data.test_features, owner_test),
        np.asarray(data.test_labels, dtype=np.int64),
    )


def xfam_arrays(data: FederatedData, result: RunResult, seed: int) -> CrossFamilyArrays | None:
    """The cross-family view of one cell and seed (:func:`attack_arrays` and :func:`utility_arrays`),
    or None for a method that releases no per-record representation."""
    attack = attack_arrays(data, result)
    return CrossFamilyArrays(attack, utility_arrays(data, result, seed)) if attack is not None else None
