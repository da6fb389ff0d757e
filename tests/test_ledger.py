"""Privacy ledger: PLD composition per deployment (dataset, sweep, cell), entry validation, pipeline."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq

from veilbench.privacy.calibration import achieved_delta, analytic_sigma, classical_noise_multiplier
from veilbench.privacy.ledger import LedgerEntry, Release, compose
from veilbench.validation import ValidationError


def _e(eps: float, delta: float, *, cell: str = "c", seed: int = 0, count: int = 1, z: float | None = None,
       dataset: str = "a") -> LedgerEntry:
    return LedgerEntry(dataset, "sw", cell, seed, "gaussian", eps, delta, count, z)


def exact_gaussian_epsilon(z: float, delta: float) -> float:
    """ε at which a Gaussian mechanism with noise multiplier z meets δ exactly (Balle & Wang profile)."""
    return brentq(lambda e: achieved_delta(z, 1.0, e) - delta, 1e-9, 1e4, xtol=1e-12)


def test_one_analytic_release_spends_its_claimed_epsilon() -> None:
    z = analytic_sigma(1.0, 2.0, 1e-5)
    c = compose([_e(2.0, 1e-5, z=z)])[("a", "sw", "c")]
    assert c.epsilon == pytest.approx(2.0, rel=2e-3) and c.delta == 1e-5
    assert c.epsilon >= 2.0 * (1 - 1e-6)  # pessimistic discretisation: never below the truth


def test_gaussian_releases_compose_exactly_and_far_below_basic_composition() -> None:
    """q releases at noise multiplier z are one Gaussian with z/√q; PLD matches its exact ε."""
    q, eps, delta = 200, 1.0, 1e-5
    z = analytic_sigma(1.0, eps, delta)
    c = compose([_e(eps, delta, z=z, count=q)])[("a", "sw", "c")]
    assert c.noise_multiplier == pytest.approx(z / math.sqrt(q))
    assert c.epsilon == pytest.approx(exact_gaussian_epsilon(z / math.sqrt(q), delta), rel=5e-3)
    assert c.epsilon < 0.25 * c.epsilon_basic == pytest.approx(0.25 * q * eps)
    # separate entries and one entry with a count are the same deployment cost
    many = compose([_e(eps, delta, z=z) for _ in range(q)])[("a", "sw", "c")]
    assert many.epsilon == pytest.approx(c.epsilon, rel=1e-9) and many.n_releases == q


def test_alternative_cells_and_repeated_seeds_are_not_composed() -> None:
    z = analytic_sigma(1.0, 1.0, 1e-5)
    entries = [_e(1.0, 1e-5, cell=cell, seed=s, z=z) for cell in ("x", "y") for s in range(3)]
    totals = compose(entries)
    assert set(totals) == {("a", "sw", "x"), ("a", "sw", "y")}
    for c in totals.values():
        assert c.epsilon == pytest.approx(1.0, rel=2e-3) and c.n_releases == 1
    other = compose(entries + [_e(1.0, 1e-5, cell="x", dataset="b", z=z)])
    assert len(other) == 3


def test_epsilon_delta_only_entries_compose_with_pld() -> None:
    """Without z, two (1, 1e-5) releases cost at most basic composition, reported at δ = 2e-5."""
    c = compose([_e(1.0, 1e-5), _e(1.0, 1e-5, count=1)])[("a", "sw", "c")]
    assert c.delta == pytest.approx(2e-5)
    assert 1.0 < c.epsilon <= 2.0 + 1e-9
    assert c.epsilon_basic == 2.0
    single = compose([_e(3.0, 1e-5)])[("a", "sw", "c")]
    assert single.epsilon == pytest.approx(3.0, rel=1e-3)


def test_classical_beyond_validity_records_the_delta_achieved() -> None:
    eps, delta = 16.0, 1e-5
    z = classical_noise_multiplier(eps, delta)
    entry = _e(eps, delta, z=z)
    assert entry.delta_achieved == pytest.approx(achieved_delta(z, 1.0, eps))
    assert entry.delta_achieved > 30 * delta
    assert entry.as_dict()["delta_achieved"] == entry.delta_achieved
    c = compose([entry])[("a", "sw", "c")]
    assert c.epsilon > eps  # at the target δ this release spends more than it claims
    assert c.delta_basic == pytest.approx(entry.delta_achieved)


def test_a_non_private_release_makes_the_deployment_infinite() -> None:
    c = compose([_e(1.0, 1e-5), _e(math.inf, 0.0)])[("a", "sw", "c")]
    assert math.isinf(c.epsilon)


@pytest.mark.parametrize("eps,delta,z,field", [
    (0.0, 1e-5, None, "epsilon"), (-1.0, 1e-5, None, "epsilon"), (1.0, 1.0, None, "delta"),
    (1.0, -0.1, None, "delta"), (1.0, 1e-5, 0.0, "noise_multiplier"), (1.0, 1e-5, -2.0, "noise_multiplier"),
    (1.0, 1e-5, float("nan"), "noise_multiplier"), (1.0, 1e-5, float("inf"), "noise_multiplier"),
])
def test_bad_entries_are_rejected(eps: float, delta: float, z: float | None, field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        _e(eps, delta, z=z)


def test_entry_round_trips_through_its_dict() -> None:
    e = _e(1.0, 1e-5, z=3.0, count=4)
    assert LedgerEntry.from_dict(e.as_dict()) == e


def test_pipeline_ledger_records_each_private_release(tiny_run) -> None:
    """The release stage turns each cell and seed's typed releases (ScoreShield: q = 30 score vectors
    at (ε, 1e-5), z = σ/Δ, record adjacency) into the sweep's ledger, tagged with the cell's method,
    and shows the same numbers as the record's ``dp_*`` columns; the clean cell spends nothing."""
    from veilbench.io import read_manifest, read_sealed_json

    out = tiny_run / "data" / "release" / "ss"
    entries = read_sealed_json(out / "ledger.json")["entries"]
    assert [(e["cell"], e["seed"]) for e in entries] == [(c, s) for c in ("epsilon=4.0", "epsilon=8.0") for s in (0, 1)]
    for e in entries:
        eps = float(e["cell"].partition("=")[2])
        z = analytic_sigma(2.0, eps, 1e-5) / 2.0
        assert (e["dataset"], e["sweep"], e["mechanism"], e["adjacency"]) == ("digits", "ss", "gaussian", "record")
        assert (e["epsilon"], e["delta"], e["count"]) == (eps, 1e-5, 30)
        assert e["noise_multiplier"] == pytest.approx(z, rel=1e-9)
        columns = read_manifest(out / e["cell"])["per_seed"][str(e["seed"])]
        assert columns["dp_epsilon"] == eps and columns["dp_releases"] == 30.0
        assert columns["dp_noise_multiplier"] == e["noise_multiplier"]
    assert "ledger" not in read_manifest(out / "mechanism=clean")
    assert not any(k.startswith("dp_") for k in read_manifest(out / "mechanism=clean")["per_seed"]["0"])
    total = compose(LedgerEntry.from_dict(e) for e in entries)[("digits", "ss", "epsilon=4.0")]
    assert total.n_releases == 30 and total.epsilon_basic == 30 * 4.0


def test_a_stage_release_becomes_an_entry_and_the_record_columns() -> None:
    z = analytic_sigma(1.0, 2.0, 1e-5)
    release = Release(2.0, 1e-5, 3, noise_multiplier=z, adjacency="client", epsilon_rdp=5.0)
    entry = release.entry("digits", "sw", "eps", 1, "dpfedavg")
    assert entry == LedgerEntry("digits", "sw", "eps", 1, "dpfedavg", 2.0, 1e-5, 3, z, "client", None, 5.0)
    assert release.metrics() == {"dp_epsilon": 2.0, "dp_delta": 1e-5, "dp_releases": 3.0, "dp_noise_multiplier": z,
                                 "dp_epsilon_rdp": 5.0}
    total = compose([release.entry("digits", "sw", "eps", s, "dpfedavg") for s in (0, 1)])[("digits", "sw", "eps")]
    assert total.n_releases == 3 and total.epsilon_basic == 6.0  # one seed's releases: the deployment
    assert total.epsilon == pytest.approx(exact_gaussian_epsilon(z / math.sqrt(3), 1e-5), rel=5e-3)
    with pytest.raises(ValidationError, match="^count:"):
        Release(2.0, 1e-5, 0)
    with pytest.raises(ValidationError, match="^adjacency:"):
        Release(2.0, 1e-5, adjacency="person")
