"""Run stage instances as one graph of tasks on the flow's task runner.

A *stage instance* is named by its DVC address: ``prepare@<dataset>``, ``embed@<embedding>``,
``<release|integrate|attack|evaluate>@<sweep>`` or ``report``. :func:`run_stage_dag` starts an
instance as soon as every instance it needs has finished. ``prepare``, ``embed`` and ``report``
are one task each; a cell stage opens (``begin_stage``, in the calling thread), submits one task
per cell and closes (``finish_stage``) when its last cell is done. The runner's workers thus
always have the next ready cell of *any* stage: they do not idle at each stage boundary while the
slowest cell of one sweep finishes (measured on the default run before this: about 0.8 s
between stages × 74 stages, plus each stage's tail with one worker busy).

Under a thread-pool runner the scheduler sends at most :data:`QUEUE_DEPTH` tasks per worker and
keeps the rest itself, so it picks what runs next. With more than one worker, the cells of a
family with ``THREAD_SAFE = False`` (:mod:`veilbench.families.base`) go through one *lane*: one such cell is
in flight at a time, so no worker sits blocked on that family's lock, and the lane's next cell
goes first to the next free worker (the lane is a chain, the longest path of the default run: GCA's
cells, about 60 s; sent behind everything else it ran alone at the end). Process-based runners
such as Dask give each worker its own global state: no lane there, and every ready task is sent.

``on_start(address)`` and ``on_done(address)`` run in the calling thread (the in-process DVC
pipeline prints, then saves and commits the instance's outputs there) while the workers go on
with other cells. After a failure nothing new starts, the tasks in flight finish, and the first
error is raised.
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
from tasks.sweep import begin_stage_task, finish_stage_task, run_cell_task
from veilbench.config import Config
from veilbench.families import get_family

#: Tasks sent to a thread pool ahead, per worker (:func:`run_stage_dag`'s ``fill``): 2 lets a worker
#: that finishes start its next cell while the scheduling thread closes a stage (finish_stage and
#: the DVC save, ~0.1–0.3 s each), and keeps the lane's next cell behind at most 3 others.
QUEUE_DEPTH = 2

#: Stages that are one task per instance (besides ``report``).
_SINGLE_TASK_STAGES = {"prepare": prepare_task, "embed": embed_task}


def _thread_slots() -> int | None:
    """The worker count of the current flow's thread-pool runner; None for other runners (Dask)."""
    from prefect.context import FlowRunContext
    from prefect.task_runners import ThreadPoolTaskRunner

    ctx = FlowRunContext.get()
    runner = ctx.task_runner if ctx else None
    return runner._max_workers if isinstance(runner, ThreadPoolTaskRunner) else None  # no public accessor


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


def run_stage_dag(
    needs: Mapping[str, Iterable[str]],
    params_path: str | None = None,
    on_start: Callable[[str], None] | None = None,
    on_done: Callable[[str], None] | None = None,
    root: str | None = None,
) -> dict[str, Any]:
    """Run every instance of ``needs`` (address → addresses it waits for; dependencies outside
    ``needs`` count as satisfied) inside the current flow; returns address → the result of the
    instance's last task (its output folder, or the report's path), in the order they finished.
    ``root`` is the folder the tasks read and write (default: :func:`tasks.paths.repo_root` where
    each task runs); passing it makes it a task parameter, so worker processes need no environment."""
    root_path = Path(root) if root else None
    cfg = load_params(params_path, root_path)
    order = list(needs)
    known = (*_SINGLE_TASK_STAGES, *CELL_STAGES, "report")
    unknown = [a for a in order if a.partition("@")[0] not in known]
    if unknown:
        raise KeyError(f"stage: {unknown} are not veilbench stages (known: {list(known)})")
    waiting = {a: set(needs[a]) & set(order) for a in order}
    slots = _thread_slots()
    lane_on = slots is not None and slots > 1
    done: queue.Queue = queue.Queue()
    in_flight: dict[Any, tuple[str, str | None, bool]] = {}  # future → (address, cell, in the lane)
    ready: deque[tuple[str, str | None]] = deque()  # (address, cell or None for a one-task stage)
    lane: deque[tuple[str, str | None]] = deque()
    lane_busy = False
    cells_left: dict[str, int] = {}
    outcomes: dict[str, dict[str, str]] = {}
    results: dict[str, Any] = {}
    started: set[str] = set()
    error: BaseException | None = None

    def submit(address: str, cell: str | None, in_lane: bool) -> None:
        name, _, key = address.partition("@")
        if cell is not None:
            future = run_cell_task.submit(name, key, cell, params_path, root_path)
        elif name == "report":
            future = report_task.submit(params_path, root_path)
        else:
            future = _SINGLE_TASK_STAGES[name].submit(key, params_path, root_path)
        in_flight[future] = (address, cell, in_lane)
        future.add_done_callback(done.put)

    def finish(address: str, result: Any) -> None:
        name, _, key = address.partition("@")
        if name in CELL_STAGES:
            result = finish_stage_task(name, key, outcomes[address], params_path, root_path)
        if on_done is not None:
            on_done(address)
        results[address] = result
        for other in order:
            waiting[other].discard(address)

    def start(address: str) -> None:
        started.add(address)
        if on_start is not None:
            on_start(address)
        name, _, key = address.partition("@")
        if name not in CELL_STAGES:
            ready.append((address, None))
            return
        cells = begin_stage_task(name, key, params_path, root_path)
        cells_left[address], outcomes[address] = len(cells), {}
        serial = lane_on and not getattr(get_family(cfg.sweeps[key].family), "THREAD_SAFE", True)
        (lane if serial else ready).extend((address, cell) for cell in cells)
        if not cells:
            finish(address, None)

    def fill() -> None:
        """Send ready work to free workers: the lane first (its cells run one at a time, so it is
        the longest chain), then ready work in start order. A thread pool holds at most
        :data:`QUEUE_DEPTH` tasks per worker, so the lane's next cell is never queued behind
        everything already sent, and a worker that finishes while this thread does bookkeeping
        finds its next task waiting."""
        nonlocal lane_busy
        while error is None and (slots is None or len(in_flight) < QUEUE_DEPTH * slots):
            if lane and not lane_busy:
                submit(*lane.popleft(), True)
                lane_busy = True
            elif ready:
                submit(*ready.popleft(), False)
            else:
                break

    while True:
        while error is None:
            startable = [a for a in order if a not in started and not waiting[a]]
            if not startable:
                break
            try:
                for address in startable:
                    start(address)
            except BaseException as exc:  # noqa: BLE001 - raised after the tasks in flight end
                error = exc
        fill()
        if not in_flight:
            break
        arrived = [done.get()]  # block for one, then take whatever else has finished
        while not done.empty():
            arrived.append(done.get())
        completed: list[tuple[str, Any]] = []
        for future in arrived:
            address, cell, in_lane = in_flight.pop(future)
            lane_busy = lane_busy and not in_lane
            try:
                result = future.result()
            except BaseException as exc:  # noqa: BLE001
                error = error or exc
                continue
            if error is None and cell is not None:
                outcomes[address][cell] = result
                cells_left[address] -= 1
            if error is None and (cell is None or cells_left[address] == 0):
                completed.append((address, result))
        fill()  # the workers get new work before the stage bookkeeping below
        for address, result in completed:
            if error is None:
                try:
                    finish(address, result)
                except BaseException as exc:  # noqa: BLE001
                    error = exc
    if error is not None:
        raise error
    if len(results) < len(order):
        stuck = [a for a in order if a not in results]
        raise ValueError(f"stages: {stuck} wait for each other (a cycle in the stage graph)")
    return results
