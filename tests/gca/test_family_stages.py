"""The GCA family through the pipeline contract: release → integrate → attack → evaluate."""

import numpy as np
import pydantic
import pytest

from tests.gca.helpers import digits_stage_inputs
from veilbench.gca import family as F
from veilbench.stages import STAGES

TINY = dict(rounds=3, attack_starts=4, attack_max_steps=30, surrogate_max_epochs=20, surrogate_patience=5)


@pytest.fixture(scope="module")
def digits_inputs():
    return digits_stage_inputs(360, seed=0)


def _run_stages(inputs, params, seed):
    """Every stage's metrics as the pipeline records them (stage → metrics), each stage reading the
    arrays of those before it."""
    inputs, metrics = dict(inputs), {}
    for stage in STAGES:
        out = getattr(F, stage)(inputs, params, seed)
        assert all(isinstance(v, float) for v in out.metrics.values()), stage
        for name, arr in out.saved_arrays().items():
            assert isinstance(arr, np.ndarray) and arr.dtype != object, (stage, name)
        inputs[stage], metrics[stage] = out.saved_arrays(), out.saved_metrics()
    return metrics


def _run(inputs, params, seed):
    """The evaluate stage's metrics (:func:`_run_stages`)."""
    return _run_stages(inputs, params, seed)["evaluate"]


def test_gca_cell_metrics_finite_sensible_and_deterministic(digits_inputs):
    params = F.Params(method="gca", normal_classes=[0], anomaly_classes=[1, 7], **TINY)
    m1 = _run(digits_inputs, params, 100)
    m2 = _run(digits_inputs, params, 100)
    assert m1 == m2
    assert all(np.isfinite(v) for v in m1.values())
    assert 0.0 <= m1["utility_accuracy"] <= 1.0 and 0.0 <= m1["utility_roc_auc"] <= 1.0
    assert m1["privacy_ntmse"] > 0 and -2.0 <= m1["privacy_delta_cos"] <= 2.0
    for kind in F.TRIVIAL_KINDS:
        assert np.isfinite(m1[f"privacy_ntmse_trivial_{kind}"])
    assert 0 < m1["comm_mib_per_round"] < 0.01


def test_paper_selection_dominates_matched_dominates_final(digits_inputs):
    params = F.Params(method="gca", recon_epochs=2, **TINY)
    m = _run(digits_inputs, params, 7)
    assert m["utility_accuracy_paper"] >= m["utility_accuracy_matched"] >= m["utility_accuracy_final"]


@pytest.mark.slow
def test_fedavg_and_dpfedavg_cells(digits_inputs):
    longer = {**TINY, "rounds": 4, "local_epochs": 5, "batch_size": 20}
    fed = _run(digits_inputs, F.Params(method="fedavg", **longer), 1)
    dp_stages = _run_stages(digits_inputs, F.Params(method="dpfedavg", **longer), 1)
    dp, released = dp_stages["evaluate"], dp_stages["release"]
    assert "dp_epsilon" not in fed and dp["dp_epsilon"] > 0 and np.isfinite(dp["dp_epsilon"])
    assert released["dp_epsilon_rdp"] == dp["dp_epsilon"] and released["dp_delta"] == 1e-5
    # the per-round audit sits beside the accountant's per-round claim, and below it
    assert 0.0 <= dp["privacy_epsilon_lower_bound_round"] <= dp["privacy_epsilon_claimed_round"] <= dp["dp_epsilon"]
    assert "privacy_epsilon_lower_bound_round" not in fed
    assert fed["comm_mib_per_round"] == dp["comm_mib_per_round"] == fed["comm_mib_per_round_measured"] > 0.1
    assert fed["utility_roc_auc"] > 0.6
    # trivial baselines depend only on the (dataset, seed), not on the method
    assert fed["privacy_ntmse_trivial_noise"] == dp["privacy_ntmse_trivial_noise"]


def test_vectorized_engine_matches_sequential_cell(digits_inputs):
    opts = {**TINY, "method": "fednova", "rounds": 2}
    seq = F.release(digits_inputs, F.Params(**opts), 5).arrays
    vec = F.release(digits_inputs, F.Params(engine="vectorized", **opts), 5).arrays
    assert np.abs(seq["victim_params"] - vec["victim_params"]).max() <= 1e-5
    assert np.allclose(seq["curve_auc"], vec["curve_auc"], atol=1e-6)
    assert np.array_equal(seq["local_steps"], vec["local_steps"])


def test_conv_cell_on_images(digits_inputs):
    params = F.Params(method="fedavg", architecture="conv", image_shape=(1, 8, 8), input_source="prepare_minmax",
                      latent_channels=4, rounds=1, local_epochs=1, attack_starts=2, attack_max_steps=5)
    m = _run(digits_inputs, params, 3)
    assert all(np.isfinite(v) for v in m.values())


def test_single_has_no_privacy_metrics(digits_inputs):
    m = _run(digits_inputs, F.Params(method="single", rounds=2, local_epochs=1), 0)
    assert not any(k.startswith("privacy_") for k in m) and np.isfinite(m["utility_accuracy"])


@pytest.mark.parametrize(
    "kwargs,field",
    [
        (dict(method="fedsgd"), "method"),
        (dict(rounds=0), "rounds"),
        (dict(upload_fraction=1.5), "upload_fraction"),
        (dict(quantile=1.0), "quantile"),
        (dict(clustering="dbscan"), "clustering"),
        (dict(dp_sigma=0.0), "dp_sigma"),
        (dict(architecture="conv"), "image_shape"),
        (dict(partition="iid"), "n_clients"),
        (dict(n_clusters=0), "n_clusters"),
        (dict(unknown_option=1), "unknown_option"),
        (dict(method="single", engine="vectorized"), "engine"),
            (dict(method="gca", architecture="conv", image_shape=(1, 8, 8), engine="vectorized"), "engine"),
            (dict(method="fedavg", engine="vectorized", device="auto"), "engine"),
            (dict(device="tpu"), "device"),
            (dict(validation_fraction=1.0), "validation_fraction"),
            (dict(selection="test"), "selection"),
    ],
)
def test_bad_params_name_the_field(kwargs, field):
    with pytest.raises(pydantic.ValidationError, match=field):
        F.Params(**kwargs)


def test_bad_stage_inputs_name_the_field(digits_inputs):
    from veilbench.validation import ValidationError

    bad = {"prepare": dict(digits_inputs["prepare"]), "embed": digits_inputs["embed"]}
    bad["prepare"]["y_train"] = bad["prepare"]["y_train"][:-1]
    with pytest.raises(ValidationError, match="y_train"):
        F.release(bad, F.Params(**TINY), 0)
    with pytest.raises(ValidationError, match="anomaly_classes"):
        F.release(digits_inputs, F.Params(normal_classes=[0], anomaly_classes=[0, 1], **TINY), 0)
