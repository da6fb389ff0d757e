"""A run's bookkeeping when things go wrong: what it records stays consistent with what it did.

* Code analysis (``ast.parse``, not thread-safe in CPython 3.11) never runs in two cell threads at once.
* A stage recorded in ``dvc.lock`` keeps its ``.gitignore`` entry when a later stage fails.
* A failed sweep stage ends its MLflow parent run FAILED; a deterministic failure is not retried.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.trust.conftest import SWEEP


def test_code_analysis_never_parses_in_two_threads_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Four threads ask for the code digests of four (family, stage) pairs at once, as four cells of
    four stages starting together would: ``ast.parse`` (slowed down to widen the window) must never
    be entered by two of them at the same time."""
    from tasks import codedeps

    inside, most, guard = [0], [0], threading.Lock()
    real_parse = ast.parse

    def parse(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        with guard:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        try:
            time.sleep(0.002)
            return real_parse(*args, **kwargs)
        finally:
            with guard:
                inside[0] -= 1

    monkeypatch.setattr(ast, "parse", parse)
    codedeps.closure.cache_clear()
    start = threading.Barrier(4)
    errors: list[BaseException] = []

    def digest(family: str, stage: str) -> None:
        start.wait()
        try:
            codedeps.code_digest(family, stage)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=digest, args=pair) for pair in
               (("scoreshield", "release"), ("dc", "integrate"), ("anchornoise", "attack"), ("scoreshield", "evaluate"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    codedeps.closure.cache_clear()  # the next user parses with the real ast.parse
    assert not errors, errors
    assert most[0] == 1, f"ast.parse ran in {most[0]} threads at once"


def _git_dvc_project(root: Path) -> None:
    """A git + DVC project of two stages: ``a`` writes ``a_out``, ``b`` reads it and writes ``b_out``."""
    root.mkdir()
    (root / "dvc.yaml").write_text("stages:\n  a:\n    cmd: 'true'\n    outs: [a_out]\n"
                                   "  b:\n    cmd: 'true'\n    deps: [a_out]\n    outs: [b_out]\n")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"}
    import os

    for cmd in (["git", "init", "-q"], [sys.executable, "-m", "dvc", "init", "-q"], ["git", "add", "-A"],
                ["git", "commit", "-qm", "init"]):
        subprocess.run(cmd, cwd=root, check=True, capture_output=True, env={**os.environ, **env})


def test_a_recorded_stage_keeps_its_gitignore_entry_when_a_later_stage_fails(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Stage ``a`` finishes and is recorded, then ``b`` fails: the run ends with b's error, ``a`` is
    in ``dvc.lock`` and its output in ``.gitignore`` (DVC's scm context removes the entries it added
    when its block fails; a locked output left out would show in ``git status`` for good)."""
    from flows import pipeline

    root = tmp_path / "project"
    _git_dvc_project(root)

    def execute(self: pipeline.PlannedRun) -> list[str]:  # the stage graph, without Prefect
        (root / "a_out").write_text("a\n")
        self.record("a")
        raise RuntimeError("stage b failed")

    monkeypatch.setattr(pipeline.PlannedRun, "execute", execute)
    with pytest.raises(RuntimeError, match="stage b failed"):
        pipeline.reproduce_in_process(root)
    lock = (root / "dvc.lock").read_text()
    assert "  a:" in lock and "  b:" not in lock, lock
    assert "/a_out" in (root / ".gitignore").read_text().splitlines(), "the locked output is not ignored by git"
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=root, capture_output=True,
                            text=True, check=True).stdout
    assert "a_out" not in status, status


def _failing_release(monkeypatch: pytest.MonkeyPatch, root: Path) -> list[int]:
    """Make ScoreShield's release raise (a bug: deterministic), remove the sweep's release output and
    point the stage store at an empty folder, so its cell is computed; returns the list its calls are
    counted in."""
    import shutil

    from tasks.store import STORE_ENV
    from veilbench.families import get_family

    calls: list[int] = []

    def release(inputs, params, seed):  # noqa: ANN001, ANN202
        calls.append(seed)
        raise ValueError("a bug in release")

    monkeypatch.setattr(get_family("scoreshield"), "release", release)
    shutil.rmtree(root / "data" / "release" / SWEEP)
    monkeypatch.setenv(STORE_ENV, str(root / "empty-store"))
    return calls


def _parent_statuses(root: Path, stage: str) -> list[str]:
    from mlflow.tracking import MlflowClient

    from tests.trust.conftest import trust_params

    client = MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
    exp = client.get_experiment_by_name(trust_params()["tracking"]["experiment"])
    runs = client.search_runs([exp.experiment_id], filter_string=f"tags.run_kind = 'sweep-stage' and tags.stage = '{stage}'",
                              order_by=["attributes.start_time DESC"])
    return [r.info.status for r in runs]


def test_a_failed_sweep_stage_ends_its_parent_run_failed(trust_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks.sweep import run_sweep_stage

    calls = _failing_release(monkeypatch, trust_root)
    with pytest.raises(ValueError, match="a bug in release"):
        run_sweep_stage("release", SWEEP, root=trust_root)
    assert calls == [0]
    assert _parent_statuses(trust_root, "release")[0] == "FAILED", "the failed stage's parent run is left RUNNING"


@pytest.mark.slow  # a Prefect flow on the session's test server
def test_a_failing_cell_runs_once_and_its_stage_parent_ends_failed(trust_root: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    prefect_server: str) -> None:
    """The stage graph of ``veilbench run`` (Prefect tasks on a thread pool): a cell failing with a
    bug is not retried (it used to run twice) and the stage's parent MLflow run ends FAILED."""
    from prefect import flow
    from prefect.task_runners import ThreadPoolTaskRunner

    from flows.dag import run_stage_dag

    calls = _failing_release(monkeypatch, trust_root)

    @flow(task_runner=ThreadPoolTaskRunner(max_workers=2))
    def graph() -> None:
        run_stage_dag({f"release@{SWEEP}": []}, workers=2, root=str(trust_root))

    with pytest.raises(ValueError, match="a bug in release"):
        graph()
    assert calls == [0], f"the failing cell ran {len(calls)} times"
    assert _parent_statuses(trust_root, "release")[0] == "FAILED"
