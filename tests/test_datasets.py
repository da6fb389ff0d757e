"""Dataset registry, user-file loaders (no pickles), public loaders offline, party partitioning."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from veilbench.datasets import describe_datasets, load_dataset, partition_parties, prepare_dataset
from veilbench.validation import ValidationError


@pytest.mark.parametrize("name,shape,n_classes", [("digits", (1797, 64), 10), ("breast_cancer", (569, 30), 2), ("wine", (178, 13), 3)])
def test_embedded_datasets(name: str, shape: tuple[int, int], n_classes: int) -> None:
    ds = load_dataset(name)
    assert ds.X.shape == shape and ds.X.dtype == np.float64
    assert np.unique(ds.y).size == n_classes


def test_generated_datasets_are_seeded() -> None:
    a = load_dataset("gaussian_mixture", n_samples=200, seed=3)
    b = load_dataset("gaussian_mixture", n_samples=200, seed=3)
    c = load_dataset("gaussian_mixture", n_samples=200, seed=4)
    assert np.array_equal(a.X, b.X) and not np.array_equal(a.X, c.X)
    lr = load_dataset("low_rank", n_samples=300, n_features=40, rank=5, noise=0.0)
    assert np.linalg.matrix_rank(lr.X) == 5
    adult = load_dataset("adult_like", n_samples=2000)
    assert adult.X.shape == (2000, 14) and 0.1 < adult.y.mean() < 0.5


def test_registry_lists_every_kind() -> None:
    kinds = {row["kind"] for row in describe_datasets()}
    assert kinds == {"embedded", "generated", "user", "public"}


def test_npz_user_file_roundtrip_and_image_flattening(tmp_path) -> None:
    X = np.arange(24, dtype=float).reshape(6, 2, 2)
    y = np.array([0, 1, 0, 1, 0, 1])
    np.savez(tmp_path / "mine.npz", X=X, y=y)
    ds = load_dataset("file", path=str(tmp_path / "mine.npz"))
    assert ds.X.shape == (6, 4) and np.array_equal(ds.y, y)


def test_csv_and_parquet_with_label_column(tmp_path) -> None:
    df = pd.DataFrame({"a": [1.0, 2.0, 3.0, 4.0], "b": [0.5, 0.1, 0.2, 0.3], "label": ["x", "y", "x", "y"]})
    df.to_csv(tmp_path / "t.csv", index=False)
    df.to_parquet(tmp_path / "t.parquet")
    for f in ("t.csv", "t.parquet"):
        ds = load_dataset("file", path=str(tmp_path / f), label_column="label")
        assert ds.X.shape == (4, 2) and np.array_equal(ds.y, [0, 1, 0, 1])


def _bad_files(tmp_path):
    np.savez(tmp_path / "pickled.npz", X=np.array([{"a": 1}, {"b": 2}], dtype=object), y=np.array([0, 1]))
    np.savez(tmp_path / "noy.npz", X=np.ones((4, 2)))
    np.savez(tmp_path / "nan.npz", X=np.array([[np.nan, 1.0], [1.0, 2.0]]), y=np.array([0, 1]))
    np.savez(tmp_path / "oneclass.npz", X=np.ones((4, 2)), y=np.zeros(4, dtype=int))
    np.savez(tmp_path / "mismatch.npz", X=np.ones((4, 2)), y=np.array([0, 1]))
    np.savez(tmp_path / "strings.npz", X=np.array([["a", "b"], ["c", "d"]]), y=np.array([0, 1]))
    good = tmp_path / "good.npz"
    np.savez(good, X=np.ones((50, 3)), y=np.arange(50) % 2)
    (tmp_path / "truncated.npz").write_bytes(good.read_bytes()[:100])
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "header.csv").write_text("a,label\n")
    (tmp_path / "nolabel.csv").write_text("a,b\n1,2\n3,4\n")
    (tmp_path / "text.csv").write_text("a,label\nfoo,1\nbar,0\n")
    (tmp_path / "notes.txt").write_text("hello")
    return [
        ("pickled.npz", "pickle"), ("noy.npz", "missing"), ("nan.npz", "NaN"), ("oneclass.npz", "at least 2 classes"),
        ("mismatch.npz", "expected 4 labels"), ("strings.npz", "numeric"), ("truncated.npz", "truncated or corrupt"),
        ("empty.csv", "cannot be read"), ("header.csv", "no rows"), ("nolabel.csv", "label_column"),
        ("text.csv", "non-numeric"), ("notes.txt", "unsupported file type"), ("absent.npz", "file not found"),
    ]


def test_bad_user_files_give_clear_errors(tmp_path) -> None:
    for fname, fragment in _bad_files(tmp_path):
        with pytest.raises(ValidationError) as err:
            load_dataset("file", path=str(tmp_path / fname), label_column="label")
        assert fragment in str(err.value), (fname, str(err.value))


def test_public_loader_offline_says_how_to_provide_the_file(tmp_path, monkeypatch) -> None:
    import sklearn.datasets

    def no_network(*args, **kwargs):
        raise OSError("network unreachable")

    monkeypatch.setattr(sklearn.datasets, "fetch_openml", no_network)
    with pytest.raises(ValidationError) as err:
        load_dataset("mnist", data_roots=[tmp_path])
    assert "data/raw/mnist.npz" in str(err.value)
    (tmp_path / "data" / "raw").mkdir(parents=True)
    np.savez(tmp_path / "data" / "raw" / "mnist.npz", X=np.random.default_rng(0).random((20, 784)), y=np.arange(20) % 10)
    assert load_dataset("mnist", data_roots=[tmp_path]).X.shape == (20, 784)


def test_unknown_dataset_name() -> None:
    with pytest.raises(ValidationError, match="dataset: must be one of"):
        load_dataset("imagenet")


def test_iid_partition_is_balanced_and_seeded() -> None:
    y = np.arange(103) % 5
    p = partition_parties(y, 4, "iid", seed=1)
    assert sorted(np.bincount(p)) == [25, 26, 26, 26]
    assert np.array_equal(p, partition_parties(y, 4, "iid", seed=1))
    assert not np.array_equal(p, partition_parties(y, 4, "iid", seed=2))


def test_dirichlet_partition_is_skewed_but_covers_every_party() -> None:
    y = np.repeat(np.arange(4), 50)
    p = partition_parties(y, 8, "dirichlet", alpha=0.1, seed=0)
    assert set(np.unique(p)) == set(range(8))
    # strong skew: some party sees at most two classes
    assert min(np.unique(y[p == k]).size for k in range(8)) <= 2


def test_partition_rejects_more_parties_than_records() -> None:
    with pytest.raises(ValidationError, match=r"n_parties: must lie in \[1, 3\]"):
        partition_parties(np.array([0, 1, 0]), 4)


def test_prepare_dataset_split_is_stratified_and_disjoint() -> None:
    ds = load_dataset("digits")
    prep = prepare_dataset(ds, test_size=0.25, n_parties=5, max_records=400, seed=0)
    assert prep.X_train.shape[0] + prep.X_test.shape[0] == 400
    assert np.unique(prep.y_test).size == 10
    rows_train = {r.tobytes() for r in prep.X_train}
    assert sum(r.tobytes() in rows_train for r in prep.X_test) <= 5  # digits has a few exact duplicates
    assert set(np.unique(prep.party_train)) == set(range(5))


def test_a_test_split_too_small_for_every_class_names_test_size() -> None:
    from veilbench.datasets import load_dataset, prepare_dataset

    data = load_dataset("paraphrases")
    with pytest.raises(ValidationError, match=r"test_size: a stratified split of 48 records in 12 classes"):
        prepare_dataset(data, test_size=0.1)
    assert prepare_dataset(data, test_size=0.25).X_test.shape[0] == 12
