"""Advantage over a control attack (veilbench.metrics.advantage): 0 at parity, 1 when perfect."""

from __future__ import annotations

import math

import pytest

from veilbench.metrics.advantage import error_advantage, success_advantage
from veilbench.validation import ValidationError


@pytest.mark.parametrize("control", [0.0, 0.1, 0.5, 0.9])
def test_success_advantage_is_zero_at_parity_and_one_when_perfect(control: float) -> None:
    assert success_advantage(control, control) == 0.0
    assert success_advantage(1.0, control) == 1.0


def test_success_advantage_values_and_sign() -> None:
    assert success_advantage(0.55, 0.1) == pytest.approx(0.5)
    assert success_advantage(0.3, 0.0) == pytest.approx(0.3)
    assert success_advantage(0.05, 0.1) < 0  # the release misled the attacker
    assert math.isnan(success_advantage(1.0, 1.0))


@pytest.mark.parametrize("control", [0.5, 1.0, 7.0])
def test_error_advantage_is_zero_at_parity_and_one_when_perfect(control: float) -> None:
    assert error_advantage(control, control) == 0.0
    assert error_advantage(0.0, control) == 1.0


def test_error_advantage_values_and_sign() -> None:
    assert error_advantage(0.25, 1.0) == pytest.approx(0.75)
    assert error_advantage(2.0, 1.0) == pytest.approx(-1.0)  # worse than the control guess
    assert math.isnan(error_advantage(0.0, 0.0))
    assert math.isnan(error_advantage(float("nan"), 1.0))


@pytest.mark.parametrize(
    ("fn", "main", "control", "match"),
    [
        (success_advantage, 1.5, 0.1, r"main: a success rate must lie in \[0, 1\]"),
        (success_advantage, 0.5, -0.1, r"control: a success rate must lie in \[0, 1\]"),
        (success_advantage, float("inf"), 0.1, "main: must be a finite number"),
        (error_advantage, -1.0, 1.0, "main: an error must be ≥ 0"),
        (error_advantage, 1.0, float("inf"), "control: must be a finite number"),
    ],
)
def test_bad_inputs_name_the_argument(fn, main: float, control: float, match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        fn(main, control)
