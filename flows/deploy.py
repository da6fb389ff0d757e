"""Scheduled benchmark: nightly at the default size, weekly at a larger size; every run in its own root.

``python -m flows.deploy`` registers both deployments with the Prefect server named by
``PREFECT_API_URL`` (start one with ``prefect server start --host 127.0.0.1``) and serves them,
blocking; ``--list`` prints them (name, schedule, params, parameters) without a server.
:func:`build_deployments` builds the deployment objects without contacting a server.

A scheduled (or manually triggered) run never writes into the DVC workspace: the
``scheduled-benchmark`` flow creates ``<runs dir>/<deployment>/<UTC start time>/`` (runs dir:
``$VEILBENCH_RUNS_DIR``, default ``runs/`` in the project, which git ignores), copies the params file
there as ``params.yaml`` with ``tracking.experiment`` suffixed by ``-<deployment>``, records what it
ran in ``run.json`` (params source, git revision, flow run id), and runs the whole benchmark in
that folder (every task gets it as its ``root`` parameter, so Dask workers need no environment;
with ``dask_address`` they must see the folder at the same path). Two deployments, two params
files or two runs of one deployment therefore never share an output folder, whatever their sweep
names. MLflow runs go to the run's own store (``<run root>/mlflow.db``) under the run's own
experiment (``veilbench-nightly``, …).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml
from prefect import flow

from flows.benchmark import run_benchmark

NIGHTLY_CRON = "0 3 * * *"  # every day at 03:00 UTC
WEEKLY_CRON = "0 4 * * 0"  # Sundays at 04:00 UTC

#: The project this module belongs to: its params files and MLflow store.
PROJECT = Path(__file__).resolve().parents[1]


def runs_dir(project: Path = PROJECT) -> Path:
    """``$VEILBENCH_RUNS_DIR``, else ``<project>/runs``."""
    return Path(os.environ.get("VEILBENCH_RUNS_DIR") or project / "runs").resolve()


def init_run_root(deployment: str, params_path: str | Path, project: Path = PROJECT,
                  started: datetime | None = None, flow_run_id: str | None = None) -> Path:
    """Create ``<runs dir>/<deployment>/<started, UTC>/`` holding ``params.yaml`` (the params file,
    its MLflow experiment suffixed with ``-<deployment>``) and ``run.json``; return the folder."""
    from tasks.tracking import git_revision

    if not deployment or "/" in deployment or deployment.startswith("."):
        raise ValueError(f"deployment: must be a non-empty name without '/' or a leading '.', got {deployment!r}")
    source = Path(params_path) if Path(params_path).is_absolute() else project / params_path
    if not source.is_file():
        raise FileNotFoundError(f"params_path: no params file at {source}")
    started = started or datetime.now(timezone.utc)
    root = runs_dir(project) / deployment / started.strftime("%Y-%m-%dT%H%M%SZ")
    root.mkdir(parents=True, exist_ok=False)  # a root is never reused: an existing one raises
    params = yaml.safe_load(source.read_text()) or {}
    tracking = params.setdefault("tracking", {}) or {}
    params["tracking"] = {**tracking, "experiment": f"{tracking.get('experiment', 'veilbench')}-{deployment}"}
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (root / "run.json").write_text(json.dumps({
        "deployment": deployment, "params_source": str(source), "project": str(project),
        "git_rev": git_revision(project), "started": started.isoformat(), "flow_run_id": flow_run_id}, indent=2) + "\n")
    return root


def _flow_run_name() -> str:
    from prefect.runtime import flow_run

    p = flow_run.parameters
    return f"{p.get('deployment', 'manual')}/{Path(p.get('params_path') or 'params.yaml').name}/" \
           f"{datetime.now(timezone.utc):%Y-%m-%dT%H%MZ}"


@flow(name="scheduled-benchmark", flow_run_name=_flow_run_name, log_prints=True)
def scheduled_benchmark(deployment: str = "manual", params_path: str = "params.yaml", workers: int = 1,
                        dask_address: str | None = None, project_root: str | None = None) -> str:
    """Run the whole benchmark for ``params_path`` (relative to the project) in a new run root;
    ``workers`` > 1 runs cells on a local Dask cluster, ``dask_address`` on an existing one (its
    workers must see the run root at the same path). Returns the run root."""
    from prefect.runtime import flow_run

    if workers < 1:
        raise ValueError(f"workers: must be ≥ 1, got {workers}")
    project = Path(project_root).resolve() if project_root else PROJECT
    root = init_run_root(deployment, params_path, project, flow_run_id=flow_run.id)
    print(f"run root: {root}")
    run_benchmark(str(root / "params.yaml"), None, workers, dask_address, str(root))
    return str(root)


def build_deployments(params_path: str = "params.yaml", weekly_params_path: str = "params.large.yaml",
                      workers: int = 1, weekly_workers: int = 2, dask_address: str | None = None) -> list[Any]:
    """The nightly and weekly ``RunnerDeployment`` objects (no server needed to build them)."""
    def deployment(name: str, cron: str, params: str, n: int, tag: str) -> Any:
        return scheduled_benchmark.to_deployment(
            name=name, cron=cron, tags=["veilbench", tag],
            description=f"veilbench benchmark of {params} on cron '{cron}' (UTC); outputs in runs/{name}/<time>/",
            parameters={"deployment": name, "params_path": params, "workers": n, "dask_address": dask_address})

    return [deployment("nightly", NIGHTLY_CRON, params_path, workers, "nightly"),
            deployment("weekly-large", WEEKLY_CRON, weekly_params_path, weekly_workers, "weekly")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flows.deploy", description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params.yaml", help="params file of the nightly run (default params.yaml)")
    parser.add_argument("--weekly-params", default="params.large.yaml", help="params file of the weekly run")
    parser.add_argument("--workers", type=int, default=1, help="Dask worker processes of the nightly run (default 1)")
    parser.add_argument("--weekly-workers", type=int, default=2, help="Dask worker processes of the weekly run (default 2)")
    parser.add_argument("--dask-address", default=None, help="an existing Dask scheduler for both runs")
    parser.add_argument("--only", action="append", metavar="NAME", help="serve only this deployment (repeatable)")
    parser.add_argument("--list", action="store_true", help="print the deployments and exit (no server needed)")
    args = parser.parse_args(argv)
    if min(args.workers, args.weekly_workers) < 1:
        print("error: --workers/--weekly-workers: must be ≥ 1", file=sys.stderr)
        return 2
    deployments = build_deployments(args.params, args.weekly_params, args.workers, args.weekly_workers, args.dask_address)
    if args.only:
        unknown = set(args.only) - {d.name for d in deployments}
        if unknown:
            print(f"error: --only: unknown deployment(s) {sorted(unknown)} (known: {[d.name for d in deployments]})",
                  file=sys.stderr)
            return 2
        deployments = [d for d in deployments if d.name in args.only]
    if args.list:
        for d in deployments:
            crons = ", ".join(s.schedule.cron for s in d.schedules)
            print(f"scheduled-benchmark/{d.name}\tcron {crons} (UTC)\t{json.dumps(d.parameters)}")
        return 0
    from prefect import serve

    serve(*deployments)
    return 0


if __name__ == "__main__":
    sys.exit(main())
