"""CPU-time measurement that survives a shared machine: the unit is timed beside every measurement.

A benchmark row compares a solver with a *unit* of work on the same input (one ``eigh`` of the
matrix, one sequential FL round, …). Wall clock on a shared 2-core machine measures the other
jobs as much as the code, so every measurement here uses the process CPU time
(:func:`time.process_time`; the benchmarks pin BLAS to one thread, so the process's CPU time is
the work of the measured call), and the unit is re-timed immediately before and after each repeat.
The spread of those unit samples is the run's ``unit_drift`` = (max − min) / median; above
:data:`MAX_UNIT_DRIFT` the row is flagged (``unit_drift_flagged``) and a benchmark summary must not
cite it. The load average at the start and end of each measurement is recorded beside it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

#: Largest tolerated relative spread of the unit's CPU time within one measurement.
MAX_UNIT_DRIFT = 0.2


def cpu_call(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    """(result, CPU seconds, wall seconds) of one call of ``fn``."""
    c, w = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - c, time.perf_counter() - w


def unit_seconds(unit: Callable[[], Any], repeats: int = 3) -> list[float]:
    """CPU seconds of ``repeats`` calls of the unit."""
    return [cpu_call(unit)[1] for _ in range(repeats)]


def measure(fn: Callable[[], Any], unit: Callable[[], Any], repeats: int = 3, unit_repeats: int = 3) -> tuple[Any, dict]:
    """Run ``fn`` ``repeats`` times, timing ``unit`` before the first and after every repeat.

    Returns the last result and a dict: ``cpu_seconds`` (median over repeats) and
    ``cpu_seconds_range`` [min, max], ``wall_seconds`` (median), ``eigh_cpu_seconds``-style unit
    ``unit_cpu_seconds`` (median of all unit samples), ``units`` = cpu_seconds / unit,
    ``unit_drift``, ``unit_drift_flagged``, ``repeats``, ``load_average`` [start (1, 5, 15 min), end].
    """
    load_start = os.getloadavg()
    units = unit_seconds(unit, unit_repeats)
    cpu, wall, out = [], [], None
    for _ in range(repeats):
        out, c, w = cpu_call(fn)
        cpu.append(c)
        wall.append(w)
        units += unit_seconds(unit, unit_repeats)
    u = float(np.median(units))
    drift = float((max(units) - min(units)) / u) if u > 0 else float("inf")
    c = float(np.median(cpu))
    return out, {
        "cpu_seconds": c,
        "cpu_seconds_range": [float(min(cpu)), float(max(cpu))],
        "wall_seconds": float(np.median(wall)),
        "unit_cpu_seconds": u,
        "units": c / u if u > 0 else float("inf"),
        "unit_drift": drift,
        "unit_drift_flagged": drift > MAX_UNIT_DRIFT,
        "repeats": repeats,
        "load_average": [list(load_start), list(os.getloadavg())],
    }
