r"""The shared anchor: a centered matrix with orthogonal columns of norm s_A (spec §2).

.. math::
    G \sim N(0,1)^{r\times d},\quad G \leftarrow G - \mathbf 1\,\overline{G},\quad
    A_0 = \mathrm{thinQR}(G).Q,\quad A = s_A A_0,

so that :math:`\mathbf 1^\top A = 0` and :math:`A^\top A = s_A^2 I_d`. A centered matrix with d
orthonormal columns exists only when r ≥ d + 1 (the columns live in the (r−1)-dimensional
complement of :math:`\mathbf 1`). The default scale is s_A = √r [assume], so anchor entries have unit
variance like standardized features; s_A = 1 is the literal reading of "orthonormal".
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from veilbench.random import as_rng
from veilbench.validation import ValidationError, check_array

AnchorScale = Literal["sqrt_r", "unit"]


def anchor_scale_value(r: int, scale: AnchorScale) -> float:
    """s_A for an r-row anchor: √r for ``"sqrt_r"``, 1 for ``"unit"`` (spec §2 scale choice)."""
    if scale == "sqrt_r":
        return float(np.sqrt(r))
    if scale == "unit":
        return 1.0
    raise ValidationError(f"anchor_scale: must be 'sqrt_r' or 'unit', got {scale!r}")


def make_anchor(
    r: int, d: int, scale: AnchorScale = "sqrt_r", seed: int | np.random.Generator | None = None
) -> np.ndarray:
    """Draw a centered anchor A (r × d) with AᵀA = s_A² I_d and 1ᵀA = 0 (spec §2).

    Raises :class:`ValidationError` when d < 1 or r < d + 1.
    """
    if int(d) < 1:
        raise ValidationError(f"d: must be ≥ 1, got {d}")
    if int(r) < int(d) + 1:
        raise ValidationError(
            f"r: a centered orthonormal anchor needs r ≥ d + 1 = {int(d) + 1} rows, got {r}"
        )
    rng = as_rng(seed, "anchornoise.anchor")
    g = rng.standard_normal((int(r), int(d)))
    g -= g.mean(axis=0)
    q, rr = np.linalg.qr(g)
    q *= np.sign(np.diag(rr))  # deterministic column signs
    q -= q.mean(axis=0)  # remove the round-off mean (columns are centered in exact arithmetic)
    return anchor_scale_value(int(r), scale) * q


def check_anchor(a: np.ndarray, name: str = "anchor", rtol: float = 1e-8) -> tuple[np.ndarray, float]:
    """Validate a centered anchor with orthogonal, equal-norm columns; return (A, s_A).

    Checks, for A (r × d): r ≥ d + 1, ‖1ᵀA‖ ≤ rtol·s_A·√r and ‖AᵀA − s_A² I‖_max ≤ rtol·s_A²
    where s_A² = tr(AᵀA)/d. Raises :class:`ValidationError` naming ``name`` otherwise.
    """
    arr = check_array(a, name, ndim=2)
    r, d = arr.shape
    if r < d + 1:
        raise ValidationError(f"{name}: needs r ≥ d + 1 = {d + 1} rows for d = {d} columns, got r = {r}")
    gram = arr.T @ arr
    s2 = float(np.trace(gram)) / d
    if s2 <= 0:
        raise ValidationError(f"{name}: must be non-zero, got squared scale {s2}")
    dev = float(np.max(np.abs(gram - s2 * np.eye(d)))) / s2
    if dev > rtol:
        raise ValidationError(
            f"{name}: columns must be orthogonal with equal norms (max |AᵀA/s_A² − I| ≤ {rtol}); got {dev:.3g}"
        )
    mean_dev = float(np.linalg.norm(arr.sum(axis=0))) / (np.sqrt(s2) * np.sqrt(r))
    if mean_dev > rtol:
        raise ValidationError(
            f"{name}: columns must be centered (‖1ᵀA‖/(s_A√r) ≤ {rtol}); got {mean_dev:.3g}"
        )
    return arr, float(np.sqrt(s2))
