"""``veilbench run --sweep NAME`` runs one sweep (and what it needs), with DVC or without."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from flows.cli import app, sweep_targets
from tests.conftest import tiny_params


def test_dvc_targets_are_the_sweeps_stage_instances() -> None:
    assert sweep_targets(["ss", "ss-identity"], None) == ["evaluate@ss", "evaluate@ss-identity"]
    assert sweep_targets(["ss"], "release") == ["release@ss"]
    assert sweep_targets([], "report") == ["report"] and sweep_targets([], None) is None


def test_no_dvc_passes_each_sweep_to_the_in_process_flow(tmp_path: Path, monkeypatch) -> None:
    import contextlib

    import flows.benchmark
    import flows.server

    params = tmp_path / "other.yaml"
    params.write_text(yaml.safe_dump(tiny_params(), sort_keys=False))
    monkeypatch.setenv("VEILBENCH_ROOT", str(tmp_path))
    monkeypatch.delenv("DVC_ROOT", raising=False)
    seen = {}

    class _Server:
        def wait_until_ready(self) -> str:
            return "http://127.0.0.1:9/api"

    monkeypatch.setattr(flows.server, "booting_prefect_server", lambda root: contextlib.nullcontext(_Server()))

    def fake_run(params_path, sweeps, workers, dask_address, root, **kw):
        seen.update(params=params_path, sweeps=sweeps, workers=workers, root=root)
        class _Display:
            def summary(self) -> str:
                return "done"

        return "report.md", _Display()

    monkeypatch.setattr(flows.benchmark, "run_with_progress", fake_run)
    result = CliRunner().invoke(app, ["run", "--no-dvc", "--params", str(params), "--sweep", "ss-identity"])
    assert result.exit_code == 0, result.output
    assert seen["sweeps"] == ["ss-identity"] and seen["params"] == str(params.resolve())


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
    assert result.exit_code == 2 and "error: --stage" in result.output  # --no-dvc runs whole sweeps
    import typer

    from flows.cli import _check_sweeps

    with pytest.raises(typer.Exit) as stop:  # with DVC: a sweep has no report stage of its own
        _check_sweeps(["ss"], params, "report")
    assert stop.value.exit_code == 2
