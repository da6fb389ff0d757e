"""Real offline data for the paper-scale run: the ``fashion_mnist`` source reads data/raw/ first,
then the folder Debian's ``dataset-fashion-mnist`` installs (``make data``), never the network;
``features: unit`` gives pixels/255; the tabular loader applies the GCA paper's preprocessing."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from veilbench.datasets import load_dataset
from veilbench.datasets.idx import IDX_FILES
from veilbench.datasets.registry import SYSTEM_DIRS, correlation_filter
from veilbench.validation import ValidationError


def _write_idx_folder(folder: Path, n_train: int, n_test: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = [rng.integers(0, 256, (n_train, 28, 28)), rng.integers(0, 10, n_train),
              rng.integers(0, 256, (n_test, 28, 28)), rng.integers(0, 10, n_test)]
    arrays[1][:10 if n_train >= 10 else n_train] = np.arange(min(10, n_train))
    folder.mkdir(parents=True, exist_ok=True)
    for stem, arr in zip(IDX_FILES, arrays, strict=True):
        header = bytes([0, 0, 0x08, arr.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in arr.shape)
        (folder / f"{stem}.gz").write_bytes(gzip.compress(header + arr.astype(np.uint8).tobytes()))
    X = np.concatenate([arrays[0].reshape(n_train, -1), arrays[2].reshape(n_test, -1)]).astype(float)
    return X, np.concatenate([arrays[1], arrays[3]])


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """No data/raw/ and no system folder visible: the loader sees only what a test writes."""
    for var in ("DVC_ROOT", "VEILBENCH_ROOT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(SYSTEM_DIRS, "fashion_mnist", (tmp_path / "usr" / "fashion-mnist",))
    return tmp_path


def test_system_folder_is_read_when_data_raw_is_empty(isolated) -> None:
    X, y = _write_idx_folder(isolated / "usr" / "fashion-mnist", 12, 5, seed=0)
    ds = load_dataset("fashion_mnist")
    assert np.array_equal(ds.X, X) and np.array_equal(ds.y, y)
    assert ds.meta["source"].endswith("fashion-mnist")


def test_data_raw_takes_precedence_over_the_system_folder(isolated) -> None:
    _write_idx_folder(isolated / "usr" / "fashion-mnist", 12, 5, seed=0)
    X, _ = _write_idx_folder(isolated / "data" / "raw" / "fashion_mnist", 8, 3, seed=1)
    ds = load_dataset("fashion_mnist")
    assert ds.X.shape == (11, 784) and np.array_equal(ds.X, X)


def test_missing_data_names_make_data_and_nothing_is_downloaded(isolated, monkeypatch) -> None:
    import sklearn.datasets

    def forbidden(*args, **kwargs):
        raise AssertionError("a loader tried to download")

    monkeypatch.setattr(sklearn.datasets, "fetch_openml", forbidden)
    with pytest.raises(ValidationError, match="make data") as err:
        load_dataset("fashion_mnist")
    assert "data/raw/fashion_mnist" in str(err.value)
    with pytest.raises(ValidationError, match="data/raw/mnist.npz"):
        load_dataset("mnist")


def test_features_unit_is_pixels_over_255(isolated) -> None:
    X, _ = _write_idx_folder(isolated / "usr" / "fashion-mnist", 12, 5, seed=0)
    ds = load_dataset("fashion_mnist", features="unit")
    assert np.allclose(ds.X, X / 255.0) and ds.X.max() <= 1.0 and ds.X.max() > 0.9
    with pytest.raises(ValidationError, match="features: must be 'raw' or 'unit'"):
        load_dataset("fashion_mnist", features="scaled")


def test_features_unit_rejects_values_beyond_255(tmp_path) -> None:
    np.savez(tmp_path / "big.npz", X=np.array([[0.0, 300.0], [1.0, 2.0]]), y=np.array([0, 1]))
    with pytest.raises(ValidationError, match=r"pixel values in \[0, 255\]"):
        load_dataset("file", path=str(tmp_path / "big.npz"), features="unit")


def test_correlation_filter_keeps_first_of_each_correlated_group() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, 500))
    X = np.column_stack([a, b, a + 0.1 * rng.normal(size=500), -b, rng.normal(size=500)])
    assert correlation_filter(X, 0.6).tolist() == [0, 1, 4]
    # |r| ≈ 0.45 between a and a + noise of sd 2: kept at 0.6, dropped at 0.4
    X2 = np.column_stack([a, a + 2.0 * rng.normal(size=500)])
    assert correlation_filter(X2, 0.6).tolist() == [0, 1] and correlation_filter(X2, 0.4).tolist() == [0]
    with pytest.raises(ValidationError, match="max_abs_correlation"):
        correlation_filter(X, 1.5)


def test_tabular_csv_with_the_gca_paper_preprocessing(tmp_path) -> None:
    # UCI adult.data style: no header, spaces after commas, '?' for missing, labels '>50K' / '>50K.'
    rows = ["39, State-gov, 77516, 13, <=50K", "50, ?, 83311, 13, >50K.", "38, Private, 215646, 9, <=50K",
            "53, Private, 234721, 7, >50K", "28, State-gov, 338409, 13, <=50K"]
    p = tmp_path / "adult.data"
    p.write_text("\n".join(rows) + "\n")
    (tmp_path / "adult.csv").write_text(p.read_text())
    names = ["age", "workclass", "fnlwgt", "education_num", "income"]
    ds = load_dataset("file", path=str(tmp_path / "adult.csv"), column_names=names, label_column="income",
                      categorical="integer")
    assert ds.X.shape == (5, 4)
    assert ds.X[:, 1].tolist() == [2, 0, 1, 1, 2]  # '?' < 'Private' < 'State-gov', its own category
    assert ds.y.tolist() == [0, 1, 0, 1, 0]        # '>50K.' and '>50K' are one class
    filtered = load_dataset("file", path=str(tmp_path / "adult.csv"), column_names=names, label_column="income",
                            categorical="integer", max_abs_correlation=0.6)
    # workclass codes correlate with age at r ≈ −0.73 (> 0.6): dropped; the other pairs stay ≤ 0.5
    assert filtered.meta["dropped_correlated"] == ["workclass"]
    assert np.array_equal(filtered.X, ds.X[:, [0, 2, 3]])
    with pytest.raises(ValidationError, match="categorical: integer codes them"):
        load_dataset("file", path=str(tmp_path / "adult.csv"), column_names=names, label_column="income")


REAL = SYSTEM_DIRS["fashion_mnist"][0]


@pytest.mark.slow
@pytest.mark.skipif(not (REAL / "train-images-idx3-ubyte.gz").is_file(), reason="run `make data` (Debian's dataset-fashion-mnist)")
def test_real_debian_fashion_mnist_loads(monkeypatch, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)
    for var in ("DVC_ROOT", "VEILBENCH_ROOT"):
        monkeypatch.delenv(var, raising=False)
    ds = load_dataset("fashion_mnist", features="unit")
    assert ds.X.shape == (70_000, 784) and sorted(np.unique(ds.y).tolist()) == list(range(10))
    assert np.bincount(ds.y).tolist() == [7000] * 10
    assert 0.0 == ds.X.min() and ds.X.max() == 1.0
