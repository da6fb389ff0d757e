"""`veilbench validate` makes every check `veilbench run` makes before a stage runs, and says each
problem once, at the key where it is written, with a suggestion for a misspelt key."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from flows.preflight import dvc_param_keys, missing_dvc_params
from tests.conftest import REPO, tiny_params
from veilbench.config import ConfigError, validate_config


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with this repository's dvc.yaml and the tiny params, as the root."""
    shutil.copy(REPO / "dvc.yaml", tmp_path / "dvc.yaml")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(tiny_params(), sort_keys=False))
    monkeypatch.setenv("VEILBENCH_ROOT", str(tmp_path))
    monkeypatch.delenv("DVC_ROOT", raising=False)
    return tmp_path


def _validate(*args: str):
    from flows.cli import app

    return CliRunner().invoke(app, ["validate", *args])


def _messages(params: dict) -> list[str]:
    """The problem lines of the ConfigError that ``params`` raise."""
    with pytest.raises(ConfigError) as err:
        validate_config(params)
    return [line.strip() for line in str(err.value).splitlines()[1:]]


def test_a_params_file_without_report_fails_validate_as_the_dvc_run_would(project: Path) -> None:
    params = tiny_params()
    del params["report"]
    path = project / "no-report.yaml"
    path.write_text(yaml.safe_dump(params))
    validate_config(params)  # the schema alone accepts it (the report section has defaults)
    result = _validate("--params", str(path))
    assert result.exit_code == 2, result.output
    assert "report: missing" in result.output and "stage report reads it" in result.output
    assert "MissingParamsError" in result.output
    assert _validate("--params", str(path), "--no-dvc").exit_code == 0, "without DVC nothing reads the key"
    assert _validate().exit_code == 0, "the default params.yaml has every key"


def test_run_refuses_the_file_before_any_stage(project: Path) -> None:
    from flows.cli import app

    params = tiny_params()
    del params["report"]
    (project / "params.yaml").write_text(yaml.safe_dump(params))
    (project / ".dvc").mkdir()
    result = CliRunner().invoke(app, ["run"])
    assert result.exit_code == 2 and "report: missing" in result.output, result.output
    assert not (project / "data").exists() and not (project / "mlflow.db").exists()


def test_every_foreach_key_dvc_reads_is_checked(project: Path) -> None:
    raw = tiny_params()
    wanted = dvc_param_keys(project / "dvc.yaml", raw)
    assert wanted["sweeps.ss"] == ["release@ss", "integrate@ss", "attack@ss", "evaluate@ss"]
    assert wanted["datasets.digits"] == ["prepare@digits"] and "report" in wanted and "seed" in wanted
    assert not any("${" in key for key in wanted)
    del raw["seed"]
    path = project / "p.yaml"
    path.write_text(yaml.safe_dump(raw))
    [problem] = missing_dvc_params(path, project / "dvc.yaml")
    assert problem.startswith("seed: missing") and "prepare@digits" in problem


def test_a_misspelt_key_gets_a_suggestion() -> None:
    params = tiny_params()
    params["reprot"] = params.pop("report")
    params["sweeps"]["ss"]["params"]["epsilom"] = 1.0
    params["datasets"]["digits"]["tset_size"] = 0.2
    lines = _messages(params)
    assert any(line.startswith("reprot: unknown key") and "did you mean 'report'?" in line for line in lines), lines
    assert any(line.startswith("datasets.digits.tset_size") and "did you mean 'test_size'?" in line for line in lines)
    params = tiny_params()
    params["sweeps"]["ss"]["params"]["epsilom"] = 1.0
    [line] = _messages(params)
    assert line.startswith("sweeps.ss.params.epsilom: unknown key") and "did you mean 'epsilon'?" in line
    params = tiny_params()
    params["sweeps"]["ss"]["params"]["zzzz"] = 1.0
    [line] = _messages(params)
    assert "did you mean" not in line, "nothing close: no suggestion"


def test_a_shared_option_is_one_problem_not_one_per_cell() -> None:
    params = tiny_params()
    params["sweeps"]["ss"]["params"]["delta"] = 2.0  # shared by the sweep's 3 cells
    params["sweeps"]["ss"]["grid"] = {"epsilon": [4.0, -1.0, -2.0]}
    lines = _messages(params)
    delta = [line for line in lines if ".delta" in line]
    assert delta == [line for line in delta if line.startswith("sweeps.ss.params.delta:")] and len(delta) == 1, lines
    assert delta[0].endswith("(every cell)")
    eps = [line for line in lines if ".epsilon" in line]
    assert len(eps) == 2 and all(line.startswith("sweeps.ss.grid.epsilon:") for line in eps), lines
    assert any("(cell epsilon=-1.0)" in line for line in eps) and any("(cell epsilon=-2.0)" in line for line in eps)
    params = tiny_params()
    params["sweeps"]["ss"]["cells"] = [{"mechanism": "clean", "delta": 3.0}]
    [line] = _messages(params)
    assert line.startswith("sweeps.ss.cells.0.delta:"), line


def test_whole_file_checks_name_their_location_one_line_each() -> None:
    params = tiny_params()
    params["report"]["crossfamily_sweeps"] = ["nope"]
    params["report"]["frontiers"][0]["sweeps"] = ["s"]
    params["report"]["frontiers"].append({**params["report"]["frontiers"][0], "sweeps": ["ss-identity"],
                                          "family": "scoreshied"})
    params["report"]["columns"] = {"gcaa": ["utility_accuracy"]}
    lines = _messages(params)
    assert not any(line.startswith(":") for line in lines), lines
    assert any(line.startswith("report.crossfamily_sweeps: 'nope' is not in sweeps") for line in lines), lines
    assert any(line.startswith("report.frontiers.0.sweeps.0: 's' is not in sweeps") and "did you mean 'ss'?" in line
               for line in lines), lines
    assert any(line.startswith("report.frontiers.1.name:") for line in lines), "two frontiers, one figure file"
    assert any(line.startswith("report.frontiers.1.family:") and "'scoreshield'" in line for line in lines), lines
    assert any(line.startswith("report.columns.gcaa:") and "did you mean 'gca'?" in line for line in lines), lines


def test_a_frontier_sweep_of_another_family_is_refused() -> None:
    params = copy.deepcopy(tiny_params())
    params["report"]["frontiers"][0]["family"] = "gca"
    params["report"]["frontiers"][0]["sweeps"] = ["ss"]
    [line] = _messages(params)
    assert line.startswith("report.frontiers.0.sweeps.0: 'ss' is a scoreshield sweep, not gca"), line
