"""Tick labels of the report's frontier figures do not overlap, also on a log x axis that spans
less than two decades (where matplotlib labels the minor ticks, e.g. 2×10⁰ 3×10⁰ 4×10⁰)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.common import load_params

REPO = Path(__file__).resolve().parents[1]


def _tick_label_boxes(fig) -> list:
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    ticks = [*ax.xaxis.get_majorticklabels(), *ax.xaxis.get_minorticklabels()]
    return [t.get_window_extent(renderer) for t in ticks if t.get_visible() and t.get_text()]


@pytest.mark.parametrize("xs", [[2.0, 7.5, 31.0], [0.5, 1.0, 2.0, 4.0, 8.0], [1e-2, 1.0, 1e2, 1e4], [3.0, 4.0]])
def test_log_x_tick_labels_do_not_overlap(xs: list[float]) -> None:
    import matplotlib.pyplot as plt

    from tasks.report.draw import draw_frontier
    from tasks.report.frontier import frontier_figure

    cfg = load_params(REPO / "params.yaml")
    fr = next(f for f in cfg.report.frontiers if f.name == "scoreshield-cf")
    points = [{"x": x, "y": 0.9 - 0.01 * i, "x_ci95": 0.0, "y_ci95": 0.05, "group": g, "dataset": "movielens",
               "cell": f"mechanism={g},epsilon={x}", "reference": False} for g in ("newton", "noisy")
              for i, x in enumerate(xs)]
    fig = draw_frontier(frontier_figure(points, fr))
    boxes = _tick_label_boxes(fig)
    plt.close(fig)
    assert len(boxes) >= 2, "the x axis is labelled"
    boxes.sort(key=lambda b: b.x0)
    for a, b in zip(boxes, boxes[1:]):
        assert a.x1 <= b.x0, f"x tick labels overlap: {a} and {b}"


def test_the_committed_cf_points_draw_without_overlapping_ticks() -> None:
    import matplotlib.pyplot as plt

    from tasks.report.draw import draw_frontier
    from tasks.report.frontier import frontier_figure

    path = REPO / "reports" / "plots" / "scoreshield-cf.json"
    if not path.is_file():
        pytest.skip("no committed scoreshield-cf points")
    cfg = load_params(REPO / "params.yaml")
    fr = next(f for f in cfg.report.frontiers if f.name == "scoreshield-cf")
    fig = draw_frontier(frontier_figure(json.loads(path.read_text()), fr))
    boxes = sorted(_tick_label_boxes(fig), key=lambda b: b.x0)
    plt.close(fig)
    assert all(a.x1 <= b.x0 for a, b in zip(boxes, boxes[1:]))
