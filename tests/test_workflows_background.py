"""DVC's and Prefect's background workflows on the project: a queued DVC experiment (DVC's queue
worker) and a served Prefect deployment (a scheduled run). Each runs in processes of its own and
must leave the DVC workspace exactly as it was.

Split from ``tests/test_workflows_dvc.py`` so that the two files run on two pytest-xdist workers;
both use a copy of the session's reproduced project (:mod:`tests.e2e_root`), built once.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.e2e_root import DVC, stages_run, workspace_snapshot
from tests.e2e_root import run as _run

#: The queued experiment's override: a report title that no other run uses.
QUEUED_TITLE = "queued experiment report"


@pytest.mark.slow
def test_dvc_queued_experiment_runs_in_the_background_and_leaves_the_parent_alone(
        committed_project: tuple[Path, dict[str, str]]) -> None:
    """``dvc exp run --queue -S …`` then ``dvc queue start``: DVC's queue worker (a background
    process) runs the experiment in its own copy under ``.dvc/tmp/exps``; once the queue is empty
    ``dvc exp show`` lists it with the override and its metrics, the experiment's commit holds the
    report made from the override, and the parent is unchanged. The override is the report's
    title, so the worker reruns the report stage alone (``dvc exp run --temp`` in
    ``tests/test_workflows_dvc.py`` reruns a sweep's stages from a changed ε)."""
    import time

    root, env = committed_project
    before = workspace_snapshot(root)
    out = _run([*DVC, "exp", "run", "--queue", "-n", "queued-title", "-S", f"report.title={QUEUED_TITLE}"], root, env)
    assert "Queued experiment" in out, out[-2000:]
    assert workspace_snapshot(root) == before, "queueing alone changes nothing"
    _run([*DVC, "queue", "start"], root, env)
    try:
        deadline = time.monotonic() + 300
        asked = time.monotonic()
        while True:  # cheap polls (git: the experiment's ref appears when it succeeds), DVC's status now and then
            refs = _run(["git", "for-each-ref", "--format=%(refname)", "refs/exps"], root, env)
            if "/queued-title" in refs or time.monotonic() - asked > 15:
                status, asked = _run([*DVC, "queue", "status"], root, env), time.monotonic()
                if not any(word in status for word in ("Queued", "Running")):
                    break
            assert time.monotonic() < deadline, _run([*DVC, "queue", "status"], root, env)
            time.sleep(1)
    finally:
        _run([*DVC, "queue", "stop"], root, env)
    log = subprocess.run([*DVC, "queue", "logs", "queued-title"], cwd=root, env=env, capture_output=True, text=True).stdout
    assert "Success" in status and "Failed" not in status, status + log[-3000:]
    assert stages_run(log) == {"report"}, log[-3000:]

    shown = json.loads(_run([*DVC, "exp", "show", "--json"], root, env))
    exps = [rev for row in shown for e in row.get("experiments") or [] for rev in e["revs"]]
    exp = next(r for r in exps if r["name"] == "queued-title")
    assert exp["data"]["params"]["params.yaml"]["data"]["report"]["title"] == QUEUED_TITLE
    summary = exp["data"]["metrics"]["reports/sweeps/ss/summary.json"]["data"]
    assert summary == json.loads((root / "reports/sweeps/ss/summary.json").read_text()), "evaluate was not rerun"
    report = _run(["git", "show", f"{exp['rev']}:reports/index.md"], root, env)
    assert QUEUED_TITLE in report, "the experiment's report was made from its own params"
    assert QUEUED_TITLE not in (root / "reports/index.md").read_text()

    assert "up to date" in _run([*DVC, "status"], root, env).lower()
    assert _run(["git", "status", "--porcelain"], root, env).strip() == ""
    assert workspace_snapshot(root) == before, "the parent workspace must be byte-identical"


@pytest.mark.slow
def test_a_served_deployment_runs_in_its_own_root(committed_project: tuple[Path, dict[str, str]],
                                                  tmp_path: Path) -> None:
    """`python -m flows.deploy` serves the nightly deployment against the test server (loopback);
    a triggered run writes under runs/nightly/<time>/ and leaves the DVC workspace as it was."""
    import time

    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment
    from prefect.exceptions import ObjectNotFound

    root, env = committed_project
    before, status = workspace_snapshot(root), _run([*DVC, "status"], root, env)
    artifacts_before = sorted((root / "mlruns").rglob("*"))
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
    assert workspace_snapshot(root) == before, "a scheduled run must not touch the DVC workspace"
    assert sorted((root / "mlruns").rglob("*")) == artifacts_before, "nor the workspace's MLflow artifacts"
    assert any((run_root / "mlruns" / "veilbench-test-nightly").rglob("metrics.json")), "its own are in its root"
