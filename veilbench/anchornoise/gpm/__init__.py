"""Generalized orthogonal Procrustes by the generalized power method (GPM), spec ``anchor-noise.md`` §4.

* :mod:`~veilbench.anchornoise.gpm.problem`: centering, the objective f, polar factors, the error
  against the true rotations;
* :mod:`~veilbench.anchornoise.gpm.start`: the hollowed spectral start, random start, m = 2 closed form;
* :mod:`~veilbench.anchornoise.gpm.iteration`: Jacobi steps with secant extrapolation, over-relaxed
  block sweeps, the stop rules;
* :mod:`~veilbench.anchornoise.gpm.certificate`: the optimality certificate and escape direction;
* :mod:`~veilbench.anchornoise.gpm.escape`: the Riemannian-staircase escape step;
* :mod:`~veilbench.anchornoise.gpm.aligner`: :class:`GeneralizedPowerMethod`, an estimator with
  ``fit``/``transform``.

Measured behaviour against the alternating baseline is in ``reports/bench/gpm.md`` and ``gpm.json``.
"""

from veilbench.anchornoise.gpm.aligner import GeneralizedPowerMethod
from veilbench.anchornoise.gpm.certificate import (
    CERTIFICATE_TOL,
    certificate,
    certificate_matrix,
    certificate_operator,
    escape_direction,
)
from veilbench.anchornoise.gpm.escape import ESCAPE_STEP, staircase_escape
from veilbench.anchornoise.gpm.iteration import (
    OMEGA_MAX,
    RelaxationSchedule,
    block_sweep,
    consensus_rate,
    excess_rank_energy,
    power_iterations,
    secant_candidate,
    young_omega,
)
from veilbench.anchornoise.gpm.problem import (
    center_anchors,
    check_anchor_uploads,
    objective,
    polar,
    polar_near,
    polar_step,
    polar_step_leave_one_out,
    rotation_error,
    template,
)
from veilbench.anchornoise.gpm.start import (
    DENSE_EIG_MAX,
    LANCZOS_TOL,
    hollow_gram_operator,
    random_init,
    spectral_init,
    two_party_optimum,
)

__all__ = [
    "CERTIFICATE_TOL", "DENSE_EIG_MAX", "ESCAPE_STEP", "LANCZOS_TOL", "OMEGA_MAX", "GeneralizedPowerMethod",
    "RelaxationSchedule", "block_sweep", "center_anchors", "certificate", "certificate_matrix",
    "certificate_operator", "check_anchor_uploads", "consensus_rate", "escape_direction",
    "excess_rank_energy", "hollow_gram_operator", "objective", "polar", "polar_near", "polar_step",
    "polar_step_leave_one_out", "power_iterations", "random_init", "rotation_error", "secant_candidate",
    "spectral_init", "staircase_escape", "template", "two_party_optimum", "young_omega",
]
