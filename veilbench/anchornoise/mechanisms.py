r"""Release mechanisms of the anchor-noise family (spec §3). Rows are records.

Every participant i holds X_i (n_i × d). With Haar O_i ∈ O(d), Ψ_i ~ N(0, s_Ψ² I_d) and iid
standard normal N_i (n_i × d), W_i (r × d):

==========================  ================================  ==================================
kind, noise                 uploaded records Y_i               uploaded anchor B_i
==========================  ================================  ==================================
``cgdp``                    X_i O + 1Ψᵀ (+ σ N_i)              none (one (O, Ψ) for everyone)
``igdp``                    X_i O_i + 1Ψ_iᵀ (+ σ N_i)          none
``aa`` (v = σ = 0: DC)      X_i O_i + 1Ψ_iᵀ (+ σ N_i)          A O_i + 1Ψ_iᵀ (+ v W_i)
``random`` (data-free)      N_i                                none
==========================  ================================  ==================================

``random`` is the data-free reference: every upload (training and both test protocols) is an
independent standard normal draw of the right shape that never reads X; (O_i, Ψ_i) are still
drawn (private, unused by the upload) so the collusion bundle has its usual form.

``aa`` with σ > 0 is "AA-I-GDP + data noise", with v > 0 the proposed anchor noise. Test records
go through the participant's own (O_i, Ψ_i); ``Y_test_noisy`` adds a fresh σ N (noisy-test
protocol, the default), ``Y_test_clean`` does not (clean-test); anchor noise never touches test
records (spec §3, §9). Randomness: the anchor and the common C-GDP transform come from streams
shared by participants only; each participant's (O_i, Ψ_i, W_i, N_i) from its own stream, all
named streams of ``seed`` (:func:`veilbench.random.stream`), independent of the analyst's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from veilbench.anchornoise.anchor import AnchorScale, check_anchor, make_anchor
from veilbench.linalg.procrustes import haar_orthogonal
from veilbench.random import stream
from veilbench.validation import ValidationError, check_array, check_in_range

Kind = Literal["cgdp", "igdp", "aa", "random"]
KINDS: tuple[str, ...] = ("cgdp", "igdp", "aa", "random")

#: Stream names (:func:`veilbench.random.stream`): participant i draws from ``stream((seed, i),
#: PARTY_STREAM)``; TEST_SPLIT_STREAM deals the test records to participants; ANALYST_STREAM is the
#: analyst's own randomness; PARTITION_STREAM re-deals the training records to participants when a
#: cell asks for it.
ANCHOR_STREAM = "anchornoise.anchor"
COMMON_STREAM = "anchornoise.common-transform"
TEST_SPLIT_STREAM = "anchornoise.test-split"
ANALYST_STREAM = "anchornoise.analyst"
PARTITION_STREAM = "anchornoise.partition"
PARTY_STREAM = "anchornoise.party"


def sample_transform(d: int, translation_scale: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Draw one GDP transform: O (d × d) Haar on O(d) and Ψ (d,) ~ N(0, s_Ψ² I) (spec §2)."""
    o = haar_orthogonal(d, rng)
    psi = rng.normal(0.0, translation_scale, size=d)
    return o, psi


def gdp(x: np.ndarray, o: np.ndarray, psi: np.ndarray) -> np.ndarray:
    """x ↦ x O + 1Ψᵀ for x (n × d), O (d × d), Ψ (d,)."""
    return x @ o + psi


def synthetic_anchor_uploads(
    m: int, r: int, d: int, v: float, seed: int, scale: AnchorScale = "sqrt_r", translation_scale: float = 5.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One anchor-noise instance without records: the m uploaded anchors B_i = A O_i + 1Ψ_iᵀ + v W_i
    (m × r × d) of one anchor A (r × d) with their ground truth O (m × d × d) and Ψ (m × d), as
    (B, O, Ψ); what the GPM solves (its tests and ``benchmarks/bench_gpm.py``)."""
    rng = stream(seed, "anchornoise.synthetic-uploads")
    a = make_anchor(r, d, scale, rng)
    v = check_in_range(v, "v", 0.0, None)
    B, O, Psi = np.empty((m, r, d)), np.empty((m, d, d)), np.empty((m, d))
    for i in range(m):
        O[i], Psi[i] = sample_transform(d, translation_scale, rng)
        B[i] = gdp(a, O[i], Psi[i]) + v * rng.standard_normal((r, d))
    return B, O, Psi


@dataclass(frozen=True)
class Release:
    """What the participants produce for one run.

    Public (uploaded to the analyst): ``Y_train`` (n × d, input row order), ``Y_test_noisy`` and
    ``Y_test_clean`` (n_test × d), ``B`` (m × r × d, anchor mechanisms only, else ``None``).
    Private ground truth (never read by the analyst; attacks see it only through the collusion
    bundle): ``O`` (m × d × d), ``Psi`` (m × d), ``A`` (r × d or ``None``).
    """

    Y_train: np.ndarray
    Y_test_noisy: np.ndarray
    Y_test_clean: np.ndarray
    B: np.ndarray | None
    O: np.ndarray
    Psi: np.ndarray
    A: np.ndarray | None


class GDPMechanism:
    """C-GDP / I-GDP / anchor-aligned I-GDP with data noise σ and anchor noise v (spec §3).

    Parameters
    ----------
    kind : ``"cgdp"``, ``"igdp"``, ``"aa"`` or ``"random"`` (data-free: uploads are N(0, 1) draws).
    v : anchor noise scale, ≥ 0 (only for ``"aa"``).
    sigma : data noise scale σ ≥ 0 on the private representations.
    r : anchor rows, ≥ d + 1 (``"aa"`` only).
    anchor_scale : s_A choice, ``"sqrt_r"`` (default, [assume]) or ``"unit"``.
    translation_scale : s_Ψ ≥ 0 (default 5, [assume]).
    """

    def __init__(
        self,
        kind: Kind = "aa",
        v: float = 0.0,
        sigma: float = 0.0,
        r: int = 200,
        anchor_scale: AnchorScale = "sqrt_r",
        translation_scale: float = 5.0,
    ):
        self.kind = kind
        self.v = v
        self.sigma = sigma
        self.r = r
        self.anchor_scale = anchor_scale
        self.translation_scale = translation_scale

    def _validate(self) -> tuple[float, float, float]:
        if self.kind not in KINDS:
            raise ValidationError(f"kind: must be one of {KINDS}, got {self.kind!r}")
        v = check_in_range(self.v, "v", 0.0, None)
        sigma = check_in_range(self.sigma, "sigma", 0.0, None)
        s_psi = check_in_range(self.translation_scale, "translation_scale", 0.0, None)
        if v > 0 and self.kind != "aa":
            raise ValidationError(f"v: anchor noise needs kind 'aa' (an anchor upload), got v = {v} with {self.kind!r}")
        if sigma > 0 and self.kind == "random":
            raise ValidationError(f"sigma: the data-free 'random' release adds no data noise, got sigma = {sigma}")
        return v, sigma, s_psi

    def release(
        self,
        X: np.ndarray,
        party: np.ndarray,
        X_test: np.ndarray,
        party_test: np.ndarray,
        seed: int,
        anchor: np.ndarray | None = None,
    ) -> Release:
        """Release every participant's upload.

        Parameters
        ----------
        X : (n, d) training features; party : (n,) participant index in 0 … m−1 (all present).
        X_test : (n_test, d); party_test : (n_test,) participant of each test record.
        seed : master seed of the participants' streams.
        anchor : optional (r, d) anchor to use instead of drawing one; must be centered with
            orthogonal equal-norm columns (:func:`check_anchor`).
        """
        v, sigma, s_psi = self._validate()
        x = check_array(X, "X", ndim=2)
        xt = check_array(X_test, "X_test", ndim=2)
        d = x.shape[1]
        if xt.shape[1] != d:
            raise ValidationError(f"X_test: expected {d} columns like X, got {xt.shape[1]}")
        p = _check_party(party, "party", x.shape[0])
        m = int(p.max()) + 1
        if np.unique(p).size != m:
            raise ValidationError(f"party: every participant 0 … {m - 1} needs at least one record")
        pt = _check_party(party_test, "party_test", xt.shape[0])
        if pt.size and pt.max() >= m:
            raise ValidationError(f"party_test: must lie in [0, {m - 1}], got max {int(pt.max())}")

        a = None
        if self.kind == "aa":
            if anchor is None:
                a = make_anchor(self.r, d, self.anchor_scale, stream(seed, ANCHOR_STREAM))
            else:
                a, _ = check_anchor(anchor, "anchor")
                if a.shape[1] != d:
                    raise ValidationError(f"anchor: expected {d} columns like X, got {a.shape[1]}")

        common = sample_transform(d, s_psi, stream(seed, COMMON_STREAM)) if self.kind == "cgdp" else None
        O = np.empty((m, d, d))
        Psi = np.empty((m, d))
        Y = np.empty_like(x)
        Yt_noisy = np.empty_like(xt)
        Yt_clean = np.empty_like(xt)
        B = None if a is None else np.empty((m,) + a.shape)
        for i in range(m):
            rng = stream((seed, i), PARTY_STREAM)
            own = sample_transform(d, s_psi, rng)  # drawn for every kind: fixed stream order
            O[i], Psi[i] = common if common is not None else own
            if B is not None:
                B[i] = gdp(a, O[i], Psi[i]) + v * rng.standard_normal(a.shape)
            rows, trows = p == i, pt == i
            if self.kind == "random":
                Y[rows] = rng.standard_normal((int(rows.sum()), d))
                Yt_clean[trows] = rng.standard_normal((int(trows.sum()), d))
                Yt_noisy[trows] = Yt_clean[trows]
                continue
            Y[rows] = gdp(x[rows], O[i], Psi[i]) + sigma * rng.standard_normal((int(rows.sum()), d))
            Yt_clean[trows] = gdp(xt[trows], O[i], Psi[i])
            Yt_noisy[trows] = Yt_clean[trows] + sigma * rng.standard_normal((int(trows.sum()), d))
        return Release(Y, Yt_noisy, Yt_clean, B, O, Psi, a)


def _check_party(party: np.ndarray, name: str, n: int) -> np.ndarray:
    arr = np.asarray(party)
    if arr.shape != (n,) or arr.dtype.kind not in "iu":
        raise ValidationError(f"{name}: expected {n} integer participant indices, got shape {arr.shape} {arr.dtype}")
    if n and arr.min() < 0:
        raise ValidationError(f"{name}: participant indices must be ≥ 0, got {int(arr.min())}")
    return arr.astype(np.int64)
