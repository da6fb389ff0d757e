"""``embed`` stage: fit an encoder on the training rows of a prepared dataset, encode both splits."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from tasks.common import as_task, load_params
from tasks.paths import embed_dir, prepare_dir, repo_root
from tasks.tracking import stage_run
from veilbench.embed.encoders import fit_encode
from veilbench.embed.text import encode_texts
from veilbench.validation import UsageError, ValidationError
from veilbench.io import read_bundle, write_bundle


def embed(embedding: str, params_path: str | Path | None = None, root: Path | None = None) -> Path:
    """Write ``data/embed/<embedding>/`` with ``Z_train`` and ``Z_test`` (the run's seconds and start
    time in the ``timings.json`` sidecar, not in the manifest)."""
    root = root or repo_root()
    cfg = load_params(params_path, root)
    if embedding not in cfg.embeddings:
        raise UsageError(f"embedding: {embedding!r} is not in params embeddings ({sorted(cfg.embeddings)})")
    ecfg = cfg.embeddings[embedding]
    params = {"embedding": embedding, "seed": cfg.seed, **ecfg.model_dump()}
    tags = {"embedding": embedding, "dataset": ecfg.dataset, "method": ecfg.encoder}
    # Inputs are checked before the MLflow run opens: a user mistake leaves no FAILED run behind.
    arrays, _ = read_bundle(prepare_dir(root, ecfg.dataset))
    n_features = arrays["X_train"].shape[1]
    if ecfg.encoder == "sentence" and "T_train" not in arrays:
        raise ValidationError(
            f"embeddings.{embedding}.encoder: 'sentence' needs a text dataset (source paraphrases or "
            f"text_file), but {ecfg.dataset!r} has no texts")
    if ecfg.encoder in ("pca", "umap", "random_orthogonal") and ecfg.dim > n_features:
        raise ValidationError(f"embeddings.{embedding}.dim: must be ≤ the number of features of dataset "
                              f"{ecfg.dataset!r} ({n_features}) for encoder {ecfg.encoder!r}, got {ecfg.dim}")
    with stage_run(cfg.tracking.experiment, "embed", params, tags, root) as mlflow:
        started, t0 = time.time(), time.perf_counter()
        if ecfg.encoder == "sentence":
            Z_train, Z_test = encode_texts(list(arrays["T_train"])), encode_texts(list(arrays["T_test"]))
        else:
            Z_train, Z_test = fit_encode(
                ecfg.encoder, arrays["X_train"], arrays["X_test"], dim=ecfg.dim, seed=cfg.seed, **ecfg.options
            )
        for name, Z in (("Z_train", Z_train), ("Z_test", Z_test)):
            if not np.all(np.isfinite(Z)):  # a failed stage (and MLflow run), never a recorded output
                raise ValidationError(f"embeddings.{embedding}: encoder {ecfg.encoder!r} produced non-finite values in "
                                      f"{name}; check the scale of dataset {ecfg.dataset!r}")
        out = write_bundle(
            embed_dir(root, embedding),
            {"Z_train": Z_train, "Z_test": Z_test},
            {"stage": "embed", "embedding": embedding, "seed": cfg.seed, "params": params},
            timings={"seconds": time.perf_counter() - t0, "started": round(started, 3)},
        )
        mlflow.log_metrics({"dim": Z_train.shape[1]})
        mlflow.log_artifact(str(out / "manifest.json"))
    return out


embed_task = as_task(embed, "embed")
