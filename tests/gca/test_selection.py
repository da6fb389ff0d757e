"""Paper vs matched vs final checkpoint selection (spec §1.4, §11.1)."""

import numpy as np
import pytest

from veilbench.gca.selection import checkpoint_indices, select
from veilbench.validation import ValidationError

# 3 rounds × 2 points per round; the best point is mid-round in round 1
CURVE = np.array([0.9, 0.5, 0.6, 0.7, 0.65, 0.55])


def test_paper_takes_global_max():
    s = select(CURVE, 2, "paper")
    assert (s.value, s.index) == (0.9, 0)


def test_matched_uses_round_end_points_only():
    assert list(checkpoint_indices(6, 2, "matched")) == [1, 3, 5]
    s = select(CURVE, 2, "matched")
    assert (s.value, s.index) == (0.7, 3)


def test_final():
    assert select(CURVE, 2, "final").index == 5


def test_one_point_per_round_makes_paper_and_matched_equal():
    c = np.array([0.2, 0.8, 0.8, 0.1])
    assert select(c, 1, "paper") == select(c, 1, "matched")
    assert select(c, 1, "paper").index == 1  # ties: earliest


@pytest.mark.parametrize(
    "ppr,protocol,field", [(4, "paper", "points_per_round"), (0, "paper", "points_per_round"), (2, "best", "protocol")]
)
def test_bad_input_names_field(ppr, protocol, field):
    with pytest.raises(ValidationError, match=field):
        select(CURVE, ppr, protocol)


def test_k_star_rule_ties_go_to_smaller_k():
    from veilbench.gca.selection import select_k_star

    ks = np.array([40, 10, 20, 80])
    acc = np.array([[0.7, 0.8], [0.75, 0.75], [0.6, 0.6], [0.5, 0.9]])
    assert select_k_star(ks, acc) == 10  # 40 and 10 tie at mean 0.75 -> the smaller K
    assert select_k_star(ks, acc + np.array([[0.0], [0.0], [0.0], [0.06]])) == 80
    with pytest.raises(ValidationError, match="accuracies"):
        select_k_star(ks, acc[:3])
