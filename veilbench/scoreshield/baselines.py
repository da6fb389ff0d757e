r"""Reference releases of the Gram beside ScoreShield (spec §3.5).

* embedding noise [X]: release X̃ = X + σ_e N (n × d i.i.d. standard normal N) with
  σ_e = calib(2, ε, δ) (one row changes by ‖x_i − x_i'‖ ≤ 2 under replacement), then
  post-process: renormalise the rows and output their cosine Gram (feasible by construction);
* identity: the data-independent I_n, ε = 0 — a private release worse than I_n is worse than
  releasing nothing (spec §8).
"""

from __future__ import annotations

import numpy as np

from veilbench.privacy.calibration import calibrate_sigma
from veilbench.random import as_rng
from veilbench.scoreshield.projectors import sym
from veilbench.validation import check_epsilon_delta, check_unit_rows

EMBEDDING_SENSITIVITY = 2.0


def embedding_noise_sigma(
    epsilon: float, delta: float, calibrator: str = "analytic", allow_invalid_calibration: bool = False
) -> float:
    """σ_e = calib(2, ε, δ) for the row-replacement release of unit embeddings."""
    eps, dlt = check_epsilon_delta(epsilon, delta)
    return calibrate_sigma(EMBEDDING_SENSITIVITY, eps, dlt, calibrator, allow_invalid=allow_invalid_calibration)


def noisy_embeddings(x: np.ndarray, sigma: float, seed: int | np.random.Generator | None) -> np.ndarray:
    """X̃ = X + σ_e N (n × d) for unit rows X (n × d): the private step of the embedding-noise release."""
    arr = check_unit_rows(x, "x")
    return arr + sigma * as_rng(seed, "scoreshield.embedding-noise").standard_normal(arr.shape)


def embedding_gram(noisy: np.ndarray) -> np.ndarray:
    """Post-processing of X̃ (n × d): the cosine Gram (n × n) of its renormalised rows."""
    unit = noisy / np.maximum(np.linalg.norm(noisy, axis=1, keepdims=True), 1e-300)
    g = np.clip(sym(unit @ unit.T), -1.0, 1.0)
    np.fill_diagonal(g, 1.0)
    return g


def embedding_noise_gram(
    x: np.ndarray, sigma: float, seed: int | np.random.Generator | None
) -> np.ndarray:
    """Cosine Gram (n × n) of the noised, row-renormalised unit embeddings X (n × d)."""
    return embedding_gram(noisy_embeddings(x, sigma, seed))


def identity_gram(n: int) -> np.ndarray:
    """I_n: the trivial, data-independent element of the elliptope."""
    return np.eye(n)
