"""Progress of long work, for a person watching: rich on a terminal, plain lines otherwise.

* :func:`progress`: a progress bar over one loop (silent when output is piped: DVC, CI).
* :class:`RunProgress`: the progress of one ``veilbench run``: stages done / total, per running
  stage its cells done / total (computed and reused), elapsed time and an ETA; one line per
  finished stage; a summary at the end. On a terminal it is a live rich display; otherwise the
  per-stage lines, a progress line at most every :data:`HEARTBEAT_S` seconds while cells finish,
  and the summary are printed.
* :func:`captured_warnings`: Python warnings raised while the run works (scikit-learn's
  convergence warnings and the like) go to a log file instead of the console, and are counted.

ETA. The pending cells are those of the running stages not done yet and every cell of the planned
cell stages not begun (their cells and seeds from the params file). A pending cell's expected time
is its last run time where it ran before (the sum of the per-seed ``seconds`` of its timings sidecar
``data/<stage>/<sweep>/<cell>/timings.json``, evaluate's too: the outputs themselves hold no
timings, :mod:`tasks.sweep`), else the median of its stage instance's cells that ran before, else
``n_seeds · r(kind, family)`` with the rate learnt from the cells this run has computed
(:class:`tasks.eta.CellCosts`); a cell of a kind whose cells so far were all reused (a first
run's evaluate cells, reused from the committed records) counts as reused. Until every pending
cell has an estimate (a first run, before a cell of each stage kind and family has finished) the
ETA reads ``first run: estimating``. A stale stage recomputes only the cells whose inputs changed and reuses
the others at almost no cost, so the pending time of each stage kind ``k`` is weighted by
``p_k``, the share of its cells done so far that were computed (:func:`tasks.eta.reuse_share`),
and the whole divided by the workers and by how fully the cells' own seconds fill their wall time
(:func:`tasks.eta.efficiency`)::

    ETA = Σ_pending p_k · t_cell / (workers · efficiency)

Stages that are one task (prepare, embed, report) are not in the estimate.
``$VEILBENCH_ETA_LOG`` names a JSON file where the run records, at each finished stage, its
elapsed time and ETA, and at its end its wall time (``benchmarks/bench_eta.py`` reads it).
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

from veilbench.stages import STAGES as CELL_STAGES

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


#: Most seconds between two progress lines when the display is not live (output piped).
HEARTBEAT_S = 30.0



def _plan(root: Path, params_path: str | Path | None) -> dict[str, tuple[str, list[str], int]]:
    """sweep → (family, cell names, number of seeds) from the params file (empty when unreadable)."""
    from tasks.common import load_params

    try:
        cfg = load_params(params_path, root)
    except Exception:  # noqa: BLE001 - progress is advisory: a run that cannot read params fails elsewhere
        return {}
    return {name: (s.family, list(s.expand()), len(s.seeds)) for name, s in cfg.sweeps.items()}


class RunProgress:
    """Progress display of one run over the stage instances ``stages`` (DVC addresses).

    Call :meth:`stage_started`, :meth:`stage_cells` (the cells of a cell stage), :meth:`cell_done`
    and :meth:`stage_done` from one thread (the pipeline's scheduling thread); use as a context
    manager around the run. ``live`` defaults to whether ``stream`` is a terminal. ``params_path``
    (default ``<root>/params.yaml``) gives the cells, seeds and family of each sweep; ``eta_log``
    (default ``$VEILBENCH_ETA_LOG``) the file recording the ETA at each stage."""

    def __init__(self, stages: Iterable[str], root: Path, workers: int = 1, stream: TextIO | None = None,
                 live: bool | None = None, warnings_count: Any = None, params_path: str | Path | None = None,
                 eta_log: str | Path | None = None, heartbeat: float = HEARTBEAT_S):
        from tasks.eta import CellCosts

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
        self.plan = _plan(self.root, params_path)
        self.costs = CellCosts()
        self.busy = 0.0  # seconds of the cells computed so far
        self.first_cell_stage: float | None = None
        self._past: dict[tuple[str, str], float | None] = {}
        self._progress: Any = None
        self._tasks: dict[str, Any] = {}
        self._overall: Any = None
        self.heartbeat = heartbeat
        self._last_line = time.monotonic()
        log = eta_log if eta_log is not None else os.environ.get("VEILBENCH_ETA_LOG")
        self.eta_log = Path(log) if log else None
        self.events: list[dict[str, Any]] = []

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

    def __exit__(self, exc_type: object = None, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        if self.eta_log is not None:
            self.write_eta_log(finished=exc_type is None and len(self.done) == len(self.stages))

    def _print(self, line: str) -> None:
        self._last_line = time.monotonic()
        if self._progress is not None:
            self._progress.console.print(line, markup=False, highlight=False)
        else:  # not print(): inside a flow with log_prints, Prefect turns print() into log records
            self.stream.write(line + "\n")
            self.stream.flush()

    # -- events --------------------------------------------------------------------------------
    def stage_started(self, address: str) -> None:
        self.started_at[address] = time.monotonic()

    def stage_cells(self, address: str, cells: list[str]) -> None:
        self.cells[address] = list(cells)
        self.outcomes[address] = {}
        if cells and self.first_cell_stage is None:
            self.first_cell_stage = time.monotonic()
        if self._progress is not None and cells:
            self._tasks[address] = self._progress.add_task(address, total=len(cells), eta="")

    def cell_done(self, address: str, cell: str, outcome: str) -> None:
        self.outcomes.setdefault(address, {})[cell] = outcome
        if outcome == "computed":
            self._learn(address, cell)
        if address in self._tasks:
            o = self.outcomes[address]
            computed = sum(v == "computed" for v in o.values())
            self._progress.update(self._tasks[address], completed=len(o),
                                  description=f"{address} ({computed} computed, {len(o) - computed} reused)")
        self._refresh()
        if self._progress is None and time.monotonic() - self._last_line >= self.heartbeat:
            self._print(self.progress_line())

    def stage_done(self, address: str) -> None:
        self.done.append(address)
        if address in self._tasks:
            self._progress.remove_task(self._tasks.pop(address))
        self._print(self.stage_line(address))
        eta = self.eta()
        self.events.append({"elapsed": round(time.monotonic() - self.t0, 3), "stages_done": len(self.done),
                            "stage": address, "eta": None if eta is None else round(eta, 3)})
        self._refresh()

    # -- numbers -------------------------------------------------------------------------------
    def _family(self, sweep: str) -> str:
        return self.plan[sweep][0] if sweep in self.plan else sweep

    def _learn(self, address: str, cell: str) -> None:
        """Learn the rate of the cell's (kind, family) from the timings sidecar it has just written."""
        from veilbench.io import read_timings

        stage, _, sweep = address.partition("@")
        record = read_timings(self.root / "data" / stage / sweep / cell)
        per_seed = record.get("per_seed") if record is not None else None
        seconds = past_cell_seconds(self.root, address, cell)
        if isinstance(per_seed, dict) and seconds is not None:
            self.costs.observe(stage, self._family(sweep), seconds, len(per_seed))
            self.busy += seconds

    def counts(self) -> tuple[int, int, int]:
        """(cells, computed, reused) over the cell stages seen so far."""
        outcomes = [v for o in self.outcomes.values() for v in o.values()]
        computed = sum(v == "computed" for v in outcomes)
        return sum(len(c) for c in self.cells.values()), computed, len(outcomes) - computed

    def _past_seconds(self, address: str, cell: str) -> float | None:
        """The cell's time in an earlier run (its sidecar as the run found it; read once)."""
        if (address, cell) not in self._past:
            self._past[(address, cell)] = past_cell_seconds(self.root, address, cell)
        return self._past[(address, cell)]

    def _planned_cells(self, address: str) -> list[str] | None:
        """The cells of a cell stage not begun: from the params file, else those with a timings
        sidecar on disk; None when neither tells."""
        from veilbench.io import TIMINGS

        stage, _, sweep = address.partition("@")
        if sweep in self.plan:
            return self.plan[sweep][1]
        on_disk = sorted(p.parent.name for p in (self.root / "data" / stage / sweep).glob(f"*/{TIMINGS}"))
        return on_disk or None

    def pending(self) -> list[tuple[str, str]] | None:
        """(stage instance, cell) of every cell still to do: the running stages' cells not done and
        the planned cell stages' cells (:meth:`_planned_cells`); None when a planned stage's cells
        are unknown."""
        out = [(a, c) for a, cells in self.cells.items() for c in cells if c not in self.outcomes.get(a, {})]
        for a in self.stages:
            if a not in self.cells and a not in self.done and a.partition("@")[0] in CELL_STAGES:
                cells = self._planned_cells(a)
                if cells is None:
                    return None
                out += [(a, c) for c in cells]
        return out

    def _sibling_seconds(self, address: str) -> float | None:
        """The median past time of the stage instance's cells that ran before (a cell new to a
        sweep costs about what its neighbours cost), or None."""
        known = [t for c in self.cells.get(address, []) if (t := self._past_seconds(address, c)) is not None]
        return statistics.median(known) if known else None

    def eta(self) -> float | None:
        """Seconds left for the pending cells (see the module docstring); None before any cell
        stage has begun and while some pending cell has no estimate yet (``first run: estimating``)."""
        from tasks.eta import efficiency, reuse_share

        if not self.cells:
            return None
        kinds: dict[str, list[int]] = {}
        for a, o in self.outcomes.items():
            k = kinds.setdefault(a.partition("@")[0], [0, 0])
            for v in o.values():
                k[0 if v == "computed" else 1] += 1
        pending = self.pending()
        if pending is None:
            return None
        work = 0.0
        for a, c in pending:
            stage, _, sweep = a.partition("@")
            t = self._past_seconds(a, c)
            if t is None:
                t = self._sibling_seconds(a)
            computed, reused = kinds.get(stage, [0, 0])
            if t is None:
                rate = self.costs.rate(stage, self._family(sweep))
                if rate is None and not computed and reused:
                    continue  # every cell of this kind so far was reused: so, expectedly, is this one
                if rate is None:
                    return None
                t = rate * (self.plan[sweep][2] if sweep in self.plan else 1)
            work += reuse_share(computed, reused) * t
        _, computed, _ = self.counts()
        wall = time.monotonic() - (self.first_cell_stage or self.t0)
        eff = efficiency(self.busy, self.workers, wall) if computed >= 2 * self.workers else 1.0
        return work / (self.workers * eff)

    def _eta_text(self, eta: float | None) -> str:
        return "first run: estimating" if eta is None else duration(eta)

    def stage_line(self, address: str) -> str:
        took = time.monotonic() - self.started_at.get(address, self.t0)
        head = f"[{len(self.done)}/{len(self.stages)}] {address}"
        if address in self.cells:
            o = self.outcomes.get(address, {})
            computed = sum(v == "computed" for v in o.values())
            head += f": {len(self.cells[address])} cells ({computed} computed, {len(o) - computed} reused)"
        line = f"{head} in {duration(took)}; elapsed {duration(time.monotonic() - self.t0)}"
        if not self.cells or len(self.done) >= len(self.stages):
            return line
        return line + f", ETA {self._eta_text(self.eta())}"

    def progress_line(self) -> str:
        """``… 340/788 cells done, 12/74 stages; elapsed …, ETA …`` (the periodic line when piped)."""
        cells, computed, reused = self.counts()
        planned = cells + sum(len(self.plan[a.partition("@")[2]][1]) for a in self.stages
                              if a not in self.cells and a.partition("@")[0] in CELL_STAGES
                              and a.partition("@")[2] in self.plan)
        return (f"… {computed + reused}/{planned} cells done ({computed} computed), {len(self.done)}/{len(self.stages)} "
                f"stages; elapsed {duration(time.monotonic() - self.t0)}, ETA {self._eta_text(self.eta())}")

    def _refresh(self) -> None:
        if self._progress is None or self._overall is None:
            return
        n = self.warnings_count()
        text = (f"ETA {self._eta_text(self.eta())}" if self.cells else "") + (f"  ({n} warnings in the log)" if n else "")
        self._progress.update(self._overall, completed=len(self.done), eta=text)

    def summary(self) -> str:
        """``74 stages, 1 925 cells: 26 computed, 1 899 reused, 4 min 12 s``."""
        cells, computed, reused = self.counts()

        def n(k: int) -> str:
            return f"{k:,}".replace(",", "\u202f")

        return (f"{len(self.done)} stage(s), {n(cells)} cells: {n(computed)} computed, {n(reused)} reused, "
                f"{duration(time.monotonic() - self.t0)}")

    def write_eta_log(self, finished: bool) -> None:
        """Write the ETA record (``eta_log``): every finished stage's elapsed seconds and ETA, the
        run's wall seconds, and whether it ran every planned stage."""
        from veilbench.io import write_json

        write_json(self.eta_log, {"stages": len(self.stages), "workers": self.workers, "finished": finished,
                                  "wall_seconds": round(time.monotonic() - self.t0, 3), "events": self.events})


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
