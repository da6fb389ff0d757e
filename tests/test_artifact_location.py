"""Where a new MLflow experiment keeps its artifacts: beside its SQLite store, whatever the working
directory of the process that creates it (:func:`tasks.tracking.artifact_location`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.tracking import artifact_location, stage_run


def test_a_sqlite_store_keeps_artifacts_beside_its_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert artifact_location(f"sqlite:///{tmp_path}/a/mlflow.db", "veilbench") == str(tmp_path / "a/mlruns/veilbench")
    assert artifact_location(f"sqlite:///{tmp_path}/a/mlflow.db?timeout=20", "e") == str(tmp_path / "a/mlruns/e")
    monkeypatch.chdir(tmp_path)
    assert artifact_location("sqlite:///rel/mlflow.db", "e") == str(tmp_path / "rel/mlruns/e"), "relative to the CWD"
    for uri in ("sqlite:///:memory:", "http://127.0.0.1:5000", "postgresql://u@h/db", "file:///tmp/mlruns"):
        assert artifact_location(uri, "e") is None, uri


def test_an_experiment_created_from_another_folder_logs_beside_its_store(
        workdir: Path, mlflow_store: Path, tmp_path_factory: pytest.TempPathFactory,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """As a DVC experiment's temporary copy logging to its parent's store, or a scheduled run whose
    store is in its own root: the experiment is first created from another working directory."""
    from mlflow.tracking import MlflowClient

    elsewhere = tmp_path_factory.mktemp("cwd")
    monkeypatch.chdir(elsewhere)
    (workdir / "note.txt").write_text("artifact")
    with stage_run("veilbench-elsewhere", "report", {"a": 1}, {}, root=workdir) as run:
        run.log_artifact(str(workdir / "note.txt"))
    client = MlflowClient(f"sqlite:///{mlflow_store}")
    exp = client.get_experiment_by_name("veilbench-elsewhere")
    assert exp.artifact_location == str(workdir / "mlruns" / "veilbench-elsewhere")
    assert (workdir / "mlruns" / "veilbench-elsewhere" / run.run_id / "artifacts" / "note.txt").read_text() == "artifact"
    assert list(elsewhere.iterdir()) == [], "nothing is written into the working directory"
