"""The paper claims (``report.claims``) read off this run's cells and judged by
:mod:`tasks.report.verdicts`; the "paper vs ours" section that shows them: :mod:`tasks.report.claims_table`.

For claim ``c`` with references ``ours``, ``than``, ``data_free`` and ``premise``:

1. *Evaluable?* A reference to a sweep or cell that the params file does not hold
   (:meth:`veilbench.config.Config.missing_claim_cells`) makes the claim *not evaluated (cell not
   in this grid)*, with a warning; the rest of the report is built as usual.
2. *Settings.* Without ``over`` the claim has one setting, the cells it names. With ``over = o``
   it has one per value ``v`` of option ``o`` among the cells of ``ours``' sweep: every cell
   reference whose options set ``o`` moves to the cell with the same options but ``o = v``
   (frontier references and numbers stay); a value at which ``ours``, ``than`` or the premise has
   no such cell is skipped, a data-free reference without one counts as not run.
3. *Values.* A cell metric is its per-seed values (:class:`~tasks.report.verdicts.Estimate`); where the
   split-to-split spread of that (sweep, cell, metric) was measured (``split_spread.json``), the
   estimate carries its between-split standard deviation, which widens the difference's bounds.
   A frontier reference is its log-log slope or its y at the frontier's mark, fitted per seed.
4. *Premise.* The automatic premise of a claim comparing two ``*_advantage`` metrics is the side
   the claim says leaks more (``than`` for ``<``, ``<=``, ``~``; ``ours`` for ``>``, ``>=``); a
   configured ``premise`` replaces it. It must beat 0 (its data-free control) or the setting is
   *vacuous*.
5. *Multiplicity.* Per family, the p-values of every setting of every ``measured`` claim that is
   judged (not vacuous, not an accounting identity or theorem check) are Holm-adjusted together;
   a setting is *held* only when its adjusted p-value is ≤ α.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tasks.report.frontier import curves, frontier_points, loglog_slope, y_at
from tasks.report.rows import Row
from tasks.report.split import split_spreads
from tasks.report.verdicts import ClaimVerdict, Estimate, holm, judge_claim
from veilbench.config import ClaimConfig, Config, FrontierConfig, FrontierRef, MetricRef

Ref = float | MetricRef | FrontierRef


class ClaimNotEvaluated(UserWarning):
    """A claim names a sweep or cell that this params file does not hold."""


def _seed_points(rows: list[dict[str, Any]], fr: FrontierConfig, curve: list[dict[str, Any]]) -> dict[str, list[dict[str, float]]]:
    """Seed → that seed's (x, y) points of a curve, x-sorted; only seeds present in every point."""
    by_cell = {(r["sweep"], r["cell"]): r for r in rows}
    per: dict[str, list[dict[str, float]]] = {}
    seeds: set[str] | None = None
    for p in curve:
        r = by_cell[(p["sweep"], p["cell"])]
        ps = r.get("per_seed") or {}
        ok = {s for s, m in ps.items() if fr.y in m and (fr.x.startswith("param:") or fr.x in m)}
        seeds = ok if seeds is None else seeds & ok
        for s in ok:
            x = p["x"] if fr.x.startswith("param:") else ps[s][fr.x]
            per.setdefault(s, []).append({"x": float(x), "y": float(ps[s][fr.y])})
    return {s: sorted(per[s], key=lambda q: q["x"]) for s in sorted(seeds or ())}


def _slope(rows: list[Row], fr: FrontierConfig, curve: list[dict[str, Any]]) -> Estimate | None:
    """A curve's log-log slope: fitted on the cell means, per seed on each seed's points; without
    per-seed values with the fit's standard error (``points − 2`` degrees of freedom)."""
    fit = loglog_slope([p["x"] for p in curve], [p["y"] for p in curve])
    if fit is None:
        return None
    seed_fits = {s: f[0] for s, pts in _seed_points(rows, fr, curve).items()
                 if len(pts) == len(curve) and (f := loglog_slope([q["x"] for q in pts], [q["y"] for q in pts]))}
    if seed_fits:
        return Estimate.of_seeds(seed_fits, mean=fit[0])
    return Estimate(fit[0], se=fit[1], df=len(curve) - 2) if len(curve) > 2 else Estimate(fit[0])


def _at_mark(rows: list[Row], fr: FrontierConfig, curve: list[dict[str, Any]]) -> Estimate | None:
    """A curve's y at the frontier's mark, interpolated on the means and per seed."""
    y0 = y_at(curve, float(fr.mark_x))
    if y0 is None:
        return None
    seed_y = {s: v for s, pts in _seed_points(rows, fr, curve).items() if (v := y_at(pts, float(fr.mark_x))) is not None}
    return Estimate.of_seeds(seed_y, mean=y0) if seed_y else Estimate(y0)


def _frontier_value(rows: list[Row], cfg: Config, ref: FrontierRef) -> Estimate | None:
    fr = next(f for f in cfg.report.frontiers if f.name == ref.frontier)
    curve = curves(frontier_points(rows, fr)).get(ref.curve)
    if not curve:
        return None
    return _slope(rows, fr, curve) if ref.stat == "slope" else _at_mark(rows, fr, curve)


def _cell_value(rows: list[Row], ref: MetricRef,
                spreads: Mapping[tuple[str, str, str], tuple[float, float]] | None) -> Estimate | None:
    """A cell metric: its per-seed values (else its summary), with its measured split spread."""
    row = next((r for r in rows if r["sweep"] == ref.sweep and r["cell"] == ref.cell), None)
    s = None if row is None else row["summary"].get(ref.metric)
    if not s or not math.isfinite(s["mean"]):
        return None
    per = {k: m[ref.metric] for k, m in (row.get("per_seed") or {}).items() if ref.metric in m}
    try:
        est = Estimate.of_seeds(per, mean=s["mean"]) if per else Estimate.of_summary(s)
    except ValueError:
        return None
    split = (spreads or {}).get((ref.sweep, ref.cell, ref.metric))
    return est.with_split(*split) if split else est


def claim_value(rows: list[Row], cfg: Config, ref: Ref | None,
                spreads: Mapping[tuple[str, str, str], tuple[float, float]] | None = None) -> Estimate | None:
    """A claim's reference as an :class:`~tasks.report.verdicts.Estimate`: a number (a constant); a
    cell metric (its per-seed values, with the measured split spread of ``spreads`` when there is
    one); a frontier curve's log-log slope (point estimate fitted on the cell means, per-seed slopes
    fitted on each seed's points) or its y at the frontier's mark (linear interpolation, on the
    means and per seed). None when not available. Without per-seed values a slope carries the
    fit's standard error (``points − 2`` degrees of freedom)."""
    if ref is None:
        return None
    if isinstance(ref, float | int):
        return Estimate.of_constant(float(ref))
    if isinstance(ref, FrontierRef):
        return _frontier_value(rows, cfg, ref)
    return _cell_value(rows, ref, spreads)


def premise_of(claim: ClaimConfig) -> MetricRef | None:
    """The claim's premise: the configured one, else, when ``ours`` and ``than`` are both attacker
    advantages, the side the claim says leaks more (module docstring); None otherwise."""
    if claim.premise is not None:
        return claim.premise
    sides = (claim.ours, claim.than)
    if all(isinstance(r, MetricRef) and r.metric.endswith("_advantage") for r in sides):
        return claim.than if claim.op in ("<", "<=", "~") else claim.ours
    return None


@dataclass(frozen=True)
class Setting:
    """One setting of a claim: its label (``""`` for a claim without ``over``, else ``option=value``)
    and the references judged there."""

    label: str
    ours: Ref
    than: Ref
    data_free: list[Ref | None] = field(default_factory=list)
    premise: MetricRef | None = None


def _moved(cfg: Config, ref: Ref | None, option: str, value: Any) -> Ref | None:
    """``ref`` at ``option = value``: a cell reference whose options set ``option`` moves to the cell
    of the same sweep with the same options but that value (None when the sweep has none); any
    other reference stays."""
    if not isinstance(ref, MetricRef):
        return ref
    cells = cfg.sweeps[ref.sweep].expand()
    options = cells[ref.cell]
    if option not in options:
        return ref
    want = {**options, option: value}
    name = next((c for c, o in cells.items() if o == want), None)
    return None if name is None else ref.model_copy(update={"cell": name})


def claim_settings(cfg: Config, claim: ClaimConfig) -> list[Setting]:
    """The settings at which a claim (whose cells all exist) is judged (module docstring, step 2)."""
    premise = premise_of(claim)
    if claim.over is None:
        return [Setting("", claim.ours, claim.than, list(claim.data_free), premise)]
    assert isinstance(claim.ours, MetricRef)  # the schema requires it with over
    values: list[Any] = []
    for options in cfg.sweeps[claim.ours.sweep].expand().values():
        if claim.over in options and options[claim.over] not in values:
            values.append(options[claim.over])
    values.sort(key=lambda v: (not isinstance(v, int | float), v if isinstance(v, int | float) else str(v)))
    out = []
    for v in values:
        moved = [_moved(cfg, r, claim.over, v) for r in (claim.ours, claim.than, premise)]
        if any(m is None and r is not None for m, r in zip(moved, (claim.ours, claim.than, premise), strict=True)):
            continue
        out.append(Setting(f"{claim.over}={v}", moved[0], moved[1], [_moved(cfg, d, claim.over, v) for d in claim.data_free],
                           moved[2]))
    return out


def ref_name(ref: Ref | None) -> str:
    """A reference as the table names it: a number, ``[frontier: curve, stat]`` or ``[sweep/cell: metric]``."""
    if ref is None:
        return ""
    if isinstance(ref, float | int):
        return f"{ref:g}"
    if isinstance(ref, FrontierRef):
        return f"[{ref.frontier}: {ref.curve}, {ref.stat.replace('_', ' ')}]"
    return f"[{ref.sweep}/{ref.cell}: {ref.metric}]"


@dataclass
class Judged:
    """One (claim, setting) with its values and its verdict (unadjusted until Holm's pass)."""

    index: int
    claim: ClaimConfig
    setting: Setting
    values: dict[str, Any]
    verdict: ClaimVerdict | None = None

    def judge(self, p_adjusted: float | None = None) -> ClaimVerdict:
        c, s, v = self.claim, self.setting, self.values
        premise = None if s.premise is None else (ref_name(s.premise), v["premise"])
        self.verdict = judge_claim(v["ours"], v["than"], c.op, factor=c.factor, tolerance=c.tolerance, kind=c.kind,
                                   data_free=v["data_free"], premise=premise, p_adjusted=p_adjusted)
        return self.verdict


def judge_claims(cfg: Config, rows: list[dict[str, Any]], split_spread: Mapping[str, Any] | None = None
                 ) -> tuple[list[Judged], dict[int, list[str]]]:
    """Every (claim, setting) judged with Holm's adjustment per family, and the claims that are not
    evaluated (claim index → why), each also raised as a :class:`ClaimNotEvaluated` warning."""
    spreads = split_spreads(split_spread)
    missing = cfg.missing_claim_cells()
    for problems in missing.values():
        for p in problems:
            warnings.warn(f"{p}: the claim is reported as not evaluated", ClaimNotEvaluated, stacklevel=2)
    judged: list[Judged] = []
    for i, c in enumerate(cfg.report.claims):
        if i in missing:
            continue
        for s in claim_settings(cfg, c):
            values = {"ours": claim_value(rows, cfg, s.ours, spreads), "than": claim_value(rows, cfg, s.than, spreads),
                      "data_free": [claim_value(rows, cfg, d, spreads) for d in s.data_free],
                      "premise": claim_value(rows, cfg, s.premise, spreads)}
            judged.append(Judged(i, c, s, values))
            judged[-1].judge()
    for family in dict.fromkeys(c.family for c in cfg.report.claims):
        members = [j for j in judged if j.claim.family == family and j.claim.kind == "measured" and j.verdict.is_finding]
        for j, p in zip(members, holm([j.verdict.p_value for j in members]), strict=True):
            j.judge(p)
    return judged, missing


