"""One validation layer for every family (the role of scikit-learn's ``check_array``).

Every public entry point validates its inputs through these helpers so that bad input gives
the same kind of error everywhere: a :class:`ValidationError` (a ``ValueError``) whose message
names the argument, the allowed range and the value seen.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class UsageError(Exception):
    """A user mistake (a bad option, file, name or value): the message names the field or file
    and what to do instead. The command line prints it as one line and exits with status 2;
    every other exception is an environment error or a bug (status 1)."""


class ValidationError(UsageError, ValueError):
    """Bad input: the message names the field, the allowed range and what was seen."""


def check_array(
    x: Any,
    name: str,
    *,
    ndim: int | None = None,
    min_rows: int = 1,
    finite: bool = True,
    dtype: type = np.float64,
) -> np.ndarray:
    """Return ``x`` as a numeric array after checking dimension, size and finiteness.

    Raises :class:`ValidationError` naming ``name`` when ``x`` is not numeric, has the wrong
    number of dimensions, fewer than ``min_rows`` rows, or (with ``finite``) NaN/inf entries.
    """
    arr = np.asarray(x)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise ValidationError(f"{name}: expected a numeric array, got dtype {arr.dtype}")
    if arr.dtype.kind == "c":
        raise ValidationError(f"{name}: expected a real numeric array, got complex dtype {arr.dtype}")
    arr = arr.astype(dtype, copy=False)
    if ndim is not None and arr.ndim != ndim:
        raise ValidationError(f"{name}: expected a {ndim}-d array, got shape {arr.shape}")
    if arr.ndim >= 1 and arr.shape[0] < min_rows:
        raise ValidationError(f"{name}: expected at least {min_rows} rows, got {arr.shape[0]}")
    if finite and arr.size and not np.all(np.isfinite(arr)):
        bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
        raise ValidationError(f"{name}: contains {bad} NaN or infinite value(s); all entries must be finite")
    return arr


def check_labels(y: Any, name: str, n: int | None = None, min_classes: int = 1) -> np.ndarray:
    """Return integer-coded labels of length ``n`` with at least ``min_classes`` classes."""
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise ValidationError(f"{name}: expected a 1-d label vector, got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ValidationError(f"{name}: expected {n} labels (one per row), got {arr.shape[0]}")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)):
            raise ValidationError(f"{name}: labels contain NaN or infinite values")
        if not np.all(arr == np.round(arr)):
            raise ValidationError(f"{name}: float labels must be whole numbers")
        arr = arr.astype(np.int64)
    elif arr.dtype.kind not in "iub":
        raise ValidationError(f"{name}: labels must be integers, got dtype {arr.dtype}")
    n_classes = np.unique(arr).size
    if n_classes < min_classes:
        raise ValidationError(f"{name}: need at least {min_classes} classes, got {n_classes}")
    return arr.astype(np.int64, copy=False)


def check_unit_rows(x: Any, name: str, atol: float = 1e-6) -> np.ndarray:
    """Return ``x`` (n × d) after checking every row has unit L2 norm within ``atol``."""
    arr = check_array(x, name, ndim=2)
    norms = np.linalg.norm(arr, axis=1)
    worst = float(np.max(np.abs(norms - 1.0))) if norms.size else 0.0
    if worst > atol:
        raise ValidationError(
            f"{name}: rows must have unit L2 norm (|‖x_i‖ - 1| ≤ {atol}); worst deviation is {worst:.3g}"
        )
    return arr


def check_symmetric(a: Any, name: str, atol: float = 1e-10) -> np.ndarray:
    """Return the square matrix ``a`` after checking ``max |a - aᵀ| ≤ atol``."""
    arr = check_array(a, name, ndim=2)
    if arr.shape[0] != arr.shape[1]:
        raise ValidationError(f"{name}: expected a square matrix, got shape {arr.shape}")
    asym = float(np.max(np.abs(arr - arr.T))) if arr.size else 0.0
    if asym > atol:
        raise ValidationError(f"{name}: must be symmetric (max |A - Aᵀ| ≤ {atol}); got {asym:.3g}")
    return arr


def check_in_range(
    value: Any,
    name: str,
    low: float | None = None,
    high: float | None = None,
    *,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
) -> float:
    """Return ``value`` as a float after checking it lies in the stated interval."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValidationError(f"{name}: expected a number, got {value!r}") from None
    lo_br = "[" if low_inclusive else "("
    hi_br = "]" if high_inclusive else ")"
    interval = f"{lo_br}{'-inf' if low is None else low}, {'inf' if high is None else high}{hi_br}"
    ok = np.isfinite(v) or (high is None and v == np.inf)
    if low is not None:
        ok = ok and (v >= low if low_inclusive else v > low)
    if high is not None:
        ok = ok and (v <= high if high_inclusive else v < high)
    if not ok:
        raise ValidationError(f"{name}: must lie in {interval}, got {value!r}")
    return v


def check_epsilon_delta(epsilon: float, delta: float) -> tuple[float, float]:
    """Validate a DP budget: ε ∈ (0, ∞), δ ∈ (0, 1)."""
    eps = check_in_range(epsilon, "epsilon", 0.0, None, low_inclusive=False)
    dlt = check_in_range(delta, "delta", 0.0, 1.0, low_inclusive=False, high_inclusive=False)
    return eps, dlt


