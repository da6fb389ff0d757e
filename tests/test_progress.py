"""A run a person can follow: stage and cell progress with an ETA, warnings to the run log, a
summary, and Ctrl-C that stops within 5 s leaving nothing half-written."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest
import yaml

from tasks.progress import RunProgress, captured_warnings, duration, past_cell_seconds
from tests.conftest import REPO, tiny_params


def _timings(root: Path, stage: str, sweep: str, cell: str, seconds: list[float]) -> None:
    """A cell's timings sidecar, as :func:`tasks.sweep.run_cell` writes it (one entry per seed)."""
    per_seed = {str(i): {"seconds": s, "started": 1.0e9 + i} for i, s in enumerate(seconds)}
    path = root / "data" / stage / sweep / cell / "timings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"per_seed": per_seed}))


def test_past_cell_times_come_from_the_timings_sidecars_not_the_outputs(tmp_path: Path) -> None:
    _timings(tmp_path, "release", "s", "a", [1.0, 2.5])
    _timings(tmp_path, "evaluate", "s", "a", [0.5])
    assert past_cell_seconds(tmp_path, "release@s", "a") == 3.5
    assert past_cell_seconds(tmp_path, "evaluate@s", "a") == 0.5
    assert past_cell_seconds(tmp_path, "release@s", "missing") is None
    # an output written before timings left the outputs is not read: no sidecar, no past time
    old = tmp_path / "data" / "release" / "s" / "b" / "manifest.json"
    old.parent.mkdir(parents=True)
    old.write_text(json.dumps({"info": {"0": {"seconds": 9.0}}}))
    assert past_cell_seconds(tmp_path, "release@s", "b") is None
    (old.parent / "timings.json").write_text("{not json")
    assert past_cell_seconds(tmp_path, "release@s", "b") is None, "an unreadable sidecar is no error"


def test_plain_progress_prints_one_line_per_stage_with_counts_eta_and_a_summary(tmp_path: Path) -> None:
    for cell, t in (("a", 10.0), ("b", 30.0)):
        _timings(tmp_path, "release", "s", cell, [t])
    out = io.StringIO()
    with RunProgress(["prepare@d", "release@s", "report"], tmp_path, workers=2, stream=out) as p:
        assert not p.live, "not a terminal: plain lines"
        p.stage_started("prepare@d")
        p.stage_done("prepare@d")
        p.stage_started("release@s")
        p.stage_cells("release@s", ["a", "b", "c"])  # c never ran: counts as the median (20 s)
        assert p.eta() == pytest.approx(1.0 * (10 + 30 + 20) / 2), "nothing done yet: all pending, share 1"
        p.cell_done("release@s", "a", "reused")
        assert p.eta() == pytest.approx((0 + 1) / (1 + 1) * (30 + 20) / 2), "a reuse lowers the expected share"
        p.cell_done("release@s", "b", "computed")
        p.cell_done("release@s", "c", "reused")
        p.stage_done("release@s")
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and lines[0].startswith("[1/3] prepare@d in ")
    assert lines[1].startswith("[2/3] release@s: 3 cells (1 computed, 2 reused) in ") and "ETA" in lines[1]
    assert p.summary().startswith("2 stage(s), 3 cells: 1 computed, 2 reused, ")


def test_live_progress_draws_on_a_terminal_and_still_prints_stage_lines(tmp_path: Path) -> None:
    out = io.StringIO()
    with RunProgress(["release@s"], tmp_path, stream=out, live=True) as p:
        p.stage_started("release@s")
        p.stage_cells("release@s", ["a", "b"])
        assert p._progress is not None and len(p._progress.tasks) == 2, "overall bar and the stage's cell bar"
        p.cell_done("release@s", "a", "computed")
        assert p._progress.tasks[1].completed == 1 and "1 computed" in p._progress.tasks[1].description
        p.cell_done("release@s", "b", "reused")
        p.stage_done("release@s")
    assert "[1/1] release@s: 2 cells (1 computed, 1 reused)" in out.getvalue()


def test_duration_reads_like_a_person_would_write_it() -> None:
    assert duration(12.34) == "12.3 s" and duration(252) == "4 min 12 s" and duration(3720) == "1 h 02 min"


def test_warnings_from_any_thread_go_to_the_log_not_the_console(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    log = tmp_path / "reports" / "run.log"
    with captured_warnings(log) as counter:
        warnings.warn("from the main thread", UserWarning, stacklevel=1)
        t = threading.Thread(target=lambda: warnings.warn("from a worker", RuntimeWarning, stacklevel=1))
        t.start()
        t.join()
    assert counter.count == 2
    text = log.read_text()
    assert "UserWarning: from the main thread" in text and "RuntimeWarning: from a worker" in text
    assert "from a worker" not in capsys.readouterr().err
    with pytest.warns(UserWarning):  # the previous handling is back afterwards
        warnings.warn("after", UserWarning, stacklevel=1)


@pytest.mark.slow
def test_ctrl_c_stops_a_run_within_5_s_and_a_rerun_finishes(tmp_path: Path, prefect_server: str,
                                                            migrated_mlflow_db: Path) -> None:
    import shutil

    from tests.e2e_root import init_project
    from tests.e2e_root import run as run_checked

    params = tiny_params()
    # enough cells that the run is still busy when Ctrl-C comes
    params["sweeps"]["ss"]["grid"]["epsilon"] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0]
    params["sweeps"]["ss"]["seeds"] = [0, 1, 2]
    root = tmp_path / "project"
    env = {**os.environ, "PREFECT_API_URL": prefect_server, "VEILBENCH_ROOT": str(root), "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    init_project(root, params, env)
    run_checked(["git", "add", "-A"], root, env)
    run_checked(["git", "commit", "-qm", "init"], root, env)
    shutil.copy(migrated_mlflow_db, root / "mlflow.db")  # migrated, as after a first run (not what this test is about)
    run = [sys.executable, "-m", "flows.cli", "run"]
    proc = subprocess.Popen(run, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    started = threading.Event()

    def read() -> None:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("[") and ("embed@" in line or "release@" in line):
                started.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert started.wait(300), "".join(lines)
    time.sleep(0.5)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        code = proc.wait(timeout=5.0)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("veilbench run did not stop within 5 s of SIGINT:\n" + "".join(lines))
    took = time.monotonic() - t0
    reader.join(5)
    out = "".join(lines)
    assert code == 130 and took < 5.0, out
    assert "done:" not in out, "the run was interrupted before its end"
    assert "Traceback" not in out, out
    for path in (root / "data").rglob("*.json"):
        if not any(part.startswith(".") for part in path.relative_to(root).parts):
            json.loads(path.read_text())  # every file under its final name is complete
    if (root / "dvc.lock").is_file():
        yaml.safe_load((root / "dvc.lock").read_text())
    again = subprocess.run(run, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert (root / "reports" / "index.md").is_file()
    status = subprocess.run([sys.executable, "-m", "dvc", "status"], cwd=root, env=env, capture_output=True,
                            text=True, timeout=300)
    assert "up to date" in (status.stdout + status.stderr).lower()


def test_eta_counts_planned_stages_not_begun_from_their_timings(tmp_path: Path) -> None:
    _timings(tmp_path, "release", "s", "a", [4.0])
    _timings(tmp_path, "evaluate", "t", "x", [6.0, 10.0])  # a later stage of another sweep
    with RunProgress(["release@s", "evaluate@t"], tmp_path, workers=2, stream=io.StringIO()) as p:
        p.stage_started("release@s")
        p.stage_cells("release@s", ["a"])
        assert p.eta() == pytest.approx((4.0 + 16.0) / 2), "evaluate@t has not begun: its sidecars count"
        p.cell_done("release@s", "a", "computed")
        p.stage_done("release@s")
        assert p.eta() == pytest.approx(16.0 / 2)


def test_eta_says_first_run_estimating_when_a_stage_never_ran(tmp_path: Path) -> None:
    out = io.StringIO()
    with RunProgress(["release@new", "attack@new"], tmp_path, stream=out) as p:
        p.stage_started("release@new")
        p.stage_cells("release@new", ["a", "b"])
        p.cell_done("release@new", "a", "computed")
        p.cell_done("release@new", "b", "computed")
        p.stage_done("release@new")
    assert p.eta() is None and "ETA first run: estimating" in out.getvalue()
