"""``attack`` stage: run the cell's family ``attack`` function for every seed (see :mod:`tasks.cell`)."""

from __future__ import annotations

from pathlib import Path

from tasks.cell import run_cell_stage
from tasks.common import as_task


def attack(cell: str, params_path: str | Path | None = None, root: Path | None = None) -> Path:
    """Run the ``attack`` stage of ``cell``; returns the output path."""
    return run_cell_stage("attack", cell, params_path, root)


attack_task = as_task(attack, "attack")
