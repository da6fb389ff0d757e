"""Export a prepared data set as per-node files for the Flower app project (``flower/``).

The data set ``datasets.<name>`` of params.yaml is loaded and split as the ``prepare`` stage does,
then turned into GCA's anomaly-detection federation (:func:`veilbench.gca.data.build_federation`:
normal classes = the most frequent training class unless given, anomalies = the rest; features
min-max scaled to [-1, 1] on the normal training rows, or standardised; the normal training
records split IID over ``nodes`` clients with ``seed``). Node i's file ``node_<i>.npz`` holds
``x_train`` ``(N_i, d)`` float32 (its shard), ``x_test`` ``(m, d)`` float32 and ``y_test`` ``(m,)``
int64 in {0, 1} (the same test set on every node); ``run-config.toml`` holds ``input-dim``,
``num-clients`` and ``data-dir`` for ``flwr run ... --run-config <out>/run-config.toml``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tasks.common import load_params
from tasks.paths import repo_root
from tasks.prepare import loader_options
from veilbench.io import atomic_write_text
from veilbench.validation import ValidationError


def export_nodes(dataset: str, nodes: int, out: Path, params_path: str | Path | None = None, root: Path | None = None,
                 input_source: str = "prepare_minmax", normal_classes: list[int] | None = None, seed: int = 0) -> list[Path]:
    """Write ``out/node_<i>.npz`` for i < ``nodes`` and ``out/run-config.toml``; returns the node files."""
    from veilbench.datasets import load_dataset, prepare_dataset
    from veilbench.gca.data import build_federation

    if not isinstance(nodes, int) or not 1 <= nodes <= 1000:
        raise ValidationError(f"nodes: must be an integer in [1, 1000], got {nodes!r}")
    if input_source not in ("prepare_minmax", "prepare_standardize"):
        raise ValidationError(f"input_source: must be 'prepare_minmax' or 'prepare_standardize', got {input_source!r}")
    root = root or repo_root()
    cfg = load_params(params_path, root)
    dcfg, options = loader_options(cfg, dataset, root)
    prepared = prepare_dataset(load_dataset(dcfg.source, **options), test_size=dcfg.test_size, n_parties=dcfg.n_parties,
                               scheme=dcfg.scheme, alpha=dcfg.alpha, max_records=dcfg.max_records, seed=cfg.seed)
    data = build_federation({"prepare": prepared.arrays()}, spec_kind="mlp", input_source=input_source,
                            normal_classes=normal_classes, anomaly_classes=None, partition="iid", n_clients=nodes,
                            dirichlet_alpha=0.1, image_shape=None, latent_channels=16, reference_size=1, seed=seed)
    fed = data.federation
    if len(fed.clients) != nodes:
        raise ValidationError(f"nodes: {nodes} nodes need ≥ 2 normal training records each; "
                              f"{dataset!r} has {sum(c.shape[0] for c in fed.clients)} (got {len(fed.clients)} nodes)")
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, x in enumerate(fed.clients):
        path = out / f"node_{i}.npz"
        tmp = out / f".node_{i}.tmp.npz"
        np.savez(tmp, x_train=np.asarray(x, np.float32), x_test=np.asarray(fed.x_test, np.float32),
                 y_test=np.asarray(fed.y_test, np.int64))
        tmp.replace(path)
        paths.append(path)
    atomic_write_text(out / "run-config.toml",
                      f"input-dim = {fed.clients[0].shape[1]}\nnum-clients = {nodes}\nseed = {seed}\n"
                      f"data-dir = {json.dumps(str(out))}\n")
    return paths
