"""Privacy ledger: composition by hand-computable cases, entry validation."""

from __future__ import annotations

import math

import numpy as np

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


def test_count_composes_like_repeated_entries() -> None:
    one = compose([LedgerEntry("a", "sw", "c", 0, "gaussian", 0.5, 1e-6, count=10)])["a"]
    many = compose([_e("a", 0.5, 1e-6, s) for s in range(10)])["a"]
    assert one == many


def test_pipeline_ledger_records_each_private_release(tmp_path) -> None:
    """The release stage turns dp_epsilon/dp_delta/dp_releases of each cell and seed into entries."""
    from tasks.sweep import _ledger_entries
    from veilbench.io import write_bundle

    out = tmp_path / "release" / "sw"
    for cell, metrics in {"eps": {"dp_epsilon": 2.0, "dp_delta": 1e-5, "dp_releases": 3.0}, "clean": {}}.items():
        write_bundle(out / cell, {"x": np.zeros(1)},
                     {"params": {"family": "scoreshield"}, "per_seed": {"0": metrics, "1": metrics}})
    entries = _ledger_entries(out, "sw", "digits", {"eps": {"mechanism": "gaussian"}, "clean": {"mechanism": "clean"}})
    assert [(e["cell"], e["seed"], e["count"]) for e in entries] == [("eps", 0, 3), ("eps", 1, 3)]
    total = compose(LedgerEntry(**e) for e in entries)["digits"]
    assert total.epsilon_basic == 12.0 and total.n_releases == 6
