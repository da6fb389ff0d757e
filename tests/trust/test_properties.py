"""Property tests (hypothesis) for the loaders and the params schema.

Loaders: for any arrays (random dtypes, shapes, NaN/inf, object arrays, corrupted bytes),
``veilbench.io.load_npz`` and ``veilbench.datasets.registry.load_file`` either return a valid
result or raise ``ValidationError`` — never another exception, never a pickle. An accepted
``Dataset`` keeps the values exactly (``X`` float64, 2-d, finite; ``y`` int64, one per row, ≥ 2
classes), and every input meeting that contract is accepted.

Schema: any mapping built from random YAML values, or a valid params mapping with one value
replaced by a random one, gives a ``Config`` or a ``ConfigError``; the privacy budget is accepted
exactly when ε ∈ (0, ∞) (finite: ε = ∞ is the clean release, not a budget) and δ ∈ (0, 1).
"""

from __future__ import annotations

import math
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests.trust.conftest import SWEEP, trust_params
from veilbench.config import Config, ConfigError, validate_config
from veilbench.datasets.registry import Dataset, load_file
from veilbench.io import load_npz
from veilbench.validation import ValidationError

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Complex arrays are rejected by check_array; the "complex-features" case of test_bad_inputs.py covers them.
REAL_DTYPES = st.sampled_from([np.float64, np.float32, np.float16, np.int64, np.int32, np.uint8, np.int8, np.bool_])
ODD_DTYPES = st.sampled_from(["U3", "S2", "M8[s]", "m8[s]"])


def _float_elements(dtype: np.dtype) -> st.SearchStrategy:
    if np.dtype(dtype).kind == "f":
        return st.floats(allow_nan=True, allow_infinity=True, width=np.dtype(dtype).itemsize * 8)
    return hnp.from_dtype(np.dtype(dtype))


@st.composite
def numeric_arrays(draw: st.DrawFn, max_dims: int = 3) -> np.ndarray:
    """Random real arrays; a zero-length axis only as the first axis of a ≤ 2-d array (zero-size
    arrays of more dims are a known bug, see :func:`test_load_file_rejects_arrays_without_features`)."""
    dtype = draw(REAL_DTYPES)
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=max_dims, min_side=1, max_side=6))
    if 0 < len(shape) <= 2 and draw(st.booleans()):
        shape = (draw(st.integers(0, 3)), *shape[1:])
    return draw(hnp.arrays(dtype, shape, elements=_float_elements(dtype)))


@st.composite
def any_arrays(draw: st.DrawFn) -> np.ndarray:
    kind = draw(st.sampled_from(["numeric", "numeric", "numeric", "odd", "object"]))
    if kind == "numeric":
        return draw(numeric_arrays())
    if kind == "odd":
        shape = draw(hnp.array_shapes(min_dims=1, max_dims=2, max_side=4))
        return draw(hnp.arrays(np.dtype(draw(ODD_DTYPES)), shape))
    return np.array([{"k": 1}, None, "x"][: draw(st.integers(1, 3))], dtype=object)


def _save(directory: Path, arrays: dict[str, np.ndarray], corruption: str, cut: float, compressed: bool = False) -> Path:
    """Write ``arrays`` as an ``.npz`` (deflated with ``compressed``, as stage files are), truncated
    to the fraction ``cut`` of its bytes when ``corruption == "truncate"``, or with the byte at that
    fraction inverted when ``corruption == "flip"``."""
    path = directory / "case.npz"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (np.savez_compressed if compressed else np.savez)(path, **arrays)
    if corruption == "truncate":
        data = path.read_bytes()
        path.write_bytes(data[: int(len(data) * cut)])
    elif corruption == "flip":
        data = bytearray(path.read_bytes())
        data[min(int(len(data) * cut), len(data) - 1)] ^= 0xFF
        path.write_bytes(bytes(data))
    return path


CORRUPTION = st.sampled_from(["none", "none", "truncate", "flip"])


@SETTINGS
@given(arrays=st.dictionaries(st.sampled_from(["X", "y", "a", "b"]), any_arrays(), max_size=3),
       corruption=CORRUPTION, cut=st.floats(0.0, 1.0), compressed=st.booleans())
def test_load_npz_returns_numeric_arrays_or_validation_error(arrays, corruption, cut, compressed) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = _save(Path(d), arrays, corruption, cut, compressed)
        try:
            loaded = load_npz(path)
        except ValidationError as exc:
            assert str(path) in str(exc), "the message names the file"
            return
    assert all(a.dtype != object for a in loaded.values()), "no object (pickled) array is ever returned"
    if corruption == "none":
        assert set(loaded) == set(arrays)
        for key, arr in loaded.items():
            assert arr.dtype == arrays[key].dtype and arr.shape == arrays[key].shape
            assert arr.tobytes() == np.ascontiguousarray(arrays[key]).tobytes()
        assert not any(a.dtype == object for a in arrays.values()), "an object array was loaded"


def _meets_contract(X: np.ndarray, y: np.ndarray) -> bool:
    """The documented contract of a user ``.npz``: numeric X with ≥ 2 rows, ≥ 2-d (images are
    flattened), finite, within ±``MAX_ABS_FEATURE`` and not constant across rows; integer (or whole
    float) labels, one per row, at least two classes."""
    from veilbench.datasets.registry import MAX_ABS_FEATURE

    if X.dtype.kind not in "biuf" or X.ndim < 2 or X.shape[0] < 2 or not np.all(np.isfinite(X.astype(np.float64))):
        return False
    flat = X.reshape(X.shape[0], -1).astype(np.float64)
    if flat.shape[1] == 0 or np.abs(flat).max() > MAX_ABS_FEATURE or np.all(flat == flat[0]):
        return False
    if y.ndim != 1 or y.shape[0] != X.shape[0] or y.dtype.kind not in "biuf":
        return False
    if y.dtype.kind == "f" and not (np.all(np.isfinite(y)) and np.all(y == np.round(y))):
        return False
    return np.unique(y).size >= 2


@SETTINGS
@given(X=numeric_arrays(max_dims=4), y=numeric_arrays(max_dims=2), corruption=CORRUPTION, cut=st.floats(0.0, 1.0))
def test_load_file_gives_a_valid_dataset_or_validation_error(X, y, corruption, cut) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = _save(Path(d), {"X": X, "y": y}, corruption, cut)
        try:
            ds = load_file(path)
        except ValidationError as exc:
            assert corruption != "none" or not _meets_contract(X, y), f"a valid input was rejected: {exc}"
            return
    assert isinstance(ds, Dataset)
    assert ds.X.dtype == np.float64 and ds.X.ndim == 2 and ds.X.shape[0] >= 2 and np.all(np.isfinite(ds.X))
    assert ds.y.dtype == np.int64 and ds.y.shape == (ds.X.shape[0],) and np.unique(ds.y).size >= 2
    if corruption == "none":
        assert _meets_contract(X, y), "an input outside the contract was accepted"
        assert np.array_equal(ds.X, X.reshape(X.shape[0], -1).astype(np.float64)), "values changed on load"
        assert np.array_equal(ds.y, y.astype(np.int64))


@SETTINGS
@given(n=st.integers(2, 30), p=st.integers(1, 5), n_classes=st.integers(2, 4), seed=st.integers(0, 2**16),
       nan_at=st.none() | st.integers(0, 10**6))
def test_load_file_csv_accepts_clean_tables_and_rejects_holes(n, p, n_classes, seed, nan_at) -> None:
    """A CSV table is accepted exactly when it has no missing value (and ≥ 2 classes)."""
    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(size=(n, p)), 6)
    y = np.arange(n) % n_classes
    cells = [[repr(float(v)) for v in row] for row in X]
    if nan_at is not None:
        cells[(nan_at // p) % n][nan_at % p] = ""
    lines = [",".join([f"f{j}" for j in range(p)] + ["label"])]
    lines += [",".join(row + [str(lbl)]) for row, lbl in zip(cells, y, strict=True)]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "table.csv"
        path.write_text("\n".join(lines) + "\n")
        if nan_at is not None:
            with pytest.raises(ValidationError, match="NaN"):
                load_file(path)
            return
        ds = load_file(path)
    assert np.array_equal(ds.X, X) and np.array_equal(ds.y, y)


def _corrupt(kind: str, path: Path) -> None:
    """Damage one part of a valid archive: the deflated bytes of the first member, or the central
    directory's compression-method field, or its "encrypted" flag bit."""
    X = np.arange(600.0).reshape(200, 3)
    (np.savez_compressed if kind == "deflate" else np.savez)(path, X=X, y=np.arange(200) % 2)
    data = bytearray(path.read_bytes())
    central = data.find(b"PK\x01\x02")
    if kind == "deflate":
        start = 30 + int.from_bytes(data[26:28], "little")  # local header + member name
        data[start + 10 : start + 60] = b"\xff" * 50
    elif kind == "method":
        data[central + 10] = 99
    else:
        data[central + 8] |= 1
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("kind", ["deflate", "method", "encrypted"])
def test_load_npz_rejects_corrupt_archives(kind: str, tmp_path: Path) -> None:
    path = tmp_path / f"{kind}.npz"
    _corrupt(kind, path)
    with pytest.raises(ValidationError, match="not a readable .npz"):
        load_npz(path)


@pytest.mark.parametrize("shape", [(0, 0, 0), (0, 2, 2), (4, 0, 3), (4, 0)])
def test_load_file_rejects_arrays_without_features(shape, tmp_path: Path) -> None:
    path = tmp_path / "nofeatures.npz"
    np.savez(path, X=np.zeros(shape), y=np.arange(shape[0]) % 2)
    with pytest.raises(ValidationError, match="X"):
        load_file(path)


# ------------------------------------------------------------------------------------------------
# the params schema
# ------------------------------------------------------------------------------------------------

YAML_SCALARS = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=True) | st.text(max_size=8)
YAML_VALUES = st.recursive(
    YAML_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)


def _validate(raw: object) -> Config | None:
    """``validate_config`` must return a Config or raise ConfigError; returns None on ConfigError."""
    try:
        cfg = validate_config(raw)
    except ConfigError as exc:
        assert str(exc).strip(), "an empty error message"
        return None
    assert isinstance(cfg, Config)
    return cfg


@SETTINGS
@given(raw=YAML_VALUES)
def test_random_yaml_values_give_config_or_config_error(raw) -> None:
    _validate(raw)


def _paths(node: object, prefix: tuple = ()) -> list[tuple]:
    """Every key path of a nested mapping/list (the places a mutation may hit)."""
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


VALID = trust_params()
VALID["datasets"]["mine"]["options"]["path"] = "user/mine.npz"
VALID_PATHS = _paths(VALID)


@SETTINGS
@given(where=st.sampled_from(VALID_PATHS), value=YAML_VALUES, drop=st.booleans())
def test_one_mutated_value_gives_config_or_config_error_naming_it(where, value, drop) -> None:
    import copy

    raw = copy.deepcopy(VALID)
    node = raw
    for key in where[:-1]:
        node = node[key]
    if drop and isinstance(node, dict):
        del node[where[-1]]
    else:
        node[where[-1]] = value
    _validate(raw)


@SETTINGS
@given(epsilon=st.floats(allow_nan=True, allow_infinity=True) | st.integers(-5, 5),
       delta=st.floats(allow_nan=True, allow_infinity=True) | st.integers(-1, 2))
def test_privacy_budget_is_accepted_exactly_when_in_range(epsilon, delta) -> None:
    raw = trust_params()
    raw["sweeps"][SWEEP]["params"].update({"mechanism": "gaussian", "epsilon": epsilon, "delta": delta})
    cfg = _validate(raw)
    in_range = math.isfinite(epsilon) and epsilon > 0 and (not math.isnan(delta)) and 0 < delta < 1
    assert (cfg is not None) == in_range, (epsilon, delta)
    if cfg is None:
        with pytest.raises(ConfigError, match=r"epsilon|delta"):
            validate_config(raw)
