"""`veilbench compare` without -m: each family's headline metrics, one narrow table."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from flows.cli import app
from tasks.tracking import PARENT_KIND

#: a scoreshield and a dc sweep, each cell with its headline metrics among 40 others
CELLS = {("ss", "scoreshield"): {"epsilon=2.0": (0.6, 0.1), "epsilon=8.0": (0.8, 0.3)},
         ("dcs", "dc"): {"method=nki": (0.7, 0.5)}}
HEADLINES = {"scoreshield": ("utility_roc_auc", "xfam_linkage_advantage"),
             "dc": ("utility_accuracy", "privacy_reconstruction_accuracy_best_advantage")}


@pytest.fixture
def two_families(workdir: Path, mlflow_store: Path) -> Path:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{mlflow_store}")
    for offset, name in enumerate(("before", "after")):
        exp = client.create_experiment(name)
        for (sweep, family), cells in CELLS.items():
            tags = {"stage": "evaluate", "sweep": sweep, "family": family}
            parent = client.create_run(exp, start_time=1000, tags={**tags, "run_kind": PARENT_KIND})
            for cell, (u, a) in cells.items():
                run = client.create_run(exp, start_time=1001, tags={**tags, "cell": cell, "run_kind": "cell",
                                                                    "mlflow.parentRunId": parent.info.run_id})
                utility, attacker = HEADLINES[family]
                client.log_metric(run.info.run_id, utility, u + offset / 10)
                client.log_metric(run.info.run_id, attacker, a)
                for i in range(40):
                    client.log_metric(run.info.run_id, f"utility_other_metric_{i:02d}", 0.5)
                client.set_terminated(run.info.run_id)
            client.set_terminated(parent.info.run_id)
    return workdir


def _compare(root: Path, *args: str) -> pd.DataFrame:
    result = CliRunner().invoke(app, ["compare", "-e", "before", "-e", "after", "--out", str(root / "cmp"), *args],
                                env={"VEILBENCH_ROOT": str(root)})
    assert result.exit_code == 0, result.output
    return pd.read_csv(root / "cmp" / "compare.csv").set_index(["sweep", "cell"])


def test_default_is_each_familys_headline_in_one_narrow_table(two_families: Path) -> None:
    table = _compare(two_families)
    assert list(table.columns) == ["utility metric", "utility [before]", "utility [after]", "attacker metric",
                                   "attacker [before]", "attacker [after]"]
    assert table.loc[("ss", "epsilon=8.0"), "utility metric"] == "utility_roc_auc"
    assert table.loc[("dcs", "method=nki"), "attacker metric"] == "privacy_reconstruction_accuracy_best_advantage"
    assert table.loc[("ss", "epsilon=8.0"), "utility [before]"] == 0.8
    assert table.loc[("ss", "epsilon=8.0"), "utility [after]"] == pytest.approx(0.9)
    assert table.loc[("dcs", "method=nki"), "attacker [after]"] == 0.5
    md = (two_families / "cmp" / "compare.md").read_text()
    assert max(map(len, md.splitlines())) < 200


def test_all_and_named_metrics_still_give_the_wide_and_the_chosen_tables(two_families: Path) -> None:
    wide = _compare(two_families, "--all")
    assert "utility_other_metric_39 [after]" in wide.columns and "utility_roc_auc [before]" in wide.columns
    named = _compare(two_families, "-m", "utility_other_metric_01")
    assert list(named.columns) == ["utility_other_metric_01 [after]", "utility_other_metric_01 [before]"]
    result = CliRunner().invoke(app, ["compare", "-e", "before", "-e", "after", "--all", "-m", "x"],
                                env={"VEILBENCH_ROOT": str(two_families)})
    assert result.exit_code == 2 and "not both" in result.output
