"""Where each stage reads and writes, relative to the repository root.

``data/prepare/<dataset>/``          prepare  (arrays.npz + manifest.json)
``data/embed/<embedding>/``          embed
``data/<stage>/<sweep>/<cell>/``     release, integrate, attack
``reports/sweeps/<sweep>/``          evaluate (cells/<cell>.json per cell; metrics.json, summary.json)
``reports/``                         report (index.md, tables, figures)
``data/checkpoints/<stage>/<sweep>/<cell>/``  a resumable stage's per-round state while it runs
"""

from __future__ import annotations

import os
from pathlib import Path

from veilbench.stages import PIPELINE_STAGES  # noqa: F401 - re-exported: the pipeline's one stage list
from veilbench.stages import STAGES as CELL_STAGES


def experiment_workspace() -> Path | None:
    """The working directory when it is a DVC experiment's own copy of the repository, else None.

    ``dvc exp run --temp`` and queued experiments (``dvc exp run --queue`` + ``dvc queue start``)
    run every stage in a copy of the workspace inside the parent repository's ``.dvc/tmp/exps/``,
    with ``-S`` overrides applied to that copy's ``params.yaml``; ``$DVC_ROOT`` still names the
    parent repository. The copy is recognised by its ``dvc.yaml`` and by lying under
    ``$DVC_ROOT/.dvc/tmp/exps``.
    """
    dvc_root = os.environ.get("DVC_ROOT")
    if not dvc_root:
        return None
    cwd = Path.cwd().resolve()
    exps = Path(dvc_root).resolve() / ".dvc" / "tmp" / "exps"
    return cwd if (cwd / "dvc.yaml").is_file() and exps in cwd.parents else None


def repo_root() -> Path:
    """The workspace the stage reads and writes: a DVC experiment's own copy when the stage runs
    in one (:func:`experiment_workspace`), else ``$DVC_ROOT`` when DVC runs the stage, else
    ``$VEILBENCH_ROOT`` (a scheduled run's own root) or the CWD."""
    workspace = experiment_workspace()
    if workspace is not None:
        return workspace
    return Path(os.environ.get("DVC_ROOT") or os.environ.get("VEILBENCH_ROOT") or os.getcwd()).resolve()


def tracking_root(root: Path | None = None) -> Path:
    """Where the MLflow store of ``root`` (default :func:`repo_root`) lives: the parent repository
    (``$DVC_ROOT``) for a DVC experiment's copy, which DVC deletes when the experiment ends, else
    ``root`` itself."""
    root = Path(root or repo_root()).resolve()
    dvc_root = os.environ.get("DVC_ROOT")
    if dvc_root and Path(dvc_root).resolve() / ".dvc" / "tmp" / "exps" in root.parents:
        return Path(dvc_root).resolve()
    return root


def data_roots() -> list[Path]:
    """Folders whose ``data/raw/`` the public data-set loaders search, in order: ``$DVC_ROOT`` (the
    parent repository of a DVC experiment's copy, where untracked raw data stays), ``$VEILBENCH_ROOT``,
    the CWD; each once."""
    out: list[Path] = []
    for r in (os.environ.get("DVC_ROOT"), os.environ.get("VEILBENCH_ROOT"), os.getcwd()):
        if r and Path(r).resolve() not in out:
            out.append(Path(r).resolve())
    return out


def prepare_dir(root: Path, dataset: str) -> Path:
    return root / "data" / "prepare" / dataset


def embed_dir(root: Path, embedding: str) -> Path:
    return root / "data" / "embed" / embedding


def sweep_dir(root: Path, stage: str, sweep: str) -> Path:
    return root / "data" / stage / sweep


def checkpoint_dir(root: Path, stage: str, sweep: str, cell: str) -> Path:
    """Where a resumable stage keeps a cell's per-round checkpoints while it runs (git-ignored, not a
    DVC output): ``data/checkpoints/<stage>/<sweep>/<cell>/``."""
    return root / "data" / "checkpoints" / stage / sweep / cell


def sweep_report_dir(root: Path, sweep: str) -> Path:
    return root / "reports" / "sweeps" / sweep
