"""GOPP aligners as estimators: :class:`GeneralizedPowerMethod` (spec §4.3) and their shared state.

``fit`` takes the raw anchor uploads B (m, r, d); ``transform`` aligns records of any participant.
The GPM runs :func:`~veilbench.anchornoise.gpm.iteration.power_iterations` from the hollowed
spectral start, then, if the point is not certified and budget remains, one
:func:`~veilbench.anchornoise.gpm.escape.staircase_escape`; m = 2 uses the closed form.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from veilbench.anchornoise.gpm.certificate import (
    CERTIFICATE_TOL,
    certificate,
    escape_direction,
)
from veilbench.anchornoise.gpm.escape import staircase_escape
from veilbench.anchornoise.gpm.iteration import power_iterations
from veilbench.anchornoise.gpm.problem import center_anchors, objective, template
from veilbench.anchornoise.gpm.start import (
    random_init,
    spectral_init,
    two_party_optimum,
)
from veilbench.validation import ValidationError, check_array, check_in_range


class _ProcrustesAligner:
    """Shared state and ``transform`` of the GOPP solvers (fit in subclasses).

    Learnt state: ``rotations_`` (m, d, d), ``offsets_`` (m, d) = b̄, ``template_`` (r, d) =
    (1/m) Σ_i B̄_i R_i, ``objective_`` = f(rotations_), ``n_iter_``, ``converged_``,
    ``objective_trace_`` (n_iter_ + 1,): f after each iteration, all runs in order (GPM escape: the
    lifted run's entries are the relaxation's objective).
    """

    def __init__(self, tol: float = 1e-10, tol_rotation: float = 1e-8, max_iter: int = 1000):
        self.tol = tol
        self.tol_rotation = tol_rotation
        self.max_iter = max_iter

    def _start(self, B: np.ndarray) -> np.ndarray:
        check_in_range(self.tol, "tol", 0.0, 1.0, low_inclusive=False, high_inclusive=False)
        check_in_range(self.tol_rotation, "tol_rotation", 0.0, None)
        if int(self.max_iter) < 1:
            raise ValidationError(f"max_iter: must be ≥ 1, got {self.max_iter}")
        Bbar, self.offsets_ = center_anchors(B)
        return Bbar

    def _finish(self, Bbar: np.ndarray, R: np.ndarray, trace: list[float], n_iter: int, converged: bool) -> None:
        self.rotations_ = R
        self.template_ = template(Bbar, R) / Bbar.shape[0]
        self.objective_ = objective(Bbar, R)
        self.objective_trace_ = np.asarray(trace)
        self.n_iter_ = int(n_iter)
        self.converged_ = bool(converged)

    def transform(self, Y: np.ndarray, party: np.ndarray) -> np.ndarray:
        """Aligned records Ŷ = (Y − 1 b̄_iᵀ) R_i, row by row with i = party[k] (§4.4); Y (n, d)."""
        y = check_array(Y, "Y", ndim=2, min_rows=0)
        p = np.asarray(party)
        m, d, _ = self.rotations_.shape
        if y.shape[1] != d or p.shape != (y.shape[0],) or (p.size and (p.min() < 0 or p.max() >= m)):
            raise ValidationError(f"Y, party: expected (n, {d}) records and n indices in [0, {m - 1}]")
        return np.einsum("nd,nde->ne", y - self.offsets_[p], self.rotations_[p])

class GeneralizedPowerMethod(_ProcrustesAligner):
    """GPM for generalized orthogonal Procrustes on anchor uploads (spec §4.3).

    Parameters
    ----------
    tol, tol_rotation, max_iter : stop rule (relative objective gain, rotation step, cap).
    init : ``"spectral"`` (default, hollowed spectral start) or ``"random"`` (Haar, ablation).
    template : ``"full"`` (default, includes the self term: monotone) or ``"leave_one_out"``: the
        template of the Jacobi steps (the block sweeps always use the exact leave-one-out maximiser).
    update : ``"adaptive"`` (default: Jacobi phase with secant extrapolation, then over-relaxed
        block-coordinate sweeps) or
        ``"jacobi"`` (Ling's step throughout, ablation).
    escape : run the escape step (module docstring) when the converged point is not certified and
        at least half as many iterations as used remain in ``max_iter``; ``escaped_`` says if it ran.
        ``init``, ``template``, ``update`` and ``escape`` configure the iteration; for m = 2 the closed
        form :func:`two_party_optimum` is returned instead (``n_iter_ = 0``, ``converged_ = True``).
    certify : compute ``certificate_`` = λ_min(Λ − C)/‖Λ − C‖₂ and ``certified_``.
    seed : used by ``init="random"`` only.
    """

    def __init__(
        self,
        tol: float = 1e-10,
        tol_rotation: float = 1e-8,
        max_iter: int = 1000,
        init: Literal["spectral", "random"] = "spectral",
        template: Literal["full", "leave_one_out"] = "full",
        update: Literal["adaptive", "jacobi"] = "adaptive",
        escape: bool = True,
        certify: bool = True,
        seed: int | np.random.Generator | None = None,
    ):
        super().__init__(tol, tol_rotation, max_iter)
        self.init = init
        self.template = template
        self.update = update
        self.escape = escape
        self.certify = certify
        self.seed = seed

    def fit(self, B: np.ndarray) -> GeneralizedPowerMethod:
        """Fit on raw anchor uploads B (m, r, d); centering is done here."""
        if self.init not in ("spectral", "random"):
            raise ValidationError(f"init: must be 'spectral' or 'random', got {self.init!r}")
        if self.template not in ("full", "leave_one_out"):
            raise ValidationError(f"template: must be 'full' or 'leave_one_out', got {self.template!r}")
        if self.update not in ("adaptive", "jacobi"):
            raise ValidationError(f"update: must be 'adaptive' or 'jacobi', got {self.update!r}")
        Bbar = self._start(B)
        m, _, d = Bbar.shape
        self.escaped_ = False
        if m == 2:
            R = two_party_optimum(Bbar)
            self._finish(Bbar, R, [objective(Bbar, R)], 0, True)
        else:
            R0 = spectral_init(Bbar) if self.init == "spectral" else random_init(m, d, self.seed)
            R, trace, n_iter, converged = power_iterations(
                Bbar,
                R0,
                self.tol,
                self.tol_rotation,
                int(self.max_iter),
                leave_one_out=self.template == "leave_one_out",
                adaptive=self.update == "adaptive",
            )
            budget = int(self.max_iter) - n_iter
            if self.escape and converged and 2 * budget >= n_iter:
                cert, u = escape_direction(Bbar, R)
                if cert < -self._certificate_tol():
                    R1, more, n_more, conv1 = staircase_escape(Bbar, R, u, self.tol, self.tol_rotation, budget)
                    self.escaped_ = True
                    trace, n_iter = trace + more[1:], n_iter + n_more
                    if objective(Bbar, R1) > objective(Bbar, R):
                        R, converged = R1, conv1
            self._finish(Bbar, R, trace, n_iter, converged)
        self.certificate_ = certificate(Bbar, self.rotations_) if self.certify else float("nan")
        self.certified_ = bool(self.certify and self.certificate_ >= -self._certificate_tol())
        return self

    def _certificate_tol(self) -> float:
        """τ = max(1e-9, 100·tol) (module docstring)."""
        return max(CERTIFICATE_TOL, 100 * self.tol)
