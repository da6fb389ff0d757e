"""CPU-time measurement that survives a shared machine: the unit is timed beside every measurement.

A benchmark row compares a solver with a *unit* of work on the same input (one ``eigh`` of the
matrix, one sequential FL round, …). Wall clock on a shared 2-core machine measures the other
jobs as much as the code, so every measurement here uses the process CPU time
(:func:`time.process_time`; the benchmarks pin BLAS to one thread, so the process's CPU time is
the work of the measured call), and the unit is re-timed immediately before and after each repeat: each such *checkpoint* is the
median of ``unit_repeats`` calls, so a single interrupted call (a page fault, a timer tick on a
millisecond unit) is not mistaken for a slower machine. The run's ``unit_drift`` is the spread of
the checkpoints, (max − min) / median: how much the machine's speed moved *during* the
measurement. Above :data:`MAX_UNIT_DRIFT` the row is flagged (``unit_drift_flagged``) and a
benchmark summary must not cite it; ``unit_sample_spread`` keeps the raw spread of all samples. The load average at the start and end of each measurement is recorded beside it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

#: Largest tolerated relative spread of the unit's CPU time within one measurement.
MAX_UNIT_DRIFT = 0.2
#: Least CPU time one checkpoint spans: a millisecond unit (``eigh`` at n = 200) is called often
#: enough that scheduler ticks and cache misses average out instead of reading as drift.
MIN_CHECKPOINT_SECONDS = 0.25


def cpu_call(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    """(result, CPU seconds, wall seconds) of one call of ``fn``."""
    c, w = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - c, time.perf_counter() - w


def unit_seconds(unit: Callable[[], Any], repeats: int = 3) -> list[float]:
    """CPU seconds of ``repeats`` calls of the unit."""
    return [cpu_call(unit)[1] for _ in range(repeats)]


def unit_checkpoint(unit: Callable[[], Any], repeats: int) -> tuple[float, list[float]]:
    """(median CPU seconds, all samples) of ``repeats`` calls of the unit: one checkpoint."""
    samples = unit_seconds(unit, repeats)
    return float(np.median(samples)), samples


def first_checkpoint(unit: Callable[[], Any], least: int,
                     min_seconds: float = MIN_CHECKPOINT_SECONDS) -> tuple[float, list[float], int]:
    """The first checkpoint: ``least`` calls, extended until they span ``min_seconds`` (default
    :data:`MIN_CHECKPOINT_SECONDS`) of CPU time (at most 1000 calls). Returns (median, samples, calls
    per checkpoint) so that the later checkpoints of the measurement make as many calls."""
    samples = unit_seconds(unit, least)
    median = float(np.median(samples))
    calls = int(min(1000, max(least, np.ceil(min_seconds / max(median, 1e-6)))))
    if calls > len(samples):
        samples += unit_seconds(unit, calls - len(samples))
    return float(np.median(samples)), samples, calls


def drift_summary(checkpoints: list[float], samples: list[float]) -> dict:
    """``unit_cpu_seconds`` (median of all samples), ``unit_drift`` (spread of the checkpoint medians
    over their median), ``unit_drift_flagged`` and ``unit_sample_spread`` (raw spread of all samples)."""
    u = float(np.median(samples))
    c = float(np.median(checkpoints))
    drift = float((max(checkpoints) - min(checkpoints)) / c) if c > 0 else float("inf")
    spread = float((max(samples) - min(samples)) / u) if u > 0 else float("inf")
    return {"unit_cpu_seconds": u, "unit_drift": drift, "unit_drift_flagged": drift > MAX_UNIT_DRIFT,
            "unit_sample_spread": spread, "unit_checkpoints": len(checkpoints)}


def measure(fn: Callable[[], Any], unit: Callable[[], Any], repeats: int = 3, unit_repeats: int = 5,
            checkpoint_seconds: float = MIN_CHECKPOINT_SECONDS) -> tuple[Any, dict]:
    """Run ``fn`` ``repeats`` times, timing ``unit`` before the first and after every repeat
    (checkpoints of at least ``unit_repeats`` calls spanning ``checkpoint_seconds``, more calls for
    a fast unit: :func:`first_checkpoint`; a quick run that is never cited may ask for less).

    Returns the last result and a dict: ``cpu_seconds`` (median over repeats) and
    ``cpu_seconds_range`` [min, max], ``wall_seconds`` (median), the :func:`drift_summary` fields
    (``unit_cpu_seconds``, ``unit_drift``, …), ``unit_repeats_per_checkpoint``,
    ``units`` = cpu_seconds / unit_cpu_seconds, ``repeats``, ``load_average`` [start (1, 5, 15 min), end].
    """
    load_start = os.getloadavg()
    checkpoint, samples, unit_repeats = first_checkpoint(unit, unit_repeats, checkpoint_seconds)
    checkpoints = [checkpoint]
    cpu, wall, out = [], [], None
    for _ in range(repeats):
        out, c, w = cpu_call(fn)
        cpu.append(c)
        wall.append(w)
        checkpoint, more = unit_checkpoint(unit, unit_repeats)
        checkpoints.append(checkpoint)
        samples += more
    drift = drift_summary(checkpoints, samples)
    u = drift["unit_cpu_seconds"]
    c = float(np.median(cpu))
    return out, {
        "cpu_seconds": c,
        "cpu_seconds_range": [float(min(cpu)), float(max(cpu))],
        "wall_seconds": float(np.median(wall)),
        **drift,
        "unit_repeats_per_checkpoint": unit_repeats,
        "units": c / u if u > 0 else float("inf"),
        "repeats": repeats,
        "load_average": [list(load_start), list(os.getloadavg())],
    }
