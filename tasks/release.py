"""``release`` stage: run the cell's family ``release`` function for every seed (see :mod:`tasks.cell`)."""

from __future__ import annotations

from pathlib import Path

from tasks.cell import run_cell_stage
from tasks.common import as_task


def release(cell: str, params_path: str | Path | None = None, root: Path | None = None) -> Path:
    """Run the ``release`` stage of ``cell``; returns the output path."""
    return run_cell_stage("release", cell, params_path, root)


release_task = as_task(release, "release")
