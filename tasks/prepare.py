"""``prepare`` stage: load a registered dataset, split train/test, allocate parties.

A user file (``options.path``: a file, or a folder of IDX files) is part of what the stage was
made from: its SHA-256 (:func:`source_digest`) is recorded in the manifest's ``params`` as
``source_sha256``. :func:`invalidate_replaced_sources`, run by ``veilbench run`` before DVC plans,
removes the output of every dataset whose file has changed since, so DVC rebuilds it (and what
depends on it) instead of reporting it up to date.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from pathlib import Path
from typing import Any

from tasks.common import as_task, load_params
from tasks.paths import prepare_dir, repo_root
from tasks.tracking import stage_run
from veilbench.datasets import load_dataset, prepare_dataset
from veilbench.io import MANIFEST, file_sha256, read_json, write_bundle
from veilbench.validation import UsageError


def prepare(dataset: str, params_path: str | Path | None = None, root: Path | None = None) -> Path:
    """Write ``data/prepare/<dataset>/`` for the dataset section ``datasets.<dataset>``."""
    root = root or repo_root()
    cfg = load_params(params_path, root)
    if dataset not in cfg.datasets:
        raise UsageError(f"dataset: {dataset!r} is not in params datasets ({sorted(cfg.datasets)})")
    dcfg = cfg.datasets[dataset]
    options = dict(dcfg.options)
    if options.get("path") and not Path(options["path"]).is_absolute():
        options["path"] = str(root / options["path"])  # user paths are relative to the repo root
    if dcfg.source in ("gaussian_mixture", "low_rank", "adult_like"):
        options.setdefault("seed", cfg.seed)
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
            {"stage": "prepare", "dataset": dataset, "seed": cfg.seed, "params": params, "description": data.description,
             "info": {"seconds": time.perf_counter() - t0, "started": round(started, 3)}},
        )
        mlflow.log_metrics({"n_train": prepared.X_train.shape[0], "n_test": prepared.X_test.shape[0], "n_features": prepared.X_train.shape[1]})
        mlflow.log_artifact(str(out / "manifest.json"))
    return out


prepare_task = as_task(prepare, "prepare")


def _user_path(root: Path, options: dict[str, Any]) -> Path | None:
    path = options.get("path")
    if not path:
        return None
    return Path(path) if Path(path).is_absolute() else root / path


def source_digest(path: Path) -> str:
    """SHA-256 of a user data file, or of a folder's files (their relative names and bytes, sorted)."""
    if path.is_file():
        return file_sha256(path)
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(path)).encode() + b"\0" + file_sha256(f).encode())
    return h.hexdigest()


def invalidate_replaced_sources(root: Path, params_path: str | Path | None = None) -> list[str]:
    """Remove ``data/prepare/<dataset>/`` of every dataset whose user file exists but is no longer
    the one its output was made from (``source_sha256`` in the manifest); returns their names."""
    cfg = load_params(params_path, root)
    removed = []
    for name, dcfg in cfg.datasets.items():
        path, out = _user_path(root, dcfg.options), prepare_dir(root, name)
        if path is None or not path.exists() or not (out / MANIFEST).is_file():
            continue
        try:
            recorded = read_json(out / MANIFEST).get("params", {}).get("source_sha256")
        except (OSError, ValueError, AttributeError):
            recorded = None
        if recorded != source_digest(path):
            shutil.rmtree(out)
            removed.append(name)
    return removed
