r"""Exact source linkage on a deduplicated pool (spec §6.1).

The pool is the non-colluders' original training records. Exact duplicate rows are merged first
(``np.unique`` over rows) and each reconstruction's true source is mapped to its merged row, so a
record with an identical twin can still be linked; then the shared
:func:`veilbench.metrics.linkage.linkage_rate` (unique nearest row = hit) is applied. Chance is
1/N_pool with N_pool the number of *distinct* rows. Near-duplicates are not merged.
"""

from __future__ import annotations

import numpy as np

from veilbench.metrics.linkage import LinkageResult, linkage_rate
from veilbench.validation import ValidationError, check_array


def deduplicated_linkage(reconstructions: np.ndarray, pool: np.ndarray, true_index: np.ndarray) -> LinkageResult:
    """Linkage rate of reconstructions (K, p) against the distinct rows of pool (N, p).

    ``true_index`` (K,) gives each reconstruction's source row in the *original* pool.
    """
    pl = check_array(pool, "pool", ndim=2)
    idx = np.asarray(true_index)
    if idx.dtype.kind not in "iu" or (idx.size and (idx.min() < 0 or idx.max() >= pl.shape[0])):
        raise ValidationError(f"true_index: expected integer indices in [0, {pl.shape[0] - 1}]")
    distinct, inverse = np.unique(pl, axis=0, return_inverse=True)
    return linkage_rate(reconstructions, distinct, inverse.reshape(-1)[idx])
