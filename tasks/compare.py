"""Comparison tables from MLflow: the latest ``evaluate`` run of each cell, per experiment.

``compare(["exp-a", "exp-b"])`` calls ``mlflow.search_runs`` for runs tagged ``stage=evaluate``,
keeps the most recent run of each (experiment, cell), and pivots their metrics into one table:
one row per cell, one column per (metric, experiment). Written as markdown and CSV.
"""

from __future__ import annotations

from pathlib import Path

from tasks.paths import repo_root
from tasks.tracking import tracking_uri
from veilbench.io import atomic_write_text


def comparison_frame(experiments: list[str], metrics: list[str] | None = None, root: Path | None = None):
    """A pandas DataFrame indexed by cell with columns ``<metric> [<experiment>]``."""
    import mlflow
    import pandas as pd

    mlflow.set_tracking_uri(tracking_uri(root or repo_root()))
    missing = [e for e in experiments if mlflow.get_experiment_by_name(e) is None]
    if missing:
        raise KeyError(f"experiment: no MLflow experiment named {missing} in {tracking_uri(root or repo_root())}")
    runs = mlflow.search_runs(experiment_names=experiments, filter_string="tags.stage = 'evaluate'", output_format="pandas")
    if runs.empty:
        return pd.DataFrame()
    exp_names = {mlflow.get_experiment_by_name(e).experiment_id: e for e in experiments}
    runs["experiment"] = runs["experiment_id"].map(exp_names)
    runs = runs.sort_values("start_time").groupby(["experiment", "tags.cell"], as_index=False).last()
    metric_cols = [c for c in runs.columns if c.startswith("metrics.") and not c.endswith("_ci95")]
    if metrics:
        metric_cols = [c for c in metric_cols if c.removeprefix("metrics.") in metrics]
    frames = []
    for exp in experiments:
        sub = runs[runs["experiment"] == exp].set_index("tags.cell")[metric_cols]
        sub.columns = [f"{c.removeprefix('metrics.')} [{exp}]" for c in sub.columns]
        frames.append(sub)
    table = pd.concat(frames, axis=1)
    table.index.name = "cell"
    return table.dropna(axis=1, how="all").sort_index(axis=1)


def compare(experiments: list[str], out_dir: Path | None = None, metrics: list[str] | None = None,
            root: Path | None = None) -> tuple[Path, Path]:
    """Write ``compare.md`` and ``compare.csv`` under ``out_dir`` (default ``reports/compare``)."""
    root = root or repo_root()
    table = comparison_frame(experiments, metrics, root)
    out_dir = out_dir or root / "reports" / "compare"
    out_dir.mkdir(parents=True, exist_ok=True)
    md_path, csv_path = out_dir / "compare.md", out_dir / "compare.csv"
    text = table.to_markdown(floatfmt=".4g") if not table.empty else "No evaluate runs found.\n"
    atomic_write_text(md_path, text + "\n")
    atomic_write_text(csv_path, table.to_csv())
    return md_path, csv_path
