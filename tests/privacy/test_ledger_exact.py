"""Ledger composition against dp_accounting's PLDs built independently here (the documented grid step),
the δ at which a deployment is reported, and entry validation messages."""

from __future__ import annotations

import math
import re

import pytest
from dp_accounting.pld import privacy_loss_distribution as pld
from dp_accounting.pld.common import DifferentialPrivacyParameters

from veilbench.privacy.ledger import LedgerEntry, compose
from veilbench.validation import ValidationError


def _e(eps, delta, count=1, z=None, seed=0):
    return LedgerEntry("d", "s", "c", seed, "gaussian", eps, delta, count, z)


def _one(entries):
    (comp,) = compose(entries).values()
    return comp


@pytest.mark.parametrize(("zs", "counts"), [((0.8, 0.8), (1, 1)), ((3.0, 2.0), (4, 1)), ((1.5,), (1,))])
def test_gaussian_entries_are_one_gaussian_pld_at_the_documented_grid(zs, counts):
    """z_eff = (Σ c/z²)^{-1/2}; PLD grid step 10⁻⁴·max(1, 1/z_eff²); ε at the largest target δ."""
    z_eff = sum(c / z**2 for z, c in zip(zs, counts)) ** -0.5
    step = 1e-4 * max(1.0, 1.0 / z_eff**2)
    want = pld.from_gaussian_mechanism(z_eff, sensitivity=1.0, value_discretization_interval=step)
    comp = _one([_e(1.0, d, c, z) for z, c, d in zip(zs, counts, (1e-6, 1e-5))])
    assert comp.noise_multiplier == pytest.approx(z_eff, rel=1e-14)
    assert comp.delta == (1e-5 if len(zs) == 2 else 1e-6)
    assert comp.epsilon == want.get_epsilon_for_delta(comp.delta)


@pytest.mark.parametrize("count", [2, 3])
def test_epsilon_delta_entries_self_compose_count_times(count):
    """An (ε, δ)-only entry of ``count`` releases is its PLD self-composed ``count`` times, reported at
    δ = count·δ (the mass it leaves at infinite loss)."""
    comp = _one([_e(0.5, 1e-4, count)])
    want = pld.from_privacy_parameters(DifferentialPrivacyParameters(0.5, 1e-4)).self_compose(count)
    assert comp.delta == pytest.approx(count * 1e-4, rel=1e-12)
    assert comp.epsilon == want.get_epsilon_for_delta(comp.delta)
    assert comp.noise_multiplier is None and comp.n_releases == count


def test_mixed_entries_compose_the_gaussian_with_the_epsilon_delta_part():
    comp = _one([_e(1.0, 1e-5, 2, 2.0), _e(0.3, 2e-5)])
    gauss = pld.from_gaussian_mechanism(2.0 / math.sqrt(2), sensitivity=1.0, value_discretization_interval=1e-4)
    want = gauss.compose(pld.from_privacy_parameters(DifferentialPrivacyParameters(0.3, 2e-5)))
    assert comp.delta == 2e-5 and comp.epsilon == want.get_epsilon_for_delta(2e-5)
    assert comp.epsilon_basic == 2.3 and comp.n_releases == 3


def test_delta_totals_are_capped_at_one():
    comp = _one([_e(1.0, 0.6), _e(1.0, 0.6)])
    assert comp.delta == 1.0 and comp.delta_basic == 1.0


def test_count_and_delta_messages():
    assert _e(1.0, 0.0, 1).count == 1  # δ = 0 and one release are allowed
    for count in (0, 1.5, -2):
        with pytest.raises(ValidationError, match="^" + re.escape(f"count: must be an integer ≥ 1, got {count}") + "$"):
            _e(1.0, 1e-5, count)
    with pytest.raises(ValidationError, match="^" + re.escape("delta: must lie in [0.0, 1.0), got 1.0") + "$"):
        _e(1.0, 1.0)
