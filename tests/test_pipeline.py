"""Stage file contracts, MLflow logging, incremental sweeps and report generation, in-process."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from tasks.embed import embed
from tasks.prepare import prepare
from tasks.report import report
from tasks.sweep import run_sweep_stage, summarise
from tests.e2e_root import copy_project
from veilbench.io import read_bundle
from veilbench.stages import PIPELINE_STAGES, STAGES
from veilbench.validation import ValidationError


def _cell_json(root: Path, sweep: str, cell: str) -> dict:
    return json.loads((root / "reports/sweeps" / sweep / "cells" / f"{cell}.json").read_text())


@pytest.fixture
def pipeline_run(tiny_run: Path, workdir: Path) -> Path:
    """A private copy, in ``workdir`` (``VEILBENCH_ROOT``), of both tiny sweeps run once per session
    (:func:`tests.e2e_root.tiny_run`: every stage but the report, each given its root explicitly)."""
    return copy_project(tiny_run, workdir)


def test_stage_files_follow_the_contract(pipeline_run: Path) -> None:
    root = pipeline_run
    prep, m_prep = read_bundle(root / "data/prepare/digits")
    assert set(prep) == {"X_train", "y_train", "party_train", "X_test", "y_test"}
    assert prep["X_train"].shape == (210, 64) and prep["X_test"].shape == (90, 64)
    assert m_prep["seed"] == 0 and m_prep["params"]["n_parties"] == 3
    emb, m_emb = read_bundle(root / "data/embed/digits-pca")
    assert emb["Z_train"].shape == (210, 8) and emb["Z_test"].shape == (90, 8)
    assert m_emb["params"]["encoder"] == "pca"
    rel, m_rel = read_bundle(root / "data/release/ss/epsilon=8.0")
    assert {k.split("__")[0] for k in rel} == {"s0", "s1"}, "one array set per seed"
    assert m_rel["seeds"] == [0, 1] and m_rel["params"]["family_params"]["epsilon"] == 8.0
    assert len(m_rel["input_key"]) == 64
    for stage in ("integrate", "attack"):
        assert (root / "data" / stage / "ss" / "mechanism=clean" / "manifest.json").is_file()
    metrics = _cell_json(root, "ss", "epsilon=4.0")
    assert set(metrics["per_seed"]) == {"0", "1"}
    acc = metrics["summary"]["utility_verification_accuracy"]
    assert 0.0 <= acc["mean"] <= 1.0 and acc["n"] == 2
    summary = json.loads((root / "reports/sweeps/ss/metrics.json").read_text())
    assert set(summary) == {"epsilon=4.0", "epsilon=8.0", "mechanism=clean"}


def test_private_cells_have_less_utility_than_clean(pipeline_run: Path) -> None:
    auc = {c: _cell_json(pipeline_run, "ss", c)["summary"]["utility_roc_auc"]["mean"]
           for c in ("epsilon=4.0", "epsilon=8.0", "mechanism=clean")}
    assert auc["epsilon=4.0"] < auc["mechanism=clean"] and auc["epsilon=8.0"] < auc["mechanism=clean"]


def test_every_stage_run_is_logged_to_mlflow(pipeline_run: Path) -> None:
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{pipeline_run / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["veilbench-test"])
    parents = runs["tags.run_kind"] == "sweep-stage"
    assert parents.sum() == 2 * 4, "one parent run per sweep and stage"
    runs = runs[~parents]
    assert len(runs) == 2 + (3 + 1) * 4, "prepare, embed, then one run per cell and stage"
    assert set(runs["tags.stage"]) == set(PIPELINE_STAGES) - {"report"}
    ev = runs[(runs["tags.stage"] == "evaluate") & (runs["tags.cell"] == "epsilon=8.0")].iloc[0]
    for tag in ("sweep", "dataset", "family", "method", "seeds", "git_rev", "params_hash"):
        assert ev[f"tags.{tag}"], tag
    assert ev["tags.method"] == "gaussian" and ev["tags.seeds"] == "0,1"
    assert ev["params.family_params.epsilon"] == "8.0"
    assert 0.0 <= ev["metrics.utility_verification_accuracy"] <= 1.0
    assert (runs["status"] == "FINISHED").all()


def test_changing_one_epsilon_recomputes_only_that_cell(pipeline_run: Path) -> None:
    root = pipeline_run
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["sweeps"]["ss"]["grid"]["epsilon"] = [4.0, 16.0]
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    before = _cell_json(root, "ss", "epsilon=4.0")
    for stage in STAGES[:-1]:
        run_sweep_stage(stage, "ss", root=root)
        sweep = json.loads((root / "data" / stage / "ss" / "sweep.json").read_text())
        assert sweep["computed"] == ["epsilon=16.0"], stage
        assert sorted(sweep["reused"]) == ["epsilon=4.0", "mechanism=clean"]
        assert not (root / "data" / stage / "ss" / "epsilon=8.0").exists(), "stale cell removed"
    run_sweep_stage("evaluate", "ss", root=root)
    assert _cell_json(root, "ss", "epsilon=4.0") == before
    assert set(json.loads((root / "reports/sweeps/ss/metrics.json").read_text())) == {
        "epsilon=4.0", "epsilon=16.0", "mechanism=clean"}


def test_report_builds_tables_and_figures(pipeline_run: Path) -> None:
    out = report(root=pipeline_run)
    text = out.read_text()
    page = (pipeline_run / "reports/scoreshield.md").read_text()
    assert "epsilon=8.0" in text and "mechanism=clean" in text and "ss-identity" in page
    assert (pipeline_run / "reports/index.html").read_text().startswith("<!DOCTYPE html>")
    table = (pipeline_run / "reports/tables/scoreshield.csv").read_text().splitlines()
    assert len(table) == 1 + 4
    assert "parameter_sharing" in (pipeline_run / "reports/gca/communication.csv").read_text()
    ledger = (pipeline_run / "reports/privacy_ledger.csv").read_text().splitlines()
    assert len(ledger) == 1 + 2 * 2, "two private cells × two seeds in the ledger"
    assert "## Privacy ledger" in text
    png = pipeline_run / "reports/figures/ss-frontier.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    points = json.loads((pipeline_run / "reports/plots/ss-frontier.json").read_text())
    by_cell = {p["cell"]: p for p in points}
    assert by_cell["epsilon=8.0"]["x"] == 8.0
    assert by_cell["mechanism=clean"]["x"] is None, "references have no ε and are drawn as lines"


def test_failed_stage_marks_mlflow_run_failed_and_writes_nothing(workdir: Path, mlflow_store: Path) -> None:
    import mlflow

    prepare("digits", root=workdir)
    (workdir / "data/prepare/digits/arrays.npz").write_bytes(b"garbage")
    with pytest.raises(Exception, match="arrays.npz: does not match the SHA-256 its manifest recorded"):
        embed("digits-pca", root=workdir)
    assert not (workdir / "data/embed/digits-pca").exists()
    mlflow.set_tracking_uri(f"sqlite:///{workdir / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["veilbench-test"])
    # the unreadable input is found before the stage opens its run, or the run is marked FAILED: never RUNNING
    assert set(runs[runs["tags.stage"] == "embed"]["status"]) <= {"FAILED"} if len(runs) else True


def test_summarise_mean_and_interval() -> None:
    s = summarise({0: {"a": 1.0}, 1: {"a": 3.0}, 2: {"a": 2.0}})["a"]
    assert s["mean"] == 2.0 and s["n"] == 3
    assert np.isclose(s["ci95"], 4.302652729911275 * 1.0 / np.sqrt(3))
    assert summarise({5: {"a": 1.0}})["a"]["ci95"] == 0.0


def test_run_left_running_by_a_killed_stage_is_marked_failed(workdir: Path, mlflow_store: Path) -> None:
    from tasks.tracking import client_and_experiment

    client, exp = client_and_experiment(f"sqlite:///{workdir / 'mlflow.db'}", "veilbench-test")
    killed = client.create_run(exp, tags={"stage": "prepare", "dataset": "digits"})  # left RUNNING
    other = client.create_run(exp, tags={"stage": "prepare", "dataset": "wine"})
    prepare("digits", root=workdir)
    assert client.get_run(killed.info.run_id).info.status == "FAILED"
    assert client.get_run(other.info.run_id).info.status == "RUNNING", "only the same stage/dataset"


def test_family_table_shows_varying_options_and_selected_metrics() -> None:
    from tasks.report.tables import family_table

    rows = [{"sweep": "s", "cell": f"epsilon={e}", "dataset": "d", "params": {"epsilon": e, "delta": 1e-5},
             "summary": {"utility_a": {"mean": e / 10, "ci95": 0.01, "n": 3}, "utility_b": {"mean": 1.0, "ci95": 0.0, "n": 3}}}
            for e in (1.0, 4.0)]
    header, md, csv = family_table(rows)
    assert header == ["sweep", "cell", "dataset", "epsilon", "utility_a", "utility_b"], "constant δ is not a column"
    assert md[1][4] == "0.400 ± 0.010" and csv[0]["utility_a_ci95"] == 0.01
    header, _, _ = family_table(rows, only=["utility_b", "missing_metric"])
    assert header[-1] == "utility_b" and "utility_a" not in header


def test_compare_tables_two_experiments(workdir: Path, mlflow_store: Path) -> None:
    from mlflow.tracking import MlflowClient

    from tasks.compare import compare

    client = MlflowClient(tracking_uri=f"sqlite:///{workdir / 'mlflow.db'}")
    for exp, values in {"exp-a": {"c1": 0.5, "c2": 0.7}, "exp-b": {"c1": 0.6}}.items():
        eid = client.create_experiment(exp)
        for cell, value in values.items():
            for stage, v in (("release", 9.9), ("evaluate", value)):
                run = client.create_run(eid, tags={"stage": stage, "cell": cell})
                client.log_metric(run.info.run_id, "utility_auc", v)
                client.set_terminated(run.info.run_id)
    md, csv = compare(["exp-a", "exp-b"], root=workdir)
    import pandas as pd

    table = pd.read_csv(csv, index_col="cell")
    assert table.loc["c1", "utility_auc [exp-a]"] == 0.5 and table.loc["c1", "utility_auc [exp-b]"] == 0.6
    assert table.loc["c2", "utility_auc [exp-a]"] == 0.7 and pd.isna(table.loc["c2", "utility_auc [exp-b]"])
    assert "utility_auc [exp-b]" in md.read_text()
    with pytest.raises(ValidationError, match="^experiment: no MLflow experiment"):
        compare(["exp-a", "nope"], root=workdir)


def test_input_digest_follows_content_not_file_bytes(tmp_path: Path) -> None:
    from tasks.sweep import _digest, arrays_digest
    from veilbench.io import write_bundle

    arrays = {"a": np.arange(20000.0), "b": np.arange(20000.0)}  # b is stored as an alias of a
    out = write_bundle(tmp_path / "cell", arrays, {"stage": "x"})
    first = _digest(out)
    assert first == arrays_digest(arrays)
    write_bundle(tmp_path / "cell", arrays, {"stage": "x"})  # same content, new files
    assert _digest(out) == first
    write_bundle(tmp_path / "cell", {**arrays, "b": arrays["b"] + 1}, {"stage": "x"})  # new content, same process
    assert _digest(out) != first


def test_cells_run_in_threads_record_their_own_timings(workdir: Path, mlflow_store: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import threading
    import time

    from tasks.sweep import run_cell
    from veilbench.families import get_family

    prepare("digits", root=workdir)
    embed("digits-pca", root=workdir)
    family = get_family("scoreshield")
    inside, overlaps, original = [0], [], family.release

    def slow_release(inputs, params, seed):
        inside[0] += 1
        overlaps.append(inside[0])
        time.sleep(0.2)
        inside[0] -= 1
        return original(inputs, params, seed)

    monkeypatch.setattr(family, "release", slow_release)
    threads = [threading.Thread(target=run_cell, args=("release", "ss", c), kwargs={"root": workdir})
               for c in ("epsilon=4.0", "epsilon=8.0")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(overlaps) == 4  # 2 cells × 2 seeds, no lock: they may overlap
    for cell in ("epsilon=4.0", "epsilon=8.0"):
        _, manifest = read_bundle(workdir / "data/release/ss" / cell)
        assert not any({"seconds", "started"} & set(info) for info in manifest["info"].values()), "timings stay out"
        timings = json.loads((workdir / "data/release/ss" / cell / "timings.json").read_text())["per_seed"]
        assert set(timings) == {"0", "1"}
        assert all(t["seconds"] >= 0.2 and t["started"] > 0 for t in timings.values())
