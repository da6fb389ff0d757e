r"""Attacker advantage over a control attack (the Anonymeter idea).

A privacy metric alone does not say how much the *release* helped the attacker: part of any
success comes from side knowledge (known records, the population mean, class priors). The
control attack gets the same side knowledge but not the release; the advantage is the share of
the gap to a perfect attacker that the release closes (Giomi et al., "A Unified Framework for
Quantifying Privacy Risk in Synthetic Data", PoPETs 2023, §4):

* success rates :math:`r \in [0, 1]` (linkage, reconstruction label match), larger = attacker
  does better:

  .. math:: A = \frac{r_\text{main} - r_\text{control}}{1 - r_\text{control}};

* errors :math:`e \ge 0` (MSE, relative reconstruction error), smaller = attacker does better:

  .. math:: A = 1 - \frac{e_\text{main}}{e_\text{control}}.

Both are 0 when the main attack does exactly as well as the control, 1 for a perfect attacker
(:math:`r_\text{main} = 1` or :math:`e_\text{main} = 0`), negative when the release misleads the
attacker, and undefined (NaN) when the control is already perfect (:math:`r_\text{control} = 1`
or :math:`e_\text{control} = 0`): no attacker can do better than it.

>>> success_advantage(0.625, 0.25)
0.5
>>> error_advantage(0.25, 1.0)
0.75
"""

from __future__ import annotations

import math

from veilbench.validation import ValidationError


def _finite(value: float, name: str) -> float:
    x = float(value)
    if not math.isfinite(x):
        raise ValidationError(f"{name}: must be a finite number, got {value!r}")
    return x


def success_advantage(main: float, control: float) -> float:
    """(main − control) / (1 − control) for success rates in [0, 1]; NaN when control = 1."""
    m, c = _finite(main, "main"), _finite(control, "control")
    for name, x in (("main", m), ("control", c)):
        if not 0.0 <= x <= 1.0:
            raise ValidationError(f"{name}: a success rate must lie in [0, 1], got {x}")
    return float("nan") if c == 1.0 else (m - c) / (1.0 - c)


def error_advantage(main: float, control: float) -> float:
    """1 − main / control for errors ≥ 0; NaN when control = 0 or either error is undefined (NaN)."""
    if math.isnan(float(main)) or math.isnan(float(control)):
        return float("nan")
    m, c = _finite(main, "main"), _finite(control, "control")
    for name, x in (("main", m), ("control", c)):
        if x < 0.0:
            raise ValidationError(f"{name}: an error must be ≥ 0, got {x}")
    return float("nan") if c == 0.0 else 1.0 - m / c
