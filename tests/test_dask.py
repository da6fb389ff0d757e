"""Cells fanned out to Dask with the results of a sequential run: a local cluster of two worker
processes (``workers=2``) and an existing cluster given by address (a `dask scheduler` and a `dask
worker` process on 127.0.0.1). The sequential run is made once, for both (:func:`sequential`)."""

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
import yaml

from tests.conftest import tiny_params
from tests.e2e_root import copy_project

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def sequential(prefect_server: str, migrated_mlflow_db: Path,
               tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """(root, metrics): the tiny params' ``ss`` sweep run sequentially in a root of its own."""
    from flows.benchmark import run_benchmark

    root = tmp_path_factory.mktemp("dask-sequential")
    (root / "params.yaml").write_text(yaml.safe_dump(tiny_params(), sort_keys=False))
    shutil.copy(migrated_mlflow_db, root / "mlflow.db")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VEILBENCH_ROOT", str(root))
        mp.delenv("DVC_ROOT", raising=False)
        run_benchmark(str(root / "params.yaml"), sweeps=["ss"], workers=1)
    return root, json.loads((root / "reports/sweeps/ss/metrics.json").read_text())


def _without_cells(sequential: tuple[Path, dict], dest: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the sequential run's root without the sweep's cell outputs and their store
    (prepared data and the embedding kept), made the stages' root."""
    root = copy_project(sequential[0], dest)
    for sub in ("data/release", "data/integrate", "data/attack", "reports/sweeps", "runs/store"):
        shutil.rmtree(root / sub)
    monkeypatch.setenv("VEILBENCH_ROOT", str(root))
    monkeypatch.delenv("DVC_ROOT", raising=False)
    return root


@pytest.mark.slow
def test_dask_runner_gives_the_same_results_as_sequential(sequential: tuple[Path, dict], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from flows.benchmark import run_benchmark

    root = _without_cells(sequential, tmp_path / "root", monkeypatch)
    run_benchmark(str(root / "params.yaml"), sweeps=["ss"], workers=2)
    parallel = json.loads((root / "reports/sweeps/ss/metrics.json").read_text())
    assert set(parallel) == {"epsilon=4.0", "epsilon=8.0", "mechanism=clean"}
    assert parallel == sequential[1]
    release = json.loads((root / "data/release/ss/sweep.json").read_text())
    assert sorted(release["computed"]) == sorted(parallel)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_workers(address: str, n: int, timeout: float) -> None:
    from distributed import Client

    with Client(address, timeout=timeout) as client:
        client.wait_for_workers(n, timeout=timeout)


@pytest.mark.slow
def test_sweep_on_a_dask_cluster_by_address_matches_a_local_run(sequential: tuple[Path, dict], prefect_server: str,
                                                                 tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from flows.benchmark import run_benchmark

    workdir = _without_cells(sequential, tmp_path / "root", monkeypatch)

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

        run_benchmark(str(workdir / "params.yaml"), sweeps=["ss"], dask_address=address)
        remote = json.loads((workdir / "reports/sweeps/ss/metrics.json").read_text())
        assert set(remote) == {"epsilon=4.0", "epsilon=8.0", "mechanism=clean"}
        assert remote == sequential[1]
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
