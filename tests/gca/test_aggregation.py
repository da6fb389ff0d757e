"""Server rules of FedAvg / FedNova / DP-FedAvg on hand-computable cases (spec §5)."""

import numpy as np
import pytest

from veilbench.gca import aggregation as agg
from veilbench.validation import ValidationError

G = np.array([1.0, 1.0])
LOCAL = np.array([[3.0, 1.0], [1.0, 5.0]])
W = np.array([0.25, 0.75])


def test_sample_weights():
    assert np.allclose(agg.sample_weights(np.array([1, 3])), [0.25, 0.75])


def test_fedavg_hand_case():
    # 0.25*[3,1] + 0.75*[1,5] = [1.5, 4.0]
    assert np.allclose(agg.fedavg(G, LOCAL, W), [1.5, 4.0])


def test_fednova_equals_fedavg_for_equal_steps():
    assert np.allclose(agg.fednova(G, LOCAL, W, np.array([7.0, 7.0])), agg.fedavg(G, LOCAL, W))


def test_fednova_hand_case_with_unequal_steps():
    tau = np.array([1.0, 3.0])
    # d_1 = (G - L1)/1 = [-2, 0]; d_2 = (G - L2)/3 = [0, -4/3]; tau_eff = 0.25 + 2.25 = 2.5
    # G - 2.5 * (0.25 d_1 + 0.75 d_2) = [1,1] - 2.5*[-0.5, -1] = [2.25, 3.5]
    out = agg.fednova(G, LOCAL, W, tau)
    assert np.allclose(out, [2.25, 3.5])
    assert not np.allclose(out, agg.fedavg(G, LOCAL, W))


def test_clip_by_norm():
    d = np.array([[3.0, 4.0], [0.3, 0.4]])
    out = agg.clip_by_norm(d, 1.0)
    assert np.allclose(out, [[0.6, 0.8], [0.3, 0.4]])


def test_dp_fedavg_without_noise_is_clipped_average():
    # deltas [2,0] -> [1,0] (norm 2 -> 1) and [0,4] -> [0,1]; average 0.25*[1,0]+0.75*[0,1]
    out = agg.dp_fedavg(G, LOCAL, W, clip=1.0, sigma=0.0, rng=np.random.default_rng(0))
    assert np.allclose(out, G + [0.25, 0.75])


def test_dp_fedavg_noise_std_is_sigma_over_clients():
    p = 20_000
    g = np.zeros(p)
    local = np.zeros((4, p))
    out = agg.dp_fedavg(g, local, np.full(4, 0.25), clip=1.0, sigma=2.0, rng=np.random.default_rng(1))
    assert out.std() == pytest.approx(2.0 / 4, rel=0.03)


def test_dp_fedavg_n_draws_are_successive_server_steps_bit_for_bit():
    """Row k of ``dp_fedavg(..., n_draws=n)`` is the k-th of successive DP-FedAvg steps on one generator,
    written out here from the formula: θ + Σ p_i clip(Δ_i) + N(0, (σ/C)²) drawn per step."""
    rng = np.random.default_rng(5)
    g, local, w = rng.standard_normal(9), 3 * rng.standard_normal((4, 9)), np.array([0.1, 0.2, 0.3, 0.4])
    clip, sigma = 1.5, 0.7
    delta = local - g
    clipped = delta * np.minimum(1.0, clip / np.linalg.norm(delta, axis=1))[:, None]
    steps = np.random.default_rng(11)
    by_hand = np.array([g + w @ clipped + steps.normal(0.0, sigma / 4, size=9) for _ in range(5)])
    drawn = agg.dp_fedavg(g, local, w, clip, sigma, np.random.default_rng(11), n_draws=5)
    assert drawn.shape == (5, 9) and np.array_equal(drawn, by_hand)
    one_by_one = np.random.default_rng(11)
    assert np.array_equal(np.array([agg.dp_fedavg(g, local, w, clip, sigma, one_by_one) for _ in range(5)]), by_hand)


@pytest.mark.parametrize(
    "call,field",
    [
        (lambda: agg.fedavg(G, LOCAL, np.array([0.5, 0.6])), "weights"),
        (lambda: agg.fedavg(G, LOCAL[:, :1], W), "local"),
        (lambda: agg.fednova(G, LOCAL, W, np.array([1.0, 0.0])), "local_steps"),
        (lambda: agg.dp_fedavg(G, LOCAL, W, clip=0.0, sigma=1.0, rng=np.random.default_rng(0)), "clip"),
        (lambda: agg.sample_weights(np.array([3, 0])), "sizes"),
        (lambda: agg.dp_fedavg(G, LOCAL, W, clip=1.0, sigma=1.0, rng=np.random.default_rng(0), n_draws=0),
         "n_draws"),
    ],
)
def test_bad_input_names_field(call, field):
    with pytest.raises(ValidationError, match=field):
        call()
