r"""A privacy ledger: every differentially private release, and what they cost together.

Each entry is ``count`` (ε, δ)-DP releases of one data set made by one cell and seed:
``(dataset, sweep, cell, seed, mechanism, ε, δ, count)`` — e.g. q query score vectors released
separately, each at (ε, δ), are one entry with ``count = q``.
:func:`compose` totals the entries of a data set two ways:

* basic composition (Dwork & Roth 2014, Thm 3.16): :math:`(\sum_i \varepsilon_i, \sum_i \delta_i)`;
* advanced composition for k releases at the largest (ε, δ) (Dwork, Rothblum & Vadhan 2010):
  :math:`\varepsilon' = \sqrt{2k\ln(1/\delta')}\,\varepsilon + k\varepsilon(e^{\varepsilon}-1)`,
  :math:`\delta' + k\delta`, with slack :math:`\delta' = 10^{-6}` by default;

the reported total is the smaller ε of the two. Releases with ε = ∞ (no privacy) make the total
infinite. Pipeline cells are different *configurations* of the same data: their composition is what
an adversary seeing every released object would face, which is the honest number to show.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from veilbench.validation import ValidationError, check_in_range


@dataclass(frozen=True)
class LedgerEntry:
    """``count`` (ε, δ)-DP releases of ``dataset``."""

    dataset: str
    sweep: str
    cell: str
    seed: int
    mechanism: str
    epsilon: float
    delta: float
    count: int = 1

    def __post_init__(self) -> None:
        if int(self.count) != self.count or self.count < 1:
            raise ValidationError(f"count: must be an integer ≥ 1, got {self.count}")
        if not (self.epsilon > 0):
            raise ValidationError(f"epsilon: must be > 0 (or inf for no privacy), got {self.epsilon}")
        check_in_range(self.delta, "delta", 0.0, 1.0, high_inclusive=False)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class Composition:
    """Total privacy cost of ``n_releases`` releases of one data set."""

    dataset: str
    n_releases: int
    epsilon_basic: float
    delta_basic: float
    epsilon_advanced: float
    delta_advanced: float

    @property
    def epsilon(self) -> float:
        return min(self.epsilon_basic, self.epsilon_advanced)

    @property
    def delta(self) -> float:
        return self.delta_basic if self.epsilon_basic <= self.epsilon_advanced else self.delta_advanced


def compose(entries: Iterable[LedgerEntry], delta_slack: float = 1e-6) -> dict[str, Composition]:
    """Per data set, the basic and advanced composition of its entries (see module docstring)."""
    check_in_range(delta_slack, "delta_slack", 0.0, 1.0, low_inclusive=False, high_inclusive=False)
    by_dataset: dict[str, list[LedgerEntry]] = {}
    for e in entries:
        by_dataset.setdefault(e.dataset, []).append(e)
    out = {}
    for dataset, es in by_dataset.items():
        k = sum(int(e.count) for e in es)
        eps_sum = math.fsum(e.count * e.epsilon for e in es)
        delta_sum = min(1.0, math.fsum(e.count * e.delta for e in es))
        eps_max = max(e.epsilon for e in es)
        delta_max = max(e.delta for e in es)
        if math.isinf(eps_max):
            eps_adv = math.inf
        else:
            eps_adv = math.sqrt(2 * k * math.log(1 / delta_slack)) * eps_max + k * eps_max * math.expm1(min(eps_max, 700.0))
        out[dataset] = Composition(dataset, k, eps_sum, delta_sum, eps_adv, min(1.0, delta_slack + k * delta_max))
    return out
