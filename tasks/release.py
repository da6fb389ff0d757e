"""``release`` stage: run the family's ``release`` function for every cell and seed of a sweep (see :mod:`tasks.sweep`)."""

from __future__ import annotations

from pathlib import Path

from tasks.sweep import run_sweep_stage


def release(sweep: str, params_path: str | Path | None = None, root: Path | None = None) -> Path:
    """Run the ``release`` stage of every cell of ``sweep``; returns the output folder."""
    return run_sweep_stage("release", sweep, params_path, root)

