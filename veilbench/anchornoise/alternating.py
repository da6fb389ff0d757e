r"""Plain alternating generalized Procrustes (classical GPA, Gower 1975): the GPM's baseline.

Start from the first configuration as template, :math:`R_i^0 = \mathcal P(\bar B_i^\top \bar B_1)`
(so :math:`R_1^0 = I`), then alternate: template = mean of the aligned configurations,
:math:`T = \frac1m\sum_j \bar B_j R_j`, and re-solve each orthogonal Procrustes problem
:math:`R_i = \mathcal P(\bar B_i^\top T)`; same stop rule and objective as
:class:`~veilbench.anchornoise.gpm.GeneralizedPowerMethod` (``benchmarks/bench_gpm.py``). The two
solvers share this Jacobi update and stop rule; the GPM differs in its start (hollowed spectral), its
adaptive schedule (over-relaxed block-coordinate sweeps past the phase transition) and its escape
step, which is what the benchmark ``benchmarks/bench_gpm.py`` measures.
"""

from __future__ import annotations

import numpy as np

from veilbench.anchornoise.gpm import polar_step, power_iterations
from veilbench.anchornoise.gpm.aligner import _ProcrustesAligner


class AlternatingProcrustes(_ProcrustesAligner):
    """Classical GPA on anchor uploads (m, r, d); learnt state as in the GPM, without a certificate."""

    def fit(self, B: np.ndarray) -> AlternatingProcrustes:
        """Fit on raw anchor uploads B (m, r, d); centering is done here."""
        Bbar = self._start(B)
        R0 = polar_step(Bbar, Bbar[0])
        self._finish(Bbar, *power_iterations(Bbar, R0, self.tol, self.tol_rotation, int(self.max_iter)))
        return self
