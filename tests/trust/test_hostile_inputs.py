"""Hostile and careless input, end to end: params files and user data files a careless or hostile
user could write, each rejected before any work with a message naming the file or field.

Like ``test_bad_inputs.py`` every case is one row of a table and must

* fail with a message naming what is wrong (each expected fragment must appear in it);
* fail as a user error: ``ConfigError`` / ``ValidationError`` (a ``UsageError``) from the stage
  functions, exit status 2 from the command line, no traceback;
* leave ``data/``, ``reports/`` and ``mlflow.db`` of a populated work folder byte-for-byte as
  they were, and write nothing outside it.
"""

from __future__ import annotations

import gzip
import io
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from tests.trust.conftest import (
    SWEEP,
    tree_digest,
    trust_params,
    valid_user_arrays,
    with_user_path,
    write_params,
)
from tests.trust.test_bad_inputs import _set
from veilbench.config import ConfigError
from veilbench.validation import UsageError, ValidationError


def _flat(text: str) -> str:
    return " ".join(text.split())


def _assert_names(message: str, fragments: tuple[str, ...]) -> None:
    flat = _flat(message)
    for frag in fragments:
        assert frag in flat, f"message does not name {frag!r}: {flat[:3000]!r}"


def _outside_digest(root: Path) -> dict[str, float]:
    """Names and mtimes of the folder holding the work folder: nothing may appear beside it."""
    return {p.name: p.stat().st_mtime for p in root.parent.iterdir()}


# ------------------------------------------------------------------------------------------------
# params files: how to make the text from the valid params → fragments the error must name
# ------------------------------------------------------------------------------------------------


def _dump(params: dict) -> str:
    return yaml.safe_dump(params, sort_keys=False)


def _edit(fn: Callable[[dict], None]) -> Callable[[dict], bytes]:
    def make(params: dict) -> bytes:
        fn(params)
        return _dump(params).encode()

    return make


def _latin1(params: dict) -> bytes:
    text = _dump(params)
    assert "title: trust report" in text
    return text.replace("title: trust report", "title: Müller's report").encode("latin-1")


def _duplicate_key(params: dict) -> bytes:
    return (_dump(params) + "seed: 3\n").encode()


def _alias_bomb(params: dict) -> bytes:
    text = _dump(params)
    bomb = ('    lol: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n'
            "    lol2: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
            "    lol3: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n")
    return text.replace("    options:\n", "    options:\n" + bomb, 1).encode()


def _merge_key(params: dict) -> bytes:
    return (_dump(params) + "base: &base {x: 1}\nother:\n  <<: *base\n").encode()


def _dataset_named_no(params: dict) -> bytes:
    params["datasets"]["no"] = params["datasets"].pop("mine")
    return _dump(params).replace("'no':", "no:").encode()


def _huge(params: dict) -> bytes:
    return (_dump(params) + "# " + "x" * (1 << 20) + "\n").encode()


def _deep_nesting(params: dict) -> bytes:
    """A value nested 10⁵ lists deep: the YAML reader's recursion, not a message, used to end it."""
    return (_dump(params) + "deep: " + "[" * 100_000 + "]" * 100_000 + "\n").encode()


def _rename_sweep(new: str) -> Callable[[dict], None]:
    def mutate(params: dict) -> None:
        params["sweeps"][new] = params["sweeps"].pop(SWEEP)

    return mutate


def _frontier(name: str) -> Callable[[dict], None]:
    def mutate(params: dict) -> None:
        params["report"]["frontiers"] = [{"name": name, "family": "scoreshield", "x": "param:epsilon", "y": "utility"}]

    return mutate


SW = f"sweeps.{SWEEP}"

PARAMS_CASES: list[tuple[str, Callable[[dict], bytes], tuple[str, ...]]] = [
    ("latin-1-file", _latin1, ("case.yaml", "line", "not UTF-8", "save the file as UTF-8")),
    ("duplicate-key", _duplicate_key, ("case.yaml", "'seed'", "given twice")),
    ("alias-bomb", _alias_bomb, ("case.yaml", "anchors", "not allowed")),
    ("merge-key", _merge_key, ("case.yaml", "anchors (&base)", "not allowed")),
    ("dataset-named-no", _dataset_named_no, ("case.yaml", "'no'", "bool", "quote it")),
    ("file-over-size-limit", _huge, ("case.yaml", "larger than the limit")),
    ("grid-of-64-million-cells", _edit(_set(f"{SW}.grid", {f"k{i}": list(range(8)) for i in range(9)})),
     (f"{SW}.grid: expands to 134217728 cells", "at most 5000")),
    ("seed-above-32-bit", _edit(_set(f"{SW}.seeds", [2**64])), (f"{SW}.seeds", "at most 4294967295")),
    ("base-seed-above-32-bit", _edit(_set("seed", 2**40)), ("seed", "less than or equal to 4294967295")),
    ("loader-option-typo", _edit(_set("datasets.digits.options", {"n_featurs": 3})),
     ("datasets.digits", "n_featurs", "valid options: none")),
    ("generated-loader-option-typo",
     _edit(_set("datasets.digits", {"source": "gaussian_mixture", "options": {"n_featurs": 3}})),
     ("datasets.digits", "n_featurs", "valid options", "n_features")),
    ("encoder-option-typo", _edit(_set("embeddings.digits-pca.options", {"whitten": True})),
     ("embeddings.digits-pca", "whitten", "encoder 'pca'")),
    ("sweep-name-with-newline", _edit(_rename_sweep("bad\nname")), ("sweeps.bad", "letters, digits")),
    ("sweep-name-300-chars", _edit(_rename_sweep("s" * 300)), ("300 characters long", "at most 64")),
    ("sweep-name-with-dot", _edit(_rename_sweep("a.b")), ("sweeps.a.b", "letters, digits")),
    ("frontier-name-escapes-root", _edit(_frontier("../../outside")), ("report.frontiers.0.name", "letters, digits")),
    ("frontier-name-absolute", _edit(_frontier("/tmp/evil")), ("report.frontiers.0.name", "letters, digits")),
    ("experiment-name-with-slash", _edit(_set("tracking.experiment", "a/../b")), ("tracking.experiment", "letters")),
    ("yaml-nested-100000-deep", _deep_nesting, ("case.yaml", "line", "nested more than 64 levels deep")),
]


@pytest.mark.parametrize("case", [c[0] for c in PARAMS_CASES])
def test_hostile_params_are_rejected_naming_the_key(case: str, trust_root: Path) -> None:
    from flows.cli import app
    from tasks.sweep import run_sweep_stage

    _, make, fragments = next(c for c in PARAMS_CASES if c[0] == case)
    case_file = trust_root / "case.yaml"
    case_file.write_bytes(make(with_user_path(trust_params(), trust_root, "user/mine.npz")))
    before, outside = tree_digest(trust_root), _outside_digest(trust_root)

    with pytest.raises(ConfigError) as err:
        run_sweep_stage("release", SWEEP, params_path=case_file, root=trust_root)
    _assert_names(str(err.value), fragments)
    assert len(str(err.value)) < 2500, "a message must stay short"

    result = CliRunner().invoke(app, ["validate", "--params", str(case_file)])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "error:" in result.output and "Traceback" not in result.output
    _assert_names(result.output, fragments)
    assert tree_digest(trust_root) == before
    assert _outside_digest(trust_root) == outside


def test_quoted_no_is_a_valid_dataset_name(trust_root: Path) -> None:
    """The control of ``dataset-named-no``: quoted, the same name validates."""
    from flows.cli import app

    params = with_user_path(trust_params(), trust_root, "user/mine.npz")
    params["datasets"]["no"] = params["datasets"].pop("mine")
    case_file = write_params(trust_root / "case.yaml", params)  # safe_dump quotes it
    assert "'no':" in case_file.read_text()
    result = CliRunner().invoke(app, ["validate", "--params", str(case_file)])
    assert result.exit_code == 0, result.output


def test_many_problems_give_a_short_message(trust_root: Path) -> None:
    """A grid whose every cell is bad lists a few problems and counts the rest."""
    from flows.cli import app

    params = with_user_path(trust_params(), trust_root, "user/mine.npz")
    params["sweeps"][SWEEP]["grid"] = {"epsilon": [-float(i) for i in range(1, 400)]}
    case_file = write_params(trust_root / "case.yaml", params)
    result = CliRunner().invoke(app, ["validate", "--params", str(case_file)])
    assert result.exit_code == 2
    assert "more problems" in result.output and len(result.output) < 3000, result.output[:4000]


def test_cell_names_stay_short_and_distinct() -> None:
    from veilbench.names import MAX_CELL_CHARS, cell_name

    long_a = {"option": "a" * 300, "x": 1}
    long_b = {"option": "a" * 300, "x": 2}
    assert len(cell_name(long_a)) <= MAX_CELL_CHARS and cell_name(long_a) != cell_name(long_b)
    assert cell_name({"epsilon": 4.0, "calibrator": "analytic"}) == "calibrator=analytic_epsilon=4.0"
    assert cell_name({"a": "../x"}) == "a=.._x"


def test_inside_refuses_paths_leaving_the_root(tmp_path: Path) -> None:
    from veilbench.names import inside

    assert inside(tmp_path, "reports", "x.png") == (tmp_path / "reports" / "x.png").resolve()
    for parts in (("..", "x"), ("/etc/passwd",), ("a", "..", "..", "b")):
        with pytest.raises(UsageError, match="outside"):
            inside(tmp_path, *parts)


# ------------------------------------------------------------------------------------------------
# user data files: how to write the file → fragments the error must name
# ------------------------------------------------------------------------------------------------


def _npz(**arrays: np.ndarray) -> Callable[[Path], None]:
    return lambda path: np.savez(path, **arrays)


def _forged_shape(path: Path) -> None:
    """An .npz whose X header declares (10⁶, 10⁶) float64 (8 TB) but stores 400 bytes."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f8", "fortran_order": False, "shape": (10**6, 10**6)})
    buf.write(np.zeros(50).tobytes())
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("X.npy", buf.getvalue())
        y = io.BytesIO()
        np.save(y, np.arange(60) % 3)
        zf.writestr("y.npy", y.getvalue())


def _zip_bomb(path: Path) -> None:
    """A compressed .npz of 24 MB of zeros (compressed about 1000-fold)."""
    np.savez_compressed(path, X=np.zeros((300_000, 10)), y=np.arange(300_000) % 3)


def _huge_values(path: Path) -> None:
    arrays = valid_user_arrays()
    arrays["X"][::2] *= 1e307
    arrays["X"][1::2] *= -1e307
    np.savez(path, **arrays)


def _one_record_per_class(path: Path) -> None:
    arrays = valid_user_arrays()
    y = arrays["y"].copy()
    y[0] = 7  # class 7 holds one record
    np.savez(path, X=arrays["X"], y=y)


def _csv_duplicate_label(path: Path) -> None:
    rows = [f"{i * 0.5},{i % 2},{i % 3}" for i in range(12)]
    path.write_text("a,label,label\n" + "\n".join(rows) + "\n")


def _idx_bytes(arr: np.ndarray) -> bytes:
    code = {np.dtype("uint8"): 0x08}[arr.dtype]
    header = bytes([0, 0, code, arr.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in arr.shape)
    return header + arr.astype(">u1").tobytes()


def _idx_folder(truncate: bool = False, test_width: int = 4) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        path.mkdir()
        rng = np.random.default_rng(0)
        parts = {"train-images-idx3-ubyte": rng.integers(0, 255, (30, 4, 4), dtype=np.uint8),
                 "train-labels-idx1-ubyte": (np.arange(30) % 3).astype(np.uint8),
                 "t10k-images-idx3-ubyte": rng.integers(0, 255, (12, 4, test_width), dtype=np.uint8),
                 "t10k-labels-idx1-ubyte": (np.arange(12) % 3).astype(np.uint8)}
        for stem, arr in parts.items():
            data = gzip.compress(_idx_bytes(arr))
            (path / f"{stem}.gz").write_bytes(data[: len(data) // 2] if truncate and "images" in stem else data)

    return write


X_OK = valid_user_arrays()["X"]
Y_OK = valid_user_arrays()["y"]

FILE_CASES: list[tuple[str, str, Callable[[Path], None], tuple[str, ...]]] = [
    ("declared-shape-larger-than-file", "forged.npz", _forged_shape, ("forged.npz", "'X'", "declares shape")),
    ("zip-bomb", "bomb.npz", _zip_bomb, ("bomb.npz", "zip bomb")),
    ("values-near-float-max", "huge.npz", _huge_values, ("X", "within ±", "rescale")),
    ("all-zero-features", "zeros.npz", _npz(X=np.zeros((60, 5)), y=Y_OK), ("X", "constant")),
    ("one-record-in-a-class", "lonely.npz", _one_record_per_class, ("y", "[7]", "single record")),
    ("csv-duplicate-header", "dup.csv", _csv_duplicate_label, ("dup.csv", "'label'", "more than once")),
    ("truncated-idx-gz", "idx_cut", _idx_folder(truncate=True), ("train-images-idx3-ubyte.gz", "truncated or corrupt")),
    ("idx-train-test-widths-differ", "idx_wide", _idx_folder(test_width=5), ("idx_wide", "same shape")),
    ("keras-0d-x-train", "keras0d.npz",
     _npz(x_train=np.float64(1.0), y_train=Y_OK[:40], x_test=X_OK[40:], y_test=Y_OK[40:]), ("x_train", "0-d")),
    ("keras-widths-differ", "keraswide.npz",
     _npz(x_train=X_OK[:40], y_train=Y_OK[:40], x_test=X_OK[40:, :3], y_test=Y_OK[40:]),
     ("x_train and x_test", "same record width")),
]


@pytest.mark.parametrize("case", [c[0] for c in FILE_CASES])
def test_hostile_data_files_are_rejected_and_outputs_survive(case: str, trust_root: Path) -> None:
    from tasks.prepare import prepare

    _, name, write, fragments = next(c for c in FILE_CASES if c[0] == case)
    path = trust_root / "user" / name
    write(path)
    case_file = write_params(trust_root / "case.yaml", with_user_path(trust_params(), trust_root, path))
    before = tree_digest(trust_root)
    with pytest.raises(ValidationError) as err:
        prepare("mine", params_path=case_file, root=trust_root)
    _assert_names(str(err.value), fragments)
    assert tree_digest(trust_root) == before, "a rejected input changed data/, reports/ or mlflow.db"


def test_valid_idx_folder_and_keras_file_are_accepted(trust_root: Path) -> None:
    """The controls of the IDX and Keras cases: the same writers, unbroken, prepare fine."""
    from tasks.prepare import prepare

    for name, write in (("idx_ok", _idx_folder()),
                        ("keras.npz", _npz(x_train=X_OK[:40], y_train=Y_OK[:40], x_test=X_OK[40:], y_test=Y_OK[40:]))):
        path = trust_root / "user" / name
        write(path)
        case_file = write_params(trust_root / "case.yaml", with_user_path(trust_params(), trust_root, path))
        assert (prepare("mine", params_path=case_file, root=trust_root) / "arrays.npz").is_file()


def test_embedding_dim_above_feature_count_leaves_no_failed_run(trust_root: Path) -> None:
    """``dim: 100`` on 64 features is refused before the MLflow run opens."""
    from tasks.embed import embed

    params = with_user_path(trust_params(), trust_root, "user/mine.npz")
    params["embeddings"]["digits-pca"]["dim"] = 100
    case_file = write_params(trust_root / "case.yaml", params)
    before = tree_digest(trust_root)
    with pytest.raises(ValidationError) as err:
        embed("digits-pca", params_path=case_file, root=trust_root)
    _assert_names(str(err.value), ("embeddings.digits-pca.dim", "(64)", "got 100"))
    assert tree_digest(trust_root) == before


# ------------------------------------------------------------------------------------------------
# the command line against a hostile environment or tampered records: how to damage the populated
# work folder → the command → its exit status and the fragments its one error line must name
# ------------------------------------------------------------------------------------------------


def _env(key: str, value: str) -> Callable[[Path, pytest.MonkeyPatch], None]:
    return lambda root, mp: mp.setenv(key, value)


def _garbage_store(root: Path, mp: pytest.MonkeyPatch) -> None:
    (root / "mlflow.db").write_bytes(b"SQLite format 2\0" + bytes(range(256)) * 40)


def _data_not_writable(root: Path, mp: pytest.MonkeyPatch) -> None:
    """``data/`` without write permission, as the operating system would say (this suite may run
    as root, for whom ``chmod`` changes nothing)."""
    import os

    real, data = os.access, root / "data"
    mp.setattr(os, "access", lambda path, mode, **kw: False if Path(path) == data else real(path, mode, **kw))


def _edit_cell_metric(root: Path, mp: pytest.MonkeyPatch) -> None:
    """The careless edit of a cell record: utility 0.129 → 0.988 (the seal left as it was)."""
    import json

    path = root / "reports" / "sweeps" / SWEEP / "cells" / "default.json"
    record = json.loads(path.read_text())
    name = sorted(record["summary"])[0]
    record["summary"][name]["mean"] = 0.988
    path.write_text(json.dumps(record, indent=2, sort_keys=True))


def _edit_ledger(root: Path, mp: pytest.MonkeyPatch) -> None:
    import json

    path = root / "data" / "release" / SWEEP / "ledger.json"
    record = json.loads(path.read_text())
    record["entries"] = [{"dataset": "digits", "sweep": SWEEP, "cell": "default", "seed": 0, "mechanism": "gaussian",
                          "epsilon": 0.01, "delta": 1e-5}]
    path.write_text(json.dumps(record))


def _edit_stored_metric(root: Path, mp: pytest.MonkeyPatch) -> None:
    """An evaluate cell run's metric edited in the MLflow store itself (SQL)."""
    import sqlite3

    with sqlite3.connect(root / "mlflow.db") as db:
        run = db.execute("SELECT run_uuid FROM tags WHERE key = 'run_kind' AND value = 'cell' AND run_uuid IN "
                         "(SELECT run_uuid FROM tags WHERE key = 'stage' AND value = 'evaluate')").fetchone()[0]
        key = db.execute("SELECT key FROM metrics WHERE run_uuid = ? ORDER BY key LIMIT 1", (run,)).fetchone()[0]
        db.execute("UPDATE metrics SET value = 0.988 WHERE run_uuid = ? AND key = ?", (run, key))
        db.execute("UPDATE latest_metrics SET value = 0.988 WHERE run_uuid = ? AND key = ?", (run, key))
    db.close()


EXPERIMENT = trust_params()["tracking"]["experiment"]

#: case → (damage, command, exit status, fragments)
CLI_DAMAGE_CASES: list[tuple[str, Callable[[Path, pytest.MonkeyPatch], None], list[str], int, tuple[str, ...]]] = [
    ("cell-threads-not-a-number", _env("VEILBENCH_CELL_THREADS", "abc"), ["run", "--no-dvc"], 2,
     ("VEILBENCH_CELL_THREADS", "'abc'", "integer")),
    ("cell-threads-zero", _env("VEILBENCH_CELL_THREADS", "0"), ["run", "--no-dvc"], 2, ("VEILBENCH_CELL_THREADS", "'0'")),
    ("data-not-writable", _data_not_writable, ["run", "--no-dvc"], 2, ("/data:", "no write permission")),
    ("mlflow-store-not-a-database-report", _garbage_store, ["report"], 2, ("mlflow.db", "not a usable MLflow store")),
    ("mlflow-store-not-a-database-compare", _garbage_store, ["compare", "-e", EXPERIMENT], 2,
     ("mlflow.db", "not a usable MLflow store", "move it aside")),
    ("edited-cell-record", _edit_cell_metric, ["report"], 2,
     (f"sweeps/{SWEEP}/cells/default.json", "does not match its recorded SHA-256")),
    ("edited-privacy-ledger", _edit_ledger, ["report"], 2,
     (f"release/{SWEEP}/ledger.json", "does not match its recorded SHA-256")),
    ("edited-metric-in-the-mlflow-store", _edit_stored_metric, ["compare", "-e", EXPERIMENT], 2,
     ("mlflow.db", "its metrics do not match the SHA-256 recorded")),
]


@pytest.mark.parametrize("case", [c[0] for c in CLI_DAMAGE_CASES])
def test_damaged_environment_or_records_end_in_one_line_naming_them(case: str, trust_root: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Each case: exit status 2, one ``error:`` line naming the file or variable, no traceback, and
    ``data/``, ``reports/`` and ``mlflow.db`` as the damage left them (nothing shown from a record
    that fails its check, nothing written half-way)."""
    from flows.cli import app

    _, damage, args, status, fragments = next(c for c in CLI_DAMAGE_CASES if c[0] == case)
    monkeypatch.chdir(trust_root)
    damage(trust_root, monkeypatch)
    before, outside = tree_digest(trust_root), _outside_digest(trust_root)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == status, (result.exit_code, result.output[-3000:], result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.output[-3000:]
    _assert_names(result.output, fragments)
    assert tree_digest(trust_root) == before
    assert _outside_digest(trust_root) == outside


def test_the_damage_cases_control_the_same_commands_succeed(trust_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The undamaged work folder: ``report`` and ``compare`` of the same commands succeed."""
    from flows.cli import app

    monkeypatch.chdir(trust_root)
    for args in (["report"], ["compare", "-e", EXPERIMENT]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, (args, result.output[-3000:], result.exception)


@pytest.mark.slow  # SQLite waits for its lock for seconds before it gives up
def test_a_locked_mlflow_store_is_named(trust_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process holds ``mlflow.db`` locked (an exclusive transaction): ``veilbench compare``
    ends with one line naming the store and the lock, exit 2, and changes nothing."""
    import subprocess
    import sys

    from flows.cli import app

    monkeypatch.chdir(trust_root)
    holder = subprocess.Popen([sys.executable, "-c", "import sqlite3, sys, time; db = sqlite3.connect(sys.argv[1], "
                               "isolation_level=None); db.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); "
                               "time.sleep(120)", str(trust_root / "mlflow.db")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        before = tree_digest(trust_root, mlflow_store=False)
        result = CliRunner().invoke(app, ["compare", "-e", EXPERIMENT])
    finally:
        holder.kill()
        holder.wait()
    assert result.exit_code == 2, (result.exit_code, result.output[-3000:], result.exception)
    _assert_names(result.output, ("mlflow.db", "locked by another process"))
    assert tree_digest(trust_root, mlflow_store=False) == before
