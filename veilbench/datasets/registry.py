"""Where data comes from: a registry of named loaders, each returning a :class:`Dataset`.

Three kinds of source:

(a) **embedded** — data that ships inside installed packages or is generated, so it needs no
    network: scikit-learn's ``digits``, ``breast_cancer``, ``wine``; ``gaussian_mixture`` and
    ``low_rank`` generated sets; ``adult_like`` (a generated tabular set of Adult's size);
(b) **user files** — ``file`` with ``path=`` an ``.npz`` (arrays ``X`` and ``y``, loaded with
    ``allow_pickle=False``) or a ``.csv``/``.parquet`` with a label column (``label_column=``);
(c) **public loaders** — ``mnist``, ``fashion_mnist``, ``cifar10``: they read a local
    ``.npz`` or IDX folder when one is given or found under ``data/raw/`` of the folders the caller
    names (``data_roots``: the stages pass :func:`tasks.paths.data_roots`), then the folder a system
    package installed (:data:`SYSTEM_DIRS`: Debian's ``dataset-fashion-mnist``, ``make data``), and
    otherwise fail with a message saying how to install or provide the file. Nothing is downloaded
    at run time. ``features="unit"`` maps pixel intensities to [0, 1] (pixels/255).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from veilbench.io import load_npz
from veilbench.random import stream
from veilbench.validation import ValidationError, check_array, check_labels


@dataclass(frozen=True)
class Dataset:
    """A labelled data set: ``X`` (n × p, float64), integer labels ``y`` (n,), and provenance."""

    name: str
    X: np.ndarray
    y: np.ndarray
    description: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    texts: np.ndarray | None = None
    """For text data sets: the records' text, (n,) unicode; ``X`` then holds simple numeric
    surface features (characters, words) and the ``sentence`` encoder embeds ``texts``."""


#: Largest feature magnitude accepted: squares and sums of squares over millions of records stay
#: far inside float64 (a standardisation of ±1e308 gives NaN).
MAX_ABS_FEATURE = 1e15


def _validated(name: str, X: Any, y: Any, description: str, **meta: Any) -> Dataset:
    """``Dataset`` after checking X (n × p numeric, finite, |x| ≤ :data:`MAX_ABS_FEATURE`, not
    every feature constant) and y (n integer labels, ≥ 2 classes)."""
    Xa = check_array(X, f"{name}.X", ndim=2, min_rows=2)
    if Xa.shape[1] == 0:
        raise ValidationError(f"{name}.X: expected at least 1 feature column, got shape {Xa.shape}")
    biggest = float(np.max(np.abs(Xa))) if Xa.size else 0.0
    if biggest > MAX_ABS_FEATURE:
        raise ValidationError(f"{name}.X: values must lie within ±{MAX_ABS_FEATURE:g}, got magnitude {biggest:.3g}; "
                              f"rescale the features")
    ya = check_labels(y, f"{name}.y", n=Xa.shape[0], min_classes=2)
    if np.all(Xa == Xa[0]):
        raise ValidationError(f"{name}.X: every feature is constant (e.g. all zero); the data hold nothing to learn")
    return Dataset(name=name, X=Xa, y=ya, description=description, meta=meta)


def _sklearn(loader_name: str, description: str) -> Callable[..., Dataset]:
    def load(**_: Any) -> Dataset:
        import sklearn.datasets

        bunch = getattr(sklearn.datasets, loader_name)()
        return _validated(loader_name.removeprefix("load_"), bunch.data, bunch.target, description, source="sklearn")

    return load


def gaussian_mixture(
    n_samples: int = 1000, n_features: int = 16, n_classes: int = 4, separation: float = 3.0, seed: int = 0, **_: Any
) -> Dataset:
    """Isotropic Gaussian clusters: class c centred at ``separation · μ_c`` with μ_c ~ N(0, I_p)/√p·√p."""
    if n_samples < n_classes * 2:
        raise ValidationError(f"n_samples: need at least 2 per class ({2 * n_classes}), got {n_samples}")
    rng = stream(seed, "datasets.gaussian_mixture")
    centres = rng.normal(size=(n_classes, n_features)) * separation
    y = rng.integers(0, n_classes, size=n_samples)
    y[:n_classes] = np.arange(n_classes)
    X = centres[y] + rng.normal(size=(n_samples, n_features))
    return _validated("gaussian_mixture", X, y, "generated Gaussian mixture", seed=seed)


def low_rank(
    n_samples: int = 1000, n_features: int = 64, rank: int = 8, n_classes: int = 4, noise: float = 0.05, seed: int = 0, **_: Any
) -> Dataset:
    """Low-rank embeddings X = (C_y + E) W with W (rank × p) random, plus small isotropic noise."""
    if rank > n_features:
        raise ValidationError(f"rank: must be ≤ n_features ({n_features}), got {rank}")
    rng = stream(seed, "datasets.low_rank")
    centres = rng.normal(size=(n_classes, rank)) * 2.0
    y = rng.integers(0, n_classes, size=n_samples)
    y[:n_classes] = np.arange(n_classes)
    W = rng.normal(size=(rank, n_features)) / np.sqrt(rank)
    X = (centres[y] + rng.normal(size=(n_samples, rank))) @ W + noise * rng.normal(size=(n_samples, n_features))
    return _validated("low_rank", X, y, "generated low-rank embeddings", seed=seed, rank=rank)


def adult_like(n_samples: int = 48842, seed: int = 0, **_: Any) -> Dataset:
    """A generated tabular set of Adult's size (48,842 × 14: 6 numeric, 8 one-hot-coded categorical
    features reduced to integer codes), binary label from a noisy logistic model (≈24% positives)."""
    rng = stream(seed, "datasets.adult_like")
    numeric = rng.normal(size=(n_samples, 6)) * np.array([13.6, 1.0, 2.6, 7400.0, 400.0, 12.4])
    numeric += np.array([38.6, 0.0, 10.1, 1079.0, 87.5, 40.4])
    cats = np.column_stack([rng.integers(0, k, size=n_samples) for k in (9, 16, 7, 15, 6, 5, 2, 42)])
    X = np.column_stack([numeric, cats]).astype(float)
    z = (X - X.mean(0)) / (X.std(0) + 1e-12)
    logits = z @ rng.normal(size=X.shape[1]) - 1.3 + 0.5 * rng.normal(size=n_samples)
    y = (logits > 0).astype(int)
    return _validated("adult_like", X, y, "generated tabular data of Adult's size (not the real Adult)", seed=seed)


def correlation_filter(X: np.ndarray, threshold: float) -> np.ndarray:
    """Indices of the columns kept by the GCA paper's filter (spec gca.md §2 step 3): go through
    the columns in order and keep column j only if its Pearson |r| with every already-kept column is
    ≤ ``threshold``. Constant columns (r undefined) count as uncorrelated.

    >>> X = np.array([[0., 0., 1.], [1., 1., 0.], [2., 2.1, 1.], [3., 2.9, 0.]])
    >>> correlation_filter(X, 0.6).tolist()
    [0, 2]
    """
    if not 0.0 < threshold < 1.0:
        raise ValidationError(f"max_abs_correlation: must be in (0, 1), got {threshold}")
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.nan_to_num(np.abs(np.corrcoef(X, rowvar=False)), nan=0.0) if X.shape[1] > 1 else np.zeros((1, 1))
    kept: list[int] = []
    for j in range(X.shape[1]):
        if all(r[j, k] <= threshold for k in kept):
            kept.append(j)
    return np.asarray(kept, dtype=int)


def _tabular(p: Path, df: Any, label_column: str, categorical: str, max_abs_correlation: float | None,
             features: str) -> Dataset:
    import pandas.api.types as ptypes

    if df.empty:
        raise ValidationError(f"{p}: file holds no rows")
    if label_column not in df.columns:
        raise ValidationError(f"label_column: {label_column!r} is not a column of {p} (columns: {list(df.columns)[:10]})")
    if categorical not in ("reject", "integer"):
        raise ValidationError(f"categorical: must be 'reject' or 'integer' (integer-coded categories), got {categorical!r}")
    y = df[label_column].to_numpy()
    feats = df.drop(columns=[label_column])
    non_numeric = [c for c in feats.columns if not ptypes.is_numeric_dtype(feats[c].dtype)]
    if non_numeric and categorical == "reject":
        raise ValidationError(f"{p}: feature columns must be numeric; non-numeric: {non_numeric[:5]} "
                              "(categorical: integer codes them)")
    for c in non_numeric:  # integer codes in sorted order of the category strings; a missing value is its own code
        feats[c] = np.unique(feats[c].astype(str).str.strip().to_numpy(), return_inverse=True)[1]
    if getattr(y.dtype, "kind", "O") not in "iuf":
        _, y = np.unique(np.char.rstrip(np.char.strip(y.astype(str)), "."), return_inverse=True)
    X = feats.to_numpy(dtype=float)
    meta: dict[str, Any] = {"source": str(p), "categorical_columns": non_numeric}
    if max_abs_correlation is not None:
        keep = correlation_filter(X, float(max_abs_correlation))
        meta["dropped_correlated"] = [str(feats.columns[j]) for j in range(X.shape[1]) if j not in set(keep.tolist())]
        X = X[:, keep]
    return _validated(p.stem, scale_features(X, features, p.stem), y, f"user file {p.name}", **meta)


def load_file(path: str | os.PathLike | None = None, label_column: str = "label", categorical: str = "reject",
              max_abs_correlation: float | None = None, column_names: list[str] | None = None,
              features: str = "raw", **_: Any) -> Dataset:
    """Load a user file: ``.npz`` with arrays ``X`` and ``y`` (or Keras' ``x_train``/``y_train``/
    ``x_test``/``y_test``; no pickles), a folder of MNIST-format IDX files
    (:mod:`veilbench.datasets.idx`), or ``.csv``/``.parquet`` with a feature table and a label
    column ``label_column``. Images (n, h, w[, c]) are flattened to rows.

    Tabular options (the GCA paper's preprocessing, spec gca.md §2): ``categorical="integer"``
    integer-codes non-numeric feature columns (a missing "?" is its own category; default
    ``"reject"`` refuses them); ``max_abs_correlation=0.6`` drops columns by
    :func:`correlation_filter` (computed on the whole file: the loader does not know the split);
    ``column_names`` names the columns of a header-less CSV (e.g. UCI's adult.data). String labels
    are coded after stripping spaces and a trailing "." (adult.test writes ">50K."). ``features="unit"``
    maps pixel values 0…255 to [0, 1]."""
    from veilbench.datasets.idx import from_keras_layout, read_idx_folder

    if not path:
        raise ValidationError("path: a user dataset needs path=<file.npz|.csv|.parquet or an IDX folder>")
    p = Path(path)
    if p.is_dir():
        X, y = read_idx_folder(p)
        X = scale_features(X.astype(float), features, p.name)
        return _validated(p.name, X, y, f"user IDX folder {p.name}", source=str(p))
    if not p.is_file():
        raise ValidationError(f"path: file not found: {p}")
    suffix = p.suffix.lower()
    if suffix == ".npz":
        arrays = load_npz(p)
        if {"X", "y"} <= set(arrays):
            X, y = arrays["X"], arrays["y"]
        elif "x_train" in arrays:
            X, y = from_keras_layout(arrays, str(p))
        else:
            raise ValidationError(f"{p}: .npz must hold arrays 'X' and 'y' (or Keras' x_train, y_train, x_test, "
                                  f"y_test); missing {sorted({'X', 'y'} - set(arrays))}, found {sorted(arrays)}")
        if X.ndim > 2:
            X = X.reshape(X.shape[0], int(np.prod(X.shape[1:])))
        if features != "raw":
            X = scale_features(check_array(X, f"{p.stem}.X", ndim=2, min_rows=2), features, p.stem)
        return _validated(p.stem, X, y, f"user file {p.name}", source=str(p))
    if suffix in (".csv", ".parquet"):
        import pandas as pd

        if suffix == ".csv":
            _check_csv_header(p)
        try:
            if suffix == ".csv":
                df = pd.read_csv(p, header=None if column_names else "infer", names=column_names,
                                 skipinitialspace=True, comment="|" if column_names else None)
            else:
                df = pd.read_parquet(p)
        except Exception as exc:  # pandas raises many types for malformed files
            raise ValidationError(f"{p}: cannot be read as {suffix} ({type(exc).__name__}: {exc})") from None
        return _tabular(p, df, label_column, categorical, max_abs_correlation, features)
    raise ValidationError(f"path: unsupported file type {suffix!r}; use .npz, .csv or .parquet")


def _check_csv_header(path: Path) -> None:
    """Refuse a CSV whose header names a column twice (pandas would rename the second ``label``
    to ``label.1`` and use it as a feature)."""
    import csv

    try:
        with open(path, newline="", encoding="utf-8") as fh:
            header = next(csv.reader(fh), [])
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ValidationError(f"{path}: cannot be read as .csv ({type(exc).__name__}: {exc})") from None
    names = [h.strip() for h in header]
    twice = sorted({h for h in names if names.count(h) > 1})
    if twice:
        raise ValidationError(f"{path}: the header names column(s) {twice} more than once; give each column one name")


def _text_dataset(name: str, texts: list[str], y: Any, description: str, **meta: Any) -> Dataset:
    if not texts or not all(isinstance(t, str) and t.strip() for t in texts):
        raise ValidationError(f"{name}.texts: every record needs a non-empty text")
    surface = np.array([[len(t), len(t.split())] for t in texts], dtype=float)
    base = _validated(name, surface, y, description, **meta)
    return Dataset(base.name, base.X, base.y, description, base.meta, np.asarray(texts, dtype=str))


def paraphrases(**_: Any) -> Dataset:
    """The embedded paraphrase corpus (:mod:`veilbench.datasets.paraphrases`); label = meaning group."""
    from veilbench.datasets.paraphrases import paraphrase_corpus

    texts, labels = paraphrase_corpus()
    return _text_dataset("paraphrases", texts, labels, "paraphrase groups (embedded text)", source="veilbench")


def load_text_file(
    path: str | os.PathLike | None = None, text_column: str = "text", label_column: str = "label", **_: Any
) -> Dataset:
    """A user ``.csv``/``.parquet`` with a text column and a label column (embed it with ``encoder: sentence``)."""
    if not path:
        raise ValidationError("path: a text dataset needs path=<file.csv|.parquet>")
    p = Path(path)
    if not p.is_file():
        raise ValidationError(f"path: file not found: {p}")
    if p.suffix.lower() not in (".csv", ".parquet"):
        raise ValidationError(f"path: unsupported file type {p.suffix!r}; use .csv or .parquet")
    import pandas as pd

    if p.suffix.lower() == ".csv":
        _check_csv_header(p)
    try:
        df = pd.read_csv(p) if p.suffix.lower() == ".csv" else pd.read_parquet(p)
    except Exception as exc:  # pandas raises many types for malformed files
        raise ValidationError(f"{p}: cannot be read ({type(exc).__name__}: {exc})") from None
    for col, role in ((text_column, "text_column"), (label_column, "label_column")):
        if col not in df.columns:
            raise ValidationError(f"{role}: {col!r} is not a column of {p} (columns: {list(df.columns)[:10]})")
    if df.empty:
        raise ValidationError(f"{p}: file holds no rows")
    y = df[label_column].to_numpy()
    if getattr(y.dtype, "kind", "O") not in "iuf":
        _, y = np.unique(y.astype(str), return_inverse=True)
    texts = ["" if pd.isna(t) else str(t) for t in df[text_column]]
    return _text_dataset(p.stem, texts, y, f"user text file {p.name}", source=str(p))


#: folders where a system package installs a public data set (Debian's ``dataset-fashion-mnist``,
#: installed by ``make data``), searched after ``data/raw/``
SYSTEM_DIRS: dict[str, tuple[Path, ...]] = {
    "fashion_mnist": (Path("/usr/share/datasets/fashion-mnist"),),
}
#: how to install each public data set, named in the error when no file is found
INSTALL_HINTS: dict[str, str] = {
    "fashion_mnist": "run `make data` (installs Debian's dataset-fashion-mnist into /usr/share/datasets/fashion-mnist)",
}


#: loader parameters the calling stage sets, never ``params.yaml`` (:mod:`veilbench.config` refuses them)
CALLER_OPTIONS = frozenset({"data_roots"})


def _unique_roots(roots: Sequence[str | os.PathLike]) -> list[Path]:
    out: list[Path] = []
    for r in roots:
        if r and Path(r).resolve() not in out:
            out.append(Path(r).resolve())
    return out


def scale_features(X: np.ndarray, features: str, name: str) -> np.ndarray:
    """``features="raw"``: X unchanged; ``"unit"``: pixel intensities 0…255 mapped to X/255 ∈ [0, 1]
    (the anchor-noise paper's pixels/255 input). ``unit`` rejects values outside [0, 255]."""
    if features == "raw":
        return X
    if features != "unit":
        raise ValidationError(f"features: must be 'raw' or 'unit' (pixels/255), got {features!r}")
    if X.size and (X.min() < 0 or X.max() > 255):
        raise ValidationError(f"features: 'unit' expects pixel values in [0, 255]; {name} has values in "
                              f"[{X.min():g}, {X.max():g}]")
    return X / 255.0


def _public(name: str, shape_hint: str) -> Callable[..., Dataset]:
    def load(path: str | None = None, features: str = "raw", system_dirs: list[str] | None = None,
             data_roots: Sequence[str | os.PathLike] = (".",), **_: Any) -> Dataset:
        """``path``, else ``<root>/data/raw/<name>[.npz]`` for each of ``data_roots`` (in order; the
        caller names them, default the CWD), else the system folders."""
        candidates = [Path(path)] if path else []
        for root in _unique_roots(data_roots):
            raw = root / "data" / "raw"
            candidates += [raw / f"{name}.npz", raw / name]  # an .npz, or a folder of IDX files
        candidates += [Path(d) for d in system_dirs] if system_dirs is not None else list(SYSTEM_DIRS.get(name, ()))
        for c in candidates:
            if c.is_file() or c.is_dir():
                ds = load_file(c)
                X = scale_features(ds.X, features, name)
                return Dataset(name, X, ds.y, f"{name} from {c}", {"source": str(c), "features": features})
        if path:
            raise ValidationError(f"path: file not found: {path}")
        hint = INSTALL_HINTS.get(name, "")
        raise ValidationError(
            f"{name}: no local copy found (nothing is downloaded at run time). "
            + (f"To install it, {hint}; or " if hint else "")
            + f"provide the data as an .npz with arrays X ({shape_hint}) and y (labels) at "
            f"data/raw/{name}.npz (or Keras' x_train/y_train/x_test/y_test, or the four IDX files in "
            f"data/raw/{name}/), or pass path=<file.npz or folder>. Searched: {', '.join(str(c) for c in candidates)}"
        )

    return load


#: name → (loader, kind, one-line description)
DATASETS: dict[str, tuple[Callable[..., Dataset], str, str]] = {
    "digits": (_sklearn("load_digits", "8×8 handwritten digits, 1,797 × 64, 10 classes"), "embedded", "scikit-learn digits (8×8 images)"),
    "breast_cancer": (_sklearn("load_breast_cancer", "Wisconsin breast cancer, 569 × 30, 2 classes"), "embedded", "scikit-learn breast cancer (tabular)"),
    "wine": (_sklearn("load_wine", "wine recognition, 178 × 13, 3 classes"), "embedded", "scikit-learn wine (tabular)"),
    "gaussian_mixture": (gaussian_mixture, "generated", "Gaussian clusters (n_samples, n_features, n_classes)"),
    "low_rank": (low_rank, "generated", "low-rank embeddings (n_samples, n_features, rank)"),
    "adult_like": (adult_like, "generated", "tabular set of Adult's size (generated)"),
    "paraphrases": (paraphrases, "embedded", "paraphrase corpus, 48 sentences in 12 meaning groups (text)"),
    "file": (load_file, "user", "your .npz (X, y) or .csv/.parquet with a label column"),
    "text_file": (load_text_file, "user", "your .csv/.parquet with a text column and a label column"),
    "mnist": (_public("mnist", "70000 × 784"), "public", "MNIST (your .npz or IDX folder in data/raw/mnist[.npz])"),
    "fashion_mnist": (_public("fashion_mnist", "70000 × 784"), "public",
                      "Fashion-MNIST (data/raw/fashion_mnist[.npz], else Debian's dataset-fashion-mnist: `make data`)"),
    "cifar10": (_public("cifar10", "60000 × 3072"), "public", "CIFAR-10 (your .npz in data/raw/cifar10.npz)"),
}


def load_dataset(name: str, **options: Any) -> Dataset:
    """Load the dataset registered as ``name`` with loader ``options`` (e.g. ``path=``, ``seed=``)."""
    try:
        loader = DATASETS[name][0]
    except KeyError:
        raise ValidationError(f"dataset: must be one of {sorted(DATASETS)}, got {name!r}") from None
    return loader(**options)


def describe_datasets() -> list[dict[str, str]]:
    """One row per registered dataset: name, kind and description (for ``veilbench datasets``)."""
    return [{"name": k, "kind": v[1], "description": v[2]} for k, v in DATASETS.items()]
