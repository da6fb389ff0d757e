"""Where each stage reads and writes, relative to the repository root.

``data/prepare/<dataset>/``          prepare  (arrays.npz + manifest.json)
``data/embed/<embedding>/``          embed
``data/<stage>/<sweep>/<cell>/``     release, integrate, attack
``reports/sweeps/<sweep>/``          evaluate (cells/<cell>.json per cell; metrics.json summary)
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


def sweep_dir(root: Path, stage: str, sweep: str) -> Path:
    return root / "data" / stage / sweep


def sweep_report_dir(root: Path, sweep: str) -> Path:
    return root / "reports" / "sweeps" / sweep
