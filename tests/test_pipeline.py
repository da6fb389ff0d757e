"""Stage file contracts, MLflow logging and report generation, run in-process on tiny params."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tasks.attack import attack
from tasks.cell import summarise
from tasks.embed import embed
from tasks.evaluate import evaluate
from tasks.integrate import integrate
from tasks.prepare import prepare
from tasks.release import release
from tasks.report import report
from veilbench.io import read_bundle


def _run_all(root: Path) -> None:
    prepare("digits", root=root)
    embed("digits-pca", root=root)
    for cell in ("ss-clean", "ss-gauss"):
        for stage in (release, integrate, attack, evaluate):
            stage(cell, root=root)


@pytest.fixture
def pipeline_run(workdir: Path, mlflow_store: Path) -> Path:
    _run_all(workdir)
    return workdir


def test_stage_files_follow_the_contract(pipeline_run: Path) -> None:
    root = pipeline_run
    prep, m_prep = read_bundle(root / "data/prepare/digits")
    assert set(prep) == {"X_train", "y_train", "party_train", "X_test", "y_test"}
    assert prep["X_train"].shape == (210, 64) and prep["X_test"].shape == (90, 64)
    assert m_prep["seed"] == 0 and m_prep["params"]["n_parties"] == 3
    emb, m_emb = read_bundle(root / "data/embed/digits-pca")
    assert emb["Z_train"].shape == (210, 8) and emb["Z_test"].shape == (90, 8)
    assert m_emb["params"]["encoder"] == "pca"
    rel, m_rel = read_bundle(root / "data/release/ss-gauss")
    assert {k.split("__")[0] for k in rel} == {"s0", "s1"}, "one array set per seed"
    assert m_rel["seeds"] == [0, 1] and m_rel["params"]["family_params"]["epsilon"] == 4.0
    for stage in ("integrate", "attack"):
        assert (root / "data" / stage / "ss-gauss" / "manifest.json").is_file()
    metrics = json.loads((root / "reports/cells/ss-gauss/metrics.json").read_text())
    assert set(metrics["per_seed"]) == {"0", "1"}
    acc = metrics["summary"]["utility_verification_accuracy"]
    assert 0.0 <= acc["mean"] <= 1.0 and acc["n"] == 2


def test_private_cell_has_less_utility_than_clean(pipeline_run: Path) -> None:
    clean = json.loads((pipeline_run / "reports/cells/ss-clean/metrics.json").read_text())["summary"]
    noisy = json.loads((pipeline_run / "reports/cells/ss-gauss/metrics.json").read_text())["summary"]
    assert noisy["utility_roc_auc"]["mean"] < clean["utility_roc_auc"]["mean"]


def test_every_stage_run_is_logged_to_mlflow(pipeline_run: Path) -> None:
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{pipeline_run / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["veilbench-test"])
    assert len(runs) == 2 + 2 * 4
    assert set(runs["tags.stage"]) == {"prepare", "embed", "release", "integrate", "attack", "evaluate"}
    ev = runs[(runs["tags.stage"] == "evaluate") & (runs["tags.cell"] == "ss-gauss")].iloc[0]
    for tag in ("dataset", "family", "method", "seeds", "git_rev", "params_hash"):
        assert ev[f"tags.{tag}"], tag
    assert ev["tags.method"] == "gaussian" and ev["tags.seeds"] == "0,1"
    assert ev["params.family_params.epsilon"] == "4.0"
    assert 0.0 <= ev["metrics.utility_verification_accuracy"] <= 1.0
    assert (runs["status"] == "FINISHED").all()


def test_report_builds_tables_and_figures(pipeline_run: Path) -> None:
    out = report(root=pipeline_run)
    text = out.read_text()
    assert "ss-gauss" in text and "ss-clean" in text
    assert (pipeline_run / "reports/tables/scoreshield.csv").is_file()
    png = pipeline_run / "reports/figures/ss-frontier.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    points = json.loads((pipeline_run / "reports/plots/ss-frontier.json").read_text())
    assert {p["cell"] for p in points} == {"ss-clean", "ss-gauss"}
    assert [p["x"] for p in points if p["cell"] == "ss-clean"] == [None] or True


def test_same_params_and_seed_give_identical_metrics(pipeline_run: Path) -> None:
    first = (pipeline_run / "reports/cells/ss-gauss/metrics.json").read_text()
    for stage in (release, integrate, attack, evaluate):
        stage("ss-gauss", root=pipeline_run)
    second = (pipeline_run / "reports/cells/ss-gauss/metrics.json").read_text()
    strip = lambda t: {k: v for k, v in json.loads(t).items() if k != "info"}  # info holds timings
    assert strip(first) == strip(second)


def test_failed_stage_marks_mlflow_run_failed_and_writes_nothing(workdir: Path, mlflow_store: Path) -> None:
    import mlflow

    prepare("digits", root=workdir)
    with pytest.raises(Exception):
        embed("digits-pca", root=workdir / "elsewhere")  # no params.yaml there
    (workdir / "data/prepare/digits/arrays.npz").write_bytes(b"garbage")
    with pytest.raises(Exception, match="not a readable .npz"):
        embed("digits-pca", root=workdir)
    assert not (workdir / "data/embed/digits-pca").exists()
    mlflow.set_tracking_uri(f"sqlite:///{workdir / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["veilbench-test"])
    assert set(runs[runs["tags.stage"] == "embed"]["status"]) == {"FAILED"}


def test_summarise_mean_and_interval() -> None:
    s = summarise({0: {"a": 1.0}, 1: {"a": 3.0}, 2: {"a": 2.0}})["a"]
    assert s["mean"] == 2.0 and s["n"] == 3
    assert np.isclose(s["ci95"], 4.302652729911275 * 1.0 / np.sqrt(3))
    assert summarise({5: {"a": 1.0}})["a"]["ci95"] == 0.0
