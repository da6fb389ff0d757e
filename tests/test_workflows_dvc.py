"""DVC's own workflows on the project, in a temporary git repository: experiments and metrics.

``dvc exp run --temp -S …`` runs the stages in a copy of the workspace under ``.dvc/tmp/exps``
while ``$DVC_ROOT`` names the parent repository; the stages must read the copy's (overridden)
params and write the copy's outputs, and leave the parent workspace exactly as it was.

The project is a copy of the session's reproduced project (:mod:`tests.e2e_root`), shared by this
module's end-to-end tests; the queued experiment and the served deployment are in
``tests/test_workflows_background.py``.
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest

from tasks.paths import experiment_workspace, repo_root, tracking_root
from tests.e2e_root import DVC, workspace_snapshot
from tests.e2e_root import run as _run


def test_experiment_workspace_is_the_copy_under_dvc_tmp(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    parent = tmp_path / "repo"
    copy = parent / ".dvc" / "tmp" / "exps" / "standalone" / "tmpabc"
    copy.mkdir(parents=True)
    (copy / "dvc.yaml").write_text("stages: {}\n")
    monkeypatch.setenv("DVC_ROOT", str(parent))
    monkeypatch.chdir(copy)
    assert experiment_workspace() == copy.resolve() and repo_root() == copy.resolve()
    assert tracking_root() == parent.resolve(), "the copy is deleted after the experiment: log to the parent"
    monkeypatch.chdir(parent)
    assert experiment_workspace() is None and repo_root() == parent.resolve() and tracking_root() == parent.resolve()
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    (elsewhere / "dvc.yaml").write_text("stages: {}\n")
    monkeypatch.chdir(elsewhere)
    assert repo_root() == parent.resolve(), "a dvc.yaml outside the parent's experiment folder is not a copy"


@pytest.mark.slow
def test_dvc_exp_run_temp_applies_the_override_and_leaves_the_parent_alone(
        committed_project: tuple[Path, dict[str, str]]) -> None:
    root, env = committed_project
    before = workspace_snapshot(root)
    assert "up to date" in _run([*DVC, "status"], root, env).lower()

    # under its own MLflow experiment, first created by the temporary copy's stages
    out = _run([*DVC, "exp", "run", "--temp", "-n", "eps2", "-S", "sweeps.ss.grid.epsilon=[2.0]",
                "-S", "tracking.experiment=veilbench-eps2"], root, env)
    assert "Ran experiment(s): eps2" in out, out[-2000:]

    shown = json.loads(_run([*DVC, "exp", "show", "--json"], root, env))
    exps = [rev for row in shown for e in row.get("experiments") or [] for rev in e["revs"]]
    exp = next(r for r in exps if r["name"] == "eps2")
    assert exp["data"]["params"]["params.yaml"]["data"]["sweeps"]["ss"]["grid"]["epsilon"] == [2.0]
    summary = exp["data"]["metrics"]["reports/sweeps/ss/summary.json"]["data"]
    baseline = json.loads((root / "reports/sweeps/ss/summary.json").read_text())
    assert summary["cells"] == 2 and summary["utility_min"] is not None
    assert summary["utility_min"] != baseline["utility_min"], "the stages must read the experiment's params"
    # the sweep's headline: its best release's primary utility, which the ε edit changed
    assert summary["metric_utility"] == baseline["metric_utility"] == "utility_roc_auc"
    assert summary["utility"] is not None and summary["utility"] != baseline["utility"]
    changed = _run([*DVC, "exp", "show", "--only-changed", "--md"], root, env)
    lines = [line for line in changed.splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    column = header.index("utility") if "utility" in header else next(
        i for i, c in enumerate(header) if c.endswith(":utility"))
    rows = {r[0].strip(" ├└─"): r[column].strip() for r in ([c for c in line.strip("|").split("|")] for line in lines[2:])}
    shown = {name: value for name, value in rows.items() if value not in ("", "-")}
    assert len(set(shown.values())) >= 2, f"--only-changed shows the changed utility:\n{changed}"
    assert any(name.startswith("eps2") or "eps2" in name for name in shown), changed
    assert max(map(len, lines)) < 1000, "the readable form: only the changed columns"

    assert "up to date" in _run([*DVC, "status"], root, env).lower()
    assert _run(["git", "status", "--porcelain"], root, env).strip() == ""
    assert workspace_snapshot(root) == before, "the parent workspace must be byte-identical"

    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
    exp_id = client.get_experiment_by_name("veilbench-eps2").experiment_id
    tagged = client.search_runs([exp_id], filter_string="tags.dvc_exp_name = 'eps2'")
    evaluated = {r.data.tags["cell"]: r for r in tagged if r.data.tags.get("stage") == "evaluate"}
    assert "epsilon=2.0" in evaluated
    # its artifacts outlive the copy, which DVC deleted: they are beside the parent's store
    files = {f.path for f in client.list_artifacts(evaluated["epsilon=2.0"].info.run_id)}
    assert "epsilon=2.0.json" in files, files
    assert Path(evaluated["epsilon=2.0"].info.artifact_uri).is_relative_to(root / "mlruns")


def test_sweep_summary_reduces_cell_means_and_writes_null_for_missing() -> None:
    from tasks.metrics_summary import cell_means_table, sweep_summary

    means = {"a": {"xfam_utility_balanced_accuracy": 0.9, "xfam_linkage_rate": 0.1, "xfam_linkage_chance": 0.01},
             "b": {"xfam_utility_balanced_accuracy": 0.6, "xfam_linkage_rate": float("nan"), "xfam_linkage_chance": 0.03},
             "c": {"utility_other": 1.0}}
    summary = sweep_summary(means, n_seeds=3)
    assert summary == {"cells": 3, "seeds": 3, "utility_min": 0.6, "utility_max": 0.9, "linkage_min": 0.1,
                       "linkage_max": 0.1, "linkage_chance": pytest.approx(0.02)}
    assert sweep_summary({"c": {"utility_other": 1.0}}, 1)["utility_max"] is None
    assert cell_means_table(means)["b"]["xfam_linkage_rate"] is None
    assert "NaN" not in json.dumps(cell_means_table(means))


def _colored_pixels(png: Path) -> int:
    """Pixels whose channels differ by more than 60: plot marks, not text, borders or background."""
    import numpy as np
    from PIL import Image

    rgb = np.asarray(Image.open(png).convert("RGB"), dtype=int)
    return int(((rgb.max(axis=2) - rgb.min(axis=2)) > 60).sum())


@pytest.mark.slow
def test_dvc_metrics_show_is_a_readable_table(committed_project: tuple[Path, dict[str, str]]) -> None:
    root, env = committed_project
    table = _run([*DVC, "metrics", "show"], root, env)
    lines = table.splitlines()
    assert lines and "reports/sweeps/ss/summary.json" in table and "utility_max" in lines[0]
    assert max(map(len, lines)) < 300, max(lines, key=len)
    assert "nan" not in table.lower()
    values = json.loads(_run([*DVC, "metrics", "show", "--json"], root, env))
    flat = [v for rev in values.values() for f in rev["data"].values() for v in f["data"].values()]
    flat += [v for d in flat if isinstance(d, dict) for v in d.values()]  # utility_at_eps.<ε>
    assert all(v is None or math.isfinite(v) for v in flat if not isinstance(v, str | dict))
    assert {v for v in flat if isinstance(v, str)} == {"utility_roc_auc", "xfam_linkage_advantage"}, "the metrics' names"


@pytest.mark.slow
@pytest.mark.skipif(not Path("/usr/bin/chromium").is_file(),
                    reason="needs Debian's chromium (/usr/bin/chromium; `make install-browser` installs it)")
def test_dvc_plots_show_renders_offline_in_headless_chromium(
        committed_project: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    root, env = committed_project
    _run([*DVC, "plots", "show", "-o", str(tmp_path / "plots")], root, env)
    page = tmp_path / "plots" / "index.html"
    assert "ss-frontier" in page.read_text() and "http" not in page.read_text().split("<body>")[0]
    shot = tmp_path / "shot.png"
    proc = subprocess.run(
        ["/usr/bin/chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",  # no network
         "--window-size=1000,1400", f"--screenshot={shot}", page.as_uri()],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env={**env, "HOME": str(tmp_path)})
    assert shot.is_file(), proc.stderr[-2000:]
    assert _colored_pixels(shot) > 500, "the page shows no plot"
