"""Cross-family report section on a fixture of fake cell rows."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tasks.report.crossfamily import crossfamily_section
from veilbench.io import read_json


def _s(mean: float, ci: float = 0.0, n: int = 3) -> dict[str, float]:
    return {"mean": mean, "ci95": ci, "n": n}


def _row(family: str, sweep: str, cell: str, dataset: str, link: float, util: float, chance: float = 1 / 500,
         xfam: bool = True) -> dict:
    summary = {"accuracy": _s(0.9)}
    if xfam:
        summary |= {"xfam_linkage_rate": _s(link, 0.02), "xfam_linkage_chance": _s(chance),
                    "xfam_relative_error": _s(0.5, 0.01), "xfam_leaked_pairs": _s(50.0),
                    "xfam_utility_balanced_accuracy": _s(util, 0.03)}
    return {"sweep": sweep, "cell": cell, "family": family, "dataset": dataset, "method": "m", "params": {},
            "summary": summary}


ROWS = [
    _row("dc", "dc-main", "obfuscation=pca", "digits", 0.81, 0.88),
    _row("dc", "dc-main", "obfuscation=umap", "digits", 0.12, 0.91),
    _row("anchornoise", "an", "sigma=0.5", "digits", 0.03, 0.77),
    _row("gca", "gca", "method=gca", "digits", 0.4, 0.6, chance=1 / 300),
    _row("scoreshield", "ss-gram", "epsilon=4.0", "digits", 0.0, 0.5, xfam=False),
]


def test_section_writes_table_csv_figure_and_points(tmp_path: Path) -> None:
    lines = crossfamily_section(ROWS, tmp_path)
    text = "\n".join(lines)
    assert lines[0] == "## Cross-family view"
    assert "nearest record" in text and "balanced accuracy" in text
    assert "![Cross-family view](figures/crossfamily.png)" in text
    table = (tmp_path / "tables" / "crossfamily.md").read_text()
    for cell in ("obfuscation=pca", "obfuscation=umap", "sigma=0.5", "method=gca"):
        assert cell in table and cell in text
    assert "epsilon=4.0" not in table  # that cell emitted no xfam_* arrays
    assert "0.81 [0.79, 0.83]" in table and "0.002" in table, "bounded interval for a rate"
    assert "| # |" not in table and "| dataset |" not in table, "at most 8 columns, no point numbers"
    assert all(line.count("|") - 1 <= 8 for line in table.splitlines() if line.startswith("|"))
    csv = pd.read_csv(tmp_path / "tables" / "crossfamily.csv")
    assert len(csv) == 4
    assert sorted(csv["family"]) == ["anchornoise", "dc", "dc", "gca"]
    assert csv.set_index("cell").loc["method=gca", "chance"] == 1 / 300
    png = tmp_path / "figures" / "crossfamily.png"
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"
    points = read_json(tmp_path / "plots" / "crossfamily.json")
    assert {(p["cell"], p["x"], p["y"]) for p in points} == {
        ("obfuscation=pca", 0.81, 0.88), ("obfuscation=umap", 0.12, 0.91), ("sigma=0.5", 0.03, 0.77),
        ("method=gca", 0.4, 0.6)}


def test_several_datasets_get_one_table_each(tmp_path: Path) -> None:
    rows = [*ROWS, _row("dc", "dc-fashion", "obfuscation=pca", "fashion_mnist", 0.7, 0.8)]
    lines = crossfamily_section(rows, tmp_path)
    assert "### digits" in lines and "### fashion_mnist" in lines
    points = read_json(tmp_path / "plots" / "crossfamily.json")
    assert [p["point"] for p in points if p["dataset"] == "fashion_mnist"] == [1]
    assert (tmp_path / "figures" / "crossfamily.png").stat().st_size > 10_000


def test_no_rows_with_arrays_says_so(tmp_path: Path) -> None:
    lines = crossfamily_section([ROWS[-1]], tmp_path)
    assert any("No evaluated cell emitted the cross-family arrays" in line for line in lines)
    assert not any("figures/crossfamily.png" in line for line in lines)
    assert pd.read_csv(tmp_path / "tables" / "crossfamily.csv").empty
    assert read_json(tmp_path / "plots" / "crossfamily.json") == []


def _crowded_rows() -> list[dict]:
    """Many cells of several families packed into a small region: labels would collide if placed naively."""
    rows = []
    for i in range(12):
        for fam in ("dc", "anchornoise", "gca"):
            rows.append(_row(fam, f"{fam}-s", f"{fam}_cell_{i}_long_name", "digits", 0.30 + 0.01 * i, 0.60 + 0.012 * i))
    return rows


def test_crossfamily_labels_never_overlap_and_legend_is_outside(tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from tasks.report.crossfamily import crossfamily_figure, crossfamily_points
    from tasks.report.draw import draw_crossfamily
    from tasks.report.layout import save_figure

    boxes = save_figure(draw_crossfamily(crossfamily_figure(crossfamily_points(_crowded_rows()))), tmp_path / "x.png")
    labels = boxes["labels"]
    assert len(labels) >= 3, "each family's Pareto points get labels"
    for i, a in enumerate(labels):
        for b in labels[i + 1:]:
            assert not a.overlaps(b), "two point labels overlap"
    assert boxes["legends"], "the figure has a legend"
    for i, legend in boxes["legends"]:
        assert legend.x0 >= boxes["axes"][i].x1, "the legend lies right of the axes, outside the plotted points"


def test_advantage_replaces_linkage_on_the_x_axis_when_present(tmp_path: Path) -> None:
    rows = [_row("dc", "dc", "a", "digits", 0.5, 0.8), _row("gca", "gca", "b", "digits", 0.2, 0.7)]
    rows[0]["summary"]["xfam_linkage_advantage"] = _s(0.45, 0.05)
    rows[1]["summary"]["xfam_linkage_advantage"] = _s(-0.02, 0.3)
    from tasks.report.crossfamily import crossfamily_figure, crossfamily_points
    from tasks.report.draw import draw_crossfamily
    from tasks.report.layout import save_figure

    lines = crossfamily_section(rows, tmp_path)
    table = (tmp_path / "tables" / "crossfamily.md").read_text()
    assert "advantage over control" in table and "0.45 [0.40, 0.50]" in table
    assert "-0.0 [-0.3, 0.3]" in table or "-0.02 [-0.32, 0.28]" in table
    boxes = save_figure(draw_crossfamily(crossfamily_figure(crossfamily_points(rows))), tmp_path / "y.png")
    assert "advantage" in boxes["xlabels"][0]
    assert any("Pareto" in line for line in lines)
