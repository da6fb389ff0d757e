r"""Nonlinear kernel integration (NKI) with graph regularisation and centering (spec §2.5–§2.8).

Per party ``k`` with anchor IR ``Ã(k)`` (``na × d̃(k)``) and RBF kernel
``κ_k(x, x') = exp(−γ_k ‖x − x'‖²)``:

* ``K_k = κ_k(Ã(k), Ã(k))``, ``S_k = (K_k + λ I)^{-1}`` (Cholesky, symmetrised);
* objective matrix ``M = λ Σ_k S_k`` (Thm 2, ``objective="paper"``) or the residual-only ablation
  ``M = λ² Σ_k S_k²`` (``objective="residual"``, spec §2.5 "variant warning");
* graph (``graph="gl"|"tsl"``, §2.6–§2.7): ``M ← M/tr M``, ``B ← B/tr B``, ``M ← M + μ B`` with ``B``
  the Laplacian of the party-averaged symmetrised kNN graph of the anchors (skipped and recorded
  when ``tr B = 0``);
* ``Z* =`` eigenvectors of the ``d̂`` smallest eigenvalues of ``M`` (``ZᵀZ = I``), or with
  ``center=True`` (§2.8) ``Z* = T Y*`` where ``T`` (``na × (na−1)``) spans ``{z : 1ᵀz = 0}`` and
  ``Y*`` are the smallest eigenvectors of ``TᵀMT`` — so ``1ᵀZ* = 0`` holds to rounding;
* ``Γ_k = S_k Z*`` (``na × d̂``) and ``g_k(x) = κ_k(x, Ã(k)) Γ_k``.

The penalty graph (TDL, ``C ≠ I``) is excluded, as in the paper's main results; ``C = I`` always.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Literal

import numpy as np
import scipy.linalg as sla

from veilbench.dc._base import BaseIntegrator, check_anchor_reps
from veilbench.linalg.distances import sq_distances
from veilbench.validation import ValidationError, check_in_range, check_labels


def rbf_kernel(a: np.ndarray, b: np.ndarray, gamma: float) -> np.ndarray:
    """RBF kernel block ``exp(−γ ‖a_i − b_j‖²)`` of shape (len(a), len(b))."""
    return np.exp(-gamma * sq_distances(a, b))


def _upper_median(d2: np.ndarray) -> float:
    """Median of the entries above the diagonal of a square matrix (0.0 when there are none)."""
    upper = d2[np.triu_indices(d2.shape[0], 1)]
    return float(np.median(upper)) if upper.size else 0.0


def median_sq_distance(a: np.ndarray) -> float:
    """Median of ``‖a_i − a_j‖²`` over pairs ``i < j`` (0.0 for a single row)."""
    return _upper_median(sq_distances(a, a))


def gamma_from_median_sq(med2: float) -> float:
    """Median heuristic ``γ = 1/(2 m²)`` from ``m²`` = the median squared pairwise distance (1.0 if 0)."""
    return 1.0 / (2.0 * med2) if med2 > 0 else 1.0


def median_gamma(a: np.ndarray) -> float:
    """Median heuristic ``γ = 1/(2 m²)``, ``m`` the median pairwise distance of the rows of ``a`` (spec §9)."""
    return gamma_from_median_sq(median_sq_distance(a))


def knn_indices(a: np.ndarray, k_nn: int) -> np.ndarray:
    """Indices (na × k) of the ``k = min(k_nn, na−1)`` Euclidean nearest neighbours of each row, self excluded."""
    d2 = sq_distances(a, a)
    np.fill_diagonal(d2, np.inf)
    k = min(int(k_nn), a.shape[0] - 1)
    return np.argsort(d2, axis=1, kind="stable")[:, :k]


def anchor_graph_laplacian(
    anchor_reps: Sequence[np.ndarray],
    kind: Literal["gl", "tsl"],
    k_nn: int = 10,
    anchor_labels: np.ndarray | None = None,
) -> np.ndarray:
    """Laplacian ``B = D − W`` (na × na) of the party-averaged anchor kNN graph (spec §2.7).

    Per party: ``ŵ_ii' = 1`` if ``i'`` is among the ``k_nn`` nearest neighbours of ``i`` in ``Ã(k)``
    (GL), additionally requiring ``y_ai = y_ai'`` (TSL, classification); ``w = (ŵ + ŵᵀ)/2``;
    ``W = (1/K) Σ_k w^(k)``; ``D = diag(W 1)``.
    """
    n_a = anchor_reps[0].shape[0]
    if kind == "tsl":
        if anchor_labels is None:
            raise ValidationError("anchor_labels: graph='tsl' needs the anchors' labels (e.g. SMOTE anchors), got None")
        labels = check_labels(anchor_labels, "anchor_labels", n=n_a)
        if np.any(labels < 0):
            raise ValidationError("anchor_labels: graph='tsl' needs every anchor labelled (≥ 0), got label −1")
    elif kind != "gl":
        raise ValidationError(f"graph: must be 'gl' or 'tsl', got {kind!r}")
    w = np.zeros((n_a, n_a))
    rows = np.repeat(np.arange(n_a), min(int(k_nn), n_a - 1))
    for a in anchor_reps:
        cols = knn_indices(a, k_nn).ravel()
        w_hat = np.zeros((n_a, n_a))
        keep = labels[rows] == labels[cols] if kind == "tsl" else np.ones(rows.size, bool)
        w_hat[rows[keep], cols[keep]] = 1.0
        w += 0.5 * (w_hat + w_hat.T)
    w /= len(anchor_reps)
    return np.diag(w.sum(1)) - w


def centering_basis_product(m: np.ndarray) -> np.ndarray:
    """``TᵀMT`` ((na−1) × (na−1)) for an orthonormal basis ``T`` of ``{z : 1ᵀz = 0}``.

    ``T`` = columns 2…na of the Householder reflector ``Q = I − 2vvᵀ/vᵀv`` with ``v = e₁ − 1/√na``,
    which maps ``e₁ ↦ 1/√na`` (so its remaining columns are orthonormal and orthogonal to ``1``).
    ``QMQ`` is formed with rank-one updates in O(na²).
    """
    v, vv = _householder(m.shape[0])
    mq = m - np.outer(m @ v, v) * (2.0 / vv)
    return (mq - np.outer(v, v @ mq) * (2.0 / vv))[1:, 1:]


def _householder(n_a: int) -> tuple[np.ndarray, float]:
    """``v = e₁ − 1/√na`` and ``vᵀv`` (> 0 for na ≥ 2) of the reflector ``Q = I − 2vvᵀ/vᵀv``."""
    v = -np.full(n_a, 1.0 / np.sqrt(n_a))
    v[0] += 1.0
    return v, float(v @ v)


def centering_basis_lift(y: np.ndarray) -> np.ndarray:
    """``Z = T Y``: lift ``Y`` ((na−1) × d̂) to ``Z`` (na × d̂) with ``1ᵀZ = 0``."""
    n_a = y.shape[0] + 1
    full = np.vstack([np.zeros((1, y.shape[1])), y])
    v, vv = _householder(n_a)
    return full - np.outer(v, v @ full) * (2.0 / vv)


class _StepClock:
    """CPU seconds of this process (``time.process_time``: insensitive to other processes on a shared
    machine) between successive ``lap(name)`` calls, collected in ``laps``."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._t = time.process_time()

    def lap(self, name: str) -> None:
        now = time.process_time()
        self.laps[name] = now - self._t
        self._t = now


def _inverse_regularised(k_mat: np.ndarray, lam: float) -> np.ndarray:
    """``S = (K + λI)^{-1}`` via Cholesky, symmetrised."""
    n = k_mat.shape[0]
    c = sla.cho_factor(k_mat + lam * np.eye(n), lower=True, check_finite=False)
    s = sla.cho_solve(c, np.eye(n), check_finite=False)
    return 0.5 * (s + s.T)


class NKI(BaseIntegrator):
    """Nonlinear kernel integration, optionally with a GL/TSL graph and the centering constraint.

    Parameters
    ----------
    n_components : d̂ (default ``d̃(1)``).
    gamma : RBF γ shared by all parties (paper: 1.0) or ``"median"`` for a per-party median heuristic.
    lam : ridge λ > 0 (paper: 1).
    graph : ``None``, ``"gl"`` or ``"tsl"``; mu : graph weight μ ≥ 0 (paper: 1); k_nn : graph neighbours.
    center : impose ``1ᵀZ = 0`` (needs ``d̂ ≤ na − 1``).
    objective : ``"paper"`` (``λ Σ S_k``) or ``"residual"`` (``λ² Σ S_k²``, ablation).

    Learnt: ``Z_`` (na × d̂), ``Gamma_`` (list of na × d̂), ``gammas_`` (per party γ_k),
    ``anchors_`` (the ``Ã(k)``), ``graph_skipped_`` (tr B = 0), ``median_distances_`` (diagnostic),
    ``step_seconds_`` (CPU seconds of the fit steps of the paper's Table 1: ``kernel`` — the ``K_k``,
    O(K na² d̃); ``inverse`` — the ``S_k`` and ``M``, O(K na³); ``graph``; ``eigen`` — ``Z*``, O(na³);
    ``gamma`` — the ``Γ_k``, O(K na² d̂)).
    """

    def __init__(
        self,
        n_components: int | None = None,
        gamma: float | Literal["median"] = 1.0,
        lam: float = 1.0,
        graph: Literal["gl", "tsl"] | None = None,
        mu: float = 1.0,
        k_nn: int = 10,
        center: bool = False,
        objective: Literal["paper", "residual"] = "paper",
    ):
        self.n_components = n_components
        self.gamma = gamma
        self.lam = lam
        self.graph = graph
        self.mu = mu
        self.k_nn = k_nn
        self.center = center
        self.objective = objective

    def _check_params(self) -> None:
        if self.gamma != "median":
            check_in_range(self.gamma, "gamma", 0.0, None, low_inclusive=False)
        check_in_range(self.lam, "lam", 0.0, None, low_inclusive=False)
        check_in_range(self.mu, "mu", 0.0, None)
        check_in_range(self.k_nn, "k_nn", 1, None)
        if self.objective not in ("paper", "residual"):
            raise ValidationError(f"objective: must be 'paper' or 'residual', got {self.objective!r}")

    def fit(self, anchor_reps: Sequence[np.ndarray], anchor_labels: np.ndarray | None = None) -> NKI:
        """Fit on ``[Ã(1), …, Ã(K)]``; ``anchor_labels`` (na,) is needed only for ``graph="tsl"``."""
        self._check_params()
        reps, d_hat = check_anchor_reps(anchor_reps, self.n_components, min_extra_rows=int(bool(self.center)))
        clock = _StepClock()
        sq = [sq_distances(a, a) for a in reps]
        med2 = [_upper_median(d2) for d2 in sq]
        self.gammas_ = [gamma_from_median_sq(m) if self.gamma == "median" else float(self.gamma) for m in med2]
        self.median_distances_ = [float(np.sqrt(m)) for m in med2]
        kernels = [np.exp(-g * d2) for g, d2 in zip(self.gammas_, sq, strict=True)]
        del sq
        clock.lap("kernel")
        s_list = [_inverse_regularised(k_mat, self.lam) for k_mat in kernels]
        if self.objective == "paper":
            m = self.lam * sum(s_list)
        else:
            m = self.lam**2 * sum(s @ s for s in s_list)
        clock.lap("inverse")
        self.graph_skipped_ = False
        if self.graph is not None and self.mu > 0:
            b = anchor_graph_laplacian(reps, self.graph, self.k_nn, anchor_labels)
            if np.trace(b) > 0:
                m = m / np.trace(m) + self.mu * b / np.trace(b)
            else:
                self.graph_skipped_ = True
        clock.lap("graph")
        self.Z_ = self._smallest_eigvecs(m, d_hat)
        clock.lap("eigen")
        self.Gamma_ = [s @ self.Z_ for s in s_list]
        clock.lap("gamma")
        self.step_seconds_ = clock.laps
        self.anchors_ = reps
        self._set_shapes(reps, d_hat)
        return self

    def _smallest_eigvecs(self, m: np.ndarray, d_hat: int) -> np.ndarray:
        """Eigenvectors of the d̂ smallest eigenvalues of ``m`` (with ``1ᵀZ = 0`` when centering)."""
        if self.center:
            _, y = sla.eigh(centering_basis_product(m), subset_by_index=[0, d_hat - 1])
            return centering_basis_lift(y)
        _, z = sla.eigh(m, subset_by_index=[0, d_hat - 1])
        return z

    def kernel_rows(self, x: np.ndarray, party: int) -> np.ndarray:
        """``κ_party(x, Ã(party))`` (m × na)."""
        return rbf_kernel(x, self.anchors_[party], self.gammas_[party])

    def _apply(self, x: np.ndarray, party: int) -> np.ndarray:
        return self.kernel_rows(x, party) @ self.Gamma_[party]
