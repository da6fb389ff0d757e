"""Prefect flows under one session-scoped test server, and the scheduled deployments."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_benchmark_flow_runs_every_stage(prefect_server: str, workdir: Path, mlflow_store: Path) -> None:
    from flows.benchmark import benchmark

    out = benchmark(params_path=str(workdir / "params.yaml"), sweeps=["ss-identity"])
    assert Path(out) == workdir / "reports/index.md"
    metrics = json.loads((workdir / "reports/sweeps/ss-identity/cells/default.json").read_text())
    assert set(metrics["per_seed"]) == {"0"}
    assert not (workdir / "reports/sweeps/ss").exists(), "only the named sweep runs"


def test_stage_flow_cli_rejects_bad_params_before_work(prefect_server: str, workdir: Path) -> None:
    from flows.release import release_flow
    from flows._stage import main

    (workdir / "params.yaml").write_text("seed: -1\ndatasets: {}\nembeddings: {}\ncells: {}\n")
    assert main("release", release_flow, ["--params", str(workdir / "params.yaml")]) == 2
    assert not (workdir / "data").exists()


def test_deployments_have_the_schedules() -> None:
    from flows.deploy import NIGHTLY_CRON, WEEKLY_CRON, build_deployments

    nightly, weekly = build_deployments()
    crons = [[s.schedule.cron for s in d.schedules] for d in (nightly, weekly)]
    assert crons == [[NIGHTLY_CRON], [WEEKLY_CRON]]
    assert nightly.name == "nightly" and nightly.parameters == {"params_path": "params.yaml"}
    assert weekly.parameters == {"params_path": "params.large.yaml"}


def test_dask_runner_gives_the_same_results_as_sequential(prefect_server: str, workdir: Path, mlflow_store: Path) -> None:
    import shutil

    from flows.benchmark import run_benchmark

    params = str(workdir / "params.yaml")
    run_benchmark(params, sweeps=["ss"], workers=1)
    sequential = json.loads((workdir / "reports/sweeps/ss/metrics.json").read_text())
    for sub in ("data/release", "data/integrate", "data/attack", "reports/sweeps"):
        shutil.rmtree(workdir / sub)
    run_benchmark(params, sweeps=["ss"], workers=2)
    parallel = json.loads((workdir / "reports/sweeps/ss/metrics.json").read_text())
    assert set(parallel) == {"epsilon=4.0", "epsilon=8.0", "mechanism=clean"}
    assert parallel == sequential
    release = json.loads((workdir / "data/release/ss/sweep.json").read_text())
    assert sorted(release["computed"]) == sorted(parallel)
