"""DVC's own workflows on the project, in a temporary git repository: experiments and metrics.

``dvc exp run --temp -S …`` runs the stages in a copy of the workspace under ``.dvc/tmp/exps``
while ``$DVC_ROOT`` names the parent repository; the stages must read the copy's (overridden)
params and write the copy's outputs, and leave the parent workspace exactly as it was.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tasks.paths import experiment_workspace, repo_root, tracking_root
from tests.conftest import REPO, tiny_params

DVC = [sys.executable, "-m", "dvc"]


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 600) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout + proc.stderr


def _snapshot(root: Path) -> dict[str, str]:
    """SHA-256 of every file of the workspace outside ``.git``, DVC's temporaries, the MLflow store
and the scheduled runs' roots (all ignored by git)."""
    skip = (".git", ".dvc/tmp", ".dvc/cache", "mlflow.db", "mlruns", "runs/")
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*"))
            if p.is_file() and not any(str(p.relative_to(root)).startswith(s) for s in skip) and "__pycache__" not in p.parts}


def exp_params() -> dict:
    """One small ScoreShield Gram sweep (two cells, one seed; the Gram regime has the cross-family
    metrics that the DVC summary shows)."""
    params = tiny_params()
    params["sweeps"] = {"ss": {"family": "scoreshield", "embedding": "digits-pca", "seeds": [0],
                               "params": {"regime": "gram", "mechanism": "aap", "adjacency": "output", "gram_sensitivity": 1.0,
                                          "n_records": 60, "delta": 1e-5},
                               "grid": {"epsilon": [8.0]}, "cells": [{"mechanism": "clean"}]}}
    params["report"]["frontiers"][0].update(y="utility_roc_auc", x_label="privacy budget ε", y_label="ROC AUC")
    return params


@pytest.fixture(scope="module")
def committed_repo(tmp_path_factory: pytest.TempPathFactory, prefect_server: str) -> tuple[Path, dict[str, str]]:
    """The project in a git repository with DVC, its pipeline reproduced and everything committed
    (shared by this module's end-to-end tests, none of which may change it)."""
    root = tmp_path_factory.mktemp("dvc") / "repo"
    root.mkdir()
    for item in ("veilbench", "tasks", "flows"):
        shutil.copytree(REPO / item, root / item, ignore=shutil.ignore_patterns("__pycache__"))
    for item in ("dvc.yaml", ".gitignore"):
        shutil.copy(REPO / item, root / item)
    (root / "params.yaml").write_text(yaml.safe_dump(exp_params(), sort_keys=False))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VEILBENCH_ROOT", "DVC_ROOT")}
    env.update({"PREFECT_API_URL": prefect_server, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x",
                "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x",
                "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"})  # `python` in dvc.yaml
    _run(["git", "init", "-q"], root, env)
    _run([*DVC, "init", "-q"], root, env)
    shutil.copy(REPO / ".dvcignore", root / ".dvcignore")  # after `dvc init`, which writes its own
    _run([sys.executable, "-m", "flows.cli", "run"], root, env)
    _run(["git", "add", "-A"], root, env)
    _run(["git", "commit", "-qm", "reproduced"], root, env)
    return root, env


def test_experiment_workspace_is_the_copy_under_dvc_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
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
        committed_repo: tuple[Path, dict[str, str]]) -> None:
    root, env = committed_repo
    before = _snapshot(root)
    assert "up to date" in _run([*DVC, "status"], root, env).lower()

    out = _run([*DVC, "exp", "run", "--temp", "-n", "eps2", "-S", "sweeps.ss.grid.epsilon=[2.0]"], root, env)
    assert "Ran experiment(s): eps2" in out, out[-2000:]

    shown = json.loads(_run([*DVC, "exp", "show", "--json"], root, env))
    exps = [rev for row in shown for e in row.get("experiments") or [] for rev in e["revs"]]
    exp = next(r for r in exps if r["name"] == "eps2")
    assert exp["data"]["params"]["params.yaml"]["data"]["sweeps"]["ss"]["grid"]["epsilon"] == [2.0]
    summary = exp["data"]["metrics"]["reports/sweeps/ss/summary.json"]["data"]
    baseline = json.loads((root / "reports/sweeps/ss/summary.json").read_text())
    assert summary["cells"] == 2 and summary["utility_min"] is not None
    assert summary["utility_min"] != baseline["utility_min"], "the stages must read the experiment's params"

    assert "up to date" in _run([*DVC, "status"], root, env).lower()
    assert _run(["git", "status", "--porcelain"], root, env).strip() == ""
    assert _snapshot(root) == before, "the parent workspace must be byte-identical"

    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
    exp_id = client.get_experiment_by_name("veilbench-test").experiment_id
    tagged = client.search_runs([exp_id], filter_string="tags.dvc_exp_name = 'eps2'")
    assert "epsilon=2.0" in {r.data.tags["cell"] for r in tagged if r.data.tags.get("stage") == "evaluate"}


@pytest.mark.slow
def test_dvc_queued_experiment_runs_in_the_background_and_leaves_the_parent_alone(
        committed_repo: tuple[Path, dict[str, str]]) -> None:
    """``dvc exp run --queue -S …`` then ``dvc queue start``: DVC's queue worker (a background
    process) runs the experiment in its own copy under ``.dvc/tmp/exps``; once the queue is empty
    ``dvc exp show`` lists it with the override and its metrics, and the parent is unchanged."""
    import time

    root, env = committed_repo
    before = _snapshot(root)
    out = _run([*DVC, "exp", "run", "--queue", "-n", "queued-eps3", "-S", "sweeps.ss.grid.epsilon=[3.0]"], root, env)
    assert "Queued experiment" in out, out[-2000:]
    assert _snapshot(root) == before, "queueing alone changes nothing"
    _run([*DVC, "queue", "start"], root, env)
    try:
        deadline = time.monotonic() + 300
        while True:
            status = _run([*DVC, "queue", "status"], root, env)
            if not any(word in status for word in ("Queued", "Running")):
                break
            assert time.monotonic() < deadline, status
            time.sleep(3)
    finally:
        _run([*DVC, "queue", "stop"], root, env)
    assert "Success" in status and "Failed" not in status, (
        status + subprocess.run([*DVC, "queue", "logs", "queued-eps3"], cwd=root, env=env, capture_output=True,
                                text=True).stdout[-3000:])

    shown = json.loads(_run([*DVC, "exp", "show", "--json"], root, env))
    exps = [rev for row in shown for e in row.get("experiments") or [] for rev in e["revs"]]
    exp = next(r for r in exps if r["name"] == "queued-eps3")
    assert exp["data"]["params"]["params.yaml"]["data"]["sweeps"]["ss"]["grid"]["epsilon"] == [3.0]
    summary = exp["data"]["metrics"]["reports/sweeps/ss/summary.json"]["data"]
    baseline = json.loads((root / "reports/sweeps/ss/summary.json").read_text())
    assert summary["cells"] == 2 and summary["utility_min"] != baseline["utility_min"], "the override took effect"

    assert "up to date" in _run([*DVC, "status"], root, env).lower()
    assert _run(["git", "status", "--porcelain"], root, env).strip() == ""
    assert _snapshot(root) == before, "the parent workspace must be byte-identical"


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
def test_dvc_metrics_show_is_a_readable_table(committed_repo: tuple[Path, dict[str, str]]) -> None:
    root, env = committed_repo
    table = _run([*DVC, "metrics", "show"], root, env)
    lines = table.splitlines()
    assert lines and "reports/sweeps/ss/summary.json" in table and "utility_max" in lines[0]
    assert max(map(len, lines)) < 300, max(lines, key=len)
    assert "nan" not in table.lower()
    values = json.loads(_run([*DVC, "metrics", "show", "--json"], root, env))
    flat = [v for rev in values.values() for f in rev["data"].values() for v in f["data"].values()]
    assert all(v is None or math.isfinite(v) for v in flat)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/usr/bin/chromium").is_file(),
                    reason="needs Debian's chromium (/usr/bin/chromium; `make install-browser` installs it)")
def test_dvc_plots_show_renders_offline_in_headless_chromium(
        committed_repo: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    root, env = committed_repo
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


@pytest.mark.slow
def test_a_served_deployment_runs_in_its_own_root(committed_repo: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """`python -m flows.deploy` serves the nightly deployment against the test server (loopback);
    a triggered run writes under runs/nightly/<time>/ and leaves the DVC workspace as it was."""
    import time

    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment
    from prefect.exceptions import ObjectNotFound

    root, env = committed_repo
    before, status = _snapshot(root), _run([*DVC, "status"], root, env)
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        server = subprocess.Popen([sys.executable, "-m", "flows.deploy", "--only", "nightly"], cwd=root, stdout=out,
                                  stderr=subprocess.STDOUT, env={**env, "PREFECT_RUNNER_POLL_FREQUENCY": "2"})
    try:
        deadline = time.monotonic() + 240
        while True:
            try:
                with get_client(sync_client=True) as client:
                    client.read_deployment_by_name("scheduled-benchmark/nightly")
                break
            except ObjectNotFound:
                assert server.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(2)
        flow_run = run_deployment("scheduled-benchmark/nightly", timeout=600)
    finally:
        server.terminate()
        server.wait(timeout=60)
    assert flow_run.state.is_completed(), log.read_text()[-3000:]
    assert flow_run.name.startswith("nightly/params.yaml/")
    (run_root,) = (root / "runs" / "nightly").iterdir()
    assert (run_root / "reports/index.md").is_file() and (run_root / "reports/sweeps/ss/summary.json").is_file()
    assert yaml.safe_load((run_root / "params.yaml").read_text())["tracking"]["experiment"] == "veilbench-test-nightly"
    assert _run([*DVC, "status"], root, env) == status
    assert _run(["git", "status", "--porcelain"], root, env).strip() == ""
    assert _snapshot(root) == before, "a scheduled run must not touch the DVC workspace"
