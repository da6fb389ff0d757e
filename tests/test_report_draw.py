"""The drawing functions draw what they are given and nothing else (:mod:`tasks.report.draw`): each
figure type from hand-built figure data, with no rows, config or family behind it."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from tasks.report.draw import draw_crossfamily, draw_frontier, draw_pareto  # noqa: E402
from tasks.report.figure_data import (  # noqa: E402
    Axes,
    CrossFamilyFigure,
    FamilySeries,
    FrontierFigure,
    Line,
    Panel,
    ParetoFigure,
    Series,
)
from tasks.report.style import METRIC_REFERENCE_GREYS, PALETTE  # noqa: E402


def _legend(ax) -> list[str]:  # noqa: ANN001 - matplotlib axes
    return ax.get_legend_handles_labels()[1]


def test_draw_frontier_draws_the_given_curves_references_mark_and_paper_value() -> None:
    fig_data = FrontierFigure(
        Axes("ε", "accuracy", "A title", log_x=True),
        curves=[Series("a", [1.0, 10.0], [0.5, 0.7], yerr=[[0.01, 0.01], [0.02, 0.02]]),
                Series("b", [1.0, 10.0], [0.4, 0.6])],
        reference_curves=[Line("free (data-free)", xs=[1.0, 10.0], ys=[0.1, 0.12])],
        flat_references=[Line("clean (reference)", "y", 0.9)],
        metric_references=[Line("control (x = 3)", "x", 3.0)],
        labels=[(1.0, 0.5, "p1")], mark=Line("x = 5", "x", 5.0), paper=(5.0, 0.65, "paper: 0.65"))
    fig = draw_frontier(fig_data)
    ax = fig.axes[0]
    assert [c.get_label() for c in ax.containers] == ["a", "b"]
    assert [c.lines[0].get_color() for c in ax.containers] == list(PALETTE[:2])
    assert {"a", "b", "free (data-free)", "clean (reference)", "control (x = 3)", "x = 5", "paper: 0.65"} <= set(_legend(ax))
    dashed = {ln.get_label(): ln for ln in ax.get_lines() if ln.get_linestyle() == "--"}
    assert list(dashed["free (data-free)"].get_ydata()) == [0.1, 0.12]
    assert dashed["free (data-free)"].get_color() == PALETTE[2], "references take the colours after the curves"
    assert dashed["clean (reference)"].get_color() == PALETTE[3]
    assert dashed["control (x = 3)"].get_color() == METRIC_REFERENCE_GREYS["x"]
    assert list(dashed["control (x = 3)"].get_xdata()) == [3.0, 3.0], "an x reference is vertical"
    assert ax.get_xscale() == "log" and ax.get_yscale() == "linear" and ax.get_title() == "A title"
    assert [t.get_text() for t in ax.texts] == ["paper", "p1"]
    plt.close(fig)


def test_draw_pareto_draws_other_cells_the_front_and_its_references() -> None:
    fig_data = ParetoFigure(
        Axes("attacker", "utility", "P"), ([0.2, 0.3], [0.5, 0.4]),
        Series("Pareto frontier", [0.1, 0.4], [0.6, 0.8], yerr=[[0.0, 0.0], [0.0, 0.0]]),
        cell_references=[Line("clean (reference)", "y", 0.9)],
        metric_references=[Line("control (x = 0.05)", "x", 0.05)],
        attacker_references=[Line("data-free attacker (zeros)", "x", 0.02)],
        labels=[(0.1, 0.6, "a"), (0.4, 0.8, "b")])
    fig = draw_pareto(fig_data)
    ax = fig.axes[0]
    assert {"other cells", "Pareto frontier"} <= set(_legend(ax))
    assert [c.get_label() for c in ax.containers] == ["Pareto frontier"]
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert lines["clean (reference)"].get_color() == PALETTE[1]
    assert lines["data-free attacker (zeros)"].get_color() == PALETTE[2], "attackers follow the cell references"
    assert list(lines["data-free attacker (zeros)"].get_xdata()) == [0.02, 0.02]
    assert sorted(t.get_text() for t in ax.texts) == ["a", "b"]
    plt.close(fig)


def test_draw_crossfamily_draws_one_panel_per_data_set() -> None:
    def panel(name: str, empty: bool = False) -> Panel:
        series = [] if empty else [FamilySeries(1, Series("dc", [0.2], [0.7], xerr=[[0.0], [0.0]], yerr=[[0.0], [0.0]]))]
        return Panel(Axes("linkage", "utility", name), series, None if empty else Line("chance", "x", 0.1),
                     (-0.05, 1.05), [] if empty else [(0.2, 0.7, "cell")], empty=empty)

    fig = draw_crossfamily(CrossFamilyFigure([panel("digits"), panel("faces", empty=True)]))
    first, second = fig.axes[:2]
    assert [ax.get_title() for ax in (first, second)] == ["digits", "faces"]
    assert first.containers[0].lines[0].get_color() == PALETTE[1], "a family keeps its colour index"
    assert first.get_xlim() == pytest.approx((-0.05, 1.05)) and first.get_ylim() == pytest.approx((0.0, 1.05))
    assert [t.get_text() for t in second.texts] == ["no cell emitted the cross-family arrays"]
    plt.close(fig)
