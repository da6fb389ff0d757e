r"""L2 / Frobenius sensitivities of ScoreShield releases (spec §1.3, §3.1, §3.3, §8 item 2).

Under record-level replacement adjacency (R) the two unit rows x_i, x_i' differ by
u = x_i' − x_i with ‖u‖ ≤ 2:

* score vector s = X q (regime i): only coordinate i moves, by |<q, u>| ≤ 2, so Δ₂ = 2
  (tight at x_i' = −x_i, q = x_i). Under a public margin <q, x> ≥ −m the scores lie in
  [−m, 1] and Δ_m = 1 + m (App. H.1, a utility model);
* one score vector per query, q queries released together: each of the q vectors moves in
  coordinate i, so the joint release has Δ₂ = 2√q;
* Gram G = X Xᵀ (regime ii): row and column i move by <u, x_j> (j ≠ i), the diagonal stays 1,
  so ‖ΔG‖_F² = 2 Σ_{j≠i} <u, x_j>² ≤ 8(n − 1) and Δ_F = 2√(2(n − 1)) (App. J.1, tight when every
  x_j is collinear with x_i and x_i' = −x_i).
"""

from __future__ import annotations

import math

import numpy as np

from veilbench.validation import ValidationError, check_in_range, check_unit_rows


def vector_sensitivity(public_margin: float | None = None, n_queries: int = 1) -> float:
    """Δ₂ of releasing ``n_queries`` score vectors: (1 + m)·√q, with m = 1 when no margin is given."""
    m = 1.0 if public_margin is None else check_in_range(public_margin, "public_margin", 0.0, 1.0)
    if n_queries < 1:
        raise ValidationError(f"n_queries: must be ≥ 1, got {n_queries}")
    return (1.0 + m) * math.sqrt(n_queries)


def gram_record_sensitivity(n: int) -> float:
    """Δ_F = 2√(2(n − 1)) of the n × n cosine Gram under record replacement (n ≥ 2)."""
    if n < 2:
        raise ValidationError(f"n: the Gram needs at least 2 records, got {n}")
    return 2.0 * math.sqrt(2.0 * (n - 1))


def replace_row(x: np.ndarray, i: int, new_row: np.ndarray) -> np.ndarray:
    """Neighbour X' of unit-row X (n × d) under (R): row ``i`` replaced by the unit ``new_row``."""
    arr = check_unit_rows(x, "x")
    new = check_unit_rows(np.asarray(new_row, dtype=float)[None, :], "new_row")
    if not 0 <= i < arr.shape[0]:
        raise ValidationError(f"i: must lie in [0, {arr.shape[0] - 1}], got {i}")
    out = arr.copy()
    out[i] = new[0]
    return out


def worst_case_gram_pair(n: int, d: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """The (R)-neighbours attaining Δ_F: n copies of e₁ (n × d), and the same with row 0 set to −e₁."""
    if n < 2 or d < 1:
        raise ValidationError(f"n, d: need n ≥ 2 and d ≥ 1, got n={n}, d={d}")
    x = np.zeros((n, d))
    x[:, 0] = 1.0
    return x, replace_row(x, 0, -x[0])
