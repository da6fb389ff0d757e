r"""Reconstruction attacks under analyst–participant collusion (spec §5).

The attacker holds every public upload (Y_j, B_j), the analyst's GPM output (R_j, T̂) and the
collusion bundle: the raw anchor A and each colluder's (O_c, Ψ_c). Every attack returns
X̂_j (n_j × d) for each non-colluding participant j, in the original feature space; with
B̄_j, b̄_j the centered upload and its row mean (§4.1):

* ``mp__pinv`` (Moore–Penrose): T̂_j = A⁺ B̄_j, X̂_j = (Y_j − 1b̄_jᵀ) T̂_j⁺;
* ``mp__inverse_regression``: M_j = B̄_j⁺ A, X̂_j = (Y_j − 1b̄_jᵀ) M_j;
* ``op`` (orthogonal Procrustes): Ô_j = P(Aᵀ B̄_j), X̂_j = (Y_j − 1b̄_jᵀ) Ô_jᵀ (exact when v = 0);
* ``amc__colluder`` (alignment-map calibration): Q̂ = P(Σ_c O_c R_c), X̂_j = (Y_j − 1b̄_jᵀ) R_j Q̂ᵀ;
* ``amc__anchor``: the same with Q̂ = P(Aᵀ T̂);
* ``colluder_inverse`` (mechanisms without an anchor): X̂_j = (Y_j − 1Ψ_cᵀ) O_cᵀ with the first
  colluder's transform: exact for C-GDP, a chance-level sanity baseline for I-GDP.

The attack name is the part before ``__``; the reported per-attack number is the best variant
(spec §5 "report the better"), and the privacy number the max over attacks. The colluders'
private records X_c are part of the spec's bundle but no attack here needs them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from veilbench.anchornoise.gpm import center_anchors
from veilbench.linalg.procrustes import orthogonal_procrustes, polar_factor
from veilbench.validation import ValidationError, check_array

ANCHOR_ATTACKS: tuple[str, ...] = ("mp__pinv", "mp__inverse_regression", "op", "amc__colluder", "amc__anchor")
PLAIN_ATTACKS: tuple[str, ...] = ("colluder_inverse",)


def attack_name(variant: str) -> str:
    """``"mp__pinv"`` → ``"mp"``: the attack a variant belongs to."""
    return variant.split("__", 1)[0]


@dataclass(frozen=True)
class CollusionBundle:
    """What the colluders reveal: indices (c,), their O (c, d, d), Ψ (c, d), and the raw anchor A (r, d) or None."""

    colluders: np.ndarray
    O: np.ndarray
    Psi: np.ndarray
    anchor: np.ndarray | None

    @classmethod
    def from_private(
        cls, colluders: np.ndarray, O: np.ndarray, Psi: np.ndarray, anchor: np.ndarray | None
    ) -> CollusionBundle:
        """Cut the bundle out of the full private state O (m, d, d), Ψ (m, d): colluders' rows only."""
        c = np.asarray(colluders, dtype=np.int64)
        m = O.shape[0]
        if c.size < 1 or c.size >= m or c.min() < 0 or c.max() >= m or np.unique(c).size != c.size:
            raise ValidationError(
                f"colluders: need 1 … {m - 1} distinct participants in [0, {m - 1}] (at least one target), "
                f"got {c.tolist()}"
            )
        return cls(c, O[c].copy(), Psi[c].copy(), None if anchor is None else anchor.copy())


def run_attacks(
    Y: np.ndarray,
    party: np.ndarray,
    bundle: CollusionBundle,
    B: np.ndarray | None = None,
    rotations: np.ndarray | None = None,
    template: np.ndarray | None = None,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Reconstruct every non-colluder's records.

    Parameters
    ----------
    Y : (n, d) uploaded records; party : (n,) their participant in 0 … m−1.
    bundle : the colluders' revelation.
    B : (m, r, d) anchor uploads, or None for C-GDP / I-GDP (then only ``colluder_inverse`` runs).
    rotations : (m, d, d) the analyst's R_i; template : (r, d) the analyst's T̂ (needed with B).

    Returns
    -------
    recon : variant name → (K, d) reconstructions, rows in the order of ``target_rows``.
    target_rows : (K,) indices into Y of every non-colluder record, ascending.
    """
    y = check_array(Y, "Y", ndim=2)
    p = np.asarray(party, dtype=np.int64)
    target_rows = np.flatnonzero(~np.isin(p, bundle.colluders))
    targets = np.unique(p[target_rows])
    if B is None:
        o, psi = bundle.O[0], bundle.Psi[0]
        return {"colluder_inverse": (y[target_rows] - psi) @ o.T}, target_rows
    if bundle.anchor is None or rotations is None or template is None:
        raise ValidationError("bundle.anchor, rotations, template: all required when anchor uploads B are given")
    a = bundle.anchor
    Bbar, bbar = center_anchors(B)
    q_col = polar_factor(np.einsum("cde,cef->df", bundle.O, rotations[bundle.colluders]))
    q_anchor = orthogonal_procrustes(a, template)
    a_pinv = np.linalg.pinv(a)
    recon = {name: np.empty((target_rows.size, y.shape[1])) for name in ANCHOR_ATTACKS}
    for j in targets:
        rows = p[target_rows] == j
        yc = y[target_rows[rows]] - bbar[j]
        aligned = yc @ rotations[j]
        recon["mp__pinv"][rows] = yc @ np.linalg.pinv(a_pinv @ Bbar[j])
        recon["mp__inverse_regression"][rows] = yc @ (np.linalg.pinv(Bbar[j]) @ a)
        recon["op"][rows] = yc @ orthogonal_procrustes(a, Bbar[j]).T
        recon["amc__colluder"][rows] = aligned @ q_col.T
        recon["amc__anchor"][rows] = aligned @ q_anchor.T
    return recon, target_rows
