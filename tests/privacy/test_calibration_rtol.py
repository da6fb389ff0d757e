"""The analytic σ at every tolerance: each ``rtol`` of :data:`RTOL_RANGE` returns after a bounded number
of profile evaluations with (1 − rtol)·δ ≤ δ(σ) ≤ δ, and an ``rtol`` outside it is refused by name."""

from __future__ import annotations

import math
import re

import pytest

from veilbench.privacy import calibration
from veilbench.privacy.calibration import RTOL_RANGE, achieved_delta, analytic_sigma
from veilbench.validation import ValidationError

#: Profile evaluations allowed per call: a bracket of log σ 20 wide halved to double resolution
#: takes about 60; a fixed tiny step towards the root takes millions at rtol ≥ 1e-4.
MAX_EVALUATIONS = 200

CASES = [(2.0, 1.0, 1e-5), (1.0, 1e-5, 1e-5), (1.0, 1e9, 1e-5), (3.0, 20.0, 0.2), (0.5, 100.0, 1e-4)]


@pytest.fixture
def evaluations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the profile evaluations of ``analytic_sigma``; stops a runaway loop with an error."""
    count = [0]

    def counted(sigma: float, sensitivity: float, epsilon: float) -> float:
        count[0] += 1
        if count[0] > 100 * MAX_EVALUATIONS:
            raise RuntimeError("analytic_sigma does not converge")
        return achieved_delta(sigma, sensitivity, epsilon)

    monkeypatch.setattr(calibration, "achieved_delta", counted)
    return count


@pytest.mark.parametrize("rtol", [1e-4, 1e-3, 1e-2, RTOL_RANGE[1], 1e-8])
@pytest.mark.parametrize(("sens", "eps", "delta"), CASES)
def test_every_rtol_returns_quickly_and_spends_delta_to_within_rtol(evaluations, sens, eps, delta, rtol):
    sigma = analytic_sigma(sens, eps, delta, rtol=rtol)
    assert evaluations[0] <= MAX_EVALUATIONS
    assert delta * (1 - rtol) <= achieved_delta(sigma, sens, eps) <= delta


@pytest.mark.parametrize("rtol", [RTOL_RANGE[0], 1e-12])
@pytest.mark.parametrize(("sens", "eps", "delta"), CASES)
def test_tight_rtol_returns_quickly_at_the_smallest_sigma_doubles_resolve(evaluations, sens, eps, delta, rtol):
    """Below about 1e-10 the rounding of the profile itself (its two terms nearly cancel at small ε)
    can exceed rtol·δ: the σ returned still meets δ and is the smallest to 1e-10."""
    sigma = analytic_sigma(sens, eps, delta, rtol=rtol)
    assert evaluations[0] <= MAX_EVALUATIONS
    assert achieved_delta(sigma, sens, eps) <= delta < achieved_delta(sigma * (1 - 1e-10), sens, eps)


def test_a_looser_rtol_needs_fewer_evaluations_and_less_accuracy(evaluations):
    tight = analytic_sigma(2.0, 1.0, 1e-5, rtol=1e-12)
    n_tight, evaluations[0] = evaluations[0], 0
    loose = analytic_sigma(2.0, 1.0, 1e-5, rtol=1e-2)
    assert evaluations[0] < n_tight
    assert tight <= loose <= tight * 1.01
    assert achieved_delta(loose, 2.0, 1.0) < achieved_delta(tight, 2.0, 1.0) * (1 - 1e-6), "rtol is used"


@pytest.mark.parametrize("rtol", [0.0, 1e-16, -1e-3, 0.2, 1.0, math.nan, math.inf])
def test_rtol_outside_its_range_is_refused_by_name(rtol):
    msg = f"rtol: must lie in [{RTOL_RANGE[0]}, {RTOL_RANGE[1]}], got {rtol!r}"
    with pytest.raises(ValidationError, match="^" + re.escape(msg) + "$"):
        analytic_sigma(2.0, 1.0, 1e-5, rtol=rtol)
