"""Cells fanned out to an existing Dask cluster given by address: a `dask scheduler` and a `dask
worker` process on 127.0.0.1 run a small sweep with the same results as a local run. (Cells spread
over two worker processes: ``tests/test_flows.py``'s local cluster.)"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_workers(address: str, n: int, timeout: float) -> None:
    from distributed import Client

    with Client(address, timeout=timeout) as client:
        client.wait_for_workers(n, timeout=timeout)


@pytest.mark.slow
def test_sweep_on_a_dask_cluster_by_address_matches_a_local_run(prefect_server: str, workdir: Path,
                                                                 mlflow_store: Path) -> None:
    from flows.benchmark import run_benchmark

    dask = str(Path(sys.executable).parent / "dask")
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "VEILBENCH_ROOT": str(workdir), "PREFECT_API_URL": prefect_server, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    procs: list[subprocess.Popen] = []
    try:
        procs.append(subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                                       "--dashboard-address", ":0", "--no-show"],
                                      env=env, cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      start_new_session=True))
        procs.append(subprocess.Popen([dask, "worker", address, "--host", "127.0.0.1", "--nthreads", "1",
                                       "--nworkers", "1", "--no-dashboard", "--name", "w0"],
                                      env=env, cwd=workdir, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, start_new_session=True))
        time.sleep(2)
        _wait_for_workers(address, 1, timeout=120)

        params = str(workdir / "params.yaml")
        run_benchmark(params, sweeps=["ss"], workers=1)
        local = json.loads((workdir / "reports/sweeps/ss/metrics.json").read_text())
        for sub in ("data/release", "data/integrate", "data/attack", "reports/sweeps"):
            shutil.rmtree(workdir / sub)
        run_benchmark(params, sweeps=["ss"], dask_address=address)
        remote = json.loads((workdir / "reports/sweeps/ss/metrics.json").read_text())
        assert set(remote) == {"epsilon=4.0", "epsilon=8.0", "mechanism=clean"}
        assert remote == local
        release = json.loads((workdir / "data/release/ss/sweep.json").read_text())
        assert sorted(release["computed"]) == sorted(remote), "every cell recomputed on the cluster"

        from distributed import Client

        with Client(address, timeout=30) as client:  # the cells ran on the cluster
            assert len(client.scheduler_info()["workers"]) == 1
            transitions = client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.transition_log))
        assert transitions > 0, "no task reached the scheduler: --dask-address was ignored"
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in reversed(procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)


def test_run_takes_a_dask_address_only_with_no_dvc() -> None:
    from typer.testing import CliRunner

    from flows.cli import app

    result = CliRunner().invoke(app, ["run", "--dask-address", "tcp://127.0.0.1:1"])
    assert result.exit_code == 2
    assert "--workers/--dask-address: only with --no-dvc" in result.output
