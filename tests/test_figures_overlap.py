"""The report's figures hide nothing: no series' markers lie unseen under another's, no text box
overlaps another, curves against a metric are joined in their option's order and labelled,
identical reference lines are drawn once, titles are readable names."""

from __future__ import annotations

import re
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from tasks.report.layout import dodge, hidden_markers, overlapping_texts  # noqa: E402
from tasks.report.style import short_cell  # noqa: E402
from tests.conftest import REPO  # noqa: E402


@pytest.fixture(scope="module")
def committed() -> tuple:
    """The default params and the committed records of every sweep (reports/sweeps/)."""
    from tasks.common import load_params
    from tasks.report.rows import load_cell_metrics

    cfg = load_params(REPO / "params.yaml", REPO)
    return cfg, load_cell_metrics(cfg, REPO)


def _frontier_figure(cfg, rows, fr):
    from tasks.report.draw import draw_frontier
    from tasks.report.frontier import frontier_figure, frontier_points
    from tasks.report.references import frontier_reference_lines, metric_references

    return draw_frontier(frontier_figure(frontier_points(rows, fr), fr,
                                         frontier_reference_lines(rows, fr, metric_references(cfg, fr.family, fr.sweeps))))


def test_no_report_figure_hides_a_series_or_overlaps_text(committed) -> None:
    from tasks.report.crossfamily import crossfamily_figure, crossfamily_points
    from tasks.report.draw import draw_crossfamily, draw_pareto
    from tasks.report.pareto import pareto_figure

    cfg, rows = committed
    problems = {}

    def check(fig, name):
        problems[name] = (hidden_markers(fig), overlapping_texts(fig))
        plt.close(fig)

    for fr in cfg.report.frontiers:
        fig = _frontier_figure(cfg, rows, fr)
        assert fig.axes[0].get_title() != fr.name, "a readable title, not the configuration id"
        check(fig, fr.name)
    for family in ("scoreshield", "gca", "dc", "anchornoise"):
        pareto = pareto_figure(cfg, family, rows)
        assert pareto is not None, f"{family}: the committed records have a headline comparison"
        check(draw_pareto(pareto), f"{family}-pareto.png")
    sweeps = set(cfg.report.crossfamily_sweeps)
    check(draw_crossfamily(crossfamily_figure(crossfamily_points([r for r in rows if r["sweep"] in sweeps]))),
          "crossfamily.png")
    assert len(problems) == len(cfg.report.frontiers) + 5
    bad = {name: p for name, p in problems.items() if p[0] or p[1]}
    assert not bad, bad


def test_the_checks_see_a_hidden_series_and_overlapping_labels() -> None:
    fig, ax = plt.subplots(dpi=120)
    ax.errorbar([1, 2, 3], [1, 2, 3], yerr=[0.1] * 3, marker="o", label="a")
    ax.errorbar([1, 2, 3], [1, 2, 3], yerr=[0.1] * 3, marker="s", label="b")  # exactly on top of a
    assert len(hidden_markers(fig)) == 3
    ax.annotate("one label", (2, 2))
    ax.annotate("one label", (2, 2))
    assert any(a.startswith("label:") and b.startswith("label:") for a, b in overlapping_texts(fig))
    plt.close(fig)
    fig, ax = plt.subplots(dpi=120)
    ax.plot([1, 2], [1, 2], "o", markersize=8, label="a")
    ax.plot([1, 2], [1, 2], "s", markersize=8, markerfacecolor="none", label="b")
    assert hidden_markers(fig) == [], "an open marker on top leaves the one below in sight"
    plt.close(fig)


def test_dodge_sets_coinciding_curves_side_by_side_and_leaves_the_first_in_place() -> None:
    fig, ax = plt.subplots(dpi=120)
    series = []
    for m in ("o", "s", "^"):
        bars = ax.errorbar([1, 2, 3], [1, 2, 3], yerr=[0.1] * 3, marker=m)
        series.append([bars.lines[0], *bars.lines[1], *bars.lines[2]])
    ax.errorbar([10], [10], marker="D")  # far away: stays
    fig.canvas.draw()
    before = ax.transData.transform([(1, 1)])[0]
    shifts = dodge(ax, series)
    assert shifts[0] == 0 and shifts[1] != 0 and shifts[2] != 0 and shifts[1] != shifts[2]
    assert hidden_markers(fig) == []
    drawn = series[1][0].get_transform().transform([(1, 1)])[0]
    assert drawn[0] == pytest.approx(before[0] + shifts[1]) and drawn[1] == pytest.approx(before[1])
    assert list(series[1][0].get_xdata()) == [1, 2, 3], "the data are unchanged"
    plt.close(fig)


def test_a_curve_against_a_metric_is_joined_in_its_options_order_and_labelled(committed) -> None:
    cfg, rows = committed
    fr = next(f for f in cfg.report.frontiers if f.name == "dc-privacy-utility")
    from tasks.report.frontier import frontier_points

    points = {(p["group"], p["cell"]): p for p in frontier_points(rows, fr)}
    fig = _frontier_figure(cfg, rows, fr)
    ax = fig.axes[0]
    line = next(line for line in ax.lines if line.get_marker() == "o")  # kpca's: the first curve
    wanted = [points[("kpca", f"d_tilde={d}_obfuscation=kpca")]["x"] for d in (4, 16, 32)]
    assert list(line.get_xdata()) == pytest.approx(wanted), "joined in d̃ order, not in x order"
    labels = {t.get_text() for t in ax.texts}
    assert {"d̃=4", "d̃=16", "d̃=32"} <= labels, labels
    plt.close(fig)


def test_identical_reference_lines_are_drawn_once(committed) -> None:
    cfg, rows = committed
    fr = next(f for f in cfg.report.frontiers if f.name == "dc-privacy-utility")
    fig = _frontier_figure(cfg, rows, fr)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    random = [t for t in legend if t.startswith("random")]  # the four data-free cells, at chance accuracy
    cells = [int(m.group(1)) if (m := re.search(r"(\d+) cells", t)) else 1 for t in random]
    assert sum(cells) == 4 and len(random) < 4, legend
    plt.close(fig)


def test_short_cell_names_for_point_labels() -> None:
    assert short_cell("d_tilde=16_obfuscation=orthogonal") == "orthogonal d̃=16"
    assert short_cell("mechanism=aa_data_noise_sigma=1.0") == "aa_data_noise σ=1.0"
    assert short_cell("method=nki_n_parties=2_obfuscation=random") == "nki random K=2"
    assert short_cell("default") == "default"
