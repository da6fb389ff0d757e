"""MNIST-format inputs: IDX files (plain and gzipped) and Keras' ``mnist.npz`` layout load to the
same (X, y) as an ``X``/``y`` file, train records first; malformed files give clear errors."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from veilbench.datasets import load_dataset
from veilbench.datasets.idx import IDX_FILES, read_idx
from veilbench.validation import ValidationError


def _idx_bytes(arr: np.ndarray) -> bytes:
    header = bytes([0, 0, 0x08, arr.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in arr.shape)
    return header + arr.astype(np.uint8).tobytes()


@pytest.fixture
def mnist_like() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"x_train": rng.integers(0, 256, (12, 28, 28)), "y_train": rng.integers(0, 10, 12),
            "x_test": rng.integers(0, 256, (5, 28, 28)), "y_test": rng.integers(0, 10, 5)}


def _expected(d: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    return (np.concatenate([d["x_train"].reshape(12, 784), d["x_test"].reshape(5, 784)]),
            np.concatenate([d["y_train"], d["y_test"]]))


@pytest.mark.parametrize("gz", [True, False])
def test_idx_folder_loads_train_then_test(tmp_path: Path, mnist_like: dict, gz: bool) -> None:
    for stem, key in zip(IDX_FILES, ("x_train", "y_train", "x_test", "y_test"), strict=True):
        data = _idx_bytes(mnist_like[key])
        if gz:
            (tmp_path / f"{stem}.gz").write_bytes(gzip.compress(data))
        else:
            (tmp_path / stem).write_bytes(data)
    ds = load_dataset("file", path=str(tmp_path))
    X, y = _expected(mnist_like)
    np.testing.assert_array_equal(ds.X, X)
    np.testing.assert_array_equal(ds.y, y)
    assert ds.X.shape == (17, 784)


def test_keras_layout_npz_matches_the_idx_reading(tmp_path: Path, mnist_like: dict) -> None:
    np.savez(tmp_path / "mnist.npz", **{k: v.astype(np.uint8) for k, v in mnist_like.items()})
    ds = load_dataset("mnist", path=str(tmp_path / "mnist.npz"))
    X, y = _expected(mnist_like)
    np.testing.assert_array_equal(ds.X, X)
    np.testing.assert_array_equal(ds.y, y)


@pytest.mark.parametrize("content, message", [
    (b"\x01\x02\x08\x01\x00\x00\x00\x01\x05", "not an IDX file"),
    (bytes([0, 0, 8, 1]) + (4).to_bytes(4, "big") + b"\x01\x02", "header says shape"),
])
def test_malformed_idx_is_rejected(tmp_path: Path, content: bytes, message: str) -> None:
    (tmp_path / "f").write_bytes(content)
    with pytest.raises(ValidationError, match=message):
        read_idx(tmp_path / "f")


def test_incomplete_folder_and_npz_name_what_is_missing(tmp_path: Path, mnist_like: dict) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / IDX_FILES[0]).write_bytes(_idx_bytes(mnist_like["x_train"]))
    with pytest.raises(ValidationError, match="train-labels-idx1-ubyte"):
        load_dataset("file", path=str(tmp_path / "d"))
    np.savez(tmp_path / "half.npz", x_train=mnist_like["x_train"], y_train=mnist_like["y_train"])
    with pytest.raises(ValidationError, match="x_test"):
        load_dataset("file", path=str(tmp_path / "half.npz"))
    np.savez(tmp_path / "other.npz", a=np.zeros(3))
    with pytest.raises(ValidationError, match="'X' and 'y'"):
        load_dataset("file", path=str(tmp_path / "other.npz"))
