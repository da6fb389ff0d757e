"""Control attackers of the extraction attack and the attacker's advantage over the best control."""

import numpy as np
import pytest

from tests.gca.helpers import blob_data, digits_stage_inputs
from veilbench.gca import family as F
from veilbench.gca.extraction import advantage, ntmse_delta_cos, perfect_values, trivial_outputs
from veilbench.stages import STAGES


def test_advantage_hand_cases():
    # NTMSE (an error, perfect 0): 1 − main/control
    assert advantage(1.0, 2.0, 0.0) == pytest.approx(0.5)
    assert advantage(2.0, 2.0, 0.0) == 0.0
    assert advantage(3.0, 2.0, 0.0) == pytest.approx(-0.5)
    # Δcos (higher = more leakage): (main − control) / (perfect − control)
    assert advantage(0.5, 0.0, 1.0) == pytest.approx(0.5)
    assert advantage(-0.5, 0.0, 1.0) == pytest.approx(-0.5)
    assert np.isnan(advantage(0.3, 1.0, 1.0))


def test_perfect_attack_has_advantage_one_and_a_control_attack_at_most_zero():
    normal, _ = blob_data(0, n_normal=80)
    targets, reference = normal[:40], normal[40:]
    perfect = perfect_values(targets, reference)
    assert perfect[0] == 0.0 and 0.0 < perfect[1] <= 2.0
    rng = np.random.default_rng(0)
    banks = {k: trivial_outputs(k, 20, targets.mean(0), reference, rng) for k in F.TRIVIAL_KINDS}
    values = {k: ntmse_delta_cos(targets, b, reference) for k, b in banks.items()}
    best = (min(v[0] for v in values.values()), max(v[1] for v in values.values()))
    for j in (0, 1):
        assert advantage(perfect[j], best[j], perfect[j]) == pytest.approx(1.0)
        for v in values.values():
            assert advantage(v[j], best[j], perfect[j]) <= 1e-12  # no control beats the best control


def test_zeros_control_outputs_zeros():
    out = trivial_outputs("zeros", 3, np.ones(4), np.ones((2, 4)), np.random.default_rng(0))
    assert out.shape == (3, 4) and not out.any()


def test_cell_reports_every_control_the_best_and_the_advantage():
    inputs = digits_stage_inputs(240, seed=0)
    params = F.Params(method="fedavg", rounds=2, local_epochs=2, attack_starts=4, attack_max_steps=20)
    staged = dict(inputs)
    for stage in STAGES:
        staged[stage] = (out := getattr(F, stage)(staged, params, 3)).arrays
    m = out.metrics
    for name, best in (("ntmse", min), ("delta_cos", max)):
        controls = [m[f"privacy_{name}_trivial_{k}"] for k in F.TRIVIAL_KINDS]
        assert m[f"privacy_{name}_control_best"] == best(controls)
    assert m["privacy_ntmse_advantage"] == pytest.approx(1.0 - m["privacy_ntmse"] / m["privacy_ntmse_control_best"])
    assert np.isfinite(m["privacy_delta_cos_advantage"])
    # larger advantage ⇔ the attack is better than the control: the sign follows the raw metrics
    assert (m["privacy_ntmse_advantage"] > 0) == (m["privacy_ntmse"] < m["privacy_ntmse_control_best"])
    assert (m["privacy_delta_cos_advantage"] > 0) == (m["privacy_delta_cos"] > m["privacy_delta_cos_control_best"])
