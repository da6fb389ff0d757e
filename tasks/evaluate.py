"""``evaluate`` stage: run the cell's family ``evaluate`` function for every seed (see :mod:`tasks.cell`)."""

from __future__ import annotations

from pathlib import Path

from tasks.cell import run_cell_stage
from tasks.common import as_task


def evaluate(cell: str, params_path: str | Path | None = None, root: Path | None = None) -> Path:
    """Run the ``evaluate`` stage of ``cell``; returns the output path."""
    return run_cell_stage("evaluate", cell, params_path, root)


evaluate_task = as_task(evaluate, "evaluate")
