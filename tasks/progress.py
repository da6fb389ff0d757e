"""Progress of long work, for a person watching: rich on a terminal, plain lines otherwise.

* :func:`progress`: a progress bar over one loop (silent when output is piped: DVC, CI).
* :class:`RunProgress`: the progress of one ``veilbench run``: stages done / total, per running
  stage its cells done / total (computed and reused), elapsed time and an ETA; one line per
  finished stage; a summary at the end. On a terminal it is a live rich display; otherwise only
  the per-stage lines and the summary are printed.
* :func:`captured_warnings`: Python warnings raised while the run works (scikit-learn's
  convergence warnings and the like) go to a log file instead of the console, and are counted.

ETA. Each cell's expected time is its last run time, read from its timings sidecar (the sum of the
per-seed ``seconds`` in ``data/<stage>/<sweep>/<cell>/timings.json``, evaluate's too: the outputs
themselves hold no timings, :mod:`tasks.sweep`); a cell without one counts as the median of the
known ones of its stage; a planned stage not begun yet counts as the sum over the sidecars on disk. Where a stage has no past time at all (a first
run), the ETA is shown as a lower bound, ``ETA ≥ …``. A stale stage recomputes only the cells
whose inputs changed and reuses the others at almost no cost, so the pending work is weighted by
the share of cells computed so far, with one pseudo-count: ``p = (computed + 1) / (done + 1)``,
``ETA = p · Σ_pending t_cell / workers``. Stages that are one task (prepare, embed, report) are
not in the estimate.
"""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO, TypeVar

T = TypeVar("T")


def progress(items: Iterable[T], description: str, total: int | None = None) -> Iterator[T]:
    """Iterate ``items`` with a rich progress bar on stderr when it is a TTY (and TQDM_DISABLE unset)."""
    if not sys.stderr.isatty() or os.environ.get("TQDM_DISABLE"):
        yield from items
        return
    from rich.progress import track

    yield from track(items, description=description, total=total, transient=True)


def duration(seconds: float) -> str:
    """``4 min 12 s``, ``12.3 s`` or ``1 h 02 min``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    m, s = divmod(int(round(seconds)), 60)
    if m < 60:
        return f"{m} min {s:02d} s"
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min"


def past_cell_seconds(root: Path, address: str, cell: str) -> float | None:
    """The last run time of ``cell`` of stage instance ``address`` (sum over its seeds) from its
    timings sidecar ``data/<stage>/<sweep>/<cell>/timings.json``, or None when it never ran or the
    sidecar is missing or unreadable."""
    from veilbench.io import read_timings

    stage, _, sweep = address.partition("@")
    record = read_timings(root / "data" / stage / sweep / cell)
    per_seed = record.get("per_seed") if record is not None else None
    if not isinstance(per_seed, dict):
        return None
    try:
        return float(sum(float(v.get("seconds", 0.0)) for v in per_seed.values() if isinstance(v, dict)))
    except (TypeError, ValueError):
        return None


class RunProgress:
    """Progress display of one run over the stage instances ``stages`` (DVC addresses).

    Call :meth:`stage_started`, :meth:`stage_cells` (the cells of a cell stage), :meth:`cell_done`
    and :meth:`stage_done` from one thread (the pipeline's scheduling thread); use as a context
    manager around the run. ``live`` defaults to whether ``stream`` is a terminal."""

    def __init__(self, stages: Iterable[str], root: Path, workers: int = 1, stream: TextIO | None = None,
                 live: bool | None = None, warnings_count: Any = None):
        self.stages = list(stages)
        self.root = Path(root)
        self.workers = max(1, workers)
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.warnings_count = warnings_count or (lambda: 0)
        self.t0 = time.monotonic()
        self.done: list[str] = []
        self.cells: dict[str, list[str]] = {}
        self.outcomes: dict[str, dict[str, str]] = {}
        self.started_at: dict[str, float] = {}
        self.estimate: dict[tuple[str, str], float] = {}
        self._progress: Any = None
        self._tasks: dict[str, Any] = {}
        self._overall: Any = None
        self._priors: dict[str, float] = {}
        self.eta_is_lower_bound = False

    # -- display -------------------------------------------------------------------------------
    def __enter__(self) -> RunProgress:
        if self.live:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            console = Console(file=self.stream)
            self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                      TimeElapsedColumn(), TextColumn("{task.fields[eta]}"), console=console,
                                      transient=True, refresh_per_second=4)
            self._progress.start()
            self._overall = self._progress.add_task("stages", total=len(self.stages), eta="")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def _print(self, line: str) -> None:
        if self._progress is not None:
            self._progress.console.print(line, markup=False, highlight=False)
        else:
            print(line, file=self.stream, flush=True)

    # -- events --------------------------------------------------------------------------------
    def stage_started(self, address: str) -> None:
        self.started_at[address] = time.monotonic()

    def stage_cells(self, address: str, cells: list[str]) -> None:
        self.cells[address] = list(cells)
        self.outcomes[address] = {}
        known = []
        for c in cells:
            t = past_cell_seconds(self.root, address, c)
            if t is not None:
                self.estimate[(address, c)] = t
                known.append(t)
        default = statistics.median(known) if known else 1.0
        if cells and not known:
            self.eta_is_lower_bound = True
        for c in cells:
            self.estimate.setdefault((address, c), default)
        if self._progress is not None and cells:
            self._tasks[address] = self._progress.add_task(address, total=len(cells), eta="")

    def cell_done(self, address: str, cell: str, outcome: str) -> None:
        self.outcomes.setdefault(address, {})[cell] = outcome
        if address in self._tasks:
            o = self.outcomes[address]
            computed = sum(v == "computed" for v in o.values())
            self._progress.update(self._tasks[address], completed=len(o),
                                  description=f"{address} ({computed} computed, {len(o) - computed} reused)")
        self._refresh()

    def stage_done(self, address: str) -> None:
        self.done.append(address)
        if address in self._tasks:
            self._progress.remove_task(self._tasks.pop(address))
        self._print(self.stage_line(address))
        self._refresh()

    # -- numbers -------------------------------------------------------------------------------
    def counts(self) -> tuple[int, int, int]:
        """(cells, computed, reused) over the cell stages seen so far."""
        outcomes = [v for o in self.outcomes.values() for v in o.values()]
        computed = sum(v == "computed" for v in outcomes)
        return sum(len(c) for c in self.cells.values()), computed, len(outcomes) - computed

    def _prior(self, address: str) -> float:
        """Expected seconds of a cell stage not begun yet: its cells' last run times on disk."""
        if address not in self._priors:
            from veilbench.io import TIMINGS

            stage, _, sweep = address.partition("@")
            if stage in ("release", "integrate", "attack", "evaluate"):
                cells = [p.parent.name for p in (self.root / "data" / stage / sweep).glob(f"*/{TIMINGS}")]
            else:
                cells = []
            self._priors[address] = sum(past_cell_seconds(self.root, address, c) or 0.0 for c in cells)
            if not cells and stage in ("release", "integrate", "attack", "evaluate"):
                self.eta_is_lower_bound = True  # a stage that never ran: its time is unknown
        return self._priors[address]

    def eta(self) -> float | None:
        """Seconds left for the pending cells of the planned stages (see the module docstring):
        a stage not begun yet counts with its cells' last run times on disk. None before any cell
        stage has begun."""
        if not self.cells:
            return None
        pending = sum(self.estimate.get((a, c), 0.0) for a, cells in self.cells.items() for c in cells
                      if c not in self.outcomes.get(a, {}))
        pending += sum(self._prior(a) for a in self.stages if a not in self.cells and a not in self.done)
        _, computed, reused = self.counts()
        share = (computed + 1) / (computed + reused + 1)
        return share * pending / self.workers

    def stage_line(self, address: str) -> str:
        took = time.monotonic() - self.started_at.get(address, self.t0)
        head = f"[{len(self.done)}/{len(self.stages)}] {address}"
        if address in self.cells:
            o = self.outcomes.get(address, {})
            computed = sum(v == "computed" for v in o.values())
            head += f": {len(self.cells[address])} cells ({computed} computed, {len(o) - computed} reused)"
        line = f"{head} in {duration(took)}; elapsed {duration(time.monotonic() - self.t0)}"
        eta = self.eta()
        return line + (f", ETA {self._eta_text(eta)}" if eta is not None and len(self.done) < len(self.stages) else "")

    def _eta_text(self, eta: float) -> str:
        return ("≥ " if self.eta_is_lower_bound else "") + duration(eta)

    def _refresh(self) -> None:
        if self._progress is None or self._overall is None:
            return
        eta = self.eta()
        n = self.warnings_count()
        text = (f"ETA {self._eta_text(eta)}" if eta is not None else "") + (f"  ({n} warnings in the log)" if n else "")
        self._progress.update(self._overall, completed=len(self.done), eta=text)

    def summary(self) -> str:
        """``74 stages, 1 925 cells: 26 computed, 1 899 reused, 4 min 12 s``."""
        cells, computed, reused = self.counts()

        def n(k: int) -> str:
            return f"{k:,}".replace(",", "\u202f")

        return (f"{len(self.done)} stage(s), {n(cells)} cells: {n(computed)} computed, {n(reused)} reused, "
                f"{duration(time.monotonic() - self.t0)}")


class WarningLog:
    """Counts the warnings written to the run's log (see :func:`captured_warnings`)."""

    def __init__(self, path: Path):
        self.path = path
        self.count = 0


@contextmanager
def captured_warnings(path: Path) -> Iterator[WarningLog]:
    """Inside the block, every Python warning shown (from any thread) is appended to ``path`` as
    one line (category, message, file:line) instead of being printed; yields the counter."""
    path.parent.mkdir(parents=True, exist_ok=True)
    log = WarningLog(path)
    lock = threading.Lock()
    with open(path, "a", encoding="utf-8") as fh, warnings.catch_warnings():
        fh.write(f"--- run started {time.strftime('%Y-%m-%d %H:%M:%S')} ---\n")
        fh.flush()

        def show(message: Any, category: type[Warning], filename: str, lineno: int, file: Any = None,
                 line: str | None = None) -> None:
            with lock:
                log.count += 1
                fh.write(f"{category.__name__}: {message} ({filename}:{lineno})\n")
                fh.flush()

        warnings.showwarning = show
        yield log
