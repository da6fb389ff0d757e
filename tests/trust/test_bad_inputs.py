"""Bad input, end to end: params.yaml, user data files and the command line.

Every case is one row of a table. A case must

* fail with a message naming what is wrong (each expected fragment must appear in it);
* fail the right way: ``ConfigError`` / ``ValidationError`` from the stage functions, a non-zero
  exit (2, usage or validation error) from the CLI, never a traceback;
* leave ``data/``, ``reports/`` and ``mlflow.db`` byte-for-byte as they were, in a work folder that
  already holds a complete tiny run (``trust_root``), so an existing output must survive too.

Params cases run twice: through a stage (``tasks.sweep.run_sweep_stage("release", …)``) and through
``veilbench validate``. Data-file cases enter as a user dataset
``datasets: {mine: {source: file, options: {path: ...}}}`` and run ``tasks.prepare.prepare``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tests.trust.conftest import SWEEP, trust_params, tree_digest, valid_user_arrays, with_user_path, write_params
from veilbench.config import ConfigError
from veilbench.validation import ValidationError

REPO = Path(__file__).resolve().parents[2]


def _flat(text: str) -> str:
    """Collapse whitespace (rich wraps long lines) so fragments match across line breaks."""
    return " ".join(text.split())


def _assert_names(message: str, fragments: tuple[str, ...]) -> None:
    flat = _flat(message)
    for frag in fragments:
        assert frag in flat, f"message does not name {frag!r}: {flat!r}"


# ------------------------------------------------------------------------------------------------
# params.yaml cases: a mutation of the valid params (or raw text) → fragments the error must name
# ------------------------------------------------------------------------------------------------


def _set(path: str, value: object) -> Callable[[dict], dict]:
    """A mutation setting the dotted key ``path`` (created if absent) to ``value``."""

    def mutate(params: dict) -> dict:
        node = params
        *parents, leaf = path.split(".")
        for key in parents:
            node = node[key]
        node[leaf] = value
        return params

    return mutate


def _set_many(values: dict[str, object]) -> Callable[[dict], dict]:
    """A mutation setting several dotted keys at once."""

    def mutate(params: dict) -> dict:
        for path, value in values.items():
            params = _set(path, value)(params)
        return params

    return mutate


def _drop(path: str) -> Callable[[dict], dict]:
    def mutate(params: dict) -> dict:
        node = params
        *parents, leaf = path.split(".")
        for key in parents:
            node = node[key]
        del node[leaf]
        return params

    return mutate


def _rename_dataset(params: dict) -> dict:
    params["datasets"]["my data"] = params["datasets"].pop("mine")
    return params


def _cases(table: list[tuple]) -> list:
    return [c[0] for c in table]


SW = f"sweeps.{SWEEP}"
CELL = f"sweeps.{SWEEP}.params"  # a cell option is named where it is written, once

PARAMS_CASES: list[tuple[str, Callable[[dict], dict | str] | str, tuple[str, ...]]] = [
    ("unknown-top-level-key", _set("sedd", 1), ("sedd", "unknown key")),
    ("unknown-dataset-key", _set("datasets.digits.n_partys", 3), ("datasets.digits.n_partys", "unknown key")),
    ("unknown-family-option", _set(f"{SW}.params.epsilonn", 1.0), (f"{CELL}.epsilonn", "unknown key")),
    ("epsilon-zero", _set(f"{SW}.params.epsilon", 0.0), (f"{CELL}.epsilon", "greater than 0", "0.0")),
    ("epsilon-negative", _set(f"{SW}.params.epsilon", -1.0), (f"{CELL}.epsilon", "greater than 0", "-1.0")),
    ("epsilon-nan", _set(f"{SW}.params.epsilon", float("nan")), (f"{CELL}.epsilon",)),
    ("epsilon-not-a-number", _set(f"{SW}.params.epsilon", "lots"), (f"{CELL}.epsilon", "valid number")),
    ("epsilon-infinite", _set(f"{SW}.params.epsilon", float("inf")), (f"{CELL}.epsilon", "finite number in (0, ∞)",
                                                                      "got inf", "mechanism: clean")),
    ("classical-beyond-validity", _set_many({f"{SW}.params.mechanism": "gaussian", f"{SW}.params.epsilon": 16.0,
                                             f"{SW}.params.calibrator": "classical"}),
     (CELL, "epsilon: calibrator 'classical'", "only for epsilon in (0, 8.42]", "at epsilon=16",
      "allow_invalid_calibration")),
    ("audit-releases-too-few", _set(f"{SW}.params.audit_releases", 10),
     (f"{CELL}.audit_releases", "greater than or equal to 100")),
    ("delta-zero", _set(f"{SW}.params.delta", 0.0), (f"{CELL}.delta", "greater than 0")),
    ("delta-one", _set(f"{SW}.params.delta", 1.0), (f"{CELL}.delta", "less than 1")),
    ("delta-above-one", _set(f"{SW}.params.delta", 1.5), (f"{CELL}.delta", "less than 1", "1.5")),
    ("epsilon-grid-with-a-bad-value", _set(f"{SW}.grid", {"epsilon": [1.0, -2.0]}),
     (f"sweeps.{SWEEP}.grid.epsilon", "greater than 0", "cell epsilon=-2.0")),
    ("unknown-mechanism", _set(f"{SW}.params.mechanism", "laplace"), (f"{CELL}.mechanism", "laplace")),
    ("unknown-family", _set(f"{SW}.family", "nope"), (f"{SW}.family", "must be one of", "nope")),
    ("missing-embedding-reference", _set(f"{SW}.embedding", "ghost"), (f"{SW}.embedding", "ghost")),
    ("missing-dataset-reference", _set("embeddings.digits-pca.dataset", "ghost"),
     ("embeddings.digits-pca.dataset", "ghost")),
    ("unknown-source", _set("datasets.digits.source", "nope"), ("datasets.digits.source", "must be one of")),
    ("test-size-one", _set("datasets.digits.test_size", 1.0), ("datasets.digits.test_size", "less than 1")),
    ("zero-parties", _set("datasets.digits.n_parties", 0), ("datasets.digits.n_parties", "greater than or equal to 1")),
    ("parties-wrong-type", _set("datasets.digits.n_parties", "three"), ("datasets.digits.n_parties", "integer")),
    ("more-parties-than-records", _set("datasets.digits.n_parties", 500), ("datasets.digits.n_parties", "more parties")),
    ("unknown-encoder", _set("embeddings.digits-pca.encoder", "pcaa"), ("embeddings.digits-pca.encoder", "pcaa")),
    ("dim-zero", _set("embeddings.digits-pca.dim", 0), ("embeddings.digits-pca.dim", "greater than or equal to 1")),
    ("negative-seed", _set(f"{SW}.seeds", [-1]), (f"{SW}.seeds", "non-negative")),
    ("repeated-seed", _set(f"{SW}.seeds", [1, 1]), (f"{SW}.seeds", "distinct")),
    ("empty-grid-axis", _set(f"{SW}.grid", {"epsilon": []}), (f"{SW}.grid", "epsilon", "no values")),
    ("bad-dataset-name", _rename_dataset, ("datasets.my data", "letters, digits")),
    ("datasets-missing", _drop("datasets"), ("datasets", "required")),
    ("top-level-list", "- seed: 0\n- datasets: {}\n", ("top level must be a mapping", "list")),
    ("empty-params-file", "", ("top level must be a mapping", "NoneType")),
    ("not-yaml", "seed: 0\ndatasets: {digits: [1, 2\n  oops: }\n", ("not valid YAML",)),
    ("tab-indented-yaml", "seed: 0\ndatasets:\n\tdigits: {}\n", ("not valid YAML",)),
]


@pytest.mark.parametrize("case", _cases(PARAMS_CASES))
def test_bad_params_are_rejected_naming_the_key(case: str, trust_root: Path) -> None:
    from flows.cli import app
    from tasks.sweep import run_sweep_stage

    _, mutation, fragments = next(c for c in PARAMS_CASES if c[0] == case)
    content = mutation if isinstance(mutation, str) else mutation(with_user_path(trust_params(), trust_root, "user/mine.npz"))
    case_file = write_params(trust_root / "case.yaml", content)
    before = tree_digest(trust_root)

    with pytest.raises(ConfigError) as err:
        run_sweep_stage("release", SWEEP, params_path=case_file, root=trust_root)
    _assert_names(str(err.value), fragments)

    result = CliRunner().invoke(app, ["validate", "--params", str(case_file)])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "error:" in result.output
    _assert_names(result.output, fragments)
    assert tree_digest(trust_root) == before


def test_missing_params_file_is_named(trust_root: Path) -> None:
    from flows.cli import app
    from tasks.sweep import run_sweep_stage

    before = tree_digest(trust_root)
    missing = trust_root / "nowhere" / "params.yaml"
    with pytest.raises(ConfigError, match="file not found"):
        run_sweep_stage("release", SWEEP, params_path=missing, root=trust_root)
    result = CliRunner().invoke(app, ["validate", "--params", str(missing)])
    assert result.exit_code == 2
    _assert_names(result.output, ("file not found", "params.yaml"))
    assert tree_digest(trust_root) == before


def test_default_params_yaml_is_validated_before_any_stage(trust_root: Path) -> None:
    """A bad ``params.yaml`` at the root (the default path) stops every stage, not just validate."""
    from flows.cli import app
    from tasks.embed import embed
    from tasks.prepare import prepare

    params = with_user_path(trust_params(), trust_root, "user/mine.npz")
    params["sweeps"][SWEEP]["params"]["delta"] = 2.0
    write_params(trust_root / "params.yaml", params)
    before = tree_digest(trust_root)
    for stage, key in ((prepare, "digits"), (embed, "digits-pca")):
        with pytest.raises(ConfigError, match=r"delta"):
            stage(key, root=trust_root)
    result = CliRunner().invoke(app, ["validate"])
    assert result.exit_code == 2
    _assert_names(result.output, (f"{CELL}.delta", "less than 1"))
    assert tree_digest(trust_root) == before


# ------------------------------------------------------------------------------------------------
# user data files: how to write the file → fragments the error must name
# ------------------------------------------------------------------------------------------------


def _npz(**overrides: object) -> Callable[[Path], None]:
    """Write a valid user ``.npz`` with some arrays replaced (``None`` drops the array)."""

    def write(path: Path) -> None:
        arrays = {**valid_user_arrays(), **overrides}
        np.savez(path, **{k: v for k, v in arrays.items() if v is not None})

    return write


def _with_nan(path: Path) -> None:
    arrays = valid_user_arrays()
    arrays["X"][3, 1] = np.nan
    np.savez(path, **arrays)


def _with_inf(path: Path) -> None:
    arrays = valid_user_arrays()
    arrays["X"][0, 0] = -np.inf
    np.savez(path, **arrays)


def _pickle_inside(path: Path) -> None:
    arrays = valid_user_arrays()
    np.savez(path, X=arrays["X"], y=np.array([{"evil": 1}] * 60, dtype=object))


def _truncated(path: Path) -> None:
    _npz()(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _text(content: str) -> Callable[[Path], None]:
    return lambda path: path.write_text(content)


def _csv_rows(n: int = 12) -> str:
    rows = [f"{i * 0.5},{(i * 7) % 5},{i % 2}" for i in range(n)]
    return "a,b,label\n" + "\n".join(rows) + "\n"


X_OK = valid_user_arrays()["X"]

FILE_CASES: list[tuple[str, str, Callable[[Path], None] | None, tuple[str, ...]]] = [
    ("missing-file", "absent.npz", None, ("path", "file not found", "absent.npz")),
    ("empty-npz", "empty.npz", _text(""), ("empty.npz", "not a readable .npz")),
    ("truncated-npz", "cut.npz", _truncated, ("cut.npz", "truncated or corrupt")),
    ("not-an-npz", "fake.npz", _text("X,y\n1,2\n"), ("fake.npz", "not a readable .npz")),
    ("pickle-inside-npz", "pickled.npz", _pickle_inside, ("pickled.npz", "pickled/object array")),
    ("npz-without-y", "noy.npz", _npz(y=None), ("noy.npz", "missing ['y']")),
    ("npz-without-X", "nox.npz", _npz(X=None), ("nox.npz", "missing ['X']")),
    ("nan-features", "nan.npz", _with_nan, ("X", "NaN or infinite")),
    ("inf-features", "inf.npz", _with_inf, ("X", "NaN or infinite")),
    ("one-dimensional-X", "flat.npz", _npz(X=np.arange(60.0)), ("X", "2-d array", "(60,)")),
    ("scalar-X", "scalar.npz", _npz(X=np.float64(3.0)), ("X", "2-d array")),
    ("no-rows", "norows.npz", _npz(X=np.zeros((0, 5)), y=np.zeros(0, dtype=int)), ("X", "at least 2 rows", "got 0")),
    ("one-row", "onerow.npz", _npz(X=np.ones((1, 5)), y=np.array([0])), ("X", "at least 2 rows", "got 1")),
    ("label-count-mismatch", "short_y.npz", _npz(y=np.arange(59) % 3), ("y", "expected 60 labels", "got 59")),
    ("two-dimensional-labels", "y2d.npz", _npz(y=(np.arange(60) % 3).reshape(60, 1)), ("y", "1-d label vector")),
    ("single-class", "oneclass.npz", _npz(y=np.zeros(60, dtype=int)), ("y", "at least 2 classes", "got 1")),
    ("fractional-labels", "fraclabels.npz", _npz(y=(np.arange(60) % 3) + 0.5), ("y", "whole numbers")),
    ("nan-labels", "nanlabels.npz", _npz(y=np.where(np.arange(60) == 4, np.nan, np.arange(60) % 3)), ("y", "NaN")),
    ("string-features", "strX.npz", _npz(X=X_OK.astype(str)), ("X", "numeric array", "<U")),
    ("string-labels", "strlabels.npz", _npz(y=np.array(["a", "b", "c"] * 20)), ("y", "integers", "<U")),
    ("complex-features", "complex.npz", _npz(X=X_OK + 1j), ("X", "complex")),
    ("unsupported-suffix", "data.txt", _text("1 2 3\n"), ("unsupported file type", ".txt")),
    ("empty-csv", "empty.csv", _text(""), ("empty.csv", "cannot be read")),
    ("header-only-csv", "header.csv", _text("a,b,label\n"), ("header.csv", "no rows")),
    ("csv-without-label-column", "nolabel.csv", _text("a,b\n1,2\n3,4\n"), ("label_column", "'label'")),
    ("csv-non-numeric-feature", "text.csv", _text("a,b,label\nx,1,0\ny,2,1\nz,3,0\n"), ("non-numeric", "'a'")),
    ("csv-missing-value", "hole.csv", _text(_csv_rows().replace("\n3.5,4,1\n", "\n,4,1\n")), ("X", "NaN")),
    ("csv-single-class", "oneclass.csv", _text(_csv_rows().replace(",1\n", ",0\n")), ("y", "at least 2 classes")),
]

def _reject_file_case(case: str, root: Path) -> str:
    """Run ``prepare`` on the user dataset written by ``case``; return the ValidationError message."""
    from tasks.prepare import prepare

    _, name, write, _ = next(c for c in FILE_CASES if c[0] == case)
    path = root / "user" / name
    if write is not None:
        write(path)
    case_file = write_params(root / "case.yaml", with_user_path(trust_params(), root, path))
    try:
        prepare("mine", params_path=case_file, root=root)
    except ValidationError as exc:
        return str(exc)
    except Exception as exc:  # noqa: BLE001 — any other type is the failure being tested for
        pytest.fail(f"{case}: raised {type(exc).__name__} instead of ValidationError: {exc}")
    raise AssertionError(f"{case}: the bad file was accepted")


@pytest.mark.parametrize("case", _cases(FILE_CASES))
def test_bad_data_files_are_rejected_and_outputs_survive(case: str, trust_root: Path) -> None:
    before = tree_digest(trust_root, mlflow_store=False)
    message = _reject_file_case(case, trust_root)
    _assert_names(message, next(c for c in FILE_CASES if c[0] == case)[3])
    assert tree_digest(trust_root, mlflow_store=False) == before, "a rejected input changed data/ or reports/"


def test_bad_data_files_leave_the_mlflow_store_as_it_was(trust_root: Path) -> None:
    changed = []
    for case in (c[0] for c in FILE_CASES):
        before = tree_digest(trust_root)
        _reject_file_case(case, trust_root)
        if tree_digest(trust_root) != before:
            changed.append(case)
    assert not changed, f"these rejected files changed mlflow.db: {changed}"


# ------------------------------------------------------------------------------------------------
# the command line: arguments → exit code and fragments of the message
# ------------------------------------------------------------------------------------------------

CLI_CASES: list[tuple[str, list[str], tuple[str, ...]]] = [
    ("unknown-stage", ["run", "--stage", "bogus"], ("--stage must be one of", "bogus")),
    ("unknown-command", ["frobnicate"], ("No such command", "frobnicate")),
    ("unknown-option", ["validate", "--nope"], ("No such option", "--nope")),
    ("compare-without-experiment", ["compare"], ("give sides to compare", "-e EXPERIMENT")),
    ("compare-unknown-experiment", ["compare", "-e", "no-such-experiment"], ("no-such-experiment",)),
    ("params-is-a-folder", ["validate", "--params", "data"], ("file not found", "data")),
    ("run-with-bad-params", ["run", "--no-dvc", "--params", "BAD"], ("delta", "less than 1")),
    ("report-with-missing-params", ["report", "--params", "missing.yaml"], ("file not found", "missing.yaml")),
]


@pytest.mark.parametrize("case", [c[0] for c in CLI_CASES])
def test_bad_cli_usage_exits_non_zero_with_a_message(case: str, trust_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from flows.cli import app

    _, args, fragments = next(c for c in CLI_CASES if c[0] == case)
    bad = with_user_path(trust_params(), trust_root, "user/mine.npz")
    bad["sweeps"][SWEEP]["params"]["delta"] = 7.0
    write_params(trust_root / "bad.yaml", bad)
    monkeypatch.chdir(trust_root)
    args = [str(trust_root / "bad.yaml") if a == "BAD" else a for a in args]
    before = tree_digest(trust_root)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    _assert_names(result.output, fragments)
    assert tree_digest(trust_root) == before


@pytest.mark.slow
def test_installed_command_rejects_bad_params_and_bad_stage(trust_root: Path) -> None:
    """The real console script (two subprocesses): exit status 2, message on stderr, no traceback."""
    exe = REPO / ".venv" / "bin" / "veilbench"
    if not exe.is_file():
        exe = Path(sys.executable).with_name("veilbench")
    bad = with_user_path(trust_params(), trust_root, "user/mine.npz")
    bad["sweeps"][SWEEP]["params"]["epsilon"] = -1.0
    case_file = write_params(trust_root / "bad.yaml", bad)
    env = {**os.environ, "VEILBENCH_ROOT": str(trust_root), "COLUMNS": "200"}
    before = tree_digest(trust_root)
    for args, fragments in (
        (["validate", "--params", str(case_file)], (f"{CELL}.epsilon", "greater than 0")),
        (["run", "--stage", "nope"], ("--stage must be one of", "nope")),
    ):
        proc = subprocess.run([str(exe), *args], cwd=trust_root, env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, (args, proc.returncode, proc.stderr[-2000:])
        assert "Traceback" not in proc.stderr
        _assert_names(proc.stderr, fragments)
    assert tree_digest(trust_root) == before


def test_valid_params_pass_validation(trust_root: Path) -> None:
    """The control: the same work folder's valid params validate with exit 0 and a cell count."""
    from flows.cli import app

    result = CliRunner().invoke(app, ["validate"])
    assert result.exit_code == 0, result.output
    assert "params OK" in result.output and "1 cell(s)" in _flat(result.output)
