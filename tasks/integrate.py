"""``integrate`` stage: run the cell's family ``integrate`` function for every seed (see :mod:`tasks.cell`)."""

from __future__ import annotations

from pathlib import Path

from tasks.cell import run_cell_stage
from tasks.common import as_task


def integrate(cell: str, params_path: str | Path | None = None, root: Path | None = None) -> Path:
    """Run the ``integrate`` stage of ``cell``; returns the output path."""
    return run_cell_stage("integrate", cell, params_path, root)


integrate_task = as_task(integrate, "integrate")
