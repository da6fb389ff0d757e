r"""Cross-family view: one record-linkage attack and one downstream utility for every family.

Every family releases something derived from private records, and its stages hand the pipeline,
per seed, the same arrays (README "Cross-family protocol") as a :class:`CrossFamilyArrays` (the
``crossfamily`` field of :class:`veilbench.families.base.StageOutput`: its :class:`LinkageArrays`
and its :class:`UtilityArrays`, from one stage or from two), saved with the stage's arrays under
the names below (:meth:`CrossFamilyArrays.arrays`, read back by :meth:`CrossFamilyArrays.from_stages`):

* ``xfam_attack_rep`` :math:`R` (n_r × k): what the server or analyst holds per private training
  record, namely

  - ScoreShield: the analyst's spectral embedding of the released Gram rows (scoreshield spec
    §3.3 Gram release, §5.3.2 Ng–Jordan–Weiss embedding; threat model §1.2);
  - DC: each party's intermediate representation :math:`\tilde X^{(k)} = f_k(X^{(k)})`
    (data-collaboration spec §1.3; the attack of §5 fits a decoder on leaked pairs);
  - anchor noise: each participant's perturbed upload :math:`Y_i` (anchor-noise spec §3; the
    colluding participant of §5; linkage as in §6.1);
  - GCA: the latent codes a client uploads to the server (gca spec §1.5 threat model, §6.3
    latent-only attack);

* ``xfam_attack_group`` (n_r,): which party/participant/client map :math:`g` produced each row;
* ``xfam_attack_index`` (n_r,): the row :math:`t_i` of each record in the pool;
* ``xfam_pool`` :math:`P` (n_p × p): the private records in the space the family starts from;
* ``xfam_utility_rep_train`` / ``_test`` with ``xfam_utility_y_train`` / ``_test``: the
  representation the analyst learns from (DC's collaboration representation, anchor noise's
  aligned uploads, GCA's latent codes of the aligned encoders, ScoreShield's spectral embedding
  of the released Gram) with class labels.

**Threat model** (:data:`THREAT_MODEL`). Per group :math:`g`, the attacker knows the records of a
seeded fraction :math:`f` of that group's records, and at least :math:`k + 1` of them (enough
pairs to identify an affine map of a k-dim representation) (a colluding party or participant, or records
known from elsewhere), i.e. the leaked pairs :math:`(r_i, P_{t_i})`, :math:`i \in L_g`. It fits
one affine ridge decoder per group,

.. math:: \hat x = \mu_P^{(g)} + (r - \mu_R^{(g)})\, W_g,\qquad
          W_g = \arg\min_W \|(R_{L_g} - \mu_R^{(g)})W - (P_{t_{L_g}} - \mu_P^{(g)})\|_F^2
                + \alpha_g \|W\|_F^2,

with :math:`\mu` the leaked rows' means and :math:`\alpha_g` chosen by leave-one-out error
(:class:`sklearn.linear_model.RidgeCV`) from :math:`a \cdot \operatorname{tr}(R_c^\top R_c)/k`,
:math:`a \in \{10^{-6}, \dots, 10^{3}\}` (scale-free, so it does not depend on a family's units).
It reconstructs every non-leaked row and links it to its unique nearest pool record
(:func:`veilbench.metrics.linkage.linkage_rate`); chance is 1 / (number of distinct pool records).
The relative reconstruction error :math:`\|\hat X - X\|_F / \|X - \bar X\|_F` is reported beside
it (:func:`veilbench.metrics.linkage.relative_reconstruction_error`).

**Control attack** (:data:`CONTROL`). The same attacker with the same side knowledge (the same
leaked pairs' records, the groups, the pool) but without the release: the release is replaced by
a constant, so each group's affine decoder reduces to its intercept and every attacked row of
group :math:`g` is reconstructed as :math:`\mu_P^{(g)}`, the mean of that group's leaked records;
it is linked and scored exactly as the main attack (:func:`control_linkage`). The advantages
(:mod:`veilbench.metrics.advantage`) are
:math:`(\text{rate} - \text{rate}_c)/(1 - \text{rate}_c)` for linkage and
:math:`1 - \text{err}/\text{err}_c` for the relative reconstruction error.

**Utility** (:data:`UTILITY`). The balanced accuracy (mean per-class recall) on the held-out
test representation of a standardised multinomial logistic regression trained on the train
representation (the anchor-noise spec §6.2 classifier, used for every family).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from veilbench.metrics.advantage import error_advantage, success_advantage
from veilbench.metrics.linkage import linkage_rate, relative_reconstruction_error
from veilbench.random import as_rng
from veilbench.validation import ValidationError, check_array, check_in_range, check_labels

DEFAULT_LEAK_FRACTION = 0.1
"""Fraction :math:`f` of each group's records whose (representation, record) pairs leak."""

RELATIVE_ALPHAS = tuple(10.0 ** np.arange(-6, 4))
"""Ridge penalties :math:`a`, relative to :math:`\\operatorname{tr}(R_c^\\top R_c)/k` of the leaked rows."""

THREAT_MODEL = (
    "For each party/participant/client map, the attacker (the server or analyst, helped by a colluding party or "
    "by records it already knows) holds a seeded {leak:.0%} of that map's private records (at least k + 1, enough to "
    "identify an affine map of a k-dim representation) together with their released representations, "
    "fits one affine ridge decoder (representation → record) per map on these leaked pairs, reconstructs every "
    "other record of that map, and links each reconstruction to its unique nearest record in the family's "
    "private record pool (chance = 1 / distinct pool records)."
)
CONTROL = (
    "The control attacker has the same leaked records but not the release: it reconstructs every attacked record "
    "of a map as the mean of that map's leaked records and is linked the same way; advantage = (linkage − "
    "control) / (1 − control)."
)
UTILITY = (
    "Utility is the balanced accuracy on held-out records of a standardised logistic regression trained on "
    "the representation the analyst learns from."
)

ATTACK_ARRAYS = ("xfam_attack_rep", "xfam_attack_group", "xfam_attack_index", "xfam_pool")
UTILITY_ARRAYS = ("xfam_utility_rep_train", "xfam_utility_y_train", "xfam_utility_rep_test", "xfam_utility_y_test")
ARRAYS = ATTACK_ARRAYS + UTILITY_ARRAYS


@dataclass(frozen=True)
class LinkageArrays:
    """What the attacker holds: ``rep`` R (n_r × k), ``group`` (n_r,) the map that produced each
    row, ``index`` (n_r,) each row's record in ``pool`` P (n_p × p). Stored as :data:`ATTACK_ARRAYS`."""

    rep: np.ndarray
    group: np.ndarray
    index: np.ndarray
    pool: np.ndarray


@dataclass(frozen=True)
class UtilityArrays:
    """What the analyst learns from: ``rep_train`` (n_u × k') with labels ``y_train`` (n_u,) and
    ``rep_test`` (m_u × k') with ``y_test`` (m_u,). Stored as :data:`UTILITY_ARRAYS`."""

    rep_train: np.ndarray
    y_train: np.ndarray
    rep_test: np.ndarray
    y_test: np.ndarray


@dataclass(frozen=True)
class CrossFamilyArrays:
    """One stage's part of the cross-family view of a seed: the attack side, the utility side or
    both (a family may emit them from two stages; the pipeline merges them for ``evaluate``)."""

    attack: LinkageArrays | None = None
    utility: UtilityArrays | None = None

    def arrays(self) -> dict[str, np.ndarray]:
        """The parts present, under their stored names (:data:`ATTACK_ARRAYS`, :data:`UTILITY_ARRAYS`)."""
        out: dict[str, np.ndarray] = {}
        if self.attack is not None:
            out.update(zip(ATTACK_ARRAYS, (self.attack.rep, self.attack.group, self.attack.index, self.attack.pool)))
        if self.utility is not None:
            out.update(zip(UTILITY_ARRAYS, (self.utility.rep_train, self.utility.y_train, self.utility.rep_test,
                                            self.utility.y_test)))
        return out

    @classmethod
    def from_stages(cls, stages: Iterable[Mapping[str, np.ndarray]]) -> CrossFamilyArrays | None:
        """The view saved by earlier stages (their arrays, in stage order; a later stage's array of
        the same name wins), or None when none saved any. Raises :class:`ValidationError` naming
        the first missing array when some are present and others are not."""
        found: dict[str, np.ndarray] = {}
        for arrays in stages:
            found.update((name, arrays[name]) for name in ARRAYS if name in arrays)
        if not found:
            return None
        missing = [name for name in ARRAYS if name not in found]
        if missing:
            raise ValidationError(
                f"{missing[0]}: missing; the cross-family protocol needs all of {', '.join(ARRAYS)} "
                f"(got {', '.join(name for name in ARRAYS if name in found)})"
            )
        return cls(LinkageArrays(*(found[name] for name in ATTACK_ARRAYS)),
                   UtilityArrays(*(found[name] for name in UTILITY_ARRAYS)))


@dataclass(frozen=True)
class LeakedPairLinkage:
    """Result of :func:`leaked_pair_linkage`.

    ``rate``: unique nearest-record linkage rate over the attacked (non-leaked) rows;
    ``chance``: 1 / distinct pool rows; ``relative_error``: ‖X̂ − X‖_F / ‖X − mean X‖_F of the
    attacked rows; ``n_leaked``: leaked rows in all; ``n_attacked``: attacked rows;
    ``leaked_per_group``: group id → leaked rows of that group.
    """

    rate: float
    chance: float
    relative_error: float
    n_leaked: int
    n_attacked: int
    leaked_per_group: dict[int, int]


def _check_index(x: object, name: str, n: int, upper: int | None = None) -> np.ndarray:
    """Integer vector of length ``n`` (whole floats accepted), entries in [0, upper − 1] when given."""
    arr = np.asarray(x)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValidationError(f"{name}: expected shape ({n},) (one entry per representation row), got {arr.shape}")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            raise ValidationError(f"{name}: entries must be whole numbers (no NaN/inf), got dtype {arr.dtype}")
    elif arr.dtype.kind not in "iu":
        raise ValidationError(f"{name}: expected integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    low = int(arr.min()) if arr.size else 0
    high = int(arr.max()) if arr.size else 0
    if low < 0 or (upper is not None and high >= upper):
        bound = "inf" if upper is None else upper - 1
        raise ValidationError(f"{name}: entries must lie in [0, {bound}], got values in [{low}, {high}]")
    return arr


def _leaked_mask(group: np.ndarray, index: np.ndarray, leak_fraction: float, seed: int, dim: int) -> np.ndarray:
    """Boolean (n_r,) mask of leaked rows.

    Per group (ascending id) the leaked *records* are a seeded ``max(round(f · n_g), k + 1)`` of the
    group's n_g distinct pool indices (k + 1 pairs identify an affine map of a k-dim
    representation, so small groups are not protected merely by their size), clipped to
    [1, n_g − 1] (all of them when n_g = 1, leaving nothing to attack); every row of a leaked
    record is leaked, so no attacked row's record is known.
    """
    rng = as_rng(seed, "crossfamily.leaked-records")
    mask = np.zeros(group.shape[0], dtype=bool)
    for g in np.unique(group):
        rows = np.flatnonzero(group == g)
        records = np.unique(index[rows])
        wanted = max(round(leak_fraction * records.size), dim + 1)
        n_leak = int(np.clip(wanted, 1, max(records.size - 1, 1)))
        leaked = rng.choice(records, size=n_leak, replace=False)
        mask[rows[np.isin(index[rows], leaked)]] = True
    return mask


def _ridge_decoder(rep: np.ndarray, records: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """Fit the affine ridge decoder of the module docstring; returns ``predict(rep) -> records``."""
    from sklearn.linear_model import RidgeCV

    mu_r, mu_x = rep.mean(axis=0), records.mean(axis=0)
    scale = float(np.sum((rep - mu_r) ** 2)) / rep.shape[1]
    if rep.shape[0] < 2 or scale == 0.0:
        # one leaked pair (or identical representations): the affine fit is the leaked records' mean
        return lambda r: np.broadcast_to(mu_x, (r.shape[0], mu_x.size)).copy()
    model = RidgeCV(alphas=np.asarray(RELATIVE_ALPHAS) * scale, fit_intercept=True).fit(rep, records)
    return model.predict


def leaked_pair_linkage(
    attack_rep: np.ndarray,
    attack_group: np.ndarray,
    attack_index: np.ndarray,
    pool: np.ndarray,
    leak_fraction: float = DEFAULT_LEAK_FRACTION,
    seed: int = 0,
) -> LeakedPairLinkage:
    """Leaked-pair ridge decoding then unique nearest-record linkage (module docstring).

    Parameters
    ----------
    attack_rep : (n_r, k) representation rows the attacker holds.
    attack_group : (n_r,) int, the map (party/participant/client) that produced each row.
    attack_index : (n_r,) int, each row's record in ``pool``.
    pool : (n_p, p) private records the attacker links to.
    leak_fraction : f ∈ (0, 1), fraction of each group's records that leak.
    seed : seeds which records leak.

    Raises :class:`ValidationError` on inconsistent shapes, indices outside the pool, NaN/inf, or
    when no row is left to attack.
    """
    rep = check_array(attack_rep, "xfam_attack_rep", ndim=2)
    pl = check_array(pool, "xfam_pool", ndim=2)
    group = _check_index(attack_group, "xfam_attack_group", rep.shape[0])
    index = _check_index(attack_index, "xfam_attack_index", rep.shape[0], upper=pl.shape[0])
    f = check_in_range(leak_fraction, "leak_fraction", 0.0, 1.0, low_inclusive=False, high_inclusive=False)
    leaked = _leaked_mask(group, index, f, seed, rep.shape[1])
    if leaked.all():
        raise ValidationError(
            "xfam_attack_rep: no row left to attack after leaking (every group has a single record); "
            f"need a group with at least 2 distinct records, got {rep.shape[0]} rows"
        )
    recon = np.empty((rep.shape[0], pl.shape[1]))
    per_group: dict[int, int] = {}
    for g in np.unique(group):
        in_g = group == g
        train, target = in_g & leaked, in_g & ~leaked
        per_group[int(g)] = int(train.sum())
        if target.any():
            recon[target] = _ridge_decoder(rep[train], pl[index[train]])(rep[target])
    attacked = ~leaked
    link = linkage_rate(recon[attacked], pl, index[attacked])
    n_unique = np.unique(pl, axis=0).shape[0]
    return LeakedPairLinkage(
        rate=link.rate,
        chance=1.0 / n_unique,
        # undefined (NaN) when fewer than two distinct records are attacked (the leak took the rest)
        relative_error=(relative_reconstruction_error(recon[attacked], pl[index[attacked]])
                        if np.unique(index[attacked]).size >= 2 else float("nan")),
        n_leaked=int(leaked.sum()),
        n_attacked=int(attacked.sum()),
        leaked_per_group=per_group,
    )


def control_linkage(
    attack_group: np.ndarray,
    attack_index: np.ndarray,
    pool: np.ndarray,
    rep_dim: int,
    leak_fraction: float = DEFAULT_LEAK_FRACTION,
    seed: int = 0,
) -> LeakedPairLinkage:
    """The control attack of the module docstring: :func:`leaked_pair_linkage` on a constant release.

    It never receives the release: only its row count (``len(attack_group)``) and width ``rep_dim``
    (k, which sets the k + 1 leaked pairs per group, so the leaked records are exactly those of the
    main attack with the same ``seed``). Each attacked row is reconstructed as its group's leaked
    records' mean.
    """
    n = np.asarray(attack_group).shape[0]
    k = int(rep_dim)
    if k < 1:
        raise ValidationError(f"rep_dim: must be ≥ 1 (the release's columns), got {rep_dim}")
    return leaked_pair_linkage(np.zeros((n, k)), attack_group, attack_index, pool, leak_fraction, seed)


def representation_utility(
    rep_train: np.ndarray, y_train: np.ndarray, rep_test: np.ndarray, y_test: np.ndarray, seed: int = 0
) -> float:
    """Balanced accuracy (mean per-class recall) on ``rep_test`` of ``StandardScaler`` +
    ``LogisticRegression(max_iter=2000, random_state=seed)`` fitted on ``rep_train`` (n_u × k')."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import balanced_accuracy_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    xtr = check_array(rep_train, "xfam_utility_rep_train", ndim=2, min_rows=2)
    xte = check_array(rep_test, "xfam_utility_rep_test", ndim=2)
    if xte.shape[1] != xtr.shape[1]:
        raise ValidationError(
            f"xfam_utility_rep_test: expected {xtr.shape[1]} columns (as xfam_utility_rep_train), got {xte.shape[1]}"
        )
    ytr = check_labels(y_train, "xfam_utility_y_train", n=xtr.shape[0], min_classes=2)
    yte = check_labels(y_test, "xfam_utility_y_test", n=xte.shape[0])
    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000, random_state=seed))
    clf.fit(xtr, ytr)
    return float(balanced_accuracy_score(yte, clf.predict(xte)))


def crossfamily_metrics(
    view: CrossFamilyArrays | None, seed: int, leak_fraction: float = DEFAULT_LEAK_FRACTION
) -> dict[str, float]:
    """The cross-family metrics of one seed from its view (:meth:`CrossFamilyArrays.from_stages`).

    Returns ``xfam_linkage_rate``, ``xfam_linkage_chance``, ``xfam_relative_error`` (NaN when fewer
    than two distinct records are left to attack), ``xfam_leaked_pairs``, ``xfam_attacked_rows``,
    ``xfam_utility_balanced_accuracy``, the control attack's ``xfam_linkage_control`` and
    ``xfam_relative_error_control`` and the advantages ``xfam_linkage_advantage`` and
    ``xfam_relative_error_advantage`` (module docstring); an empty dict when ``view`` is None.
    Raises :class:`ValidationError` naming the array when a side is missing or the arrays are
    inconsistent (shapes, indices out of range, NaN/inf).
    """
    if view is None:
        return {}
    for side, names in (("attack", ATTACK_ARRAYS), ("utility", UTILITY_ARRAYS)):
        if getattr(view, side) is None:
            raise ValidationError(f"{names[0]}: missing; the cross-family protocol needs all of {', '.join(ARRAYS)}")
    a, u = view.attack, view.utility
    link = leaked_pair_linkage(a.rep, a.group, a.index, a.pool, leak_fraction=leak_fraction, seed=seed)
    control = control_linkage(a.group, a.index, a.pool, np.shape(a.rep)[1], leak_fraction=leak_fraction, seed=seed)
    utility = representation_utility(u.rep_train, u.y_train, u.rep_test, u.y_test, seed=seed)
    return {
        "xfam_linkage_rate": link.rate,
        "xfam_linkage_chance": link.chance,
        "xfam_relative_error": link.relative_error,
        "xfam_leaked_pairs": float(link.n_leaked),
        "xfam_attacked_rows": float(link.n_attacked),
        "xfam_utility_balanced_accuracy": utility,
        "xfam_linkage_control": control.rate,
        "xfam_linkage_advantage": success_advantage(link.rate, control.rate),
        "xfam_relative_error_control": control.relative_error,
        "xfam_relative_error_advantage": error_advantage(link.relative_error, control.relative_error),
    }
