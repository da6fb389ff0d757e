"""Shared fixtures of the trust suite: a work folder that already holds one tiny successful run.

``populated_root`` (built once per test session, shared by every pytest-xdist worker) runs
``prepare → embed → release → integrate → attack → evaluate → report`` for a small digits dataset,
a user ``.npz`` dataset (``mine``) and a one-cell ScoreShield identity sweep, so ``data/``,
``reports/`` and ``mlflow.db`` all exist and "left as they were" is a meaningful check. Tests copy
it (``trust_root``) before changing anything.
"""

from __future__ import annotations

import copy
import hashlib
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.conftest import exclusive

SWEEP = "ss-identity"

_PARAMS = {
    "seed": 0,
    "tracking": {"experiment": "veilbench-trust"},
    "datasets": {
        "digits": {"source": "digits", "test_size": 0.3, "n_parties": 3, "max_records": 300},
        "mine": {"source": "file", "options": {"path": "<set by with_user_path>"}, "test_size": 0.3, "n_parties": 2},
    },
    "embeddings": {"digits-pca": {"dataset": "digits", "encoder": "pca", "dim": 8}},
    "sweeps": {
        SWEEP: {"family": "scoreshield", "embedding": "digits-pca", "seeds": [0],
                "params": {"mechanism": "identity", "n_queries": 30, "audit_releases": 400}},
    },
    "report": {"title": "trust report", "frontiers": []},
}


def trust_params() -> dict:
    """A fresh copy of the valid params mapping of :func:`populated_root` (user file path relative)."""
    return copy.deepcopy(_PARAMS)


def with_user_path(params: dict, root: Path, path: Path | str) -> dict:
    """``params`` with ``datasets.mine.options.path`` set to ``path`` (absolute, under ``root``)."""
    params["datasets"]["mine"]["options"]["path"] = str(Path(root) / path)
    return params


def write_params(path: Path, params: dict | str) -> Path:
    """Write a params mapping as YAML (or raw text as is) to ``path``."""
    path.write_text(params if isinstance(params, str) else yaml.safe_dump(params, sort_keys=False))
    return path


def tree_digest(root: Path, mlflow_store: bool = True) -> dict[str, str]:
    """Relative path → SHA-256 of every file (and ``<dir>`` for every folder) under ``data/``,
    ``reports/`` and (with ``mlflow_store``) of ``mlflow.db`` with any SQLite side files: the state
    a bad input must not touch."""
    out: dict[str, str] = {}
    for top in ("data", "reports"):
        base = root / top
        for p in sorted(base.rglob("*")) if base.exists() else []:
            rel = str(p.relative_to(root))
            out[rel] = "<dir>" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
    for p in sorted(root.glob("mlflow.db*")) if mlflow_store else []:
        out[p.name] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def valid_user_arrays(n: int = 60, p: int = 5, seed: int = 0) -> dict[str, np.ndarray]:
    """A small valid user data set: three Gaussian classes, every class present."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 3
    X = rng.normal(size=(n, p)) + 2.0 * y[:, None]
    return {"X": X, "y": y}


def _populate(root: Path, mlflow_db: Path) -> None:
    """Write the tiny complete run of :func:`populated_root` into the new folder ``root``."""
    from tasks.embed import embed
    from tasks.prepare import prepare
    from tasks.report import report
    from tasks.sweep import run_sweep_stage
    from veilbench.stages import STAGES

    root.mkdir()
    shutil.copy(mlflow_db, root / "mlflow.db")
    (root / "user").mkdir()
    np.savez(root / "user" / "mine.npz", **valid_user_arrays())
    write_params(root / "params.yaml", with_user_path(trust_params(), root, "user/mine.npz"))
    for dataset in ("digits", "mine"):
        prepare(dataset, root=root)
    embed("digits-pca", root=root)
    for stage in STAGES:
        run_sweep_stage(stage, SWEEP, root=root)
    report(root=root)


@pytest.fixture(scope="session")
def populated_root(tmp_path_factory: pytest.TempPathFactory, migrated_mlflow_db: Path) -> Path:
    """A work folder with the outputs of one complete tiny run (see the module docstring).

    Built once per test session: under pytest-xdist the first worker to ask builds it in the
    session's temporary folder (the parent of every worker's own), under :func:`exclusive`, and the
    others wait for it and reuse it. Nothing writes into it; tests copy it (:func:`trust_root`)."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    root, done = shared / "trust-populated", shared / "trust-populated.done"
    with exclusive("trust-populated"):
        if not done.is_file():
            shutil.rmtree(root, ignore_errors=True)  # a build that failed in another worker
            _populate(root, migrated_mlflow_db)
            done.touch()
    assert (root / "reports" / "sweeps" / SWEEP / "metrics.json").is_file()
    assert (root / "data" / "prepare" / "mine" / "arrays.npz").is_file()
    return root


@pytest.fixture
def trust_root(populated_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private copy of :func:`populated_root`; ``VEILBENCH_ROOT`` points at it."""
    root = tmp_path / "root"
    shutil.copytree(populated_root, root)
    write_params(root / "params.yaml", with_user_path(trust_params(), root, "user/mine.npz"))
    monkeypatch.setenv("VEILBENCH_ROOT", str(root))
    monkeypatch.delenv("DVC_ROOT", raising=False)
    monkeypatch.delenv("VEILBENCH_TRACKING_URI", raising=False)
    return root
