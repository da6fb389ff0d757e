"""Does a release beat publishing nothing? Each cell against the best data-free reference of its sweep.

For a utility metric with sign ``s`` (+1 when higher is better), a cell is compared with the best
of its sweep's data-free references (the reference cells ``report.data_free`` selects, and the
companions computed beside each cell: a metric of the same cell, or a constant) through the
signed difference ``s·(cell − reference)`` and its one-sided bounds
(:func:`tasks.report.verdicts.difference`): it *beats* the reference when ``L > 0``, *loses* to
it when ``U < 0``, and is *indistinguishable* otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from tasks.report.tables import pipe_table
from tasks.report.verdicts import ALPHA, Estimate, difference, fmt_bound

def matches(cell: str, params: Mapping[str, Any], selectors: Iterable[str | Mapping[str, Any]]) -> bool:
    """Whether a cell is selected: by its name, or by an option filter whose every key matches."""
    for sel in selectors:
        if isinstance(sel, str):
            if sel == cell:
                return True
        elif all(k in params and params[k] == v for k, v in sel.items()):
            return True
    return False


def cell_estimate(row: Mapping[str, Any], metric: str) -> Estimate | None:
    """A cell row's metric as an estimate: its per-seed values, else its stored summary; None when missing."""
    per_seed = {s: m[metric] for s, m in (row.get("per_seed") or {}).items() if metric in m}
    if per_seed:
        try:
            return Estimate.of_seeds(per_seed)
        except ValueError:
            return None
    s = row["summary"].get(metric)
    return Estimate.of_summary(s) if s and math.isfinite(s["mean"]) else None


def _companion(row: Mapping[str, Any], companion: str | float) -> Estimate | None:
    """A data-free companion's estimate for ``row``: a metric of the same cell, or a constant."""
    return cell_estimate(row, companion) if isinstance(companion, str) else Estimate.of_constant(companion)


def _companion_name(companion: str | float) -> str:
    return f"{companion} (same cell)" if isinstance(companion, str) else f"constant {companion:g} (data-free by definition)"


def beats_data_free(rows: list[dict[str, Any]], sweep: str, references: list[str | Mapping[str, Any]],
                    metrics: Mapping[str, str], exclude: list[str | Mapping[str, Any]] = (),
                    companions: Mapping[str, str | float] | None = None, match: Iterable[str] = (),
                    alpha: float = ALPHA) -> list[dict[str, Any]]:
    """Each (cell, metric) of ``sweep`` judged against the best data-free reference on that metric.

    ``references`` select the sweep's data-free cells (names or option filters); ``companions``
    maps a metric to a metric of the same cell that holds a data-free release's value (e.g. the
    identity Gram's error computed beside each release) or to a constant (a data-free release's
    value by definition, e.g. ROC AUC 0.5 for the detector that flags everything); ``metrics`` maps each utility metric to
    ``"higher"`` or ``"lower"`` (which is better); ``exclude`` drops cells that are not releases
    (e.g. the clean, non-private reference); ``match`` names options a reference must share with
    the cell (e.g. ``n_records``: a release of 400 records is compared with the data-free release
    of 400 records). The best reference has the best mean; the signed
    difference ``s·(cell − reference)`` (``s = +1`` when higher is better) gives ``outcome`` =
    ``beats`` (``L > 0``), ``loses`` (``U < 0``) or ``indistinguishable``."""
    companions = companions or {}
    mine = [r for r in rows if r["sweep"] == sweep]
    refs = [r for r in mine if matches(r["cell"], r["params"], references)]
    cells = [r for r in mine if r not in refs and not matches(r["cell"], r["params"], exclude)]
    out = []
    for metric, better in metrics.items():
        if better not in ("higher", "lower"):
            raise ValueError(f"metrics.{metric}: must be 'higher' or 'lower', got {better!r}")
        cand_refs = [(r, e) for r in refs if (e := cell_estimate(r, metric)) is not None]
        for r in cells:
            a = cell_estimate(r, metric)
            options = [] if a is None else _reference_options(r, metric, cand_refs, companions, match)
            if options:
                out.append(_against_best(sweep, r["cell"], metric, better, a, options, alpha))
    return out


def _reference_options(row: Mapping[str, Any], metric: str, cand_refs: list[tuple[Mapping[str, Any], Estimate]],
                       companions: Mapping[str, str | float], match: Iterable[str]) -> list[tuple[str, Estimate]]:
    """``(name, estimate)`` of the data-free references a cell may be compared with on ``metric``:
    the reference cells sharing its ``match`` options, and its companion."""
    options = [(ref["cell"], e) for ref, e in cand_refs if all(ref["params"].get(k) == row["params"].get(k) for k in match)]
    if metric in companions and (e := _companion(row, companions[metric])) is not None:
        options.append((_companion_name(companions[metric]), e))
    return options


def _against_best(sweep: str, cell: str, metric: str, better: str, a: Estimate, options: list[tuple[str, Estimate]],
                  alpha: float) -> dict[str, Any]:
    """One cell's ``metric`` against the best of ``options`` (module docstring)."""
    sign = 1.0 if better == "higher" else -1.0
    ref_name, ref = max(options, key=lambda o: sign * o[1].mean)
    d = difference(a, ref, 1.0, alpha) if sign > 0 else difference(ref, a, 1.0, alpha)
    outcome = "beats" if d.lower > 0 else "loses" if d.upper < 0 else "indistinguishable"
    return {"sweep": sweep, "cell": cell, "metric": metric, "better": better, "value": a.mean,
            "reference": ref_name, "reference_value": ref.mean, "advantage": d.mean,
            "lower": d.lower, "upper": d.upper, "test": d.test, "outcome": outcome}


def _judged(rows: list[dict[str, Any]], entries: list[Any], alpha: float) -> list[dict[str, Any]]:
    judged: list[dict[str, Any]] = []
    for e in entries:
        judged += beats_data_free(rows, e.sweep, list(e.references), dict(e.metrics), list(e.exclude),
                                  dict(e.companions), list(e.match), alpha)
    return judged


def data_free_digest(family: str, rows: list[dict[str, Any]], entries: Iterable[Any], sweep_family: Mapping[str, str],
                     alpha: float = ALPHA) -> list[str]:
    """Markdown, one line per sweep: the cells of ``family`` that do not beat the best data-free
    reference on some utility metric (the short form of :func:`data_free_section`, for the index)."""
    mine = [e for e in entries if sweep_family.get(e.sweep) == family]
    if not mine:
        return [f"- **{family}**: no data-free reference declared (`report.data_free`)."]
    judged = _judged(rows, mine, alpha)
    if not judged:
        return [f"- **{family}**: the declared data-free references have not run yet."]
    losing: dict[str, dict[str, list[str]]] = {}
    for j in judged:
        if j["outcome"] != "beats":
            losing.setdefault(j["sweep"], {}).setdefault(j["cell"], []).append(f"{j['metric']}: {j['outcome']}")
    n_cells = len({(j["sweep"], j["cell"]) for j in judged})
    n_losing = sum(len(c) for c in losing.values())
    out = [f"- **{family}**: {n_losing} of {n_cells} checked cells do not beat a data-free reference on at least one "
           f"utility metric ([details]({family}.md#cells-that-do-not-beat-the-data-free-references))"
           + (":" if losing else ".")]
    for sweep, cells in losing.items():
        out.append(f"  - {sweep}: " + "; ".join(f"{c} ({', '.join(m)})" for c, m in cells.items()))
    return out


def _declared(entry: Any) -> str:
    """The data-free references one ``report.data_free`` entry declares, in words."""
    cells = [s if isinstance(s, str) else ", ".join(f"{k}={v}" for k, v in s.items()) for s in entry.references]
    companions = [f"{c} beside each cell" if isinstance(c, str) else f"the constant {c:g}"
                  for c in entry.companions.values()]
    return f"{entry.sweep}: " + ", ".join([*cells, *companions])


def data_free_section(family: str, rows: list[dict[str, Any]], entries: Iterable[Any], sweep_family: Mapping[str, str],
                      alpha: float = ALPHA) -> list[str]:
    """Markdown: the cells of ``family`` that do not beat the best data-free reference of their sweep
    on a utility metric (``entries``: the ``report.data_free`` config; ``sweep_family``: sweep →
    family)."""
    mine = [e for e in entries if sweep_family.get(e.sweep) == family]
    lines = ["### Cells that do not beat the data-free references", ""]
    if not mine:
        return lines + [f"No data-free reference is declared for {family} (`report.data_free`): its cells are not "
                        "checked against a release that never reads the data.", ""]
    judged = _judged(rows, mine, alpha)
    if not judged:
        return lines + [f"The data-free references declared for {family} (`report.data_free`) have no evaluated "
                        "cells (or no cell to compare) yet.", ""]
    losing = [j for j in judged if j["outcome"] != "beats"]
    refs = "; ".join(_declared(e) for e in mine)
    lines += [f"Each release is compared, per utility metric, with the best data-free reference of its sweep ({refs}) "
              f"by the paired per-seed difference (one-sided {1 - alpha:.0%} t bounds; `tasks/report/verdicts.py`). "
              f"{len(judged) - len(losing)} of {len(judged)} (cell, metric) pairs beat it; the others are listed: "
              "*advantage* = how much better the cell is than the reference (cell − reference when higher is better, "
              "reference − cell when lower is better); *loses* = worse than publishing the data-free release, "
              "*indistinguishable* = the bounds straddle 0.", ""]
    if not losing:
        return lines + ["Every checked cell beats its data-free reference.", ""]
    header = ["sweep", "cell", "metric", "cell value", "best data-free", "advantage (bounds)", "outcome"]
    md = [[j["sweep"], j["cell"], f"{j['metric']} ({j['better']} is better)", f"{j['value']:.4g}",
           f"{j['reference_value']:.4g} ({j['reference']})",
           f"{j['advantage']:+.3g} [{fmt_bound(j['lower'])}, {fmt_bound(j['upper'])}]", j["outcome"]]
          for j in losing]
    return [*lines, *pipe_table(header, md), ""]


