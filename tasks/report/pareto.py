"""What a family's Pareto figure (``reports/figures/<family>-pareto.png``) draws: every cell of the
headline sweep as utility vs attacker metric (:mod:`tasks.report.headline`), the best cell at each
privacy level joined and labelled (short names, :func:`tasks.report.style.short_cell`), the other
cells grey (each cell drawn once), the reference cells' utility, the metric-level data-free
references and the data-free attackers as dashed lines, and a readable title. Drawn by
:func:`tasks.report.draw.draw_pareto`.
"""

from __future__ import annotations

from tasks.report.families import title
from tasks.report.figure_data import Axes, Line, ParetoFigure, Series
from tasks.report import headline as hl
from tasks.report.numbers import error_bars
from tasks.report.rows import Row, has, mean
from tasks.report.style import short_cell
from veilbench.config import Config


def _axes(family: str, h: hl.Headline) -> Axes:
    a = h["attack"]
    return Axes(f"attacker: {a}" + (" (higher = more leakage)" if hl.leak_sign(a) > 0 else " (lower = more leakage)"),
                f"utility: {h['utility']}",
                f"{title(family)}: utility vs attacker, best per privacy level ({h['sweep']})")


def _front(h: hl.Headline, best: list[Row], mode: str) -> Series | None:
    u = h["utility"]
    if not best:
        return None
    ys = [mean(r, u) for r in best]
    return Series("best per ε" if mode == "epsilon" else "Pareto frontier", [mean(r, h["attack"]) for r in best], ys,
                  yerr=error_bars(u, ys, [r["summary"][u]["ci95"] for r in best]))


def pareto_figure(cfg: Config, family: str, rows: list[Row]) -> ParetoFigure | None:
    """What the family's Pareto figure draws (module docstring); None without a headline comparison."""
    h = hl.headline(cfg, family, rows)
    if h is None:
        return None
    u, a = h["utility"], h["attack"]
    groups = hl.reference_groups(cfg, family)
    mode, best = hl.best_per_level(h, groups)
    front = [r for r in best if has(r, a)]
    on_front = {id(r) for r in front}
    others = [r for r in h["rows"] if has(r, u) and has(r, a) and not hl.is_reference(r, groups) and id(r) not in on_front]
    cells = [Line(f"{short_cell(r['cell'])} ({'data-free' if hl.is_data_free(r) else 'reference'})", "y", mean(r, u))
             for r in h["rows"] if hl.is_reference(r, groups) and has(r, u)]
    metrics = [Line(f"{label} ({axis} = {v:.3g})", axis, v) for axis, label, v in hl.metric_reference_values(cfg, family, h)]
    attackers = [Line(f"data-free attacker ({guess})", "x", float(stats["mean"])) for guess, stats in hl.trivial_attackers(h)]
    return ParetoFigure(_axes(family, h), ([mean(r, a) for r in others], [mean(r, u) for r in others]),
                        _front(h, front, mode), cells, metrics, attackers,
                        [(mean(r, a), mean(r, u), short_cell(r["cell"])) for r in front])
