r"""Reconstruction attacks from leaked anchor pairs ``(A_I, Ã(k)_I)`` (spec §5).

The attacker knows ``|I|`` anchor rows ``A_I`` (|I| × d) and the target party's IRs ``Ã(k)_I``
(|I| × d̃); with means ``μ = mean(A_I)``, ``μ̃ = mean(Ã(k)_I)`` it reconstructs an IR ``x̃`` as

* **LR**: ``W = argmin ‖(Ã_I − μ̃) W − (A_I − μ)‖_F`` (least squares), ``x̂ = (x̃ − μ̃) W + μ``;
* **PINV**: forward map ``F = (A_I − μ)^+ (Ã_I − μ̃)`` (d × d̃), ``x̂ = (x̃ − μ̃) F^+ + μ``;
* **MLP**: ``MLPRegressor(hidden_layer_sizes=(128,), max_iter, early_stopping=True,
  validation_fraction=0.2, n_iter_no_change=10, random_state=seed)`` on the centred pairs.

For a linear obfuscation ``x̃ = x F₀`` with enough pairs (``|I| > d``, ``A_I`` of full column rank)
PINV recovers ``F = F₀`` exactly, and with ``d̃ = d`` (invertible ``F₀``) both LR and PINV give
``x̂ = x`` exactly.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from veilbench.validation import ValidationError, check_array

ATTACKS = ("lr", "pinv", "mlp")


class ReconstructionAttack:
    """Base: ``fit(ir_leaked (|I| × d̃), x_leaked (|I| × d))``, ``reconstruct(ir (m × d̃)) → (m × d)``."""

    def fit(self, ir_leaked: np.ndarray, x_leaked: np.ndarray) -> ReconstructionAttack:
        ir = check_array(ir_leaked, "ir_leaked", ndim=2, min_rows=2)
        x = check_array(x_leaked, "x_leaked", ndim=2, min_rows=2)
        if ir.shape[0] != x.shape[0]:
            raise ValidationError(
                f"ir_leaked and x_leaked: need one IR per leaked row, got {ir.shape[0]} vs {x.shape[0]}"
            )
        self.ir_mean_, self.x_mean_ = ir.mean(axis=0), x.mean(axis=0)
        self._fit_centred(ir - self.ir_mean_, x - self.x_mean_)
        return self

    def reconstruct(self, ir: np.ndarray) -> np.ndarray:
        if not hasattr(self, "ir_mean_"):
            raise ValidationError(f"{type(self).__name__}: call fit before reconstruct")
        arr = check_array(ir, "ir", ndim=2)
        if arr.shape[1] != self.ir_mean_.size:
            raise ValidationError(f"ir: expected {self.ir_mean_.size} columns (as fitted), got {arr.shape[1]}")
        return self._map_centred(arr - self.ir_mean_) + self.x_mean_

    def _fit_centred(self, ir_c: np.ndarray, x_c: np.ndarray) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _map_centred(self, ir_c: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError


class LRAttack(ReconstructionAttack):
    """Least-squares regression from IR to original; learnt ``W_`` (d̃ × d)."""

    def _fit_centred(self, ir_c: np.ndarray, x_c: np.ndarray) -> None:
        self.W_ = np.linalg.lstsq(ir_c, x_c, rcond=None)[0]

    def _map_centred(self, ir_c: np.ndarray) -> np.ndarray:
        return ir_c @ self.W_


class PINVAttack(ReconstructionAttack):
    """Least-squares forward map ``forward_ = F`` (d × d̃), inverted by the pseudo-inverse."""

    def _fit_centred(self, ir_c: np.ndarray, x_c: np.ndarray) -> None:
        self.forward_ = np.linalg.pinv(x_c) @ ir_c
        self.inverse_ = np.linalg.pinv(self.forward_)

    def _map_centred(self, ir_c: np.ndarray) -> np.ndarray:
        return ir_c @ self.inverse_


class MLPAttack(ReconstructionAttack):
    """One-hidden-layer MLP regressor (spec §5) on the centred pairs (early stopping needs ≥ 10 pairs)."""

    def __init__(self, hidden: int = 128, max_iter: int = 600, seed: int = 0):
        self.hidden = hidden
        self.max_iter = max_iter
        self.seed = seed

    def _fit_centred(self, ir_c: np.ndarray, x_c: np.ndarray) -> None:
        from sklearn.neural_network import MLPRegressor

        early = ir_c.shape[0] >= 10
        self.model_ = MLPRegressor(
            hidden_layer_sizes=(self.hidden,),
            max_iter=self.max_iter,
            early_stopping=early,
            validation_fraction=0.2,
            n_iter_no_change=10,
            random_state=self.seed,
        ).fit(ir_c, x_c)

    def _map_centred(self, ir_c: np.ndarray) -> np.ndarray:
        return np.asarray(self.model_.predict(ir_c)).reshape(ir_c.shape[0], -1)


def make_attack(name: str, seed: int = 0, **options: Any) -> ReconstructionAttack:
    """Unfitted attack ``name`` ∈ {lr, pinv, mlp}; ``seed`` and ``options`` (hidden, max_iter) go to the MLP only."""
    if name == "lr":
        return LRAttack()
    if name == "pinv":
        return PINVAttack()
    if name == "mlp":
        return MLPAttack(seed=seed, **options)
    raise ValidationError(f"attack: must be one of {list(ATTACKS)}, got {name!r}")
