"""Scheduled deployments and the roots their runs write into (never the DVC workspace)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

from flows.benchmark import output_root
from flows.deploy import NIGHTLY_CRON, WEEKLY_CRON, build_deployments, init_run_root
from veilbench.stages import STAGES


def test_deployments_have_the_schedules_and_run_parameters() -> None:
    nightly, weekly = build_deployments(workers=1, weekly_workers=3, dask_address="tcp://127.0.0.1:8786")
    assert [[s.schedule.cron for s in d.schedules] for d in (nightly, weekly)] == [[NIGHTLY_CRON], [WEEKLY_CRON]]
    assert nightly.name == "nightly" and nightly.parameters == {
        "deployment": "nightly", "params_path": "params.yaml", "workers": 1, "dask_address": "tcp://127.0.0.1:8786"}
    assert weekly.parameters["params_path"] == "params.large.yaml" and weekly.parameters["workers"] == 3
    assert weekly.parameters["deployment"] == "weekly-large"
    assert NIGHTLY_CRON in nightly.description, "the schedule is readable without `prefect deployment inspect`"


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "params.yaml").write_text(yaml.safe_dump({"tracking": {"experiment": "veilbench"}, "sweeps": {"s": {}}}))
    (project / "params.large.yaml").write_text(yaml.safe_dump({"sweeps": {"s": {}}}))
    return project


def test_each_run_gets_its_own_root_with_its_own_experiment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VEILBENCH_RUNS_DIR", raising=False)
    project = _project(tmp_path)
    t = datetime(2026, 12, 6, 3, 0, tzinfo=timezone.utc)
    nightly = init_run_root("nightly", "params.yaml", project, started=t)
    weekly = init_run_root("weekly-large", "params.large.yaml", project, started=t)
    assert nightly == project / "runs" / "nightly" / "2026-12-06T030000Z"
    assert weekly == project / "runs" / "weekly-large" / "2026-12-06T030000Z", "same sweep names, other folder"
    assert yaml.safe_load((nightly / "params.yaml").read_text())["tracking"]["experiment"] == "veilbench-nightly"
    assert yaml.safe_load((weekly / "params.yaml").read_text())["tracking"]["experiment"] == "veilbench-weekly-large"
    record = json.loads((nightly / "run.json").read_text())
    assert record["deployment"] == "nightly" and record["params_source"] == str(project / "params.yaml")
    with pytest.raises(FileExistsError):
        init_run_root("nightly", "params.yaml", project, started=t)  # a root is never shared by two runs
    assert sorted(p.name for p in project.iterdir()) == ["params.large.yaml", "params.yaml", "runs"]

    monkeypatch.setenv("VEILBENCH_RUNS_DIR", str(tmp_path / "elsewhere"))
    assert init_run_root("nightly", "params.yaml", project, started=t).parent.parent == tmp_path / "elsewhere"


@pytest.mark.parametrize("name", ["", "a/b", ".hidden"])
def test_a_bad_deployment_name_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="deployment"):
        init_run_root(name, "params.yaml", _project(tmp_path))


def test_another_params_file_never_writes_into_the_workspace(tmp_path: Path) -> None:
    ws = tmp_path
    (ws / "params.yaml").write_text("{}")
    assert output_root(None, ws) == ws
    assert output_root(str(ws / "params.yaml"), ws) == ws
    assert output_root(str(ws / "params.large.yaml"), ws) == ws / "runs" / "params.large"
    assert output_root(str(ws / "params.large.yaml"), ws, str(tmp_path / "x")) == tmp_path / "x"


@pytest.mark.slow
def test_task_runs_are_named_and_reused_cells_say_so(prefect_server: str, workdir: Path, mlflow_store: Path) -> None:
    import asyncio
    import time

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import TaskRunFilter, TaskRunFilterFlowRunId

    from flows.benchmark import benchmark

    params = str(workdir / "params.yaml")
    benchmark(params_path=params, sweeps=["ss-identity"], root=str(workdir))
    records = [workdir / f"data/{stage}/ss-identity/default/manifest.json" for stage in ("release", "integrate", "attack")]
    records.append(workdir / "reports/sweeps/ss-identity/cells/default.json")
    written = {p: p.stat().st_mtime_ns for p in records}
    second = benchmark(params_path=params, sweeps=["ss-identity"], root=str(workdir), return_state=True)
    assert second.is_completed(), second
    assert {p: p.stat().st_mtime_ns for p in records} == written, "the second run rewrote a cell's outputs"
    # this flow run's task runs only: other test workers run the same sweep on the shared server
    this_run = TaskRunFilter(flow_run_id=TaskRunFilterFlowRunId(any_=[second.state_details.flow_run_id]))

    async def task_runs() -> list:
        async with get_client() as client:
            return await client.read_task_runs(task_run_filter=this_run)

    cells = {f"{stage}@ss-identity/default" for stage in STAGES}
    deadline = time.monotonic() + 60  # task-run records reach the server as events, shortly after the run
    while True:
        states = {tr.name: tr.state.name for tr in asyncio.run(task_runs())}
        if cells <= set(states) and all(states[c] != "Running" for c in cells) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert cells <= set(states), sorted(states)
    assert {states[c] for c in cells} == {"Reused"}, "the second run reuses every cell"
    assert {"prepare@digits", "embed@digits-pca", "begin-stage release@ss-identity"} <= set(states)
