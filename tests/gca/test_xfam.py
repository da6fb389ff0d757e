"""Cross-family arrays of a GCA cell: shapes, dtypes, and that rows point at the right records."""

from dataclasses import replace

import numpy as np
import pytest

from tests.gca.helpers import digits_stage_inputs
from veilbench.crossfamily import CrossFamilyArrays
from veilbench.gca import family as F
from veilbench.gca.communication import upload_size
from veilbench.gca.simulator import run_protocol
from veilbench.gca.training import encode
from veilbench.gca.xfam import utility_arrays, xfam_arrays

TINY = dict(rounds=2, local_epochs=1, recon_epochs=1, align_epochs=1, n_clusters=2, batch_size=40)
UTILITY = ("xfam_utility_rep_train", "xfam_utility_y_train", "xfam_utility_rep_test", "xfam_utility_y_test")
ATTACK = ("xfam_attack_rep", "xfam_attack_group", "xfam_attack_index")


@pytest.fixture(scope="module")
def digits_inputs():
    return digits_stage_inputs(300, seed=1)


def _cell(inputs, method, seed=3, **cfg):
    params = F.Params(method=method, normal_classes=[0], **TINY)
    data = F._data(inputs, params, seed)
    result = run_protocol(method, data.federation, replace(params.fed_config(), **cfg), seed)
    view = xfam_arrays(data, result, seed)
    return data, result, {} if view is None else view.arrays()


def _check_utility(inputs, arrays, d_z):
    prep = inputs["prepare"]
    n, m = len(prep["y_train"]), len(prep["y_test"])
    assert arrays["xfam_utility_rep_train"].shape == (n, d_z) and arrays["xfam_utility_rep_test"].shape == (m, d_z)
    assert arrays["xfam_utility_rep_train"].dtype == np.float64 and np.isfinite(arrays["xfam_utility_rep_test"]).all()
    # class labels (digits 0, 1, 7), not the normal/anomaly label
    assert np.array_equal(arrays["xfam_utility_y_train"], prep["y_train"])
    assert np.array_equal(arrays["xfam_utility_y_test"], prep["y_test"])
    assert set(np.unique(arrays["xfam_utility_y_train"])) == {0, 1, 7}
    assert arrays["xfam_utility_y_train"].dtype == np.int64


def test_gca_attack_rows_are_uploaded_codes_of_pool_records(digits_inputs):
    # no alignment after the last upload and no extra victim epochs: the final encoders made the upload
    data, result, arrays = _cell(digits_inputs, "gca", align_epochs=0, attack_extra_epochs=0)
    pool, rep = arrays["xfam_pool"], arrays["xfam_attack_rep"]
    group, index = arrays["xfam_attack_group"], arrays["xfam_attack_index"]
    sizes = data.federation.sizes
    assert pool.shape == (sizes.sum(), 64) and pool.dtype == np.float64
    assert rep.shape == (sum(upload_size(s, 0.5) for s in sizes), 16) and rep.dtype == np.float64
    assert group.dtype == index.dtype == np.int64 and set(np.unique(group)) == set(range(len(sizes)))
    assert np.unique(index).size == index.size and index.min() >= 0 and index.max() < pool.shape[0]
    # a row's code is its client's encoder applied to the pool record it points at
    import torch

    for c in range(len(sizes)):
        rows = group == c
        expected = encode(result.final_models[c], torch.from_numpy(pool[index[rows]].astype(np.float32)))
        np.testing.assert_allclose(rep[rows], expected, rtol=1e-5, atol=1e-6)
    # the pool rows of client c are exactly its shard
    offsets = np.cumsum([0, *sizes])
    for c, shard in enumerate(data.federation.clients):
        np.testing.assert_array_equal(pool[offsets[c]:offsets[c + 1]], shard)
    _check_utility(digits_inputs, arrays, 16)


def test_gca_utility_uses_each_clients_own_encoder_for_its_records(digits_inputs):
    import torch

    data, result, arrays = _cell(digits_inputs, "gca")
    rows = data.client_rows[1]
    own = encode(result.final_models[1], torch.from_numpy(data.train_features[rows].astype(np.float32)))
    np.testing.assert_allclose(arrays["xfam_utility_rep_train"][rows], own, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(data.train_labels[rows], 0)  # shards hold the normal class only


@pytest.mark.parametrize("method", ["fedavg", "single"])
def test_methods_without_per_record_uploads_emit_no_xfam_arrays(digits_inputs, method):
    data, result, arrays = _cell(digits_inputs, method)
    assert arrays == {}
    assert len(result.final_models) == (1 if method == "fedavg" else 3)
    # their final encoders still give the utility representation (one shared model / own encoders)
    _check_utility(digits_inputs, CrossFamilyArrays(utility=utility_arrays(data, result, 3)).arrays(), 16)


def test_centralized_server_holds_the_records(digits_inputs):
    _, _, arrays = _cell(digits_inputs, "centralized")
    _check_utility(digits_inputs, arrays, 16)
    np.testing.assert_array_equal(arrays["xfam_attack_rep"], arrays["xfam_pool"])
    np.testing.assert_array_equal(arrays["xfam_attack_index"], np.arange(arrays["xfam_pool"].shape[0]))
    assert not arrays["xfam_attack_group"].any()


def test_release_stage_carries_deterministic_xfam_arrays(digits_inputs):
    params = F.Params(method="gca", normal_classes=[0], **TINY)
    a = F.release(digits_inputs, params, 4).saved_arrays()
    b = F.release(digits_inputs, params, 4).saved_arrays()
    for name in ("xfam_pool", *ATTACK, *UTILITY):
        assert np.array_equal(a[name], b[name]), name
