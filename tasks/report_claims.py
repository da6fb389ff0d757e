"""The "paper vs ours" table: each configured claim (``report.claims``) read off this run's cells
and judged by :mod:`tasks.verdicts`.

For claim ``c`` with references ``ours``, ``than``, ``data_free`` and ``premise``:

1. *Evaluable?* A reference to a sweep or cell that the params file does not hold
   (:meth:`veilbench.config.Config.missing_claim_cells`) makes the claim *not evaluated (cell not
   in this grid)*, with a warning; the rest of the report is built as usual.
2. *Settings.* Without ``over`` the claim has one setting, the cells it names. With ``over = o``
   it has one per value ``v`` of option ``o`` among the cells of ``ours``' sweep: every cell
   reference whose options set ``o`` moves to the cell with the same options but ``o = v``
   (frontier references and numbers stay); a value at which ``ours``, ``than`` or the premise has
   no such cell is skipped, a data-free reference without one counts as not run.
3. *Values.* A cell metric is its per-seed values (:class:`~tasks.verdicts.Estimate`); where the
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

``claims.csv`` has one row per (claim, setting): the setting's own verdict, test, unadjusted and
Holm-adjusted p-values, and the claim's verdict over all its settings with where it holds.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tasks.report import _curves, frontier_points, loglog_slope, y_at
from tasks.report_tables import markdown_table as _markdown
from tasks.verdicts import ALPHA, ClaimVerdict, Estimate, combine_settings, holm, judge_claim, split_spread_lines
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


def split_spreads(spread: Mapping[str, Any] | None) -> dict[tuple[str, str, str], tuple[float, float]]:
    """(sweep, cell, metric) → (between-split SD of the cell mean, its degrees of freedom = splits − 1)
    from ``benchmarks/bench_split_spread.py``'s JSON."""
    out = {}
    for c in (spread or {}).get("cells", []):
        if "split_component_sd" in c and len(c.get("per_split", {})) >= 2:
            out[(c["sweep"], c["cell"], c["metric"])] = (float(c["split_component_sd"]), len(c["per_split"]) - 1.0)
    return out


def claim_value(rows: list[dict[str, Any]], cfg: Config, ref: Ref | None,
                spreads: Mapping[tuple[str, str, str], tuple[float, float]] | None = None) -> Estimate | None:
    """A claim's reference as an :class:`~tasks.verdicts.Estimate`: a number (a constant); a cell
    metric (its per-seed values, with the measured split spread of ``spreads`` when there is one);
    a frontier curve's log-log slope (point estimate fitted on the cell means, per-seed slopes
    fitted on each seed's points) or its y at the frontier's mark (linear interpolation, on the
    means and per seed). None when not available. Without per-seed values a slope carries the
    fit's standard error (``points − 2`` degrees of freedom)."""
    if ref is None:
        return None
    if isinstance(ref, float | int):
        return Estimate.of_constant(float(ref))
    if isinstance(ref, FrontierRef):
        fr = next(f for f in cfg.report.frontiers if f.name == ref.frontier)
        curve = _curves(frontier_points(rows, fr)).get(ref.curve)
        if not curve:
            return None
        per_seed = _seed_points(rows, fr, curve)
        if ref.stat == "slope":
            fit = loglog_slope([p["x"] for p in curve], [p["y"] for p in curve])
            if fit is None:
                return None
            seed_fits = {s: f[0] for s, pts in per_seed.items()
                         if len(pts) == len(curve) and (f := loglog_slope([q["x"] for q in pts], [q["y"] for q in pts]))}
            if seed_fits:
                return Estimate.of_seeds(seed_fits, mean=fit[0])
            return Estimate(fit[0], se=fit[1], df=len(curve) - 2) if len(curve) > 2 else Estimate(fit[0])
        y0 = y_at(curve, float(fr.mark_x))
        if y0 is None:
            return None
        seed_y = {s: v for s, pts in per_seed.items() if (v := y_at(pts, float(fr.mark_x))) is not None}
        return Estimate.of_seeds(seed_y, mean=y0) if seed_y else Estimate(y0)
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
    if ref is None:
        return ""
    if isinstance(ref, float | int):
        return f"{ref:g}"
    if isinstance(ref, FrontierRef):
        return f"[{ref.frontier}: {ref.curve}, {ref.stat.replace('_', ' ')}]"
    return f"[{ref.sweep}/{ref.cell}: {ref.metric}]"


def _est_txt(e: Estimate | None) -> str:
    """``mean ± 95% t half-width`` of an estimate (over its seeds, or from its standard error)."""
    from scipy import stats

    if e is None:
        return "?"
    if e.constant:
        return f"{e.mean:.4g}"
    n = len(e.per_seed)
    if n > 1:
        half = float(stats.t.ppf(0.975, n - 1)) * float(stats.sem(list(e.per_seed.values())))
        return f"{e.mean:.4g} ± {half:.2g}"
    if e.se is not None and math.isfinite(e.df):
        return f"{e.mean:.4g} ± {float(stats.t.ppf(0.975, e.df)) * e.se:.2g}"
    return f"{e.mean:.4g}"


@dataclass
class _Judged:
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
                 ) -> tuple[list[_Judged], dict[int, list[str]]]:
    """Every (claim, setting) judged with Holm's adjustment per family, and the claims that are not
    evaluated (claim index → why), each also raised as a :class:`ClaimNotEvaluated` warning."""
    spreads = split_spreads(split_spread)
    missing = cfg.missing_claim_cells()
    for problems in missing.values():
        for p in problems:
            warnings.warn(f"{p}: the claim is reported as not evaluated", ClaimNotEvaluated, stacklevel=2)
    judged: list[_Judged] = []
    for i, c in enumerate(cfg.report.claims):
        if i in missing:
            continue
        for s in claim_settings(cfg, c):
            values = {"ours": claim_value(rows, cfg, s.ours, spreads), "than": claim_value(rows, cfg, s.than, spreads),
                      "data_free": [claim_value(rows, cfg, d, spreads) for d in s.data_free],
                      "premise": claim_value(rows, cfg, s.premise, spreads)}
            judged.append(_Judged(i, c, s, values))
            judged[-1].judge()
    for family in dict.fromkeys(c.family for c in cfg.report.claims):
        members = [j for j in judged if j.claim.family == family and j.claim.kind == "measured" and j.verdict.is_finding]
        for j, p in zip(members, holm([j.verdict.p_value for j in members]), strict=True):
            j.judge(p)
    return judged, missing


def _test_txt(v: ClaimVerdict) -> str:
    d = v.diff
    if d is None:
        return "—"
    p = "" if not math.isfinite(v.p_value) or d.se == 0 else f", p = {v.p_value:.2g}"
    if p and math.isfinite(v.p_adjusted):
        p += f", p_Holm = {v.p_adjusted:.2g}"
    return f"{d.test}: d̄ = {d.mean:.3g}, [{d.lower:.3g}, {d.upper:.3g}]{p}"


def _verdict_txt(c: ClaimConfig, verdict: str) -> str:
    if c.kind == "accounting_identity" and verdict == "trivial":
        return "trivial (accounting identity)"
    return f"{verdict} (theorem check)" if c.kind == "theorem_check" else verdict


def _why(c: ClaimConfig, j: _Judged) -> str:
    v = j.verdict
    if v.verdict == "held":
        return ""
    df_ref = None if v.data_free_index is None else j.setting.data_free[v.data_free_index]
    reason = f"{v.reason}: {ref_name(df_ref)}" if df_ref is not None else v.reason
    return "; ".join(x for x in (reason, c.why_not if v.verdict not in ("trivial", "vacuous") else "") if x)


def _record(j: _Judged, claim_verdict: str, where: str, n_tests: int) -> dict[str, Any]:
    c, s, v, values = j.claim, j.setting, j.verdict, j.values
    d, k = v.diff, v.data_free_index
    df_est = None if k is None else values["data_free"][k]
    pd = v.premise_diff
    return {
        "claim_id": j.index, "family": c.family, "claim": c.claim, "kind": c.kind.replace("_", " "), "source": c.source,
        "paper": c.paper, "setting": s.label, "ours_ref": ref_name(s.ours),
        "ours": None if values["ours"] is None else values["ours"].mean, "op": c.op, "factor": c.factor,
        "tolerance": c.tolerance, "than_ref": ref_name(s.than),
        "than": None if values["than"] is None else values["than"].mean,
        "data_free_ref": ref_name(None if k is None else s.data_free[k]),
        "data_free_value": None if df_est is None else df_est.mean, "data_free_verdict": v.data_free_verdict,
        "premise_ref": ref_name(s.premise), "premise_value": None if pd is None else pd.mean,
        "premise_lower": None if pd is None else pd.lower,
        "test": None if d is None else d.test, "n_seeds": None if d is None else d.n,
        "diff_mean": None if d is None else d.mean, "diff_lower": None if d is None else d.lower,
        "diff_upper": None if d is None else d.upper, "t_statistic": None if d is None else d.statistic,
        "p_value": None if not math.isfinite(v.p_value) else v.p_value,
        "p_holm": None if not math.isfinite(v.p_adjusted) else v.p_adjusted,
        "holm_tests": n_tests if math.isfinite(v.p_adjusted) else None, "alpha": ALPHA,
        "verdict": v.verdict, "claim_verdict": claim_verdict, "where": where, "why_not": _why(c, j)}


def _not_evaluated_record(i: int, c: ClaimConfig, problems: list[str]) -> dict[str, Any]:
    return {"claim_id": i, "family": c.family, "claim": c.claim, "kind": c.kind.replace("_", " "), "source": c.source,
            "paper": c.paper, "setting": "", "ours_ref": ref_name(c.ours), "op": c.op, "than_ref": ref_name(c.than),
            "alpha": ALPHA, "verdict": "not evaluated", "claim_verdict": "not evaluated", "where": "",
            "why_not": "not evaluated (cell not in this grid): " + "; ".join(problems)}


INTRO = (
    "Headline claims of the papers (`../shared/specs/`) that the configured data can test. The *paper* column "
    "is the paper's own statement or number; *ours* is measured by the named cell of this run (mean ± 95% CI "
    "over seeds). Each claim is judged on the difference d = ours − factor·than, paired over the seeds the "
    "cells share (scipy's paired t-test; Welch's unpaired t where no seeds are shared), with one-sided "
    f"{1 - ALPHA:.0%} bounds [L, U] (α = {ALPHA:g}): *held* when the bounds lie on the claim's side "
    "(for ~: inside ± the tolerance) and the claim's p-value, Holm-adjusted over the family's findings "
    "(p_Holm), is ≤ α; *not held* when the bounds exclude the claim's boundary on the wrong side; "
    "*inconclusive* otherwise. Where the split-to-split spread of a cell was measured (below), it widens the "
    "bounds. An exact sign-flip permutation test cannot reach α = 0.05 with 3 seeds (its smallest "
    "p-value is 1/8), hence the t bounds. *data-free* is what a release or attacker that never reads the "
    "data puts in ours' place (← marks the one that decided): when one satisfies the claim too, the claim "
    "is *trivial*, and while one's own test is inconclusive or it has not run, the claim is inconclusive. A "
    "claim comparing attacker advantages (0 = no better than the data-free control) is judged only when the "
    "attack the claim says leaks more beats its control (its *premise*); otherwise it is *vacuous*: the attack "
    "learns nothing on this data. A claim over a sweep option is judged at every value of it (*partly held*: "
    "held at some, listed under the table). An accounting identity is true by construction of a formula and "
    "a theorem check is passed by every release, data-free ones included: both are labelled so and are not "
    "findings. A claim whose cell is not in this grid is *not evaluated*. The rule: `tasks/verdicts.py`.")


def claims_section(cfg: Config, rows: list[dict[str, Any]], split_spread: dict[str, Any] | None = None
                   ) -> tuple[list[str], list[dict[str, Any]]]:
    """The "paper vs ours" section and the ``claims.csv`` records (module docstring): one table row
    per claim (its verdict over all settings, the named setting's values and test), a table of the
    per-setting verdicts of the claims judged at several settings, and the note that the CIs are
    conditional on one train/test split with the measured split spread (``split_spread``)."""
    if not cfg.report.claims:
        return [], []
    judged, missing = judge_claims(cfg, rows, split_spread)
    n_tests = {f: sum(1 for j in judged if j.claim.family == f and math.isfinite(j.verdict.p_adjusted))
               for f in {c.family for c in cfg.report.claims}}
    md, per_setting, records = [], [], []
    for i, c in enumerate(cfg.report.claims):
        if i in missing:
            rec = _not_evaluated_record(i, c, missing[i])
            records.append(rec)
            md.append([c.family, c.claim, c.paper, "—", f"{c.op} {ref_name(c.than)}", "", "not evaluated", rec["why_not"]])
            continue
        mine = [j for j in judged if j.index == i]
        if not mine:
            why = f"not evaluated: no value of {c.over!r} at which every referenced cell exists"
            records.append({**_not_evaluated_record(i, c, []), "why_not": why})
            md.append([c.family, c.claim, c.paper, "—", f"{c.op} {ref_name(c.than)}", "", "not evaluated", why])
            continue
        verdict, where = combine_settings([(j.setting.label, j.verdict.verdict) for j in mine])
        records += [_record(j, verdict, where, n_tests[c.family]) for j in mine]
        named = next((j for j in mine if j.setting.ours == c.ours), mine[0])
        v, values = named.verdict, named.values
        scale = "" if c.factor == 1.0 else f"{c.factor:g} × "
        cmp = f"{c.op} {scale}{_est_txt(values['than'])}" + (f" (± {c.tolerance:g})" if c.op == "~" else "")
        if not isinstance(named.setting.than, float | int):
            cmp += f" {ref_name(named.setting.than)}"
        ours_txt = "—" if values["ours"] is None else f"{_est_txt(values['ours'])} {ref_name(named.setting.ours)}"
        df_txt = "; ".join(f"{_est_txt(e) if e else 'not run'} {ref_name(d)}" + (" ←" if k == v.data_free_index else "")
                           for k, (d, e) in enumerate(zip(named.setting.data_free, values["data_free"], strict=True)))
        if named.setting.premise is not None:
            pv = values["premise"]
            df_txt += ("; " if df_txt else "") + f"premise: {_est_txt(pv) if pv else 'not run'} " \
                                                 f"{ref_name(named.setting.premise)} > 0"
        why = _why(c, named)
        if len(mine) > 1:
            sep = " " if where.startswith("at every") else ": "
            shown = f"{_verdict_txt(c, verdict)}{sep}{where} (test at {named.setting.label}: {_test_txt(v)})"
            why = why or ("" if verdict in ("held", "trivial", "vacuous") else c.why_not)
            per_setting += [[c.claim, j.setting.label, _est_txt(j.values["ours"]), _est_txt(j.values["than"]),
                             _test_txt(j.verdict), _verdict_txt(c, j.verdict.verdict)] for j in mine]
        else:
            shown = f"{_verdict_txt(c, verdict)} ({_test_txt(v)})"
        md.append([c.family, c.claim, c.paper, ours_txt, cmp, df_txt, shown, why])  # source: claims.csv
    lines = ["## Paper vs ours", "", INTRO, "",
             _markdown(["family", "claim", "paper (the paper's number)", "ours", "claim: ours", "data-free",
                        "verdict (test: d = ours − factor·than)", "why not"], md)]
    if per_setting:
        lines += ["Claims judged at every value of a sweep option: the verdict at each setting.", "",
                  _markdown(["claim", "setting", "ours", "than", "test", "verdict"], per_setting)]
    return [*lines, "Machine-readable: `tables/claims.csv` (one row per claim and setting).", "",
            *split_spread_lines(split_spread, cfg.seed)], records
