"""One reproduced git + DVC project for the end-to-end tests, built once per test session.

The project is this repository's code, ``dvc.yaml``, ``.gitignore`` and ``.dvcignore`` with a tiny
``params.yaml`` (:func:`project_params`), in a git repository with DVC, reproduced by a plain
``dvc repro`` (every stage's ``cmd`` in its own process, as a user runs it) and committed.

It is built once for the whole session, across pytest-xdist workers: the first worker that asks
builds it under an exclusive lock (``fcntl.flock``) in a folder beside the workers' own temporary
folders, the others wait for that build and reuse it. Nobody changes the built project: a test
module takes a private copy (:func:`copy_project`) or clones it with git. The ``dvc repro`` output
of the build is kept (:attr:`Reproduced.repro_output`) so that a test can check what it ran.

:func:`tiny_run` is the in-process counterpart (no DVC): every stage but the report run once on
both tiny sweeps, shared the same way by the in-process pipeline and MLflow tests.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import REPO, tiny_params

DVC = [sys.executable, "-m", "dvc"]
VEILBENCH_RUN = [sys.executable, "-m", "flows.cli", "run"]

#: Every stage of :func:`project_params`, as DVC addresses them.
ALL_STAGES = frozenset({"prepare@digits", "embed@digits-pca", "release@ss", "integrate@ss", "attack@ss",
                        "evaluate@ss", "report"})


def run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 600) -> str:
    """Run ``cmd``; fail the test with the end of its output unless it exits 0; return stdout + stderr."""
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout + proc.stderr


def stages_run(output: str) -> set[str]:
    """Stages that ran: DVC's "Running stage 'x'" lines, or `veilbench run`'s "[k/n] x: …" lines."""
    dvc = {line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage '")}
    ours = {m.group(1) for m in re.finditer(r"^\[\d+/\d+\] (\S+?)(?::| in )", output, re.M)}
    return dvc | ours


def project_env(prefect_url: str) -> dict[str, str]:
    """The environment a user's shell would give the project's commands: no ``PYTHONPATH``,
    ``VEILBENCH_ROOT`` or ``DVC_ROOT``, no ``PYTHONDONTWRITEBYTECODE`` (Python writes its bytecode
    caches beside the project's code, as by default: the project's ``.dvcignore`` must hide them from
    DVC), the test Prefect server, a git identity, and this interpreter's folder first on ``PATH``
    (``dvc.yaml`` calls ``python``)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VEILBENCH_ROOT", "DVC_ROOT", "PYTHONDONTWRITEBYTECODE")}
    env.update({"PREFECT_API_URL": prefect_url, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x",
                "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x",
                "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"})
    return env


def project_params() -> dict:
    """One small ScoreShield Gram sweep ``ss``: ε ∈ {4, 8} and the clean reference, one seed. The
    Gram regime has the cross-family metrics the DVC summary shows; two ε cells let a changed ε be
    recomputed while the other grid cell and the reference are reused. The audit has a fixed size
    (the default, the smallest decidable size, is the unit tests' subject: ``tests/scoreshield``)."""
    params = tiny_params()
    params["sweeps"] = {"ss": {"family": "scoreshield", "embedding": "digits-pca", "seeds": [0],
                               "params": {"regime": "gram", "mechanism": "aap", "adjacency": "output",
                                          "gram_sensitivity": 1.0, "n_records": 60, "delta": 1e-5,
                                          "audit_releases": 400},
                               "grid": {"epsilon": [4.0, 8.0]}, "cells": [{"mechanism": "clean"}]}}
    params["report"]["frontiers"][0].update(y="utility_roc_auc", x_label="privacy budget ε", y_label="ROC AUC")
    return params


def init_project(root: Path, params: dict, env: dict[str, str]) -> Path:
    """``root``: the project's code, ``dvc.yaml``, ``.gitignore``, ``.dvcignore``, ``params`` and the
    ``data/sources.yaml`` made from them after ``git init`` and ``dvc init`` (nothing committed, nothing run)."""
    root.mkdir(parents=True)
    for item in ("veilbench", "tasks", "flows"):
        shutil.copytree(REPO / item, root / item, ignore=shutil.ignore_patterns("__pycache__"))
    for item in ("dvc.yaml", ".gitignore"):
        shutil.copy(REPO / item, root / item)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    from tasks.sources import write_sources

    write_sources(root)  # data/sources.yaml: dvc.yaml's vars (the file each data set's prepare reads)
    run(["git", "init", "-q"], root, env)
    run([*DVC, "init", "-q"], root, env)
    shutil.copy(REPO / ".dvcignore", root / ".dvcignore")  # after `dvc init`, which writes its own
    return root


@dataclass(frozen=True)
class Reproduced:
    """The built project (:attr:`root`, never to be changed) and the output of its ``dvc repro``."""

    root: Path
    repro_output: str


def _build(folder: Path, prefect_url: str, mlflow_db: Path) -> None:
    env = project_env(prefect_url)
    root = init_project(folder / "repo", project_params(), env)
    shutil.copy(mlflow_db, root / "mlflow.db")  # a migrated store (git-ignored): a new one is the fresh clone's
    (folder / "repro.log").write_text(run([*DVC, "repro"], root, env, timeout=900))
    run(["git", "add", "-A"], root, env)
    run(["git", "commit", "-qm", "reproduced"], root, env)


def built_once(folder: Path, build: Callable[[Path], None]) -> Path:
    """``folder``, filled by ``build(folder)`` in the first process that asks (pytest-xdist workers
    included); later callers wait on the lock and reuse it. A failed build is reported to them,
    not retried."""
    folder.mkdir(parents=True, exist_ok=True)
    ready, failed = folder / "ready", folder / "failed"
    with open(folder / "lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            if failed.exists():
                raise RuntimeError(f"the shared build in {folder} failed (in another test):\n{failed.read_text()}")
            if not ready.exists():
                try:
                    build(folder)
                except BaseException:
                    failed.write_text(traceback.format_exc())
                    raise
                ready.touch()
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
    return folder


def reproduced_project(folder: Path, prefect_url: str, mlflow_db: Path) -> Reproduced:
    """The reproduced project, built in ``folder`` once (:func:`built_once`), its MLflow store a
    copy of the migrated store ``mlflow_db``."""
    built_once(folder, lambda f: _build(f, prefect_url, mlflow_db))
    return Reproduced(folder / "repo", (folder / "repro.log").read_text())


def workspace_snapshot(root: Path) -> dict[str, str]:
    """SHA-256 of every file of the workspace outside ``.git``, DVC's temporaries, the MLflow store
    and the scheduled runs' roots (all ignored by git)."""
    skip = (".git", ".dvc/tmp", ".dvc/cache", "mlflow.db", "mlruns", "runs/")
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*"))
            if p.is_file() and not any(str(p.relative_to(root)).startswith(s) for s in skip)
            and "__pycache__" not in p.parts}


def shared_folder(tmp_path_factory: Any, name: str) -> Path:
    """``<this session's temporary root>/name``: one folder for all pytest-xdist workers of the session."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name


#: Runs a command (the Prefect server) until the process ``argv[1]`` (the pytest run) is gone, then stops it.
_KEEPER = """
import os, signal, subprocess, sys, time
watched, child = int(sys.argv[1]), subprocess.Popen(sys.argv[2:])
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
try:
    while child.poll() is None:
        try:
            os.kill(watched, 0)
        except ProcessLookupError:
            break
        time.sleep(1)
finally:
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(15)
        except subprocess.TimeoutExpired:
            child.kill()
"""


def _start_prefect_server(folder: Path, timeout: float = 120) -> None:
    """A Prefect API server as :func:`prefect.testing.utilities.prefect_test_harness` starts it
    (uvicorn on loopback, no UI, its own SQLite database in ``folder``), kept alive until the pytest
    run (the pytest-xdist controller, the parent of a worker) ends; its URL in ``folder/url``."""
    import urllib.request

    import prefect

    from flows.server import _free_port

    owner = os.getppid() if os.environ.get("PYTEST_XDIST_WORKER") else os.getpid()
    port = _free_port("127.0.0.1")
    url = f"http://127.0.0.1:{port}/api"
    env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1",
           "PREFECT_HOME": str(folder / "home"),
           "PREFECT_SERVER_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{folder / 'prefect.db'}"}
    env.pop("PREFECT_API_URL", None)
    with open(folder / "server.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", _KEEPER, str(owner), sys.executable, "-m", "uvicorn",
             "--app-dir", str(Path(prefect.__file__).parent.parent), "--factory", "prefect.server.api.server:create_app",
             "--host", "127.0.0.1", "--port", str(port), "--log-level", "error", "--lifespan", "on"],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=5) as response:
                if response.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the test Prefect server did not start:\n{(folder / 'server.log').read_text()[-3000:]}")
        time.sleep(0.5)
    # the database as the server's start left it (migrated, block types registered, no runs yet):
    # the template of seed_prefect_home (the same Prefect, the same migrations as `prefect server start`)
    _sqlite_copy(folder / "prefect.db", folder / "migrated.db")
    (folder / "url").write_text(url)


def shared_prefect_server(folder: Path) -> str:
    """The API URL of the session's one Prefect test server, started in ``folder`` by the first
    process that asks (:func:`built_once`): the pytest-xdist workers share it. Its database as it
    was before any test used it: ``folder/migrated.db``."""
    return (built_once(folder, _start_prefect_server) / "url").read_text()


def _sqlite_copy(source: Path, dest: Path) -> Path:
    """``dest``: a consistent copy of the SQLite database ``source`` (SQLite's online backup, the
    write-ahead log included), even while a server has it open."""
    src, dst = sqlite3.connect(source), sqlite3.connect(dest)
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()
    return dest


def seed_prefect_home(root: Path, migrated: Path) -> Path:
    """``root/.prefect/prefect.db`` (the database of ``veilbench run``'s own server in ``root``) as a
    copy of the migrated, still empty database ``migrated`` (the ``migrated_prefect_db`` fixture):
    the run's server then starts without the migrations of a new home, as on a user's second run."""
    home = root / ".prefect"
    home.mkdir(parents=True, exist_ok=True)
    return _sqlite_copy(migrated, home / "prefect.db")


def _build_tiny_run(folder: Path, migrated_mlflow_db: Path) -> None:
    from tasks.embed import embed
    from tasks.prepare import prepare
    from tasks.sweep import run_sweep_stage
    from veilbench.stages import STAGES

    root = folder / "root"
    root.mkdir()
    (root / "params.yaml").write_text(yaml.safe_dump(tiny_params(), sort_keys=False))
    shutil.copy(migrated_mlflow_db, root / "mlflow.db")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@x"]
    for cmd in (["git", "init", "-q"], [*git, "add", "params.yaml"], [*git, "commit", "-q", "-m", "params"]):
        subprocess.run(cmd, cwd=root, check=True, capture_output=True)
    prepare("digits", root=root)
    embed("digits-pca", root=root)
    for sweep in ("ss", "ss-identity"):
        for stage in STAGES:
            run_sweep_stage(stage, sweep, root=root)


def tiny_run(folder: Path, migrated_mlflow_db: Path) -> Path:
    """A work folder (no DVC) where every stage but the report ran, in process, on both sweeps of
    :func:`tests.conftest.tiny_params`, after ``params.yaml`` was committed to git; built in
    ``folder`` once (:func:`built_once`). Tests change only copies (:func:`copy_project`)."""
    return built_once(folder, lambda f: _build_tiny_run(f, migrated_mlflow_db)) / "root"


def copy_project(source: Path, dest: Path) -> Path:
    """A private copy of the project or work folder at ``source`` (git, DVC and MLflow state
    included) at ``dest`` (files already there and not in ``source`` are kept).

    MLflow stores each experiment's artifact location and each run's artifact URI as absolute
    paths (into ``<root>/mlruns``); the copy's store is pointed at its own ``mlruns`` so that runs
    in the copy never write into ``source``."""
    shutil.copytree(source, dest, symlinks=True, dirs_exist_ok=True)
    store = dest / "mlflow.db"
    if store.exists():
        with sqlite3.connect(store) as db:
            db.execute("UPDATE experiments SET artifact_location = REPLACE(artifact_location, ?, ?)",
                       (str(source), str(dest)))
            db.execute("UPDATE runs SET artifact_uri = REPLACE(artifact_uri, ?, ?)", (str(source), str(dest)))
        db.close()
    return dest
