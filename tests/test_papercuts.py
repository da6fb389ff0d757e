"""Small things a user meets: file modes, `make clean-outputs`, ignored files, telemetry, start-up noise."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.conftest import REPO


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("umask", [0o022, 0o027], ids=["umask022", "umask027"])
def test_outputs_get_the_mode_of_a_new_file_not_a_private_temporary(tmp_path: Path, umask: int) -> None:
    from veilbench.io import atomic_write_text, write_bundle, write_json

    old = os.umask(umask)
    try:
        atomic_write_text(tmp_path / "a.txt", "x")
        write_json(tmp_path / "b.json", {"a": 1})
        out = write_bundle(tmp_path / "cell", {"x": np.arange(3)}, {"stage": "t"}, timings={"s": 1})
        write_bundle(tmp_path / "cell", {"x": np.arange(4)}, {"stage": "t"})  # replacing an existing one
        with open(tmp_path / "plain.txt", "w") as fh:  # what open() gives under this umask
            fh.write("x")
        (tmp_path / "plain-dir").mkdir()
    finally:
        os.umask(old)
    file_mode, dir_mode = _mode(tmp_path / "plain.txt"), _mode(tmp_path / "plain-dir")
    assert file_mode == 0o666 & ~umask and dir_mode == 0o777 & ~umask
    assert _mode(tmp_path / "a.txt") == file_mode and _mode(tmp_path / "b.json") == file_mode
    assert _mode(out) == dir_mode
    assert {p.name: _mode(p) for p in out.iterdir()} == {p.name: file_mode for p in out.iterdir()}


def _makefile_list(name: str) -> list[str]:
    text = (REPO / "Makefile").read_text()
    return re.search(rf"^{name} := (.*)$", text, re.M).group(1).split()


def test_clean_outputs_lists_exactly_the_cached_outputs_of_dvc_yaml() -> None:
    spec = yaml.safe_load((REPO / "dvc.yaml").read_text())
    cached = set()
    for stage in spec["stages"].values():
        for out in (stage.get("do", stage)).get("outs", []):
            path, opts = (out, {}) if isinstance(out, str) else next(iter(out.items()))
            if opts.get("cache", True):
                cached.add(path.split("/${")[0])
    assert set(_makefile_list("CACHED_OUTS")) == cached


def test_make_clean_outputs_removes_run_outputs_and_the_mlflow_artifacts_only(tmp_path: Path) -> None:
    shutil.copy(REPO / "Makefile", tmp_path / "Makefile")
    for d in _makefile_list("CACHED_OUTS"):
        (tmp_path / d / "x").mkdir(parents=True)
        (tmp_path / d / "x" / "manifest.json").write_text("{}")
        (tmp_path / d / ".gitignore").write_text("/x\n")
    for f in ("mlflow.db", "reports/run.log", "data/evaluate/s/c/timings.json", "mlruns/1/a/artifacts/f.json",
              "dvc_plots/index.html", "reports/sweeps/s/summary.json", "data/raw/mine.npz", "params.yaml",
              ".dvc/cache/files/md5/ab/cd"):
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("x")
    out = subprocess.run(["make", "-s", "clean-outputs"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    for d in _makefile_list("CACHED_OUTS"):
        assert sorted(p.name for p in (tmp_path / d).iterdir()) == [".gitignore"], "git tracks DVC's .gitignore"
    for gone in ("mlflow.db", "mlruns", "reports/run.log", "data/evaluate", "dvc_plots"):
        assert not (tmp_path / gone).exists(), gone
    for kept in ("reports/sweeps/s/summary.json", "data/raw/mine.npz", "params.yaml", ".dvc/cache/files/md5/ab/cd"):
        assert (tmp_path / kept).is_file(), kept


def test_dvc_plots_page_is_ignored_by_git() -> None:
    out = subprocess.run(["git", "check-ignore", "-q", "dvc_plots/index.html"], cwd=REPO, timeout=30)
    assert out.returncode == 0


def test_telemetry_is_off_in_every_entry_point_not_only_under_make(tmp_path: Path) -> None:
    """A shell without the Makefile's exports: the veilbench command and a stage process turn
    MLflow's and Prefect's usage reporting off before loading them."""
    from tasks.telemetry import TELEMETRY_OFF

    env = {k: v for k, v in os.environ.items() if k not in (*TELEMETRY_OFF, "DO_NOT_TRACK")}
    env["PREFECT_HOME"] = str(tmp_path)
    probe = ("import {module}, json, os; from mlflow.telemetry.utils import is_telemetry_disabled; "
             "from prefect.settings import get_current_settings as s; "
             "print(json.dumps([is_telemetry_disabled(), s().server.analytics_enabled, os.environ.get('DVC_NO_ANALYTICS')]))")
    for module in ("flows.cli", "flows.release"):
        out = subprocess.run([sys.executable, "-c", probe.format(module=module)], cwd=REPO, env=env,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        assert json.loads(out.stdout.splitlines()[-1]) == [True, False, "1"], module
    env["MLFLOW_DISABLE_TELEMETRY"] = "false"  # a value the user set is kept
    from tasks.telemetry import telemetry_off

    assert "MLFLOW_DISABLE_TELEMETRY" not in telemetry_off(env) and env["MLFLOW_DISABLE_TELEMETRY"] == "false"


def test_a_new_mlflow_store_starts_without_info_lines(tmp_path: Path) -> None:
    code = ("from pathlib import Path; from tasks.tracking import open_store; "
            f"open_store(Path({str(tmp_path)!r}))")
    env = {k: v for k, v in os.environ.items() if k not in ("VEILBENCH_TRACKING_URI", "DVC_ROOT")}
    env["VEILBENCH_ROOT"] = str(tmp_path)
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert (tmp_path / "mlflow.db").is_file()
    assert "INFO" not in out.stdout + out.stderr, out.stderr
