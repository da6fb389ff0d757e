"""Kill and resume, bit for bit: ``veilbench run`` stopped by SIGINT, SIGTERM or SIGKILL at five
moments (planning, release, integrate, evaluate, report), then run to the end, records exactly what
an uninterrupted run records.

For each signal one fresh git + DVC project (digits, one ScoreShield cell, the report) is run five
times, each run stopped at the next moment, then once more to the end; its ``dvc.lock`` (the hash
of every output: the prepared data, the embedding, every cell's arrays and manifest, the cell
records, the report and its figures) must equal that of one uninterrupted run of the same project.
After every stop: the exit status (130 for SIGINT, 143 for SIGTERM, killed for SIGKILL), no lock
entry disagrees with the outputs it names (:func:`tests.trust.test_integrity_e2e.lock_disagreements`);
at the end: ``dvc status`` clean, no half-written temporary left, no MLflow run left RUNNING.

A moment is a fixed point of the run, not a sleep: a hook sends the signal to the run's own
process when DVC plans its first stage, right after the first cell of the release, integrate or
evaluate stage has written its output, or when the report starts writing ``index.html``
(``index.md`` written). To keep this cheap every run is a ``fork`` of one process that imported
the pipeline once (:data:`_ZYGOTE`); all runs use the session's Prefect test server.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.trust.conftest import SWEEP, trust_params

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")]

REPO = Path(__file__).resolve().parents[2]
MOMENTS = ("planning", "release", "integrate", "evaluate", "report")
SIGNALS = ("SIGINT", "SIGTERM", "SIGKILL")

#: One process importing the pipeline once; for each JSON request on stdin it forks a child that
#: runs ``veilbench <argv>`` (or ``dvc <argv>``) in the request's project, stopped at ``moment``
#: by ``signal``, its output in the file ``log``; it answers with the child's exit status.
_ZYGOTE = r'''
import json, os, signal, sys, time
import tasks  # first: the CPU code paths, as every entry point
import flows.cli, flows.pipeline, flows.dag, tasks.sweep, tasks.report, tasks.report.html_page
import dvc.cli, dvc.repo, mlflow.tracking, sklearn.decomposition, scipy.stats, matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot


def hooks(moment, sig):
    fired = []

    def kill(where):
        if not fired:
            fired.append(where)
            print(f"killing at {where}", flush=True)
            os.kill(os.getpid(), sig)

    if moment == "planning":
        call = flows.pipeline.StalePlanner.__call__

        def planning(self, *args, **kwargs):
            kill("planning")
            return call(self, *args, **kwargs)

        flows.pipeline.StalePlanner.__call__ = planning
    elif moment == "report":
        write_html = tasks.report.html_page.write_html

        def report(*args, **kwargs):
            kill("report")
            return write_html(*args, **kwargs)

        tasks.report.html_page.write_html = report
    elif moment:
        run_cell = tasks.sweep.run_cell

        def cell(stage, *args, **kwargs):
            outcome = run_cell(stage, *args, **kwargs)
            if stage == moment:
                kill(moment)
            return outcome

        tasks.sweep.run_cell = cell


def child(request):
    os.chdir(request["root"])
    os.environ.update(request["env"])
    argv = request["argv"]
    if argv[0] == "dvc":
        os._exit(dvc.cli.main(argv[1:]))
    if request["moment"]:
        hooks(request["moment"], getattr(signal, request["signal"]))
    try:
        flows.cli.app(argv, prog_name="veilbench")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


print("ready", flush=True)
for line in sys.stdin:
    request = json.loads(line)
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    pid = os.fork()
    if pid == 0:
        os.dup2(log, 1)
        os.dup2(log, 2)
        try:
            child(request)
        finally:
            os._exit(70)
    os.close(log)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"exit": os.waitstatus_to_exitcode(status)}), flush=True)
'''


class Zygote:
    """The :data:`_ZYGOTE` process: :meth:`run` forks one ``veilbench``/``dvc`` command from it."""

    def __init__(self, env: dict[str, str]):
        self.env = env
        self.proc = subprocess.Popen([sys.executable, "-c", _ZYGOTE], cwd=REPO, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "ready", "the zygote did not start"

    def run(self, root: Path, argv: list[str], log: Path, moment: str = "", sig: str = "") -> tuple[int, str]:
        request = {"root": str(root), "argv": argv, "log": str(log), "moment": moment, "signal": sig,
                   "env": {"VEILBENCH_ROOT": str(root), "COLUMNS": "200"}}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        assert answer, "the zygote died"
        return json.loads(answer)["exit"], log.read_text()

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def _params() -> dict:
    params = trust_params()
    del params["datasets"]["mine"]
    return params


def _running_runs(root: Path) -> list[str]:
    import sqlite3

    with sqlite3.connect(root / "mlflow.db") as db:
        rows = db.execute("SELECT name FROM runs WHERE status = 'RUNNING'").fetchall()
    db.close()
    return [r[0] for r in rows]


def _temporaries(root: Path) -> list[str]:
    return [str(p.relative_to(root)) for top in ("data", "reports") for p in (root / top).rglob(".*")
            if p.name != ".gitignore"]


@pytest.fixture(scope="module")
def projects(tmp_path_factory: pytest.TempPathFactory, prefect_server: str,
             migrated_mlflow_db: Path) -> tuple[Zygote, dict[str, Path], Path]:
    """The zygote, one fresh project per signal, and the lock of an uninterrupted run of the same project."""
    from tests.e2e_root import copy_project
    from tests.trust.test_runtime_faults import _project

    base, env = _project(tmp_path_factory.mktemp("kill"), _params(), mlflow_db=migrated_mlflow_db)
    env = {**env, "PREFECT_API_URL": prefect_server, "PYTHONPATH": str(REPO)}
    env.pop("VEILBENCH_ROOT", None)
    copies = {name: copy_project(base, base.parent / name) for name in ("reference", *SIGNALS)}
    zygote = Zygote(env)
    code, out = zygote.run(copies["reference"], ["run"], base.parent / "reference.log")
    assert code == 0, out[-3000:]
    yield zygote, copies, copies["reference"] / "dvc.lock"
    zygote.close()


@pytest.mark.parametrize("sig", SIGNALS)
def test_killed_at_every_moment_then_resumed_records_what_an_uninterrupted_run_records(
        sig: str, projects: tuple[Zygote, dict[str, Path], Path]) -> None:
    from tests.trust.test_integrity_e2e import _read_lock, lock_disagreements

    zygote, copies, reference = projects
    root = copies[sig]
    expected = {"SIGINT": 130, "SIGTERM": 143, "SIGKILL": -signal.SIGKILL}[sig]
    for moment in MOMENTS:
        code, out = zygote.run(root, ["run"], root.parent / f"{sig}-{moment}.log", moment, sig)
        assert f"killing at {moment}" in out, (moment, out[-3000:])
        assert code == expected, (moment, code, out[-3000:])
        if sig != "SIGKILL":
            assert "interrupted" in out and "Traceback" not in out, (moment, out[-3000:])
        if (root / "dvc.lock").exists():
            assert lock_disagreements(root) == [], moment
    code, out = zygote.run(root, ["run"], root.parent / f"{sig}-resume.log")
    assert code == 0, out[-3000:]
    assert _read_lock(root)["stages"] == _read_lock(reference.parent)["stages"], "the resumed run recorded other bits"
    code, status = zygote.run(root, ["dvc", "status", "--json"], root.parent / f"{sig}-status.log")
    assert code == 0 and json.loads(status.strip().splitlines()[-1]) == {}, status[-3000:]
    assert not _temporaries(root), _temporaries(root)
    assert not _running_runs(root), "an interrupted MLflow run is still RUNNING"
    assert (root / "reports" / "sweeps" / SWEEP / "cells" / "default.json").is_file()
