r"""A privacy ledger: every differentially private release, and what one deployment spends.

Each entry is ``count`` releases of one data set made by one cell and seed:
``(dataset, sweep, cell, seed, mechanism, ε, δ, count, noise_multiplier, adjacency,
record_noise_multiplier, epsilon_rdp)`` — e.g. q query score vectors released separately, each at
(ε, δ), are one entry with ``count = q``. A Gaussian release carries its noise multiplier z = σ/Δ
(noise std over L2 sensitivity); then its exact privacy profile is known and
:attr:`LedgerEntry.delta_achieved` is the δ it really meets at ε (Balle & Wang 2018, Thm 8; above
the target δ for a classical calibration used beyond its validity). An entry without z is only
known to be (ε, δ)-DP.

**Adjacency.** ε means nothing without the neighbouring relation it protects; each entry states it:

* ``record``: replacing one record (a gallery row, an item's rating column, a sentence, an
  embedding row) — person-level when a record is a person;
* ``output``: ScoreShield's output-space adjacency, ‖G − G'‖_F ≤ Δ for a user Δ independent of n
  (Cohen-Addad et al.): *not* record-level unless Δ ≥ 2√(2(n − 1)). Such an entry also carries
  ``record_noise_multiplier`` = σ/(2√(2(n − 1))), the same σ against the record-level sensitivity
  at the cell's n, and :attr:`LedgerEntry.epsilon_record` is the ε that σ gives a record (exact
  profile, :func:`~veilbench.privacy.calibration.gaussian_epsilon`);
* ``client``: adding/removing one client's (clipped) update with the weights held fixed (DP-FedAvg).

**Another accountant's figure.** An entry may carry ``epsilon_rdp``, the ε the cell's own RDP
accountant states for all its ``count`` releases at δ (DP-FedAvg's rounds); it is shown beside the
ledger's exact composition, which is tighter.

**Deployments, not sweeps.** A cell is one deployable configuration; its seeds are repetitions of
the same deployment and the sweep's other cells are alternatives to it, so neither is composed:
:func:`compose` totals, per (dataset, sweep, cell), the releases *one seed* makes (the largest
total over seeds) with Google's ``dp_accounting`` privacy-loss distributions (PLD):

* the Gaussian entries compose exactly into one Gaussian mechanism with
  :math:`z_{\mathrm{eff}} = (\sum_i c_i / z_i^2)^{-1/2}` (the sum of independent Gaussian
  releases of sensitivity-1 queries; Dong, Roth & Su 2022, Cor. 3.3), turned into a PLD by
  ``from_gaussian_mechanism``;
* each (ε, δ)-only entry enters as ``from_privacy_parameters`` self-composed ``count`` times;

and the deployment spends ε = ``get_epsilon_for_delta(δ)`` at δ = the largest target δ of its
entries (at least Σ c·δ over the (ε, δ)-only entries, the loss mass they leave at infinity). Basic composition :math:`(\sum c_i\varepsilon_i, \sum c_i\delta_i)` is kept beside it for
reference. Releases with ε = ∞ (no privacy) make the total infinite.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields

from veilbench.privacy.calibration import achieved_delta, gaussian_epsilon
from veilbench.validation import ValidationError, check_in_range


ADJACENCIES = ("", "record", "output", "client")
"""The neighbouring relations an entry may state ("" = not stated); see the module docstring."""


def _optional(x: float | None) -> float | None:
    return None if x is None else float(x)


@dataclass(frozen=True)
class Release:
    """What one stage's differentially private release spends, as the stage states it: ``count``
    releases of one data set at (ε, δ) each, with the noise multiplier z = σ/Δ of a Gaussian one,
    the neighbouring relation it protects (:data:`ADJACENCIES`), z against the record-level
    sensitivity (an output-adjacency release) and the family's own RDP figure for all ``count``
    releases. The pipeline adds where it was made (:meth:`entry`)."""

    epsilon: float
    delta: float
    count: int = 1
    noise_multiplier: float | None = None
    adjacency: str = ""
    record_noise_multiplier: float | None = None
    epsilon_rdp: float | None = None

    def __post_init__(self) -> None:
        if int(self.count) != self.count or self.count < 1:
            raise ValidationError(f"count: must be an integer ≥ 1, got {self.count}")
        if not (self.epsilon > 0):
            raise ValidationError(f"epsilon: must be > 0 (or inf for no privacy), got {self.epsilon}")
        check_in_range(self.delta, "delta", 0.0, 1.0, high_inclusive=False)
        z = self.noise_multiplier
        if z is not None and not (math.isfinite(z) and z > 0):
            raise ValidationError(f"noise_multiplier: must be a finite σ/Δ > 0 (or None), got {z}")
        if self.adjacency not in ADJACENCIES:
            raise ValidationError(f"adjacency: must be one of {list(ADJACENCIES)}, got {self.adjacency!r}")
        z_rec = self.record_noise_multiplier
        if z_rec is not None and not (math.isfinite(z_rec) and z_rec > 0):
            raise ValidationError(f"record_noise_multiplier: must be a finite σ/Δ_record > 0 (or None), got {z_rec}")
        if self.epsilon_rdp is not None and not self.epsilon_rdp > 0:
            raise ValidationError(f"epsilon_rdp: must be > 0 (or None), got {self.epsilon_rdp}")
        for name in ("noise_multiplier", "record_noise_multiplier", "epsilon_rdp"):  # plain floats, JSON-able
            object.__setattr__(self, name, _optional(getattr(self, name)))
        object.__setattr__(self, "epsilon", float(self.epsilon))
        object.__setattr__(self, "delta", float(self.delta))
        object.__setattr__(self, "count", int(self.count))

    def entry(self, dataset: str, sweep: str, cell: str, seed: int, mechanism: str) -> LedgerEntry:
        """This release as the ledger entry of ``cell`` and ``seed`` of ``sweep`` on ``dataset``."""
        return LedgerEntry(dataset, sweep, cell, int(seed), mechanism, **{f.name: getattr(self, f.name)
                                                                          for f in fields(Release)})

    def metrics(self) -> dict[str, float]:
        """The budget as the stage's record columns: ``dp_epsilon``, ``dp_delta``, ``dp_releases``
        (the count) and, when known, ``dp_noise_multiplier``, ``dp_record_noise_multiplier`` and
        ``dp_epsilon_rdp``."""
        out = {"dp_epsilon": self.epsilon, "dp_delta": self.delta, "dp_releases": float(self.count)}
        for name, value in (("dp_noise_multiplier", self.noise_multiplier),
                            ("dp_record_noise_multiplier", self.record_noise_multiplier),
                            ("dp_epsilon_rdp", self.epsilon_rdp)):
            if value is not None:
                out[name] = value
        return out


@dataclass(frozen=True)
class _Origin:
    """Where a release was made: the data set, and the sweep, cell, seed and method that made it."""

    dataset: str
    sweep: str
    cell: str
    seed: int
    mechanism: str


@dataclass(frozen=True)
class LedgerEntry(Release, _Origin):
    """``count`` (ε, δ)-DP releases of ``dataset`` (a :class:`Release`, checked as one) made by
    ``cell`` and ``seed`` of ``sweep``; Gaussian ones with noise multiplier z = σ/Δ. Fields in order:
    ``dataset, sweep, cell, seed, mechanism`` then those of :class:`Release`."""

    @property
    def delta_achieved(self) -> float:
        """δ each release meets at ε: the exact Gaussian profile with z, else the claimed δ."""
        if self.noise_multiplier is None or math.isinf(self.epsilon):
            return self.delta
        return achieved_delta(self.noise_multiplier, 1.0, self.epsilon)

    @property
    def epsilon_record(self) -> float | None:
        """ε at δ of one release against a record-level neighbour (exact profile of
        ``record_noise_multiplier``), or None when the entry has none."""
        if self.record_noise_multiplier is None:
            return None
        return gaussian_epsilon(self.record_noise_multiplier, 1.0, self.delta)

    def as_dict(self) -> dict[str, object]:
        """The fields and the derived ``delta_achieved`` and ``epsilon_record``."""
        out = asdict(self)
        out["delta_achieved"] = self.delta_achieved
        out["epsilon_record"] = self.epsilon_record
        return out

    @classmethod
    def from_dict(cls, row: dict[str, object]) -> LedgerEntry:
        """Inverse of :meth:`as_dict` (derived keys are ignored)."""
        return cls(**{f.name: row[f.name] for f in fields(cls) if f.name in row})


@dataclass(frozen=True)
class Composition:
    """What one deployment (dataset, sweep, cell) spends over the releases of one seed."""

    dataset: str
    sweep: str
    cell: str
    n_releases: int
    epsilon: float
    delta: float
    epsilon_basic: float
    delta_basic: float
    noise_multiplier: float | None
    adjacency: str = ""
    epsilon_record: float | None = None
    epsilon_rdp: float | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        return self.dataset, self.sweep, self.cell


def _pld_epsilon(entries: list[LedgerEntry], delta: float) -> tuple[float, float | None]:
    """(ε at ``delta`` of the PLD composition of ``entries``, z_eff of their Gaussian part or None)."""
    from dp_accounting.pld import privacy_loss_distribution as pld
    from dp_accounting.pld.common import DifferentialPrivacyParameters

    if any(math.isinf(e.epsilon) for e in entries):
        return math.inf, None
    precision = sum(e.count / e.noise_multiplier**2 for e in entries if e.noise_multiplier is not None)
    z_eff = precision**-0.5 if precision > 0 else None
    total = None
    if z_eff is not None:
        # the loss grows like 1/z²: a grid step ∝ max(1, 1/z²) keeps the relative precision and the size
        step = 1e-4 * max(1.0, 1.0 / z_eff**2)
        total = pld.from_gaussian_mechanism(z_eff, sensitivity=1.0, value_discretization_interval=step)
    for e in entries:
        if e.noise_multiplier is None:
            part = pld.from_privacy_parameters(DifferentialPrivacyParameters(e.epsilon, e.delta))
            part = part.self_compose(int(e.count)) if e.count > 1 else part
            total = part if total is None else total.compose(part)
    return float(total.get_epsilon_for_delta(delta)), z_eff


def _record_epsilon(entries: list[LedgerEntry], delta: float) -> float | None:
    """ε at ``delta`` of the entries against a record-level neighbour: the exact profile of
    (Σ c/z_rec²)^{-1/2} when every entry is Gaussian with a ``record_noise_multiplier``, else None."""
    if not entries or any(e.record_noise_multiplier is None or e.noise_multiplier is None for e in entries):
        return None
    z_rec = math.fsum(e.count / e.record_noise_multiplier**2 for e in entries) ** -0.5
    return gaussian_epsilon(z_rec, 1.0, delta)


def compose(entries: Iterable[LedgerEntry]) -> dict[tuple[str, str, str], Composition]:
    """Per deployment (dataset, sweep, cell): the PLD composition of one seed's releases (the largest
    over seeds), at the largest target δ of its entries (see the module docstring)."""
    by_run: dict[tuple[str, str, str], dict[int, list[LedgerEntry]]] = {}
    for e in entries:
        by_run.setdefault((e.dataset, e.sweep, e.cell), {}).setdefault(int(e.seed), []).append(e)
    out = {}
    for key, seeds in by_run.items():
        best = None
        for es in seeds.values():
            # an (ε, δ)-only entry puts mass δ at infinite loss: the total cannot be reported below Σ c·δ
            delta = max(max(e.delta for e in es),
                        min(math.fsum(e.count * e.delta for e in es if e.noise_multiplier is None), 1.0))
            eps, z_eff = _pld_epsilon(es, delta)
            eps_basic = math.fsum(e.count * e.epsilon for e in es)
            delta_basic = min(1.0, math.fsum(e.count * e.delta_achieved for e in es))
            comp = Composition(*key, sum(int(e.count) for e in es), eps, delta, eps_basic, delta_basic, z_eff,
                               " + ".join(sorted({e.adjacency for e in es if e.adjacency})),
                               _record_epsilon(es, delta), es[0].epsilon_rdp if len(es) == 1 else None)
            if best is None or comp.epsilon > best.epsilon:
                best = comp
        out[key] = best
    return out
