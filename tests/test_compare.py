"""``veilbench compare`` on a small synthetic MLflow store (runs built directly with MlflowClient)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from flows.cli import app
from tasks.compare import comparison, compare, params_side, revision_side
from tasks.tracking import PARENT_KIND, file_sha

COMMIT_A, COMMIT_B = "a" * 40, "b" * 40


def _sweep_run(client, exp_id: str, sweep: str, cells: dict[str, float], tags: dict[str, str],
               start: int, status: str = "FINISHED") -> None:
    """One evaluate parent of ``sweep`` with a cell run per entry of ``cells`` (metric ``utility_auc``)."""
    parent = client.create_run(exp_id, start_time=start, tags={"stage": "evaluate", "sweep": sweep,
                                                              "run_kind": PARENT_KIND, **tags})
    for cell, value in cells.items():
        run = client.create_run(exp_id, start_time=start + 1, tags={
            "stage": "evaluate", "sweep": sweep, "cell": cell, "run_kind": "cell",
            "mlflow.parentRunId": parent.info.run_id, **tags})
        client.log_metric(run.info.run_id, "utility_auc", value)
        client.log_metric(run.info.run_id, "utility_auc_ci95", 0.01)
        client.log_metric(run.info.run_id, "utility_auc.seed_0", value)
        client.set_terminated(run.info.run_id)
    client.set_terminated(parent.info.run_id, status=status)


@pytest.fixture
def store(workdir: Path, mlflow_store: Path):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{mlflow_store}")
    a, b = client.create_experiment("exp-a"), client.create_experiment("exp-b")
    tags_a = {"mlflow.source.git.commit": COMMIT_A, "params_file": "params.yaml", "params_sha": "1" * 16}
    tags_b = {"mlflow.source.git.commit": COMMIT_B, "params_file": "params.large.yaml", "params_sha": "2" * 16}
    # the same cell name in two sweeps; sweep s1 was run twice on side A (the later run dropped cell x=3)
    _sweep_run(client, a, "s1", {"mechanism=clean": 0.9, "x=1": 0.5, "x=3": 0.1}, tags_a, start=1000)
    _sweep_run(client, a, "s1", {"mechanism=clean": 0.91, "x=1": 0.55}, tags_a, start=2000)
    _sweep_run(client, a, "s2", {"mechanism=clean": 0.7, "x=2": 0.4}, tags_a, start=2100)
    _sweep_run(client, b, "s1", {"mechanism=clean": 0.8, "x=1": 0.6}, tags_b, start=3000)
    _sweep_run(client, b, "s2", {"mechanism=clean": 0.65}, tags_b, start=3100)
    _sweep_run(client, b, "s2", {"mechanism=clean": 0.0, "x=2": 0.0}, tags_b, start=3200, status="FAILED")
    return workdir


def test_rows_are_keyed_by_sweep_and_cell(store: Path) -> None:
    result = comparison(["exp-a", "exp-b"], root=store)
    t = result.table
    assert t.loc[("s1", "mechanism=clean"), "utility_auc [exp-a]"] == 0.91, "the latest parent of s1 on side A"
    assert t.loc[("s2", "mechanism=clean"), "utility_auc [exp-a]"] == 0.7, "same cell name, other sweep: own row"
    assert t.loc[("s2", "mechanism=clean"), "utility_auc [exp-b]"] == 0.65, "a FAILED parent is not the record"
    assert ("s1", "x=3") not in t.index, "a cell dropped by the latest run does not linger"
    assert list(t.columns) == ["utility_auc [exp-a]", "utility_auc [exp-b]"], "no _ci95 or per-seed columns by default"
    assert pd.isna(t.loc[("s2", "x=2"), "utility_auc [exp-b]"])
    assert result.missing == {"exp-a": [], "exp-b": [("s2", "x=2")]}


def test_missing_cells_warn_in_the_output_and_on_stderr(store: Path) -> None:
    md, csv = compare(["exp-a", "exp-b"], root=store)
    text = md.read_text()
    assert text.startswith("> warning: 1 cell(s) missing from [exp-b]: s2/x=2")
    table = pd.read_csv(csv)
    assert list(table.columns[:2]) == ["sweep", "cell"] and len(table) == 4
    result = CliRunner().invoke(app, ["compare", "-e", "exp-a", "-e", "exp-b", "--out", str(store / "cmp")],
                                env={"VEILBENCH_ROOT": str(store)})
    assert result.exit_code == 0, result.output
    assert "missing from [exp-b]: s2/x=2" in result.stderr
    assert "> warning: 1 cell(s) missing from [exp-b]" in result.stdout


def test_no_warning_when_both_sides_have_every_cell(store: Path) -> None:
    result = comparison(["exp-a", params_side(store / "gone" / "params.yaml")], root=store)  # same runs
    assert result.warnings() == [] and result.table.notna().all().all()


def test_two_git_revisions(store: Path) -> None:
    result = comparison([revision_side(COMMIT_A[:7], root=store), revision_side(COMMIT_B, root=store)], root=store)
    cols = list(result.table.columns)
    assert cols == [f"utility_auc [{COMMIT_A[:7]}]", f"utility_auc [{COMMIT_B}]"]
    assert result.table.loc[("s1", "x=1"), cols[0]] == 0.55 and result.table.loc[("s1", "x=1"), cols[1]] == 0.6
    assert result.missing[COMMIT_B] == [("s2", "x=2")]
    none = comparison([revision_side("c" * 40, root=store), revision_side(COMMIT_A, root=store)], root=store)
    assert len(none.missing["c" * 40]) == 4, "a revision with no runs misses every cell, loudly"


def test_two_params_files_by_content_or_name(store: Path, tmp_path: Path) -> None:
    gone = store / "gone"  # files not at hand: selected by name
    by_name = comparison([params_side(gone / "params.yaml"), params_side(gone / "params.large.yaml")], root=store)
    assert by_name.table.loc[("s1", "x=1"), "utility_auc [params.large.yaml]"] == 0.6
    f = tmp_path / "mine.yaml"
    f.write_text("seed: 0\n")
    side = params_side(f)
    assert side.filter_string == f"tags.params_sha = '{file_sha(f)}'" and side.label == f"mine.yaml@{file_sha(f)[:8]}"


def test_cli_rejects_missing_experiment_and_mixed_sides(store: Path) -> None:
    env = {"VEILBENCH_ROOT": str(store)}
    result = CliRunner().invoke(app, ["compare", "-e", "exp-a", "-e", "nope"], env=env)
    assert result.exit_code == 2 and "nope" in result.stderr
    result = CliRunner().invoke(app, ["compare", "--rev", "HEAD", "--params-file", "params.yaml"], env=env)
    assert result.exit_code == 2 and "not both" in result.stderr
    result = CliRunner().invoke(app, ["compare"], env=env)
    assert result.exit_code == 2


def test_cli_reports_a_key_error_as_a_bug_not_a_user_error(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only user errors exit 2 with a bare message: a ``KeyError`` inside the comparison (a missing
    tag, say) is a bug, reported with its type and exit status 1 (:mod:`flows.errors`)."""
    import tasks.compare

    def broken(*args, **kwargs):
        raise KeyError("cell")

    monkeypatch.setattr(tasks.compare, "comparison", broken)
    result = CliRunner().invoke(app, ["compare", "-e", "exp-a", "-e", "exp-b"], env={"VEILBENCH_ROOT": str(store)})
    assert result.exit_code == 1 and "KeyError" in result.stderr, result.stderr


def test_cli_compares_git_revisions(store: Path) -> None:
    result = CliRunner().invoke(app, ["compare", "--rev", COMMIT_A, "--rev", COMMIT_B, "--out", str(store / "cmp")],
                                env={"VEILBENCH_ROOT": str(store)})
    assert result.exit_code == 0, result.output
    table = pd.read_csv(store / "cmp" / "compare.csv")
    assert f"utility [{COMMIT_B}]" in table.columns and len(table) == 4, "the headline utility (compare's default)"
    assert set(table["utility metric"]) == {"utility_auc"}
