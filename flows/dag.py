"""Run stage instances as one graph of tasks on the flow's task runner.

A *stage instance* is named by its DVC address: ``prepare@<dataset>``, ``embed@<embedding>``,
``<release|integrate|attack|evaluate>@<sweep>`` or ``report``. :func:`run_stage_dag` starts an
instance as soon as every instance it needs has finished. ``prepare``, ``embed`` and ``report``
are one task each; a cell stage opens (``begin_stage``, in the calling thread), submits one task
per cell and closes (``finish_stage``) when its last cell is done. The runner's workers thus
always have the next ready cell of *any* stage: they do not idle at each stage boundary while the
slowest cell of one sweep finishes.

Under a thread-pool runner of ``workers`` threads the scheduler sends at most :data:`QUEUE_DEPTH`
tasks per worker and keeps the rest itself, in start order, except for *probes*: the cells of the
first stage instance of each (stage, family) go ahead of the other cells (after the probes already
waiting), and those of the first instance of a stage at all go first. A run so learns early what
each kind of cell costs in each family (:mod:`tasks.eta`: the ETA of a first run); the total work,
hence the run's length, is the same. Other runners (Dask) get every ready task. Cells of every
family may run concurrently (stage functions hold no process-global state,
:mod:`veilbench.families.base`).

``on_start(address)`` and ``on_done(address)`` run in the calling thread (the in-process DVC
pipeline prints, then saves and commits the instance's outputs there) while the workers go on
with other cells; so do the progress callbacks ``on_cells(address, cells)`` (a cell stage's
cells, once it opens) and ``on_cell(address, cell, outcome)`` (``"computed"`` or ``"reused"``).
After a failure nothing new starts, the tasks in flight finish, the MLflow parent runs of the
stages that will not finish end FAILED, and the first error is raised.
"""

from __future__ import annotations

import queue
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from tasks.common import load_params
from tasks.embed import embed_task
from tasks.paths import CELL_STAGES
from tasks.prepare import prepare_task
from tasks.report import report_task
from tasks.sweep import abort_stage, begin_stage_task, finish_stage_task, run_cell_task
from veilbench.config import Config

#: Tasks sent to a thread pool ahead, per worker (:func:`run_stage_dag`'s ``fill``): 2 lets a worker
#: that finishes start its next cell while the scheduling thread closes a stage (finish_stage and
#: the DVC save).
QUEUE_DEPTH = 2

#: Stages that are one task per instance (besides ``report``).
_SINGLE_TASK_STAGES = {"prepare": prepare_task, "embed": embed_task}


def stage_graph(cfg: Config, sweeps: Iterable[str]) -> dict[str, list[str]]:
    """The stage instances of ``sweeps`` (their embeddings and data sets, every cell stage, and
    the report) → the instances each one needs, in start order."""
    sweeps = list(sweeps)
    embeddings = sorted({cfg.sweeps[s].embedding for s in sweeps})
    graph: dict[str, list[str]] = {f"prepare@{d}": [] for d in sorted({cfg.embeddings[e].dataset for e in embeddings})}
    graph.update({f"embed@{e}": [f"prepare@{cfg.embeddings[e].dataset}"] for e in embeddings})
    for i, stage in enumerate(CELL_STAGES):
        for s in sweeps:
            graph[f"{stage}@{s}"] = [f"{CELL_STAGES[i - 1]}@{s}" if i else f"embed@{cfg.sweeps[s].embedding}"]
    graph["report"] = [f"evaluate@{s}" for s in sweeps]
    return graph


def dag_lines(graph: Mapping[str, Iterable[str]]) -> list[str]:
    """A readable picture of a stage graph (:func:`stage_graph`): each data set, under it its
    embeddings, under each the sweeps built on it with their cell stages, one line per sweep, then
    the report; short lines whatever the number of sweeps (``dvc dag`` draws every instance side by
    side, one text line thousands of characters wide)."""
    needs = {a: list(n) for a, n in graph.items()}
    lines: list[str] = []
    for dataset in (a for a in needs if a.startswith("prepare@")):
        lines.append(dataset)
        embeds = [a for a in needs if a.startswith("embed@") and dataset in needs[a]]
        for i, embed in enumerate(embeds):
            last = i == len(embeds) - 1
            lines.append(f"{'└─' if last else '├─'} {embed}")
            sweeps = [a.partition("@")[2] for a in needs if a.startswith(f"{CELL_STAGES[0]}@") and embed in needs[a]]
            for j, sweep in enumerate(sweeps):
                stages = [st for st in CELL_STAGES if f"{st}@{sweep}" in needs]
                lines.append(f"{'   ' if last else '│  '}{'└─' if j == len(sweeps) - 1 else '├─'} "
                             f"{' → '.join(stages)} @{sweep}")
    if "report" in needs:
        lines.append(f"report (after {len(needs['report'])} evaluate stage(s))")
    return lines


class _GraphRun:
    """The state of one :func:`run_stage_dag` call: which instances wait, which cells are queued or in
    flight, and the first error. Every method runs in the calling (scheduling) thread."""

    def __init__(self, needs: Mapping[str, Iterable[str]], params_path: str | None, workers: int | None,
                 callbacks: Mapping[str, Callable[..., None] | None], root: Path | None = None,
                 families: Mapping[str, str] | None = None):
        self.order = list(needs)
        known = (*_SINGLE_TASK_STAGES, *CELL_STAGES, "report")
        unknown = [a for a in self.order if a.partition("@")[0] not in known]
        if unknown:
            raise KeyError(f"stage: {unknown} are not veilbench stages (known: {list(known)})")
        self.waiting = {a: set(needs[a]) & set(self.order) for a in self.order}
        self.params_path, self.workers, self.root = params_path, workers, root
        self.callbacks = callbacks
        self.done: queue.Queue = queue.Queue()
        self.in_flight: dict[Any, tuple[str, str | None]] = {}  # future → (address, cell or None)
        self.ready: deque[tuple[str, str | None]] = deque()
        self.cells_left: dict[str, int] = {}
        self.outcomes: dict[str, dict[str, str]] = {}
        self.results: dict[str, Any] = {}
        self.started: set[str] = set()
        self.error: BaseException | None = None
        self.families = dict(families or {})  # sweep → family
        self.probed: set[tuple[str, str]] = set()  # (stage, family) whose first instance went ahead
        self.probes = 0  # probe cells at the head of ``ready``

    def _call(self, name: str, *args: Any) -> None:
        callback = self.callbacks.get(name)
        if callback is not None:
            callback(*args)

    def _guard(self, step: Callable[[], None]) -> None:
        """Run ``step``; its exception becomes the run's error (raised once the tasks in flight end)."""
        try:
            step()
        except BaseException as exc:  # noqa: BLE001
            self.error = self.error or exc

    def submit(self, address: str, cell: str | None) -> None:
        name, _, key = address.partition("@")
        if cell is not None:
            future = run_cell_task.submit(name, key, cell, self.params_path, self.root)
        elif name == "report":
            future = report_task.submit(self.params_path, self.root)
        else:
            future = _SINGLE_TASK_STAGES[name].submit(key, self.params_path, self.root)
        self.in_flight[future] = (address, cell)
        future.add_done_callback(self.done.put)

    def start(self, address: str) -> None:
        self.started.add(address)
        self._call("on_start", address)
        name, _, key = address.partition("@")
        if name not in CELL_STAGES:
            self.ready.append((address, None))
            return
        cells = begin_stage_task(name, key, self.params_path, self.root)
        self.cells_left[address], self.outcomes[address] = len(cells), {}
        self._call("on_cells", address, list(cells))
        group = (name, self.families.get(key, key))
        if cells and group not in self.probed:  # a probe (module docstring)
            at = 0 if all(stage != name for stage, _ in self.probed) else self.probes
            self.probed.add(group)
            for i, cell in enumerate(cells):
                self.ready.insert(at + i, (address, cell))
            self.probes += len(cells)
        else:
            self.ready.extend((address, cell) for cell in cells)
        if not cells:
            self.finish(address, None)

    def start_ready(self) -> None:
        """Start every instance whose dependencies have finished (again, as starting one may finish it)."""
        while self.error is None:
            startable = [a for a in self.order if a not in self.started and not self.waiting[a]]
            if not startable:
                return
            for address in startable:
                self._guard(lambda a=address: self.start(a))

    def fill(self) -> None:
        """Send ready work in start order; a thread pool holds at most :data:`QUEUE_DEPTH` tasks per
        worker, so a worker that finishes while this thread does bookkeeping finds its next task waiting."""
        limit = None if self.workers is None else QUEUE_DEPTH * self.workers
        while self.error is None and self.ready and (limit is None or len(self.in_flight) < limit):
            self.probes = max(0, self.probes - 1)
            self.submit(*self.ready.popleft())

    def collect(self) -> list[tuple[str, Any]]:
        """Wait for at least one task, take every finished one; return the instances now complete."""
        arrived = [self.done.get()]
        while not self.done.empty():
            arrived.append(self.done.get())
        completed = []
        for future in arrived:
            address, cell = self.in_flight.pop(future)
            try:
                result = future.result()
            except BaseException as exc:  # noqa: BLE001
                self.error = self.error or exc
                continue
            if self.error is not None:
                continue
            if cell is not None:
                self.outcomes[address][cell] = result
                self.cells_left[address] -= 1
                self._call("on_cell", address, cell, result)
            if cell is None or self.cells_left[address] == 0:
                completed.append((address, result))
        return completed

    def finish(self, address: str, result: Any) -> None:
        name, _, key = address.partition("@")
        if name in CELL_STAGES:
            result = finish_stage_task(name, key, self.outcomes[address], self.params_path, self.root)
        self._call("on_done", address)
        self.results[address] = result
        for other in self.order:
            self.waiting[other].discard(address)

    def abort_open(self) -> None:
        """End the MLflow parent runs of the cell stages that started but will not finish FAILED."""
        for address in self.started:
            name, _, key = address.partition("@")
            if name in CELL_STAGES and address not in self.results:
                try:
                    abort_stage(name, key, self.params_path, self.root)
                except Exception:  # noqa: BLE001 - the run's own error is the one to report
                    pass

    def run(self) -> dict[str, Any]:
        try:
            while True:
                self.start_ready()
                self.fill()
                if not self.in_flight:
                    break
                completed = self.collect()
                self.fill()  # the workers get new work before the stage bookkeeping below
                for address, result in completed:
                    if self.error is None:
                        self._guard(lambda a=address, r=result: self.finish(a, r))
        except BaseException:  # Ctrl-C, SIGTERM, a dead server: the open stages end FAILED too
            self.abort_open()
            raise
        if self.error is not None:
            self.abort_open()
            raise self.error
        if len(self.results) < len(self.order):
            stuck = [a for a in self.order if a not in self.results]
            raise ValueError(f"stages: {stuck} wait for each other (a cycle in the stage graph)")
        return self.results


def run_stage_dag(
    needs: Mapping[str, Iterable[str]],
    params_path: str | None = None,
    on_start: Callable[[str], None] | None = None,
    on_done: Callable[[str], None] | None = None,
    on_cells: Callable[[str, list[str]], None] | None = None,
    on_cell: Callable[[str, str, Any], None] | None = None,
    workers: int | None = None,
    root: str | None = None,
) -> dict[str, Any]:
    """Run every instance of ``needs`` (address → addresses it waits for; dependencies outside
    ``needs`` count as satisfied) inside the current flow; returns address → the result of the
    instance's last task (its output folder, or the report's path), in the order they finished.

    ``workers``: the worker count of the flow's thread-pool runner (at most :data:`QUEUE_DEPTH`
    tasks per worker are sent ahead); None for runners that queue work themselves (Dask).
    ``root`` is the folder the tasks read and write (default: :func:`tasks.paths.repo_root` where
    each task runs); passing it makes it a task parameter, so worker processes need no environment."""
    root_path = Path(root) if root else None
    cfg = load_params(params_path, root_path)  # a bad params file is an error before any work
    callbacks = {"on_start": on_start, "on_done": on_done, "on_cells": on_cells, "on_cell": on_cell}
    families = {name: s.family for name, s in cfg.sweeps.items()}
    return _GraphRun(needs, params_path, workers, callbacks, root_path, families).run()
