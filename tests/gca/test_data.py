"""Stage arrays → one-class federation (normal classes, partitions, scaling, reference bank)."""

import numpy as np
import pytest

from veilbench.gca.data import build_federation
from veilbench.validation import ValidationError


def _inputs(seed=0, n=200, m=80, p=6):
    rng = np.random.default_rng(seed)
    y_tr = rng.choice([0, 1, 2], n, p=[0.6, 0.3, 0.1])
    y_te = rng.choice([0, 1, 2], m, p=[0.5, 0.3, 0.2])
    x_tr = rng.uniform(0, 16, (n, p))
    x_te = rng.uniform(-5, 20, (m, p))
    prepare = {"X_train": x_tr, "y_train": y_tr, "party_train": rng.integers(0, 4, n), "X_test": x_te, "y_test": y_te}
    embed = {"Z_train": (x_tr - 8) / 4, "Z_test": (x_te - 8) / 4}
    return {"prepare": prepare, "embed": embed}


def _build(inputs, **kw):
    args = dict(spec_kind="mlp", input_source="embed", normal_classes=None, anomaly_classes=None, partition="given",
                n_clients=None, dirichlet_alpha=0.1, image_shape=None, latent_channels=16, reference_size=10, seed=0)
    args.update(kw)
    return build_federation(inputs, **args)


def test_default_normal_class_is_most_frequent_and_clients_hold_normals_only():
    inputs = _inputs()
    data = _build(inputs, validation_fraction=None)  # the whole evaluation pool as the test set
    assert data.normal_classes == [0] and data.anomaly_classes == [1, 2]
    n_normal = int((inputs["prepare"]["y_train"] == 0).sum())
    assert sum(c.shape[0] for c in data.federation.clients) == n_normal
    y_te = inputs["prepare"]["y_test"]
    assert np.array_equal(data.federation.y_test, (y_te != 0).astype(int))
    assert data.reference.shape == (10, 6)
    assert np.allclose(data.reference, data.federation.x_test[data.federation.y_test == 0][:10])


def test_explicit_classes_restrict_the_test_set():
    data = _build(_inputs(), normal_classes=[1], anomaly_classes=[2])
    y_te = _inputs()["prepare"]["y_test"]
    fed = data.federation
    assert fed.y_test.size + fed.y_val.size == int(np.isin(y_te, [1, 2]).sum())


@pytest.mark.parametrize("fraction", [0.5, 0.3])
def test_validation_and_test_sets_split_the_pool_by_label(fraction):
    inputs = _inputs()
    whole = _build(inputs, validation_fraction=None).federation
    fed = _build(inputs, validation_fraction=fraction).federation
    # disjoint halves whose union is the pool (rows as multisets), stratified by label
    pool = sorted(map(tuple, np.c_[whole.x_test, whole.y_test].round(6)))
    parts = sorted(map(tuple, np.r_[np.c_[fed.x_test, fed.y_test], np.c_[fed.x_val, fed.y_val]].round(6)))
    assert pool == parts
    for c in (0, 1):
        m_c = int((whole.y_test == c).sum())
        assert int((fed.y_val == c).sum()) == int(np.floor(fraction * m_c + 0.5))
    # reproducible by seed, another seed draws another split
    again = _build(inputs, validation_fraction=fraction).federation
    assert np.array_equal(again.x_val, fed.x_val)
    other = _build(inputs, validation_fraction=fraction, seed=1).federation
    assert not np.array_equal(other.y_val, fed.y_val) or not np.array_equal(other.x_val, fed.x_val)


def test_a_balanced_pool_gives_balanced_validation_and_test_sets():
    fed = _build(_inputs(m=200), test_balance="balanced").federation
    assert fed.y_test.mean() == fed.y_val.mean() == 0.5


@pytest.mark.parametrize("partition,n_clients", [("iid", 5), ("dirichlet", 3)])
def test_repartition(partition, n_clients):
    data = _build(_inputs(), partition=partition, n_clients=n_clients)
    assert len(data.federation.clients) == n_clients


def test_minmax_scaling_maps_training_normals_into_unit_box():
    data = _build(_inputs(), input_source="prepare_minmax")
    x = np.vstack(data.federation.clients)
    assert x.min() >= -1.0 - 1e-6 and x.max() <= 1.0 + 1e-6
    assert data.federation.x_test.min() >= -1.0 and data.federation.x_test.max() <= 1.0
    assert data.federation.spec.output_activation == "tanh"


def test_standardize_on_training_normals():
    data = _build(_inputs(), input_source="prepare_standardize")
    x = np.vstack(data.federation.clients)
    assert np.allclose(x.mean(0), 0.0, atol=1e-5) and np.allclose(x.std(0), 1.0, atol=1e-4)


@pytest.mark.parametrize(
    "kw,field",
    [
        (dict(normal_classes=[7]), "normal_classes"),
        (dict(normal_classes=[0], anomaly_classes=[0]), "anomaly_classes"),
        (dict(normal_classes=[0], anomaly_classes=[9]), "y_test"),
        (dict(partition="iid", n_clients=None), "n_clients"),
        (dict(validation_fraction=1.0), "validation_fraction"),
        (dict(normal_classes=[0], anomaly_classes=[2], validation_fraction=0.001), None),
    ],
)
def test_bad_input_names_field(kw, field):
    if field is None:  # a tiny fraction still leaves one validation and one test record of each label
        fed = _build(_inputs(), **kw).federation
        assert min((fed.y_val == c).sum() for c in (0, 1)) == 1
        return
    with pytest.raises(ValidationError, match=field):
        _build(_inputs(), **kw)
