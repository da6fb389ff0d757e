"""Pairwise squared Euclidean distances: the one implementation every family uses.

:math:`D_{ij} = \\|a_i - b_j\\|^2 = \\|a_i\\|^2 - 2 a_i^\\top b_j + \\|b_j\\|^2`, clipped at 0 (the expansion can
round below 0), by :func:`sklearn.metrics.pairwise.euclidean_distances` with ``squared=True``, which
computes that expansion with one matrix product (and sets the diagonal of ``a`` against itself to 0).
"""

from __future__ import annotations

import numpy as np
from sklearn.metrics.pairwise import euclidean_distances


def sq_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Squared Euclidean distances ``‖a_i − b_j‖²``, shape (n_a, n_b), for a (n_a, d) and b (n_b, d).

    >>> sq_distances(np.array([[0.0, 0.0], [3.0, 4.0]]), np.array([[0.0, 0.0]])).ravel().tolist()
    [0.0, 25.0]
    """
    return euclidean_distances(a, b, squared=True)
