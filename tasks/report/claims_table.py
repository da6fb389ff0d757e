"""The "paper vs ours" section of ``reports/index.md`` and the records of ``tables/claims.csv``:
each configured claim judged at its settings (:mod:`tasks.report.claims`).

The section has one row per claim: the paper's number, ours (mean ± 95% CI over seeds of the
named setting), the comparison, the data-free references and the premise, the verdict over all
settings with the test of the named setting, and why a claim is not held. Claims judged at
several settings also get one row per setting. ``claims.csv`` has one row per (claim, setting):
the setting's own verdict, test, unadjusted and Holm-adjusted p-values, and the claim's verdict
over all its settings with where it holds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tasks.report.claims import Judged, judge_claims, ref_name
from tasks.report.rows import Row
from tasks.report.split import split_spread_lines
from tasks.report.tables import markdown_table
from tasks.report.verdicts import ALPHA, ClaimVerdict, Estimate, combine_settings
from veilbench.config import ClaimConfig, Config


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


def _why(c: ClaimConfig, j: Judged) -> str:
    v = j.verdict
    if v.verdict == "held":
        return ""
    df_ref = None if v.data_free_index is None else j.setting.data_free[v.data_free_index]
    reason = f"{v.reason}: {ref_name(df_ref)}" if df_ref is not None else v.reason
    return "; ".join(x for x in (reason, c.why_not if v.verdict not in ("trivial", "vacuous") else "") if x)


def _record(j: Judged, claim_verdict: str, where: str, n_tests: int) -> dict[str, Any]:
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
    "findings. A claim whose cell is not in this grid is *not evaluated*. The rule: `tasks/report/verdicts.py`.")


def _not_evaluated_row(c: ClaimConfig, why: str) -> list[str]:
    return [c.family, c.claim, c.paper, "—", f"{c.op} {ref_name(c.than)}", "", "not evaluated", why]


def _comparison_txt(c: ClaimConfig, named: Judged) -> str:
    """The claim's side of the table: ``op [factor ×] than`` with its value and reference."""
    scale = "" if c.factor == 1.0 else f"{c.factor:g} × "
    cmp = f"{c.op} {scale}{_est_txt(named.values['than'])}" + (f" (± {c.tolerance:g})" if c.op == "~" else "")
    if not isinstance(named.setting.than, float | int):
        cmp += f" {ref_name(named.setting.than)}"
    return cmp


def _data_free_txt(named: Judged) -> str:
    """The data-free references' values (← the one that decided) and the premise."""
    s, values = named.setting, named.values
    txt = "; ".join(f"{_est_txt(e) if e else 'not run'} {ref_name(d)}" + (" ←" if k == named.verdict.data_free_index else "")
                    for k, (d, e) in enumerate(zip(s.data_free, values["data_free"], strict=True)))
    if s.premise is not None:
        pv = values["premise"]
        txt += ("; " if txt else "") + f"premise: {_est_txt(pv) if pv else 'not run'} {ref_name(s.premise)} > 0"
    return txt


def _judged_row(c: ClaimConfig, mine: list[Judged], verdict: str, where: str) -> tuple[list[str], list[list[str]]]:
    """The table row of a judged claim (values and test of its named setting: the one at ``ours``)
    and, for a claim judged at several settings, the per-setting rows."""
    named = next((j for j in mine if j.setting.ours == c.ours), mine[0])
    v, values = named.verdict, named.values
    ours_txt = "—" if values["ours"] is None else f"{_est_txt(values['ours'])} {ref_name(named.setting.ours)}"
    why = _why(c, named)
    per_setting: list[list[str]] = []
    if len(mine) > 1:
        sep = " " if where.startswith("at every") else ": "
        shown = f"{_verdict_txt(c, verdict)}{sep}{where} (test at {named.setting.label}: {_test_txt(v)})"
        why = why or ("" if verdict in ("held", "trivial", "vacuous") else c.why_not)
        per_setting = [[c.claim, j.setting.label, _est_txt(j.values["ours"]), _est_txt(j.values["than"]),
                        _test_txt(j.verdict), _verdict_txt(c, j.verdict.verdict)] for j in mine]
    else:
        shown = f"{_verdict_txt(c, verdict)} ({_test_txt(v)})"
    return [c.family, c.claim, c.paper, ours_txt, _comparison_txt(c, named), _data_free_txt(named), shown, why], per_setting


def _claim_rows(i: int, c: ClaimConfig, judged: list[Judged], missing: Mapping[int, list[str]], n_tests: int
                ) -> tuple[list[str], list[list[str]], list[dict[str, Any]]]:
    """(table row, per-setting rows, ``claims.csv`` records) of the ``i``-th claim."""
    if i in missing:
        rec = _not_evaluated_record(i, c, missing[i])
        return _not_evaluated_row(c, rec["why_not"]), [], [rec]
    mine = [j for j in judged if j.index == i]
    if not mine:
        why = f"not evaluated: no value of {c.over!r} at which every referenced cell exists"
        return _not_evaluated_row(c, why), [], [{**_not_evaluated_record(i, c, []), "why_not": why}]
    verdict, where = combine_settings([(j.setting.label, j.verdict.verdict) for j in mine])
    row, per_setting = _judged_row(c, mine, verdict, where)
    return row, per_setting, [_record(j, verdict, where, n_tests) for j in mine]


def claims_section(cfg: Config, rows: list[Row], split_spread: dict[str, Any] | None = None
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
        row, per, recs = _claim_rows(i, c, judged, missing, n_tests[c.family])
        md.append(row)  # source: claims.csv
        per_setting += per
        records += recs
    lines = ["## Paper vs ours", "", INTRO, "",
             markdown_table(["family", "claim", "paper (the paper's number)", "ours", "claim: ours", "data-free",
                             "verdict (test: d = ours − factor·than)", "why not"], md)]
    if per_setting:
        lines += ["Claims judged at every value of a sweep option: the verdict at each setting.", "",
                  markdown_table(["claim", "setting", "ours", "than", "test", "verdict"], per_setting)]
    return [*lines, "Machine-readable: `tables/claims.csv` (one row per claim and setting).", "",
            *split_spread_lines(split_spread, cfg.seed)], records
