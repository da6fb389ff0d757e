"""``veilbench run --sweep NAME`` runs one sweep (and what it needs), with DVC or without."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from flows.cli import app, benchmark_command, sweep_targets
from tests.conftest import tiny_params


def test_dvc_targets_are_the_sweeps_stage_instances() -> None:
    assert sweep_targets(["ss", "ss-identity"], None) == ["evaluate@ss", "evaluate@ss-identity"]
    assert sweep_targets(["ss"], "release") == ["release@ss"]
    assert sweep_targets([], "report") == ["report"] and sweep_targets([], None) is None


def test_no_dvc_passes_each_sweep_to_the_benchmark_flow() -> None:
    cmd = benchmark_command(Path("p.yaml"), 2, None, ["a", "b"])
    assert cmd[1:] == ["-m", "flows.benchmark", "--params", "p.yaml", "--workers", "2", "--sweep", "a", "--sweep", "b"]
    assert "--sweep" not in benchmark_command(None, 1, None, [])


def test_an_unknown_sweep_is_one_error_line_and_exit_2(tmp_path: Path, monkeypatch) -> None:
    params = tmp_path / "params.paper.yaml"
    params.write_text(yaml.safe_dump(tiny_params(), sort_keys=False))
    monkeypatch.setenv("VEILBENCH_ROOT", str(tmp_path))
    monkeypatch.delenv("DVC_ROOT", raising=False)
    result = CliRunner().invoke(app, ["run", "--no-dvc", "--params", str(params), "--sweep", "nope"])
    assert result.exit_code == 2
    assert "error: --sweep: ['nope'] not in the params file's sweeps (ss, ss-identity)" in " ".join(result.output.split())
    assert not (tmp_path / "data").exists() and not (tmp_path / "mlflow.db").exists()
    result = CliRunner().invoke(app, ["run", "--no-dvc", "--params", str(params), "--sweep", "ss", "--stage", "report"])
    assert result.exit_code == 2 and "--stage report with --sweep" in result.output
