"""The default GCA protocol's pieces: balanced test set, flag-all accuracy, per-round curve, convergence."""

import numpy as np
import pytest

from tests.gca.helpers import digits_stage_inputs
from veilbench.gca import family as F
from veilbench.gca.data import balanced_rows
from veilbench.gca.selection import converged_round, round_curve
from veilbench.stages import STAGES
from veilbench.validation import ValidationError


def test_balanced_rows_keep_the_rarer_label_and_subsample_the_other():
    y = np.r_[np.zeros(5), np.ones(20)].astype(np.int64)
    rows = balanced_rows(y, 3)
    assert np.all(np.diff(rows) > 0)
    assert (y[rows] == 0).sum() == (y[rows] == 1).sum() == 5
    assert set(np.flatnonzero(y == 0)) <= set(rows)
    assert np.array_equal(rows, balanced_rows(y, 3)) and not np.array_equal(rows, balanced_rows(y, 4))
    flipped = balanced_rows(1 - y, 3)
    assert (y[flipped] == 0).sum() == (y[flipped] == 1).sum() == 5


def test_round_curve_is_the_best_point_of_each_round():
    curve = np.array([0.1, 0.5, 0.2, 0.3, 0.9, 0.4])
    assert np.array_equal(round_curve(curve, 3), [0.5, 0.9])
    assert np.array_equal(round_curve(curve, 1), curve)
    with pytest.raises(ValidationError, match="points_per_round"):
        round_curve(curve, 4)


@pytest.mark.parametrize("curve,tol,expected", [
    ([0.5, 0.8, 0.9, 0.9], 0.0, 3),
    ([0.5, 0.8, 0.9, 0.9], 0.15, 2),
    ([0.9, 0.1, 0.2, 0.3], 0.0, 1),   # a later dip does not undo convergence
    ([0.1, 0.2, 0.3, 0.95], 0.01, 4),  # still improving in the last round
])
def test_converged_round_is_the_first_round_within_tolerance_of_the_best(curve, tol, expected):
    assert converged_round(np.array(curve), tol) == expected


def test_converged_round_rejects_a_negative_tolerance():
    with pytest.raises(ValidationError, match="tolerance"):
        converged_round(np.array([0.1, 0.2]), -0.1)


def test_balanced_cell_reports_flag_all_half_and_convergence():
    inputs = digits_stage_inputs(240, seed=0)
    tiny = dict(rounds=3, local_epochs=1, recon_epochs=2, align_epochs=1, method="single")
    out = {}
    for balance in ("all", "balanced"):
        params = F.Params(test_balance=balance, **tiny)
        staged = dict(inputs)
        for stage in STAGES:
            staged[stage] = (res := getattr(F, stage)(staged, params, 5)).arrays
        out[balance] = res.metrics
        assert staged["integrate"]["round_auc"].shape == (3,)
    assert out["balanced"]["utility_accuracy_flag_all"] == 0.5
    assert out["all"]["utility_accuracy_flag_all"] != 0.5 and 0 < out["all"]["utility_accuracy_flag_all"] < 1
    assert out["balanced"]["utility_rounds"] == 3.0
    assert 1 <= out["balanced"]["utility_roc_auc_converged_round"] <= 3
