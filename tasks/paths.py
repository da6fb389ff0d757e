"""Where each stage reads and writes, relative to the repository root.

``data/prepare/<dataset>/``          prepare  (arrays.npz + manifest.json)
``data/embed/<embedding>/``          embed
``data/<stage>/<cell>/``             release, integrate, attack
``reports/cells/<cell>/metrics.json`` evaluate (per-seed metrics, mean, 95% CI)
``reports/``                         report (index.md, tables, figures)
"""

from __future__ import annotations

import os
from pathlib import Path

CELL_STAGES = ("release", "integrate", "attack", "evaluate")


def repo_root() -> Path:
    """The repository root: ``$DVC_ROOT`` when DVC runs the stage, else ``$VEILBENCH_ROOT`` or the CWD."""
    return Path(os.environ.get("DVC_ROOT") or os.environ.get("VEILBENCH_ROOT") or os.getcwd()).resolve()


def prepare_dir(root: Path, dataset: str) -> Path:
    return root / "data" / "prepare" / dataset


def embed_dir(root: Path, embedding: str) -> Path:
    return root / "data" / "embed" / embedding


def cell_dir(root: Path, stage: str, cell: str) -> Path:
    return root / "data" / stage / cell


def metrics_path(root: Path, cell: str) -> Path:
    return root / "reports" / "cells" / cell / "metrics.json"
