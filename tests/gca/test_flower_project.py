"""The Flower app project (``flower/``) launched as Flower documents: ``flwr run`` on the simulation
engine and on a local deployment (a SuperLink and two SuperNodes on 127.0.0.1), per-node data files
from ``veilbench flower-export``, errors that fail the run (and ``veilbench flower-run``'s exit
status), results in MLflow (runs tagged ``flower``).

The end-to-end tests start processes only on 127.0.0.1 with free ports, and stop every process
they started (by process group) in ``finally``/``with``; they are marked slow.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from veilbench.validation import ValidationError

REPO = Path(__file__).resolve().parents[2]
APP = REPO / "flower"


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """digits (300 records) exported for two nodes."""
    import yaml

    from tasks.flower_export import export_nodes
    from tests.conftest import tiny_params

    root = tmp_path_factory.mktemp("flower-root")
    (root / "params.yaml").write_text(yaml.safe_dump(tiny_params()))
    export_nodes("digits", 2, root / "nodes", root=root)
    return root / "nodes"


def _task():
    sys.path.insert(0, str(APP))
    try:
        import veilbench_flower.task as task
    finally:
        sys.path.remove(str(APP))
    return task


def test_export_writes_one_file_per_node_and_the_run_config(exported: Path) -> None:
    import tomllib

    shards = []
    for i in range(2):
        with np.load(exported / f"node_{i}.npz", allow_pickle=False) as f:
            assert set(f.files) == {"x_train", "x_test", "y_test"}
            assert f["x_train"].dtype == np.float32 and f["x_train"].shape[1] == 64
            assert set(np.unique(f["y_test"])) == {0, 1}
            assert f["x_train"].min() >= -1.0 and f["x_train"].max() <= 1.0, "min-max scaled to [-1, 1]"
            shards.append(f["x_train"])
    assert abs(len(shards[0]) - len(shards[1])) <= 1, "IID split of the normal training records"
    assert not (shards[0][:, None, :] == shards[1][None, :, :]).all(-1).any(), "disjoint shards"
    config = tomllib.loads((exported / "run-config.toml").read_text())
    assert config == {"input-dim": 64, "num-clients": 2, "seed": 0, "data-dir": str(exported)}


def test_export_rejects_bad_arguments(tmp_path: Path, workdir: Path) -> None:
    from tasks.flower_export import export_nodes

    with pytest.raises(ValidationError, match="nodes"):
        export_nodes("digits", 0, tmp_path, root=workdir)
    with pytest.raises(ValidationError, match="dataset"):
        export_nodes("nope", 2, tmp_path, root=workdir)


def test_node_data_path_from_node_config_or_data_dir(exported: Path) -> None:
    task = _task()
    assert task.data_path({"data-path": str(exported / "node_1.npz")}, {}) == exported / "node_1.npz"
    assert task.data_path({"partition-id": 1}, {"data-dir": str(exported)}) == exported / "node_1.npz"
    with pytest.raises(ValidationError, match="data-path: missing"):
        task.data_path({"partition-id": 0}, {"data-dir": ""})
    with pytest.raises(ValidationError, match="not a file"):
        task.data_path({"data-path": str(exported / "node_7.npz")}, {})


def test_final_metrics_of_each_method_and_a_run_with_no_replies() -> None:
    task = _task()
    final, rounds = task.final_metrics("fedavg", {"evaluate": {1: {"accuracy": 0.5, "roc_auc": 0.6},
                                                               2: {"accuracy": 0.7, "roc_auc": 0.8}}})
    assert final == {"accuracy": 0.7, "roc_auc": 0.8} and set(rounds) == {1, 2}
    final, _ = task.final_metrics("gca", {"train": {1: {"accuracy-epochs": [0.1, 0.9], "auc-epochs": [0.2, 0.95]}}})
    assert final == {"accuracy": 0.9, "roc_auc": 0.95}, "the round's last reconstruction epoch"
    with pytest.raises(RuntimeError, match="every client failed"):
        task.final_metrics("fedavg", {"evaluate": {}, "train": {}})


def test_the_mlflow_experiment_name_is_checked_before_the_first_round(monkeypatch) -> None:
    """It names the experiment's artifact folder (:func:`tasks.tracking.artifact_location`)."""
    from types import SimpleNamespace

    from veilbench.validation import UsageError

    task = _task()
    assert task.experiment_name({}) == "veilbench-flower" and task.experiment_name({"mlflow-experiment": "ab-1"}) == "ab-1"
    for bad in ("../elsewhere", "a/b", ".hidden"):
        with pytest.raises(UsageError, match="mlflow-experiment"):
            task.experiment_name({"mlflow-experiment": bad})
    pytest.importorskip("flwr")
    sys.path.insert(0, str(APP))
    try:
        import veilbench_flower.server_app as server_app
    finally:
        sys.path.remove(str(APP))
    monkeypatch.setattr(server_app, "_deployed_server_setup", lambda context: "set up")
    assert server_app._server_setup(SimpleNamespace(run_config={"mlflow-experiment": "ok"})) == "set up"
    with pytest.raises(UsageError, match="mlflow-experiment"):
        server_app._server_setup(SimpleNamespace(run_config={"mlflow-experiment": "../x"}))


def _fake_flwr(tmp_path: Path, body: str) -> list[str]:
    """A stand-in ``flwr`` command: a Python script whose ``sys.argv[1:]`` are flwr's arguments."""
    script = tmp_path / "flwr.py"
    script.write_text("import json, sys, time\nargs = sys.argv[1:]\n" + body)
    return [sys.executable, str(script)]


def test_run_app_follows_the_log_stream_then_reads_the_status_once(tmp_path: Path, monkeypatch) -> None:
    """``run`` submits, ``log --stream`` blocks until the run ended (its output is the log), one
    ``ls`` reads the final status; every call is recorded to check that nothing polled."""
    import tasks.flower_launch as launch

    calls = tmp_path / "calls.txt"
    body = (f"open({str(calls)!r}, 'a').write(' '.join(args[:1] + args[-1:]) + '\\n')\n"
            "if args[0] == 'run':\n    print(json.dumps({'success': True, 'run-id': 7}))\n"
            "elif args[0] == 'log':\n    print('client 1 failed: input-dim')\n"
            "elif args[0] == 'ls':\n    print(json.dumps({'runs': [{'status': 'finished:failed', 'status-details': 'every client failed'}]}))\n")
    monkeypatch.setattr(launch, "_flwr", lambda: _fake_flwr(tmp_path, body))
    status = launch.run_app(tmp_path, "local-deployment", timeout=60)
    assert (status.run_id, status.status, status.details) == ("7", "finished:failed", "every client failed")
    assert not status.ok and "client 1 failed: input-dim" in status.log
    assert [line.split()[0] for line in calls.read_text().splitlines()] == ["run", "log", "ls"]


def test_follow_returns_what_was_printed_when_the_run_outlives_the_timeout(tmp_path: Path, monkeypatch) -> None:
    import tasks.flower_launch as launch

    monkeypatch.setattr(launch, "_flwr", lambda: _fake_flwr(tmp_path, "print('round 1', flush=True)\ntime.sleep(30)\n"))
    assert launch.follow("7", "local-simulation", timeout=1.5).strip() == "round 1"


@pytest.mark.slow
def test_app_components_are_created_at_import() -> None:
    """``flwr`` loads ``module:attribute`` statically (no module ``__getattr__``)."""
    pytest.importorskip("flwr")
    import tomllib

    from flwr.clientapp import ClientApp
    from flwr.serverapp import ServerApp

    components = tomllib.loads((APP / "pyproject.toml").read_text())["tool"]["flwr"]["app"]["components"]
    code = ("import importlib, sys; sys.path.insert(0, sys.argv[1]); "
            "s = importlib.import_module(sys.argv[2].split(':')[0]); c = importlib.import_module(sys.argv[3].split(':')[0]); "
            "print(type(vars(s)[sys.argv[2].split(':')[1]]).__name__, type(vars(c)[sys.argv[3].split(':')[1]]).__name__)")
    out = subprocess.run([sys.executable, "-c", code, str(APP), components["serverapp"], components["clientapp"]],
                         capture_output=True, text=True, timeout=120, env=_env(None))
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == [ServerApp.__name__, ClientApp.__name__]


# ------------------------------------------------------------------------------------------------
# end to end: flwr run on the simulation engine and on a local deployment
# ------------------------------------------------------------------------------------------------

def _env(tracking_db: Path | None, **extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "FLWR_DISABLE_UPDATE_CHECK": "1", "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
           "RAY_USAGE_STATS_ENABLED": "0", **extra}
    if tracking_db is not None:
        env["VEILBENCH_TRACKING_URI"] = f"sqlite:///{tracking_db}"
    return env


def _flower_runs(db: Path) -> dict[str, dict]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{db}")
    exp = client.get_experiment_by_name("veilbench-flower")
    runs = client.search_runs([exp.experiment_id], "tags.flower = 'true'") if exp else []
    return {r.data.tags["flwr_run_id"] + "/" + r.data.tags["method"]: {**r.data.metrics, "status": r.info.status}
            for r in runs}


def _kill_local_superlink(port: int) -> None:
    """Stop the simulation SuperLink that ``flwr`` started (detached) for our control port."""
    import psutil

    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmd = proc.info["cmdline"] or []
        if any("flower-superlink" in c for c in cmd) and f"127.0.0.1:{port}" in cmd:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # its own session: the SuperExec and app processes too
            except ProcessLookupError:
                pass


#: ``flwr ls``'s status details when Flower's simulation runtime itself (the Ray backend, ``start_vce``)
#: raised: the ServerApp's own errors read ``Simulation failed with exception: <its message>``.
RUNTIME_CRASH = "An error was encountered. Ending simulation."


@pytest.mark.slow
def test_flwr_run_on_the_simulation_engine(exported: Path, tmp_path: Path, migrated_mlflow_db: Path,
                                           ray_lock: None) -> None:
    """Both methods in one run on the simulation engine (Ray), one MLflow run each. Under the full
    suite Flower's simulation runtime has crashed on its own, before any client reply reached the
    ServerApp (status details :data:`RUNTIME_CRASH`); such a run says nothing about veilbench's
    apps, so it is reported as a warning with its log and run again, once."""
    pytest.importorskip("flwr")
    from tasks.flower_launch import free_ports, run_app, write_flower_config

    db = tmp_path / "mlflow.db"
    shutil.copy(migrated_mlflow_db, db)
    (port,) = free_ports(1)
    write_flower_config(tmp_path / "flwr")
    env = _env(db, FLWR_HOME=str(tmp_path / "flwr"), FLWR_LOCAL_CONTROL_API_PORT=str(port))
    try:
        for attempt in range(2):
            status = run_app(APP, "local-simulation", [str(exported / "run-config.toml")], timeout=240, env=env,
                             cwd=tmp_path)
            if attempt or status.ok or RUNTIME_CRASH not in status.details:
                break
            warnings.warn(f"Flower's simulation runtime crashed (run {status.run_id}); running again. Its log:\n"
                          f"{status.log[-6000:]}", stacklevel=1)
        assert status.ok, (status, status.log[-6000:])
    finally:
        _kill_local_superlink(port)
    runs = _flower_runs(db)
    assert set(runs) == {f"{status.run_id}/fedavg", f"{status.run_id}/gca"}
    for metrics in runs.values():
        assert metrics["status"] == "FINISHED" and 0.5 < metrics["roc_auc"] <= 1.0 and 0.0 <= metrics["accuracy"] <= 1.0


@pytest.mark.slow
def test_flwr_run_on_a_local_deployment_with_two_supernodes(exported: Path, tmp_path: Path,
                                                             migrated_mlflow_db: Path, ray_lock: None) -> None:
    pytest.importorskip("flwr")
    from tasks.flower_launch import LocalDeployment, run_app

    db = tmp_path / "mlflow.db"
    shutil.copy(migrated_mlflow_db, db)
    data = [exported / "node_0.npz", exported / "node_1.npz"]
    with LocalDeployment(data, tmp_path / "flwr", tmp_path / "logs", env=_env(db)) as dep:
        # the data comes from each SuperNode's node config (data-path), not from the run config
        status = run_app(APP, "local-deployment", ['method="gca" rounds=1 input-dim=64 num-clients=2 data-dir=""'],
                         timeout=240, env=dep.env, cwd=tmp_path)
        assert status.ok, (status, status.log[-4000:])

        # every client fails (the run config's input-dim disagrees with the nodes' files): the run
        # fails, and `veilbench flower-run` says so with a non-zero exit and the client's own message
        out = subprocess.run([sys.executable, "-m", "flows.cli", "flower-run", str(APP), "local-deployment",
                              "-c", 'method="gca" rounds=1 input-dim=63 num-clients=2', "--timeout", "180"],
                             capture_output=True, text=True, env=dep.env, cwd=tmp_path, timeout=300)
        procs = list(dep.procs)
    assert all(p.poll() is not None for p in procs), "every process of the deployment was stopped"
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-2000:]
    assert "finished:failed" in out.stderr and "every client failed" in out.stderr, out.stderr[-6000:]
    assert "input-dim: run config says 63" in out.stderr, out.stderr[-6000:]
    runs = _flower_runs(db)
    assert set(runs) == {f"{status.run_id}/gca"}, "a failed run logs no results"
    assert runs[f"{status.run_id}/gca"]["roc_auc"] > 0.5
