"""Shared fit/transform contract and input checks of every DC integrator (spec §1.1, §2).

An integrator is fitted on the parties' anchor representations ``Ã(k)`` (each ``na × d̃(k)``,
rows aligned: row ``i`` of every ``Ã(k)`` is the same anchor record) and learns one integration
function ``g_k : R^{1×d̃(k)} → R^{1×d̂}`` per party; ``transform(x, party)`` applies ``g_k`` to new
rows of that party (its private IRs or its IRs of the shared test set).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from veilbench.validation import ValidationError, check_array


def check_anchor_reps(
    anchor_reps: Sequence[np.ndarray], n_components: int | None, *, min_extra_rows: int = 0
) -> tuple[list[np.ndarray], int]:
    """Validate the list ``[Ã(1), …, Ã(K)]`` and resolve ``d̂``.

    Every ``Ã(k)`` must be a finite ``na × d̃(k)`` array with the same ``na``; ``d̂`` defaults to
    ``d̃(1)`` (spec §1.3: ``d̂ = d̃``) and must satisfy ``1 ≤ d̂ ≤ na − min_extra_rows`` (LKI/NKI
    need ``d̂ ≤ na``, centering ``d̂ ≤ na − 1``, spec §9).

    Returns the validated list and ``d̂``.
    """
    if isinstance(anchor_reps, np.ndarray) and anchor_reps.ndim == 3:
        anchor_reps = list(anchor_reps)
    if not isinstance(anchor_reps, Sequence) or len(anchor_reps) < 1:
        raise ValidationError("anchor_reps: expected a non-empty list of (na, d̃) arrays, one per party")
    reps = [check_array(a, f"anchor_reps[{k}]", ndim=2, min_rows=2) for k, a in enumerate(anchor_reps)]
    n_a = reps[0].shape[0]
    for k, a in enumerate(reps):
        if a.shape[0] != n_a:
            raise ValidationError(
                f"anchor_reps[{k}]: every party must represent the same {n_a} anchor rows, got {a.shape[0]}"
            )
    d_hat = reps[0].shape[1] if n_components is None else int(n_components)
    limit = n_a - min_extra_rows
    if not 1 <= d_hat <= limit:
        raise ValidationError(
            f"n_components: d̂ must lie in [1, {limit}] (na = {n_a} anchors"
            f"{', minus 1 for centering' if min_extra_rows else ''}), got {d_hat}; use more anchors or a smaller d̃"
        )
    return reps, d_hat


class BaseIntegrator:
    """Common ``transform`` checks; subclasses implement ``fit`` and ``_apply(x, party)``.

    Learnt state shared by all subclasses: ``dims_`` (list of ``d̃(k)``), ``n_components_`` (``d̂``),
    ``n_anchor_`` (``na``).
    """

    def _set_shapes(self, reps: list[np.ndarray], d_hat: int) -> None:
        self.dims_ = [int(a.shape[1]) for a in reps]
        self.n_components_ = int(d_hat)
        self.n_anchor_ = int(reps[0].shape[0])

    def transform(self, x: np.ndarray, party: int) -> np.ndarray:
        """Apply ``g_party`` row-wise: ``x`` (m × d̃(party)) → (m × d̂)."""
        if not hasattr(self, "dims_"):
            raise ValidationError(f"{type(self).__name__}: call fit(anchor_reps) before transform")
        if not 0 <= int(party) < len(self.dims_):
            raise ValidationError(f"party: must lie in [0, {len(self.dims_) - 1}], got {party}")
        arr = check_array(x, "x", ndim=2)
        if arr.shape[1] != self.dims_[party]:
            raise ValidationError(
                f"x: party {party} was fitted on d̃ = {self.dims_[party]} columns, got {arr.shape[1]}"
            )
        return self._apply(arr, int(party))

    def _apply(self, x: np.ndarray, party: int) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError
