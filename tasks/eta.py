"""Expected seconds of the cells a run has still to do, learnt from the cells it has done.

A cell of stage kind ``k`` (release, integrate, attack, evaluate) of a sweep of family ``f`` runs
its stage function once per seed, so its time is modelled as ``n_seeds · r(k, f)``: ``r`` is the
*rate*, seconds per seed. :class:`CellCosts` learns ``r(k, f) = Σ seconds / Σ seeds`` over the
cells of ``(k, f)`` this run computed (their timings sidecars, :func:`tasks.progress.past_cell_seconds`).

For a ``(k, f)`` not observed yet, the same kind's rate in the other families stands in::

    r̂(k, f) = median_{f' : (k, f') observed} r(k, f')

(a kind's cost is more alike across families than a family's across kinds: a federation's
checkpoint selection is trivial where data collaboration's integration trains a model, so scaling
one family's release time by another's integrate/release ratio can be off by orders of magnitude). With no
family observed for the kind there is no estimate: :meth:`CellCosts.rate` returns None and the
run says it is still estimating. The pipeline runs the first stage instance of each (stage,
family) ahead of the queue (:mod:`flows.dag`), so every group is observed early.
"""

from __future__ import annotations

import statistics
from collections import defaultdict


class CellCosts:
    """Seconds per seed of a cell, per (stage kind, family), learnt from finished cells."""

    def __init__(self) -> None:
        self._seconds: dict[tuple[str, str], float] = defaultdict(float)
        self._seeds: dict[tuple[str, str], int] = defaultdict(int)

    def observe(self, kind: str, family: str, seconds: float, n_seeds: int) -> None:
        """Record a computed cell of ``(kind, family)``: ``seconds`` over its ``n_seeds`` seeds."""
        if n_seeds > 0 and seconds >= 0:
            self._seconds[(kind, family)] += float(seconds)
            self._seeds[(kind, family)] += int(n_seeds)

    def observed(self, kind: str, family: str) -> float | None:
        """``r(kind, family)`` from this run's cells, or None before the first."""
        n = self._seeds.get((kind, family), 0)
        return self._seconds[(kind, family)] / n if n else None

    def rate(self, kind: str, family: str) -> float | None:
        """Seconds per seed of a ``(kind, family)`` cell: observed, else the median of the kind's
        observed rates in other families (module docstring), else None."""
        direct = self.observed(kind, family)
        if direct is not None:
            return direct
        others = [r for (k, f) in sorted(self._seeds) if k == kind and (r := self.observed(k, f)) is not None]
        return statistics.median(others) if others else None


def reuse_share(computed: int, reused: int) -> float:
    """Expected share of a stage kind's pending cells that will be computed, not reused: the share
    among its cells done so far with one pseudo-count towards computing, ``(computed + 1) / (done + 1)``
    (a kind with no cell done yet counts as all computed)."""
    return (computed + 1) / (computed + reused + 1)


def efficiency(busy_seconds: float, workers: int, wall_seconds: float, floor: float = 0.25) -> float:
    """How much of the workers' wall time the cells' own seconds fill, ``busy / (workers · wall)``,
    clipped to ``[floor, 1]``: the rest is the run's own work between cells (reuse checks, MLflow
    records, saving each stage to DVC), which the cells' timings do not see."""
    if wall_seconds <= 0 or workers <= 0:
        return 1.0
    return min(1.0, max(floor, busy_seconds / (workers * wall_seconds)))
