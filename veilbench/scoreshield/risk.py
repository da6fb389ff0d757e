r"""Risk scaling of the Gram release with n (spec §4.3, §9 E2).

For n records, R(n) = E‖Ĝ − G‖_F² is estimated by Monte Carlo over seeds for the noisy release
G̃ and for a projection of it, and the log–log slope d log R / d log n is fitted by least
squares. Predicted exponents (exact projection, spec §4.3): under record adjacency the naive
risk is Θ(n³) and the projected one O(n²); under output-space adjacency Θ(n²) and O(n^{3/2})
(approached slowly; lower for low-rank G).

Per-cell predictions (spec §4.1, §4.3), computed from the cell's σ and n, for the pipeline's
``risk_*`` metrics (all unnormalised squared Frobenius norms over the n × n matrix):

* naive release: E‖sym(Z)‖_F² = σ² n(n + 1)/2 exactly (diagonal variance σ², off-diagonal σ²/2);
* exact metric projection (Newton, Dykstra): the global bound 2σ·𝒢(E_n) with
  𝒢(E_n) ≈ n·E λ_max(W) ≈ √2·n^{3/2} (W = sym(Z)/σ), i.e. 2√2·σ·n^{3/2}. With σ ∝ √(n − 1)
  under record adjacency this is Θ(n²); under output adjacency (σ fixed) Θ(n^{3/2}). AAP, clip
  and eigen-clip are not metric projections and have no such prediction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from veilbench.random import stream
from veilbench.scoreshield.gram import PROJECTORS, GaussianGramMechanism, cosine_gram
from veilbench.validation import ValidationError

PREDICTED_SLOPES: dict[str, dict[str, float]] = {
    "record": {"noisy": 3.0, "projected": 2.0},
    "output": {"noisy": 2.0, "projected": 1.5},
}


EXACT_PROJECTORS: tuple[str, ...] = ("newton", "dykstra")


def noisy_expected_frobenius_sq(sigma: float, n: int) -> float:
    """E‖G̃ − G‖_F² = σ² n(n + 1)/2 for G̃ = G + sym(Z), Z_ij ~ N(0, σ²) (spec §4.3, naive row)."""
    return float(sigma) ** 2 * n * (n + 1) / 2.0


def projection_global_bound_frobenius_sq(sigma: float, n: int) -> float:
    """2σ·𝒢(E_n) ≈ 2√2·σ·n^{3/2}: the spec's global bound on E‖P_{E_n}(G̃) − G‖_F² (§4.1, §4.3)."""
    return 2.0 * math.sqrt(2.0) * float(sigma) * n**1.5


def predicted_frobenius_sq(mechanism: str, sigma: float, n: int) -> float | None:
    """The spec's predicted E‖Ĝ − G‖_F² for ``mechanism`` at noise σ and n records.

    ``"noisy"``: the exact naive risk; an exact projection (:data:`EXACT_PROJECTORS`): the global
    bound; any other release: ``None`` (the theory does not cover it).
    """
    if mechanism == "noisy":
        return noisy_expected_frobenius_sq(sigma, n)
    if mechanism in EXACT_PROJECTORS:
        return projection_global_bound_frobenius_sq(sigma, n)
    return None


@dataclass(frozen=True)
class RiskCurve:
    """Mean squared Frobenius errors (len(ns),) and fitted vs predicted log–log slopes."""

    ns: np.ndarray
    noisy: np.ndarray
    projected: np.ndarray
    slope_noisy: float
    slope_projected: float
    predicted_noisy: float
    predicted_projected: float


def loglog_slope(ns: np.ndarray, values: np.ndarray) -> float:
    """Least-squares slope of log(values) against log(ns) (both (k,), k ≥ 2, positive)."""
    x, y = np.log(np.asarray(ns, dtype=float)), np.log(np.asarray(values, dtype=float))
    if x.size < 2 or not np.all(np.isfinite(x)) or not np.all(np.isfinite(y)):
        raise ValidationError("ns, values: need ≥ 2 positive points for a log-log slope")
    return float(np.polyfit(x, y, 1)[0])


def clustered_unit_rows(n: int, rank: int, rng: np.random.Generator) -> np.ndarray:
    """n unit rows in R^rank drawn around 5 Gaussian cluster centres (a rank-≤ r Gram)."""
    centres = rng.standard_normal((5, rank))
    x = centres[rng.integers(5, size=n)] + 0.5 * rng.standard_normal((n, rank))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def risk_scaling(
    ns: tuple[int, ...],
    mechanism: GaussianGramMechanism,
    projector: str = "newton",
    rank: int = 4,
    n_seeds: int = 3,
    seed: int = 0,
) -> RiskCurve:
    """Monte Carlo R(n) of G̃ and of ``projector``(G̃) for rank-``rank`` clustered embeddings."""
    if projector not in PROJECTORS:
        raise ValidationError(f"projector: must be one of {sorted(PROJECTORS)}, got {projector!r}")
    if len(ns) < 2 or min(ns) < 2 or n_seeds < 1:
        raise ValidationError(f"ns: need ≥ 2 sizes, each ≥ 2 (and n_seeds ≥ 1), got {ns}, n_seeds={n_seeds}")
    noisy, proj = [], []
    for n in ns:
        errs = np.zeros((n_seeds, 2))
        for k in range(n_seeds):
            rng = stream((seed, n, k), "scoreshield.risk-monte-carlo")
            x = clustered_unit_rows(n, rank, rng)
            g = cosine_gram(x)
            g_noisy = mechanism.release(x, rng).noisy
            errs[k] = np.sum((g_noisy - g) ** 2), np.sum((PROJECTORS[projector](g_noisy).gram - g) ** 2)
        noisy.append(errs[:, 0].mean())
        proj.append(errs[:, 1].mean())
    pred = PREDICTED_SLOPES[mechanism.adjacency]
    ns_arr = np.asarray(ns)
    return RiskCurve(ns_arr, np.array(noisy), np.array(proj), loglog_slope(ns_arr, noisy), loglog_slope(ns_arr, proj),
                     pred["noisy"], pred["projected"])
