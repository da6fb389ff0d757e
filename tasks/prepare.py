"""``prepare`` stage: load a registered dataset, split train/test, allocate parties.

A user file (``options.path``) is part of what the stage was made from: it is the stage's DVC
dependency (``data/sources.yaml``, :mod:`tasks.sources`) and its SHA-256
(:func:`tasks.sources.source_digest`) is recorded in the manifest's ``params`` as
``source_sha256``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from tasks.common import as_task, load_params
from tasks.paths import data_roots, prepare_dir, repo_root
from tasks.sources import check_sources, source_digest
from tasks.tracking import stage_run
from veilbench.datasets import DATASETS, load_dataset, prepare_dataset
from veilbench.io import write_bundle
from veilbench.validation import ValidationError


def loader_options(cfg: Any, dataset: str, root: Path) -> tuple[Any, dict[str, Any]]:
    """(the ``datasets.<dataset>`` section, its loader options): user paths made absolute against
    ``root``, the run seed given to the generated sources that take one, and the folders a public
    source searches for ``data/raw/`` (:func:`tasks.paths.data_roots`)."""
    if dataset not in cfg.datasets:
        raise ValidationError(f"dataset: {dataset!r} is not in params datasets ({sorted(cfg.datasets)})")
    dcfg = cfg.datasets[dataset]
    options = dict(dcfg.options)
    if options.get("path") and not Path(options["path"]).is_absolute():
        options["path"] = str(root / options["path"])  # user paths are relative to the repo root
    if dcfg.source in ("gaussian_mixture", "low_rank", "adult_like"):
        options.setdefault("seed", cfg.seed)
    if DATASETS[dcfg.source][1] == "public":
        options["data_roots"] = data_roots()
    return dcfg, options


def prepare(dataset: str, params_path: str | Path | None = None, root: Path | None = None) -> Path:
    """Write ``data/prepare/<dataset>/`` for the dataset section ``datasets.<dataset>`` (its run's
    seconds and start time in the ``timings.json`` sidecar, not in the manifest)."""
    root = root or repo_root()
    cfg = load_params(params_path, root)
    dcfg, options = loader_options(cfg, dataset, root)
    if params_path is None and os.environ.get("DVC_ROOT"):  # a DVC stage: DVC hashed the file sources.yaml names
        check_sources(root, dataset, dcfg.options)
    params = {"dataset": dataset, "seed": cfg.seed, **dcfg.model_dump()}
    if options.get("path") and Path(options["path"]).exists():
        params["source_sha256"] = source_digest(Path(options["path"]))
    started, t0 = time.time(), time.perf_counter()
    # Load and validate the data before the MLflow run opens: a rejected file changes nothing.
    data = load_dataset(dcfg.source, **options)
    prepared = prepare_dataset(
        data,
        test_size=dcfg.test_size,
        n_parties=dcfg.n_parties,
        scheme=dcfg.scheme,
        alpha=dcfg.alpha,
        max_records=dcfg.max_records,
        seed=cfg.seed,
    )
    with stage_run(cfg.tracking.experiment, "prepare", params, {"dataset": dataset}, root) as mlflow:
        out = write_bundle(
            prepare_dir(root, dataset),
            prepared.arrays(),
            {"stage": "prepare", "dataset": dataset, "seed": cfg.seed, "params": params, "description": data.description},
            timings={"seconds": time.perf_counter() - t0, "started": round(started, 3)},
        )
        mlflow.log_metrics({"n_train": prepared.X_train.shape[0], "n_test": prepared.X_test.shape[0], "n_features": prepared.X_train.shape[1]})
        mlflow.log_artifact(str(out / "manifest.json"))
    return out


prepare_task = as_task(prepare, "prepare")

