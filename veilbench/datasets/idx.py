"""Readers for the two common MNIST-format layouts besides ``X``/``y`` arrays.

* IDX files (LeCun's format, as distributed for MNIST and Fashion-MNIST, optionally gzipped): a
  big-endian header — two zero bytes, a type code (0x08 = unsigned byte), the number of dimensions
  k — then k uint32 sizes and the data. Images (n, 28, 28), labels (n,).
* Keras' ``mnist.npz``: arrays ``x_train``, ``y_train``, ``x_test``, ``y_test``.

Both give one (X, y) with train records first, then test, as the public 70 000-record sets.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from veilbench.validation import ValidationError

#: IDX type code → numpy big-endian dtype
_IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
#: the file stems of the train/test image and label files (MNIST, Fashion-MNIST naming)
IDX_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


#: Largest IDX payload read (bytes, after decompression); MNIST's training images are 47 MB.
MAX_IDX_BYTES = 4 << 30


def read_idx(path: str | Path, max_bytes: int = MAX_IDX_BYTES) -> np.ndarray:
    """The array stored in one IDX file (``.gz`` is decompressed); shape from its header.

    A truncated or corrupt ``.gz``, or one that decompresses to more than ``max_bytes``, is a
    :class:`ValidationError` naming the file."""
    p = Path(path)
    try:
        with gzip.open(p) if p.suffix == ".gz" else open(p, "rb") as fh:
            raw = fh.read(max_bytes + 1)
    except (EOFError, OSError, zlib.error) as exc:
        raise ValidationError(f"{p}: truncated or corrupt ({type(exc).__name__}: {exc}); download the file again") from None
    if len(raw) > max_bytes:
        raise ValidationError(f"{p}: holds more than {max_bytes} bytes (decompressed); not an MNIST-format file")
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_TYPES:
        raise ValidationError(f"{p}: not an IDX file (bad magic number {raw[:4].hex()!r})")
    ndim = raw[3]
    header = 4 + 4 * ndim
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    dtype = np.dtype(_IDX_TYPES[raw[2]])
    if len(raw) - header != int(np.prod(shape)) * dtype.itemsize:
        raise ValidationError(f"{p}: header says shape {shape} but the file holds {len(raw) - header} data bytes")
    return np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape).astype(dtype.newbyteorder("="))


def read_idx_folder(folder: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """(X (n, h·w), y (n,)) from a folder holding the four files of :data:`IDX_FILES` (each
    optionally ``.gz``): train then test records."""
    folder = Path(folder)
    arrays = []
    for stem in IDX_FILES:
        found = [folder / f"{stem}{ext}" for ext in (".gz", "") if (folder / f"{stem}{ext}").is_file()]
        if not found:
            raise ValidationError(f"path: {folder} must hold {stem}[.gz] (an MNIST-format IDX folder: {', '.join(IDX_FILES)})")
        arrays.append(read_idx(found[0]))
    x_train, y_train, x_test, y_test = arrays
    if x_train.ndim == 0 or x_test.ndim == 0 or x_train.shape[1:] != x_test.shape[1:]:
        raise ValidationError(f"path: {folder}: train and test images must have the same shape per record, got "
                              f"{x_train.shape[1:]} and {x_test.shape[1:]}")
    X = np.concatenate([x_train.reshape(len(x_train), -1), x_test.reshape(len(x_test), -1)])
    return X, np.concatenate([y_train, y_test])


def from_keras_layout(arrays: Mapping[str, np.ndarray], name: str) -> tuple[np.ndarray, np.ndarray]:
    """(X, y) from Keras' ``x_train``/``y_train``/``x_test``/``y_test`` arrays, train first."""
    missing = {"x_train", "y_train", "x_test", "y_test"} - set(arrays)
    if missing:
        raise ValidationError(f"{name}: a Keras-layout .npz needs x_train, y_train, x_test, y_test; missing {sorted(missing)}")
    xs = [arrays["x_train"], arrays["x_test"]]
    for key in ("x_train", "x_test", "y_train", "y_test"):
        if arrays[key].ndim == 0:
            raise ValidationError(f"{name}: {key} must hold one record per row, got a 0-d array")
    flat = [x.reshape(len(x), -1) for x in xs]
    if flat[0].shape[1] != flat[1].shape[1]:
        raise ValidationError(f"{name}: x_train and x_test must have the same record width, got "
                              f"{xs[0].shape[1:]} and {xs[1].shape[1:]}")
    X = np.concatenate(flat)
    return X, np.concatenate([np.ravel(arrays["y_train"]), np.ravel(arrays["y_test"])])
