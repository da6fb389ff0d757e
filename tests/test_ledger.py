"""Privacy ledger: composition by hand-computable cases, entry validation."""

from __future__ import annotations

import math

import pytest

from veilbench.privacy.ledger import LedgerEntry, compose
from veilbench.validation import ValidationError


def _e(dataset: str, eps: float, delta: float, seed: int = 0) -> LedgerEntry:
    return LedgerEntry(dataset, "sw", "c", seed, "gaussian", eps, delta)


def test_basic_composition_sums_per_dataset() -> None:
    totals = compose([_e("a", 1.0, 1e-5), _e("a", 2.0, 1e-5, 1), _e("b", 0.5, 1e-6)])
    assert totals["a"].n_releases == 2
    assert totals["a"].epsilon_basic == 3.0 and math.isclose(totals["a"].delta_basic, 2e-5)
    assert totals["b"].epsilon_basic == 0.5 and totals["b"].n_releases == 1


def test_advanced_composition_wins_for_many_small_releases() -> None:
    k, eps = 400, 0.01
    c = compose([_e("a", eps, 1e-8, s) for s in range(k)])["a"]
    expected = math.sqrt(2 * k * math.log(1e6)) * eps + k * eps * math.expm1(eps)
    assert math.isclose(c.epsilon_advanced, expected)
    assert c.epsilon == c.epsilon_advanced < c.epsilon_basic == pytest.approx(4.0)
    assert math.isclose(c.delta, 1e-6 + k * 1e-8)


def test_a_non_private_release_makes_the_total_infinite() -> None:
    c = compose([_e("a", 1.0, 1e-5), _e("a", math.inf, 0.0)])["a"]
    assert math.isinf(c.epsilon)


@pytest.mark.parametrize("eps,delta,field", [(0.0, 1e-5, "epsilon"), (-1.0, 1e-5, "epsilon"), (1.0, 1.0, "delta"), (1.0, -0.1, "delta")])
def test_bad_entries_are_rejected(eps: float, delta: float, field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        _e("a", eps, delta)
