r"""The data-free references a report figure or table shows beside the releases.

Two kinds (:mod:`veilbench.families.base`):

* *reference cells*: cells whose options match an entry of the family's ``DATA_FREE`` (a release
  that never reads the data, run as an ordinary cell), and the frontier's ``reference_groups``;
  the frontier figure draws them dashed (:func:`tasks.report.frontier.frontier_points` flags them);
* *metric-level references*: the family's ``DATA_FREE_METRICS`` (metric → companion metric of
  the same cell, or a constant), together with the ``companions`` of ``report.data_free`` for the
  sweeps shown.

The value of a metric-level reference over cells ``C`` is the constant, or the mean over the cells
of ``C`` that report the companion of their per-cell means (each a mean over the cell's seeds):
:math:`\bar r = |C|^{-1} \sum_{c \in C} \bar r_c`. On the y axis of a frontier whose x is a cell
option (``param:<name>``) and whose companion differs between option values, it is a curve:
:math:`x \mapsto` mean of :math:`\bar r_c` over the cells with that option value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tasks.report.families import declarations as family_declarations
from tasks.report.numbers import fmt_number
from tasks.report.rows import Row, mean_of, option
from veilbench.config import Config, FrontierConfig
from veilbench.families.base import DataFreeMetric, is_data_free


def is_data_free_cell(family: str, params: Mapping[str, Any]) -> bool:
    """True when a cell's options make it one of its family's data-free reference cells."""
    return is_data_free(family_declarations(family)[0], params)


def metric_references(cfg: Config | None, family: str, sweeps: Iterable[str] = ()) -> dict[str, DataFreeMetric]:
    """Metric → its data-free reference for ``family`` (restricted to ``sweeps`` for the
    ``report.data_free`` companions; all of the family's sweeps when empty). The family's
    declaration wins over a configured companion of the same metric."""
    sweeps = set(sweeps)
    refs: dict[str, DataFreeMetric] = {}
    if cfg is not None:
        for entry in cfg.report.data_free:
            scfg = cfg.sweeps.get(entry.sweep)
            if scfg is None or scfg.family != family or (sweeps and entry.sweep not in sweeps):
                continue
            for metric, companion in entry.companions.items():
                refs.setdefault(metric, DataFreeMetric(companion, "data-free reference"))
    return {**refs, **family_declarations(family)[1]}


def reference_value(rows: Iterable[Mapping[str, Any]], ref: DataFreeMetric) -> float | None:
    """The reference's value over ``rows`` (module docstring); None when no row reports it."""
    if not isinstance(ref.value, str):
        return float(ref.value)
    vals = [v for r in rows if (v := mean_of(r, ref.value)) is not None]
    return sum(vals) / len(vals) if vals else None


def _curve_against_option(rows: list[Row], x: str, companion: str) -> tuple[list[float], list[float]] | None:
    """``(xs, ys)``: the mean companion over the cells at each value of the option ``x``; None when it
    does not vary with x (or is known at fewer than two values)."""
    by_x: dict[float, list[float]] = {}
    for r in rows:
        xv, v = option(r, x), mean_of(r, companion)
        if xv is not None and v is not None:
            by_x.setdefault(xv, []).append(v)
    ys = [sum(v) / len(v) for _, v in sorted(by_x.items())]
    if len(ys) >= 2 and max(ys) - min(ys) > 1e-12 * max(1.0, abs(max(ys))):
        return sorted(by_x), ys
    return None


def frontier_reference_lines(rows: list[Row], fr: FrontierConfig, refs: Mapping[str, DataFreeMetric]) -> list[dict[str, Any]]:
    """The metric-level data-free references of one frontier, as lines to draw: ``{"axis": "x"}``
    (a vertical line at ``value``) for a reference of the x metric, ``{"axis": "y"}`` for one of the
    y metric, either a horizontal line at ``value`` or (x a cell option, companion varying with it)
    a curve ``xs``/``ys``; each with ``metric``, ``label`` and ``source`` (companion or constant)."""
    cells = [r for r in rows if r["family"] == fr.family and (not fr.sweeps or r["sweep"] in fr.sweeps)
             and mean_of(r, fr.y) is not None]
    lines: list[dict[str, Any]] = []
    for axis, metric in (("x", fr.x), ("y", fr.y)):
        ref = refs.get(metric)
        shown = [r for r in cells if axis == "y" or mean_of(r, metric) is not None]
        value = None if ref is None else reference_value(shown, ref)
        if value is None:
            continue
        line = {"axis": axis, "metric": metric, "label": ref.label, "source": ref.value, "value": value}
        if axis == "y" and isinstance(ref.value, str) and fr.x.startswith("param:"):
            curve = _curve_against_option(shown, fr.x, ref.value)
            if curve is not None:
                line.update(xs=curve[0], ys=curve[1])
        lines.append(line)
    return lines


def with_companions(metrics: list[str], present: set[str], refs: Mapping[str, DataFreeMetric]) -> list[str]:
    """``metrics`` with each one's companion reference metric (when the cells report it) right after
    it, unless already listed."""
    out: list[str] = []
    for m in metrics:
        if m not in out:
            out.append(m)
        ref = refs.get(m)
        if ref is not None and isinstance(ref.value, str) and ref.value in present and ref.value not in metrics:
            if ref.value not in out:
                out.append(ref.value)
    return out


def reference_notes(rows: list[dict[str, Any]], metrics: Iterable[str], refs: Mapping[str, DataFreeMetric]) -> str:
    """One paragraph naming the data-free reference of each shown metric: the companion column
    (per cell) or the constant, and the mean over ``rows`` of every data-free attacker reported as
    ``<metric>_trivial_<guess>``; ``""`` when there is none."""
    metrics = list(metrics)
    by: dict[tuple[str, str], list[str]] = {}
    for m in metrics:
        ref = refs.get(m)
        if ref is None:
            continue
        what = f"column `{ref.value}` (per cell)" if isinstance(ref.value, str) else fmt_number(float(ref.value))
        by.setdefault((ref.label, what), []).append(f"`{m}`")
    parts = [f"{', '.join(ms)}: {label}, {what}" for (label, what), ms in by.items()]
    for m in metrics:
        trivial = sorted({t for r in rows for t in r["summary"] if t.startswith(f"{m}_trivial_")})
        guesses = [f"{t.rsplit('_trivial_', 1)[1]} {fmt_number(v)}" for t in trivial
                   if (v := reference_value(rows, DataFreeMetric(t, ""))) is not None]
        if guesses:
            parts.append(f"data-free attackers on `{m}` (mean over the cells): {', '.join(guesses)}")
    return ("Data-free references — " + "; ".join(parts) + ".") if parts else ""


def utility_outcomes(cfg: Config, family: str, sweep: str, metric: str, rows: list[dict[str, Any]],
                     better: str) -> dict[str, str]:
    """Cell of ``sweep`` → whether its ``metric`` ``beats``, ``loses`` to or is ``indistinguishable``
    from the best data-free reference of the sweep (:func:`tasks.report.data_free.beats_data_free`): the
    family's data-free cells and those ``report.data_free`` selects for the sweep, and the metric's
    metric-level reference (:func:`metric_references`: a companion metric or a constant), with the
    entries' ``exclude`` and ``match``. Cells with no reference to compare are absent."""
    from tasks.report.data_free import beats_data_free

    entries = [e for e in cfg.report.data_free if e.sweep == sweep]
    references = [*family_declarations(family)[0], *(sel for e in entries for sel in e.references)]
    ref = metric_references(cfg, family, [sweep]).get(metric)
    companions = {} if ref is None else {metric: ref.value}
    exclude = [sel for e in entries for sel in e.exclude]
    match = list(dict.fromkeys(k for e in entries for k in e.match))
    judged = beats_data_free(rows, sweep, references, {metric: better}, exclude, companions, match)
    return {j["cell"]: j["outcome"] for j in judged}
