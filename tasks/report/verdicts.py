"""Verdicts with uncertainty: the paper-vs-ours claims and the "does this release beat publishing
nothing?" check, both judged on paired per-seed differences.

**The difference.** Two estimates ``a`` and ``b`` (cell metrics, frontier slopes, constants) are
compared through ``d = a − f·b`` (``f`` the claim's factor). When both carry per-seed values and
share seeds ``s ∈ S`` (the cells of a sweep run on the same seeds), the test is *paired*
(``scipy.stats.ttest_rel`` of ``a_s`` and ``f·b_s``): ``d̄ = mean_s d_s``, ``SE = sd(d_s)/√|S|``,
Student t with ``|S| − 1`` degrees of freedom. Against a constant it is the one-sample t-test of
``a_s − f·c`` (``scipy.stats.ttest_1samp``). A frontier slope is fitted per seed (each seed's
points), so slopes pair like metrics. Identical differences on every seed (deterministic
quantities) are exact: ``L = U = d̄``. Without shared seeds it is Welch's unpaired t-test
(``scipy.stats.ttest_ind(equal_var=False)``), or, with summaries only, the same test on the
standard errors taken from the stored 95% half-widths (``SE = ci95 / t_{0.975, n−1}``) or, for a
slope fitted on means, from the fit (``n_points − 2`` degrees of freedom). The standard error is
read off the test's own interval.

**The split.** The seeds re-draw the noise, not the train/test split. Where the split-to-split
spread of a cell metric was measured (``benchmarks/bench_split_spread.py``: the between-split
standard deviation ``σ_split`` of the cell's mean over ``k`` splits), the estimate carries it and
the difference's variance becomes ``SE² + σ²_split,a + f²σ²_split,b`` with Welch–Satterthwaite
degrees of freedom ``ν = V² / Σ_i (v_i² / ν_i)`` (``ν = k − 1`` for a split term). Treating the two
cells' split effects as independent is conservative when they are positively correlated, as cells
scored on one split are.

**The level.** One-sided bounds at ``1 − α`` (α = 0.05): ``L = d̄ − t_{1−α, ν}·SE``,
``U = d̄ + t_{1−α, ν}·SE``; equivalently two one-sided t-tests at level α each. An exact
sign-flip permutation test cannot reach α = 0.05 with the 2–3 seeds of the default sweeps (its
smallest one-sided p-value is 2^{−n}: 0.25 for n = 2, 0.125 for n = 3), so the t bounds are the
test everywhere; they assume the per-seed differences are roughly normal.

**The verdict** of ``a op f·b``:

========  =====================================  =====================================
op        held                                   not held
========  =====================================  =====================================
``>``     ``L > 0``                              ``U ≤ 0``
``>=``    ``L ≥ 0``                              ``U < 0``
``<``     ``U < 0``                              ``L ≥ 0``
``<=``    ``U ≤ 0``                              ``L > 0``
``~``     ``−τ ≤ L`` and ``U ≤ τ`` (TOST)        ``L > τ`` or ``U < −τ``
========  =====================================  =====================================

and *inconclusive* otherwise (the bounds straddle the boundary, fewer than two seeds, no spread
known): a shortfall whose bound excludes the claimed boundary is *not held*. The p-value of the
claim's direction (:func:`claim_p_value`; ``~``: the TOST p-value) is adjusted by Holm's step-down
procedure over the tests of one family's findings (:func:`holm`); a claim *held* by its bounds whose
adjusted p-value exceeds α is *inconclusive*. A refutation (*not held*) keeps the unadjusted bounds.

A claim with ``data_free`` references (what a release or attacker that never reads the data puts
in ``a``'s place) and held by its bounds is judged again with each of them in ``a``'s place: if one
is also *held*, the claim is *trivial* (whatever the multiplicity adjustment says: a release that
never reads the data meets it); else if one is *inconclusive* (or has not run), so is the claim —
it is *held* only when every data-free reference demonstrably fails it. An accounting identity (true by
construction of a formula, no sampling) is *trivial* when its comparison holds and *not held*
otherwise. A theorem check (a property any release has, data-free ones included) is judged like a
measurement but is not a finding: it enters no multiplicity family.

**The premise of an attack comparison.** A claim comparing an attacker's advantage over its
data-free control (``A = 0``: no better than the control, ``A ≤ 1``) on two methods says something
only when the attack on the side the claim says leaks more (``than`` for ``<``, ``<=``, ``~``;
``ours`` for ``>``, ``>=``) beats its control: one-sample lower bound ``L_A > 0``. Otherwise the
claim is *vacuous*: both attacks learn nothing on this data (an attacker can always fall back on
the control, so every advantage ≤ 0 is the same "nothing"), and it is not judged.

**Not evaluated.** A claim whose own cells (``a``, ``b``, or the premise's attack) have no result —
not in the grid, or not run in this root — is *not evaluated*: no verdict and not a finding (it
enters no multiplicity family). A data-free reference that has not run makes a claim its own bounds
hold *inconclusive* (above).

**Settings.** A claim over a sweep option (``over``) is judged at every value of it; its verdict
is that of every setting when they agree, *partly held* when it is held at some and not all, and
otherwise the most telling of theirs (:func:`combine_settings`).

The same bounds decide whether a cell *beats* the best data-free reference of its sweep on a
utility metric (``L > 0`` for the signed difference cell − reference), *loses* to it (``U < 0``),
or cannot be told apart from it (:mod:`tasks.report.data_free`).

References: Student's paired t-test and Welch, *Biometrika* 34 (1947) for the unpaired case;
Satterthwaite, *Biometrics Bulletin* 2 (1946) for the combined degrees of freedom; Schuirmann,
*J. Pharmacokinet. Biopharm.* 15 (1987) for two one-sided tests of equivalence; Holm, *Scand. J.
Statist.* 6 (1979) for the step-down adjustment.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

ALPHA = 0.05
#: a setting's verdicts; a claim over several settings may also be *partly held*
VERDICTS = ("held", "not held", "inconclusive", "trivial", "vacuous", "not evaluated")
CLAIM_VERDICTS = (*VERDICTS, "partly held")
OPS = ("<", "<=", ">", ">=", "~")
KINDS = ("measured", "accounting_identity", "theorem_check")


@dataclass(frozen=True)
class Estimate:
    """A value to compare: its point estimate, its per-seed values (seed → value) when known, and
    otherwise the standard error of the mean with its degrees of freedom. ``constant`` marks a
    number with no sampling error (a threshold typed in the config). ``split_sd`` is the measured
    between-split standard deviation of the mean (0: not measured) with ``split_df`` degrees of
    freedom (number of splits − 1)."""

    mean: float
    per_seed: Mapping[str, float] = field(default_factory=dict)
    se: float | None = None
    df: float = math.inf
    constant: bool = False
    split_sd: float = 0.0
    split_df: float = math.inf

    @classmethod
    def of_constant(cls, value: float) -> Estimate:
        return cls(mean=float(value), se=0.0, constant=True)

    @classmethod
    def of_seeds(cls, per_seed: Mapping[Any, float], mean: float | None = None) -> Estimate:
        """From per-seed values (non-finite values dropped); ``mean`` overrides the point estimate
        (e.g. a slope fitted on the cell means)."""
        vals = {str(s): float(v) for s, v in per_seed.items() if v is not None and math.isfinite(float(v))}
        if not vals:
            raise ValueError("per_seed: no finite per-seed value")
        m = sum(vals.values()) / len(vals) if mean is None else float(mean)
        return cls(mean=m, per_seed=vals)

    @classmethod
    def of_summary(cls, summary: Mapping[str, float]) -> Estimate:
        """From a stored ``{"mean", "ci95", "n"}`` summary (the 95% t half-width over n seeds)."""
        from scipy.stats import t

        n = int(summary.get("n", 1))
        if n < 2:
            return cls(mean=float(summary["mean"]))
        return cls(mean=float(summary["mean"]), se=float(summary["ci95"]) / float(t.ppf(0.975, n - 1)), df=n - 1)

    def with_split(self, sd: float, df: float) -> Estimate:
        """This estimate with a measured between-split standard deviation ``sd`` (``df`` degrees of freedom)."""
        if not (sd >= 0 and math.isfinite(sd)) or not df > 0:
            raise ValueError(f"split_sd: must be a finite number ≥ 0 with df > 0, got {sd} (df {df})")
        return dataclasses.replace(self, split_sd=float(sd), split_df=float(df))


@dataclass(frozen=True)
class Difference:
    """``d = a − f·b``: its mean, one-sided (1 − α) lower and upper bounds, the standard error and
    degrees of freedom of the mean (``se = 0``: exact, no sampling error; ``se = ∞``: no test),
    the number of paired seeds (0 when unpaired), and the test's name."""

    test: str
    mean: float
    lower: float
    upper: float
    se: float = 0.0
    df: float = math.inf
    n: int = 0

    @property
    def statistic(self) -> float:
        """The t statistic d̄ / SE (NaN when exact or untestable)."""
        return self.mean / self.se if 0 < self.se < math.inf else math.nan

    def p_value(self, side: str, shift: float = 0.0) -> float:
        """One-sided p-value of H0: E[d] ≤ shift (``side='greater'``) or E[d] ≥ shift (``'less'``)."""
        from scipy.stats import t

        if side not in ("greater", "less"):
            raise ValueError(f"side: must be 'greater' or 'less', got {side!r}")
        if self.se == 0:
            return 0.0 if (self.mean > shift if side == "greater" else self.mean < shift) else 1.0
        if not math.isfinite(self.se):
            return math.nan
        stat = (self.mean - shift) / self.se
        return float(t.sf(stat, self.df) if side == "greater" else t.cdf(stat, self.df))


#: a seed-level test: (its name, the mean difference, its standard error, degrees of freedom, paired seeds)
Sampling = tuple[str, float, float, float, int]


def _bounds(mean: float, se: float, df: float, alpha: float) -> tuple[float, float]:
    from scipy.stats import t

    q = float(t.ppf(1 - alpha, df))
    return mean - q * se, mean + q * se


def _se_of(result: Any) -> tuple[float, float]:
    """(standard error, degrees of freedom) of a scipy t-test result, read off its own interval:
    the two-sided 50% interval is ``± t_{0.75, ν}·SE``."""
    from scipy.stats import t

    ci = result.confidence_interval(0.5)
    df = float(result.df)
    return float(ci.high - ci.low) / (2.0 * float(t.ppf(0.75, df))), df


def _satterthwaite(parts: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """(√V, ν) of a sum of independent variance terms ``(s_i, ν_i)``: ``V = Σ s_i²`` and
    ``ν = V² / Σ (s_i⁴ / ν_i)`` over the terms with ``s_i > 0`` (∞ when none has finite ν)."""
    var = sum(s * s for s, _ in parts)
    finite = [(s, nu) for s, nu in parts if s > 0 and math.isfinite(nu)]
    df = var ** 2 / sum(s ** 4 / nu for s, nu in finite) if finite else math.inf
    return math.sqrt(var), df


def _paired_seeds(a: Estimate, b: Estimate) -> list[str] | None:
    """The seeds a paired (or, against a constant, one-sample) test uses; None for an unpaired test."""
    if a.constant or b.constant:
        return list((b if a.constant else a).per_seed) or None
    if a.per_seed and b.per_seed:
        return [s for s in a.per_seed if s in b.per_seed] or None
    return None


def _paired(a: Estimate, b: Estimate, factor: float, seeds: list[str]) -> Sampling:
    """The paired t-test of ``a_s − factor·b_s`` over ``seeds`` (``scipy.stats.ttest_rel``), or the
    one-sample t-test when one side is a constant (``scipy.stats.ttest_1samp``)."""
    import numpy as np
    from scipy import stats

    one_sample = a.constant or b.constant
    x = np.array([a.mean if a.constant else a.per_seed[s] for s in seeds])
    y = factor * np.array([b.mean if b.constant else b.per_seed[s] for s in seeds])
    d = x - y
    n, dbar = len(d), float(d.mean())
    name = "one-sample t" if one_sample else "paired t"
    if n < 2:
        return f"{name} (1 seed: no test)", dbar, math.inf, math.inf, n
    if float(np.ptp(d)) <= 1e-12 * max(1.0, abs(dbar)):
        return f"{name}, identical differences over {n} seeds (no spread)", dbar, 0.0, math.inf, n
    se, df = _se_of(stats.ttest_1samp(d, 0.0) if one_sample else stats.ttest_rel(x, y))
    return f"{name} over {n} seeds", dbar, se, df, n


def _spread(e: Estimate, factor: float) -> tuple[float, float] | None:
    """(standard error of ``factor·e``, its degrees of freedom); None when no spread is known."""
    from scipy import stats

    if e.constant:
        return 0.0, math.inf
    if len(e.per_seed) >= 2:
        v = list(e.per_seed.values())
        return factor * float(stats.sem(v)), len(v) - 1
    if e.se is not None:
        return factor * e.se, e.df
    return None


def _unpaired(a: Estimate, b: Estimate, factor: float) -> Sampling:
    """Welch's t-test of ``a − factor·b`` (``scipy.stats.ttest_ind(equal_var=False)``) on their
    per-seed values, else on their standard errors with Welch–Satterthwaite degrees of freedom."""
    from scipy import stats

    mean = a.mean - factor * b.mean
    if len(a.per_seed) >= 2 and len(b.per_seed) >= 2:
        res = stats.ttest_ind(list(a.per_seed.values()), [factor * v for v in b.per_seed.values()], equal_var=False)
        se, df = _se_of(res)
        return "Welch t (unpaired)", mean, se, df, 0
    parts = [_spread(a, 1.0), _spread(b, factor)]
    if None in parts:
        return "no spread known: no test", mean, math.inf, math.inf, 0
    se, df = _satterthwaite(parts)
    return ("Welch t (unpaired)" if se > 0 else "exact (no spread)"), mean, se, df, 0


def _sampling(a: Estimate, b: Estimate, factor: float) -> Sampling:
    """The seed-level test of ``a − factor·b``: (name, mean, SE, ν, paired seeds); SE 0 = exact,
    ∞ = no test."""
    if a.constant and b.constant:
        return "exact (constants)", a.mean - factor * b.mean, 0.0, math.inf, 0
    seeds = _paired_seeds(a, b)
    return _unpaired(a, b, factor) if seeds is None else _paired(a, b, factor, seeds)


def difference(a: Estimate, b: Estimate, factor: float = 1.0, alpha: float = ALPHA) -> Difference:
    """The difference ``a − factor·b`` with one-sided ``1 − alpha`` bounds (module docstring),
    its variance widened by the measured split spread of either side."""
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha: must be in (0, 0.5), got {alpha}")
    name, mean, se, df, n = _sampling(a, b, factor)
    split = [(s, nu) for s, nu in ((a.split_sd, a.split_df), (factor * b.split_sd, b.split_df)) if s > 0]
    if split and math.isfinite(se):
        se, df = _satterthwaite([(se, df), *split])
        name += f" + split spread ({', '.join(f'{nu + 1:g}' for _, nu in split)} splits)"
    if not math.isfinite(se):
        return Difference(name, mean, -math.inf, math.inf, math.inf, n=n)
    if se == 0:
        return Difference(name, mean, mean, mean, 0.0, math.inf, n)
    lo, hi = _bounds(mean, se, df, alpha)
    return Difference(name, mean, lo, hi, se, df, n)


def judge(diff: Difference | None, op: str, tolerance: float = 0.0) -> str:
    """*held*, *not held* or *inconclusive* for ``d op 0`` (``|d| ≤ tolerance`` for ``~``), from
    the one-sided bounds of ``diff`` (table in the module docstring)."""
    if op not in OPS:
        raise ValueError(f"op: must be one of {OPS}, got {op!r}")
    if tolerance < 0:
        raise ValueError(f"tolerance: must be ≥ 0, got {tolerance}")
    if diff is None:
        return "inconclusive"
    lo, hi = diff.lower, diff.upper
    held, not_held = {
        ">": (lo > 0, hi <= 0),
        ">=": (lo >= 0, hi < 0),
        "<": (hi < 0, lo >= 0),
        "<=": (hi <= 0, lo > 0),
        "~": (-tolerance <= lo and hi <= tolerance, lo > tolerance or hi < -tolerance),
    }[op]
    return "held" if held else "not held" if not_held else "inconclusive"


def claim_p_value(diff: Difference, op: str, tolerance: float = 0.0) -> float:
    """One-sided p-value of the claim's direction (``>``/``>=``: H0 E[d] ≤ 0; ``<``/``<=``:
    H0 E[d] ≥ 0); for ``~`` the TOST p-value, the larger of those of H0 E[d] ≤ −τ and H0 E[d] ≥ τ.
    An exact difference (no sampling error) has p = 0 when its comparison holds, else 1; an
    untestable one NaN."""
    if diff.se == 0:
        return 0.0 if judge(diff, op, tolerance) == "held" else 1.0
    if op in (">", ">="):
        return diff.p_value("greater")
    if op in ("<", "<="):
        return diff.p_value("less")
    return max(diff.p_value("greater", -tolerance), diff.p_value("less", tolerance))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order: with the m finite p-values sorted,
    ``p̃_(i) = max_{j ≤ i} min(1, (m − j + 1)·p_(j))``; NaN stays NaN (an untested claim is no
    member of the family). ``p̃_i ≤ α`` exactly for the hypotheses Holm's procedure rejects at
    family-wise level α.

    >>> holm([0.01, 0.04, 0.03, float("nan")])[:3]
    [0.03, 0.06, 0.06]
    """
    order = sorted((i for i, p in enumerate(p_values) if math.isfinite(p)), key=lambda i: p_values[i])
    out = [math.nan] * len(p_values)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * float(p_values[i])))
        out[i] = running
    return out


@dataclass(frozen=True)
class ClaimVerdict:
    """The verdict of one claim at one setting with its evidence: the difference ours − f·than
    and the p-value of the claim's direction (unadjusted, and Holm-adjusted when given); the
    premise's difference (advantage − 0) when the claim has one; and, when data-free references
    are configured, the index of the one that decided (the first that satisfies the claim, else
    the first whose test is inconclusive or that has not run, else the first), its difference and
    its judgement (``"not run"`` when it has no value)."""

    verdict: str
    reason: str
    diff: Difference | None
    data_free_index: int | None = None
    data_free_diff: Difference | None = None
    data_free_verdict: str = ""
    p_value: float = math.nan
    p_adjusted: float = math.nan
    premise_diff: Difference | None = None

    @property
    def is_finding(self) -> bool:
        """Whether this test joins its family's multiplicity adjustment: judged, with a p-value."""
        return self.verdict not in ("vacuous", "not evaluated") and math.isfinite(self.p_value)


def fmt_bound(x: float) -> str:
    """A bound in three significant digits, ``∞``/``−∞`` when infinite."""
    return f"{x:.3g}" if math.isfinite(x) else ("−∞" if x < 0 else "∞")


def _premise(premise: tuple[str, Estimate | None], alpha: float) -> tuple[Difference | None, str]:
    """The premise's advantage − 0 and, when it fails, why (``""`` when it holds)."""
    name, est = premise
    if est is None:
        return None, f"the premise has not run: {name}"
    d = difference(est, Estimate.of_constant(0.0), 1.0, alpha)
    if d.lower > 0:
        return d, ""
    how = "scores below its data-free control" if d.mean <= 0 else "is not shown to beat its data-free control"
    return d, (f"the attack learns nothing on this data: the attack on {name} {how} (advantage {d.mean:.3g}, "
               f"one-sided {1 - alpha:.0%} lower bound {fmt_bound(d.lower)} ≤ 0), so the claim would compare degrees of "
               "failure; an attacker can always fall back on the control")


def _accounting(diff: Difference, op: str, tolerance: float) -> ClaimVerdict:
    """An accounting identity: *trivial* when its comparison holds exactly, else *not held*."""
    exact = Difference("accounting identity (no sampling)", diff.mean, diff.mean, diff.mean)
    ok = judge(exact, op, tolerance) == "held"
    return ClaimVerdict("trivial" if ok else "not held",
                        "true by construction of the formula: an accounting identity, not a measured claim" if ok
                        else "the accounting formula does not give it", exact)


def _bounds_reason(diff: Difference, verdict: str, alpha: float) -> str:
    """Why a claim's own bounds do not hold it."""
    bounds = f"the one-sided {1 - alpha:.0%} bounds of d [{fmt_bound(diff.lower)}, {fmt_bound(diff.upper)}]"
    return (f"{bounds} straddle the claim's boundary" if verdict == "inconclusive" else
            f"{bounds} exclude the claim's boundary on the wrong side")


#: why a claim held by its bounds stays inconclusive, by the judgement of a data-free reference
_DATA_FREE_DOUBTS = (
    ("inconclusive", "held, but the data-free reference might satisfy it too (its own test is inconclusive)"),
    ("not run", "held, but the data-free reference has not run, so a release that never reads the data might "
                "meet it too"))


def _held(diff: Difference, judged: list[tuple[Difference | None, str]], p: float, p_adjusted: float | None,
          alpha: float, evidence: dict[str, Any]) -> ClaimVerdict:
    """The verdict of a claim its own bounds hold, given each data-free reference's ``(difference,
    judgement)``: *trivial* when one holds it too, *inconclusive* when Holm's adjusted p-value
    exceeds α or a reference's test is inconclusive or has not run, else *held*."""
    trivial = next((i for i, (_, v) in enumerate(judged) if v == "held"), None)
    if trivial is not None:
        return ClaimVerdict("trivial", "the data-free reference satisfies it too", diff, trivial, *judged[trivial],
                            **evidence)
    if p_adjusted is not None and not p_adjusted <= alpha:
        return ClaimVerdict("inconclusive", f"held at α = {alpha:g} on its own (p = {p:.2g}), not after Holm's "
                                            f"adjustment over the family's findings (p_Holm = {p_adjusted:.2g})",
                            diff, **evidence)
    for want, reason in _DATA_FREE_DOUBTS:
        hit = next((i for i, (_, v) in enumerate(judged) if v == want), None)
        if hit is not None:
            return ClaimVerdict("inconclusive", reason, diff, hit, *judged[hit], **evidence)
    return ClaimVerdict("held", "", diff, *((0, *judged[0]) if judged else ()), **evidence)


def judge_claim(ours: Estimate | None, than: Estimate | None, op: str, *, factor: float = 1.0,
                tolerance: float = 0.0, kind: str = "measured", data_free: Sequence[Estimate | None] = (),
                premise: tuple[str, Estimate | None] | None = None, p_adjusted: float | None = None,
                alpha: float = ALPHA) -> ClaimVerdict:
    """Judge ``ours op factor·than`` (module docstring). ``premise`` is ``(name, advantage)`` of
    the attack that must beat its control for the claim to be judged (*vacuous* otherwise).
    ``p_adjusted`` is the claim's Holm-adjusted p-value: *held* needs it ≤ ``alpha``.
    ``data_free`` holds the value of each configured data-free reference (None for one that has
    not run): the claim is *trivial* when any of them is judged *held* in ``ours``' place, and
    *held* only when every one of them is judged *not held*."""
    if kind not in KINDS:
        raise ValueError(f"kind: must be one of {KINDS}, got {kind!r}")
    if ours is None or than is None:
        return ClaimVerdict("not evaluated", "not run: a referenced cell or curve has no result", None)
    diff = difference(ours, than, factor, alpha)
    p = claim_p_value(diff, op, tolerance)
    if kind == "accounting_identity":
        return _accounting(diff, op, tolerance)
    evidence: dict[str, Any] = {"p_value": p, "p_adjusted": math.nan if p_adjusted is None else p_adjusted}
    if premise is not None:
        pd, failed = _premise(premise, alpha)
        evidence["premise_diff"] = pd
        if failed:
            return ClaimVerdict("not evaluated" if pd is None else "vacuous", failed, diff, p_value=math.nan,
                                premise_diff=pd)
    verdict = judge(diff, op, tolerance)
    if verdict != "held":
        return ClaimVerdict(verdict, _bounds_reason(diff, verdict, alpha), diff, **evidence)
    judged = []
    for e in data_free:
        dd = None if e is None else difference(e, than, factor, alpha)
        judged.append((dd, "not run" if dd is None else judge(dd, op, tolerance)))
    return _held(diff, judged, p, p_adjusted, alpha, evidence)


def combine_settings(verdicts: Sequence[tuple[str, str]]) -> tuple[str, str]:
    """(claim verdict, where) of a claim judged at several settings ``(label, verdict)``: the common
    verdict when all agree; *partly held* when held at some but not all; otherwise the first of
    *not held*, *inconclusive*, *trivial*, *vacuous*, *not evaluated* that occurs. ``where`` lists
    the settings per verdict, or says "at every setting (…)" when they agree (``""`` for a single
    setting)."""
    if not verdicts:
        raise ValueError("verdicts: a claim needs at least one setting")
    if len(verdicts) == 1:
        return verdicts[0][1], ""
    by: dict[str, list[str]] = {}
    for label, v in verdicts:
        by.setdefault(v, []).append(label)
    if len(by) == 1:
        return verdicts[0][1], f"at every setting ({', '.join(label for label, _ in verdicts)})"
    where = "; ".join(f"{v} at {', '.join(labels)}" for v, labels in by.items())
    if "held" in by:
        return "partly held", where
    return next(v for v in ("not held", "inconclusive", "trivial", "vacuous", "not evaluated") if v in by), where
