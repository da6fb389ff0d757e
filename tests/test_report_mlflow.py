"""The report's MLflow run keeps the report itself: figures, index.html, pages; readable run name."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from tests.e2e_root import copy_project


@pytest.fixture(scope="module")
def reported(tiny_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the session's tiny run with three more frontiers configured, and its report built."""
    from tasks.report import report

    root = copy_project(tiny_run, tmp_path_factory.mktemp("report-mlflow") / "root")
    params = yaml.safe_load((root / "params.yaml").read_text())
    base = params["report"]["frontiers"][0]
    params["report"]["frontiers"] += [{**copy.deepcopy(base), "name": f"ss-{y}", "y": y} for y in
                                      ("utility_roc_auc", "utility_recall_at_k", "utility_map")]
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    report(root=root)
    return root


def _report_run(root: Path):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
    exp = client.get_experiment_by_name("veilbench-test")
    [run] = client.search_runs([exp.experiment_id], filter_string="tags.stage = 'report'")
    return client, run


def test_the_report_run_holds_the_figures_and_index_html(reported: Path) -> None:
    client, run = _report_run(reported)
    top = {f.path for f in client.list_artifacts(run.info.run_id)}
    assert {"index.html", "index.md", "scoreshield.md"} <= top, top
    figures = {f.path for f in client.list_artifacts(run.info.run_id, "figures")}
    pngs = {p for p in figures if p.endswith(".png")}
    assert len(pngs) >= 4, figures
    assert {f"figures/ss-{y}.png" for y in ("utility_roc_auc", "utility_recall_at_k", "utility_map")} <= pngs
    local = Path(client.download_artifacts(run.info.run_id, "index.html", str(reported / "dl")))
    assert local.read_bytes() == (reported / "reports" / "index.html").read_bytes()


def test_a_stale_figure_of_an_earlier_configuration_is_not_logged(reported: Path, tmp_path: Path) -> None:
    from tasks.report import report_artifacts

    (reported / "reports" / "figures" / "old-frontier.png").write_bytes(b"x")
    names = {p.name for p in report_artifacts(reported / "reports")}
    assert "old-frontier.png" not in names and "ss-utility_map.png" in names


def test_the_report_run_has_a_readable_name(reported: Path) -> None:
    _, run = _report_run(reported)
    assert run.data.tags["mlflow.runName"] == "report params.yaml"
    assert run.data.tags.get("params_file") == "params.yaml"
