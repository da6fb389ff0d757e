"""The whole pipeline as one Prefect flow: ``python -m flows.benchmark [--params params.yaml]``.

Runs prepare → embed → release → integrate → attack → evaluate → report for every dataset,
embedding and sweep of ``params.yaml`` in one process (one Prefect server start, imports paid
once). Every cell of every stage is a task, started as soon as the stage before it in its sweep
has finished (:mod:`flows.dag`): by default :func:`flows._stage.cell_threads` cells at a time in
worker threads of this process (``VEILBENCH_CELL_THREADS``, one BLAS and torch thread each, as in
``veilbench run``); with ``--workers N`` in parallel on a local Dask cluster of N single-threaded
worker processes, with ``--dask-address`` on an existing Dask cluster. Results are identical
either way (each cell seeds its own streams). Progress (:class:`tasks.progress.RunProgress`) goes
to stderr: a live display on a terminal, lines when piped.
``veilbench run`` uses DVC instead; both reuse cells whose inputs did not change.

The command writes into the workspace only for the workspace's own ``params.yaml``; another
params file (``--params params.large.yaml``) runs in ``runs/<params file stem>/`` (or ``--root``),
so two params files never overwrite each other's ``data/`` and ``reports/``, whatever their sweep
names. Scheduled runs (:mod:`flows.deploy`) get a new root per run.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner

from flows._stage import cell_threads, single_threaded_blas, stages_use_torch
from flows.dag import run_stage_dag, stage_graph
from tasks.common import load_params


def task_runner(workers: int = 1, dask_address: str | None = None, threads: int = 1) -> Any:
    """A pool of ``threads`` worker threads for ``workers=1``; else a Dask runner (local cluster,
    or ``dask_address``)."""
    if dask_address is None and workers <= 1:
        return ThreadPoolTaskRunner(max_workers=threads)
    from prefect_dask import DaskTaskRunner

    if dask_address:
        return DaskTaskRunner(address=dask_address)
    return DaskTaskRunner(cluster_kwargs={"n_workers": workers, "threads_per_worker": 1, "processes": True,
                                          "dashboard_address": None})


def _flow_run_name() -> str:
    from prefect.runtime import flow_run

    p = flow_run.parameters
    sweeps = p.get("sweeps")
    return f"benchmark {Path(p.get('params_path') or 'params.yaml').name}" + (f" [{', '.join(sweeps)}]" if sweeps else "")


@flow(name="benchmark", flow_run_name=_flow_run_name, log_prints=True)
def benchmark(params_path: str | None = None, sweeps: list[str] | None = None, root: str | None = None,
              thread_workers: int | None = 1, progress: Any = None) -> str:
    """Run every stage for the configured (or the named) sweeps and rebuild the report, reading
    and writing under ``root`` (default: the workspace, :func:`tasks.paths.repo_root`);
    ``thread_workers``: the thread pool's size, None under Dask; ``progress``: a
    :class:`tasks.progress.RunProgress` told of every stage and cell. Its task runner is made for
    each run (:func:`run_benchmark`: :func:`task_runner`); called as it is, the flow runs on
    Prefect's default thread pool, with at most :data:`flows.dag.QUEUE_DEPTH` × ``thread_workers``
    tasks in flight."""
    cfg = load_params(params_path, Path(root) if root else None)
    graph = stage_graph(cfg, sweeps or list(cfg.sweeps))
    callbacks = {} if progress is None else {"on_start": progress.stage_started, "on_done": progress.stage_done,
                                             "on_cells": progress.stage_cells, "on_cell": progress.cell_done}
    threads = single_threaded_blas(thread_workers, stages_use_torch(cfg, graph)) if thread_workers else nullcontext()
    with threads:
        results = run_stage_dag(graph, params_path, root=root, workers=thread_workers, **callbacks)
    return str(results["report"])


def run_benchmark(params_path: str | None = None, sweeps: list[str] | None = None, workers: int = 1,
                  dask_address: str | None = None, root: str | None = None, progress: Any = None) -> str:
    """Run :func:`benchmark` with the task runner for ``workers`` / ``dask_address`` (in this
    process: :func:`flows._stage.cell_threads` worker threads)."""
    threads = cell_threads() if workers <= 1 and dask_address is None else None
    return benchmark.with_options(task_runner=task_runner(workers, dask_address, threads or 1))(
        params_path=params_path, sweeps=sweeps, root=root, thread_workers=threads, progress=progress)


def planned_stages(params_path: str | None, sweeps: list[str] | None, root: Path) -> list[str]:
    """The stage instances :func:`benchmark` runs, in start order."""
    cfg = load_params(params_path, root)
    return list(stage_graph(cfg, sweeps or list(cfg.sweeps)))


def run_with_progress(params_path: str | None, sweeps: list[str] | None, workers: int, dask_address: str | None,
                      root: Path, warnings_count: Any = None) -> tuple[str, Any]:
    """:func:`run_benchmark` under a progress display on stderr; returns (the report's path, the
    :class:`tasks.progress.RunProgress`, whose ``summary()`` closes the run)."""
    from tasks.progress import RunProgress

    threads = cell_threads() if workers <= 1 and dask_address is None else workers
    display = RunProgress(planned_stages(params_path, sweeps, root), root, threads, warnings_count=warnings_count,
                          params_path=params_path)
    with display:
        report = run_benchmark(params_path, sweeps, workers, dask_address, str(root), progress=display)
    return report, display


def output_root(params_path: str | None, workspace: Path, root: str | None = None) -> Path:
    """Where a run of ``params_path`` writes: ``root`` when given; the workspace for its own
    ``params.yaml`` (or no params file); else ``<workspace>/runs/<params file stem>``."""
    if root:
        return Path(root).resolve()
    if params_path is None or Path(params_path).resolve() == (workspace / "params.yaml").resolve():
        return workspace
    return workspace / "runs" / Path(params_path).stem


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flows.benchmark", description=__doc__.splitlines()[0])
    parser.add_argument("--params", default=None, help="path to params.yaml (default: at the repo root)")
    parser.add_argument("--sweep", action="append", dest="sweeps", metavar="NAME", help="run only these sweeps")
    parser.add_argument("--workers", type=int, default=1, help="parallel Dask worker processes for cells (default 1)")
    parser.add_argument("--dask-address", default=None, help="address of an existing Dask scheduler to use")
    parser.add_argument("--root", default=None,
                        help="output folder (default: the workspace for its params.yaml, runs/<stem>/ for another params file)")
    args = parser.parse_args(argv)
    from flows.errors import run_entry
    from flows.server import use_shared_server
    from tasks.paths import repo_root
    from veilbench.validation import UsageError

    def body() -> None:
        load_params(args.params)
        if args.workers < 1:
            raise UsageError(f"--workers: must be ≥ 1, got {args.workers}")
        if argv is None:  # a process of its own: the project's shared server unless one is set
            use_shared_server("flows.benchmark", sys.argv[1:])
        workspace = repo_root()
        root = output_root(args.params, workspace, args.root)
        params = str(Path(args.params).resolve()) if args.params else None
        if root != workspace:
            root.mkdir(parents=True, exist_ok=True)
            print(f"outputs in {root}", file=sys.stderr)
        report, display = run_with_progress(params, args.sweeps, args.workers, args.dask_address, root)
        print(display.summary(), file=sys.stderr)
        print(report)

    return run_entry(body)  # one error: line (2 for a user error), as veilbench's own boundary


if __name__ == "__main__":
    sys.exit(main())
