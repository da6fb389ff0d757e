"""The whole pipeline as one Prefect flow: ``python -m flows.benchmark [--params params.yaml]``.

Runs prepare → embed → release → integrate → attack → evaluate → report for every dataset,
embedding and sweep of ``params.yaml`` in one process (one Prefect server start, imports paid
once). Every cell of every stage is a task, started as soon as the stage before it in its sweep
has finished (:mod:`flows.dag`): with ``--workers N`` they run in parallel on a local Dask
cluster of N single-threaded worker processes, with ``--dask-address`` on an existing Dask cluster.
Results are identical either way (each cell seeds its own streams).
``veilbench run`` uses DVC instead; both reuse cells whose inputs did not change.

The command writes into the workspace only for the workspace's own ``params.yaml``; another
params file (``--params params.large.yaml``) runs in ``runs/<params file stem>/`` (or ``--root``),
so two params files never overwrite each other's ``data/`` and ``reports/``, whatever their sweep
names. Scheduled runs (:mod:`flows.deploy`) get a new root per run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner

from flows.dag import run_stage_dag, stage_graph
from tasks.common import load_params


def task_runner(workers: int = 1, dask_address: str | None = None) -> Any:
    """Sequential runner for ``workers=1``; else a Dask runner (local cluster, or ``dask_address``)."""
    if dask_address is None and workers <= 1:
        return ThreadPoolTaskRunner(max_workers=1)
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


@flow(name="benchmark", flow_run_name=_flow_run_name, log_prints=True, task_runner=ThreadPoolTaskRunner(max_workers=1))
def benchmark(params_path: str | None = None, sweeps: list[str] | None = None, root: str | None = None,
              thread_workers: int | None = 1) -> str:
    """Run every stage for the configured (or the named) sweeps and rebuild the report, reading
    and writing under ``root`` (default: the workspace, :func:`tasks.paths.repo_root`);
    ``thread_workers``: the thread pool's size, None under Dask."""
    cfg = load_params(params_path, Path(root) if root else None)
    results = run_stage_dag(stage_graph(cfg, sweeps or list(cfg.sweeps)), params_path, root=root, workers=thread_workers)
    return str(results["report"])


def run_benchmark(params_path: str | None = None, sweeps: list[str] | None = None, workers: int = 1,
                  dask_address: str | None = None, root: str | None = None) -> str:
    """Run :func:`benchmark` with the task runner for ``workers`` / ``dask_address``."""
    thread_workers = 1 if workers <= 1 and dask_address is None else None
    return benchmark.with_options(task_runner=task_runner(workers, dask_address))(
        params_path=params_path, sweeps=sweeps, root=root, thread_workers=thread_workers)


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
        print(run_benchmark(params, args.sweeps, args.workers, args.dask_address, str(root)))

    return run_entry(body)  # one error: line (2 for a user error), as veilbench's own boundary


if __name__ == "__main__":
    sys.exit(main())
