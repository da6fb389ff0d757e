"""MLflow as the complete record of a run: after an incremental run every evaluated cell has an
evaluate run (computed or re-logged as reused) under the latest per-(sweep, stage) parent run."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from tasks.sweep import run_sweep_stage
from tasks.tracking import PARENT_KIND, latest_cell_runs
from tests.e2e_root import copy_project
from veilbench.stages import STAGES


@pytest.fixture(scope="module")
def incremental(tiny_run: Path, tmp_path_factory: pytest.TempPathFactory):
    """A copy of the session's full run of both tiny sweeps (:func:`tests.e2e_root.tiny_run`:
    ``params.yaml`` committed to git first), then ε 8 → 16 in sweep ``ss`` and its stages run again
    (once for this module: every stage is given its root explicitly)."""
    from mlflow.tracking import MlflowClient

    workdir = copy_project(tiny_run, tmp_path_factory.mktemp("record") / "root")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=workdir, capture_output=True, text=True,
                            check=True).stdout.strip()
    params = yaml.safe_load((workdir / "params.yaml").read_text())
    params["sweeps"]["ss"]["grid"]["epsilon"] = [4.0, 16.0]
    (workdir / "params.yaml").write_text(yaml.safe_dump(params))
    for stage in STAGES:
        run_sweep_stage(stage, "ss", root=workdir)
    client = MlflowClient(tracking_uri=f"sqlite:///{workdir / 'mlflow.db'}")
    return workdir, client, client.get_experiment_by_name("veilbench-test").experiment_id, commit


def test_every_evaluated_cell_has_an_evaluate_run_under_its_sweep_parent(incremental) -> None:
    root, client, exp_id, _ = incremental
    evaluated = {(s, p.stem) for s in ("ss", "ss-identity") for p in (root / "reports/sweeps" / s / "cells").glob("*.json")}
    assert evaluated == {("ss", "epsilon=4.0"), ("ss", "epsilon=16.0"), ("ss", "mechanism=clean"), ("ss-identity", "default")}
    runs = latest_cell_runs(client, [exp_id], "evaluate")
    assert len(runs) == len(evaluated), "one evaluate run per evaluated cell, no stale cell (epsilon=8.0)"
    assert {(r.data.tags["sweep"], r.data.tags["cell"]) for r in runs} == evaluated
    parents = {r.data.tags["mlflow.parentRunId"] for r in runs}
    assert len(parents) == 2, "one parent per sweep"
    for pid in parents:
        parent = client.get_run(pid)
        assert parent.data.tags["run_kind"] == PARENT_KIND and parent.info.status == "FINISHED"
        assert parent.data.tags["mlflow.runName"] == f"evaluate@{parent.data.tags['sweep']}"
        assert parent.data.metrics["n_cells"] == sum(1 for s, _ in evaluated if s == parent.data.tags["sweep"])
    reused = {r.data.tags["cell"]: r.data.tags["reused"] for r in runs if r.data.tags["sweep"] == "ss"}
    assert reused == {"epsilon=4.0": "true", "mechanism=clean": "true", "epsilon=16.0": "false"}
    # the first run's ss parent still holds epsilon=8.0; the latest one does not
    all_parents = client.search_runs([exp_id], f"tags.run_kind = '{PARENT_KIND}' and tags.stage = 'evaluate' "
                                               "and tags.sweep = 'ss'")
    assert len(all_parents) == 2


def test_reused_run_repeats_the_stored_metrics_and_names_its_source(incremental) -> None:
    root, client, exp_id, _ = incremental
    runs = {r.data.tags["cell"]: r for r in latest_cell_runs(client, [exp_id], "evaluate") if r.data.tags["sweep"] == "ss"}
    stored = json.loads((root / "reports/sweeps/ss/cells/epsilon=4.0.json").read_text())
    reused = runs["epsilon=4.0"]
    source = client.get_run(reused.data.tags["reused_from"])
    assert source.data.tags["reused"] == "false" and source.data.tags["input_key"] == stored["input_key"]
    name = "utility_verification_accuracy"
    assert reused.data.metrics[name] == pytest.approx(stored["summary"][name]["mean"])
    assert reused.data.metrics[name] == source.data.metrics[name]
    for seed in ("0", "1"):
        assert reused.data.metrics[f"{name}.seed_{seed}"] == pytest.approx(stored["per_seed"][seed][name])
    # per-seed values are separate metric names at step 0, not one metric with step = seed
    history = client.get_metric_history(reused.info.run_id, f"{name}.seed_1")
    assert [m.step for m in history] == [0]
    assert not any(k.startswith("seed/") for k in reused.data.metrics)


def test_cell_runs_carry_standard_tags_and_artifacts(incremental) -> None:
    root, client, exp_id, commit = incremental
    runs = latest_cell_runs(client, [exp_id], "evaluate")
    for run in runs:
        tags = run.data.tags
        assert tags["mlflow.source.git.commit"] == commit
        assert tags["mlflow.runName"] == f"evaluate:{tags['sweep']}/{tags['cell']}" == run.info.run_name
        assert tags["params_file"] == "params.yaml" and len(tags["params_sha"]) == 16
        files = {f.path for f in client.list_artifacts(run.info.run_id)}
        assert f"{tags['cell']}.json" in files and "tables" in files
        table = {f.path for f in client.list_artifacts(run.info.run_id, "tables")}
        assert table == {"tables/per_seed.csv"}
    # the edited params file has a different hash than the first run's
    first = client.search_runs([exp_id], "tags.stage = 'evaluate' and tags.cell = 'epsilon=8.0'")
    assert first and first[0].data.tags["params_sha"] != runs[0].data.tags["params_sha"]
    parent = client.get_run(runs[0].data.tags["mlflow.parentRunId"])
    assert "metrics.json" in {f.path for f in client.list_artifacts(parent.info.run_id)}


def test_every_cell_stage_has_a_complete_parent(incremental) -> None:
    _, client, exp_id, _ = incremental
    for stage in ("release", "integrate", "attack"):
        runs = latest_cell_runs(client, [exp_id], stage)
        assert sorted((r.data.tags["sweep"], r.data.tags["cell"]) for r in runs) == [
            ("ss", "epsilon=16.0"), ("ss", "epsilon=4.0"), ("ss", "mechanism=clean"), ("ss-identity", "default")], stage
