"""The report a person reads, built from this repository's evaluated cells (``reports/sweeps``):
summary first, narrow tables, bounded intervals, flags as counts, figures with legends outside,
and ``index.html`` rendering with every figure in headless Chromium."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tasks.report.numbers import error_bars, fmt_stats, interval, metric_kind, metric_range

REPO = Path(__file__).resolve().parents[1]
FAMILIES = ("anchornoise", "dc", "gca", "scoreshield")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, migrated_mlflow_db: Path) -> dict:
    """The report of the committed sweeps, built in a copy; also every figure's layout."""
    if not (REPO / "reports" / "sweeps").is_dir():
        pytest.skip("no evaluated sweeps committed in reports/sweeps")
    root = tmp_path_factory.mktemp("report")
    shutil.copy(REPO / "params.yaml", root / "params.yaml")
    shutil.copytree(REPO / "reports" / "sweeps", root / "reports" / "sweeps")
    for ledger in (REPO / "data" / "release").glob("*/ledger.json"):
        (root / "data" / "release" / ledger.parent.name).mkdir(parents=True)
        shutil.copy(ledger, root / "data" / "release" / ledger.parent.name / "ledger.json")
    shutil.copy(migrated_mlflow_db, root / "mlflow.db")
    import tasks.report as report_mod
    import tasks.report.crossfamily as crossfamily_mod
    import tasks.report.family_page as family_mod
    import tasks.report.layout as layout_mod

    layouts: dict[str, dict] = {}
    real = layout_mod.save_figure

    def spy(fig, path):  # noqa: ANN001 - matplotlib figure
        layouts[Path(path).name] = out = real(fig, path)
        return out

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VEILBENCH_ROOT", str(root))
        for mod in (family_mod, crossfamily_mod):  # where the report's figures are saved
            mp.setattr(mod, "save_figure", spy)
        report_mod.report(root=root)
    return {"root": root, "layouts": layouts}


def _tables(text: str) -> list[list[list[str]]]:
    """Every markdown table of ``text`` as rows of cells (header first, separator dropped)."""
    tables, current = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            if not re.fullmatch(r"\|(\s*-+\s*\|)+", line.replace("---", "-")):
                current.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif current:
            tables.append(current)
            current = []
    return tables


@pytest.mark.slow  # builds the report of every committed sweep
def test_the_first_60_lines_answer_every_family_with_narrow_tables(built: dict) -> None:
    text = (built["root"] / "reports" / "index.md").read_text()
    head = "\n".join(text.splitlines()[:60])
    for family in FAMILIES:
        section = head.split(f"## {family}\n", 1)
        assert len(section) == 2, f"{family} is not summarised in the first 60 lines"
        body = section[1].split("\n## ", 1)[0]
        assert "best mechanism" in body and "utility" in body and "attacker" in body, family
        assert re.search(r"\| \S.* \| .*\[\d", body), f"{family}: a table row with a bounded interval"
        assert f"[{family}.md]({family}.md)" in body
    for table in _tables(text):
        assert len(table[0]) <= 8, f"index.md table wider than 8 columns: {table[0]}"


def _metric_of(header: str) -> str | None:
    m = re.search(r"`([\w\-]+)`", header)
    name = m.group(1) if m else header
    return name if re.fullmatch(r"[a-z][\w\-]*", name) and "_" in name else None


NUM = r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?"


@pytest.mark.slow
def test_no_interval_leaves_a_bounded_metric_range_and_flags_are_counts(built: dict) -> None:
    reports = built["root"] / "reports"
    pages = [reports / "index.md", *(reports / f"{f}.md" for f in FAMILIES)]
    checked = {"bounded": 0, "flag": 0}
    for page in pages:
        for table in _tables(page.read_text()):
            for j, header in enumerate(table[0]):
                name = _metric_of(header)
                if name is None:
                    continue
                rng = metric_range(name)
                for row in table[1:]:
                    cell = row[j] if j < len(row) else ""
                    if not cell or cell == "n/a":
                        continue
                    if metric_kind(name) == "flag":
                        assert re.fullmatch(r"\d+ of \d+", cell), f"{page.name} {name}: flag shown as {cell!r}"
                        k, n = map(int, cell.split(" of "))
                        assert 0 <= k <= n
                        checked["flag"] += 1
                    elif rng is not None:
                        assert "±" not in cell, f"{page.name} {name}: symmetric interval {cell!r} for a bounded metric"
                        values = [float(v) for v in re.findall(NUM, cell)]
                        assert all(rng[0] <= v <= rng[1] for v in values), f"{page.name} {name}: {cell!r} outside {rng}"
                        checked["bounded"] += 1
    assert checked["bounded"] > 50 and checked["flag"] > 5, checked


def test_interval_formatting_clips_counts_and_follows_the_interval() -> None:
    assert fmt_stats("gpm_converged", {"mean": 2 / 3, "ci95": 1.43, "n": 3}) == "2 of 3"
    assert interval("utility_accuracy", {"mean": 0.99, "ci95": 0.05}) == (0.99, 0.94, 1.0)
    assert interval("privacy_delta_cos", {"mean": 0.99, "ci95": 0.05}) == (0.99, 0.94, 1.04), "unbounded: no clip"
    assert fmt_stats("utility_accuracy", {"mean": 0.9714, "ci95": 0.0025, "n": 3}) == "0.971 [0.969, 0.974]"
    assert fmt_stats("utility_accuracy", {"mean": 0.98, "ci95": 0.3, "n": 3}) == "1.0 [0.7, 1.0]"
    # an advantage is at most 1 (a perfect attacker) and unbounded below (worse than its control)
    assert fmt_stats("xfam_linkage_advantage", {"mean": -0.9, "ci95": 0.3, "n": 3}) == "-0.9 [-1.2, -0.6]"
    assert fmt_stats("xfam_linkage_advantage", {"mean": 0.9, "ci95": 0.3, "n": 3}) == "0.9 [0.6, 1.0]"
    assert fmt_stats("gpm_iterations", {"mean": 73.0, "ci95": 59.0, "n": 3}) == "70 ± 60"
    assert fmt_stats("gpm_iterations", {"mean": 98.67, "ci95": 15.2, "n": 3}) == "99 ± 15"
    assert fmt_stats("utility_accuracy", {"mean": 0.5, "ci95": 0.0, "n": 1}) == "0.5"
    below, above = error_bars("utility_accuracy", [0.99, 0.5], [0.05, 0.1])
    assert below == pytest.approx([0.05, 0.1]) and above == pytest.approx([0.01, 0.1]), "figure bars clipped too"


@pytest.mark.slow
def test_every_figure_has_its_legend_outside_the_axes_and_no_overlapping_labels(built: dict) -> None:
    layouts = built["layouts"]
    figures = {p.name for p in (built["root"] / "reports" / "figures").glob("*.png")}
    assert figures and figures <= set(layouts), "every figure is drawn through save_figure"
    assert {f"{f}-pareto.png" for f in FAMILIES} | {"crossfamily.png"} <= figures
    for name, lay in layouts.items():
        for i, legend in lay["legends"]:
            axes = lay["axes"][i]
            assert legend.x0 >= axes.x1 - 1 or legend.y1 <= axes.y0 + 1 or legend.y0 >= axes.y1 - 1, \
                f"{name}: legend inside the axes"
        labels = lay["labels"]
        for a in range(len(labels)):
            for b in range(a + 1, len(labels)):
                assert not labels[a].overlaps(labels[b]), f"{name}: two text labels overlap"


@pytest.mark.slow
def test_index_html_is_self_contained_and_every_figure_loads_in_chromium(built: dict, tmp_path: Path) -> None:
    from tests.test_report_html import PROBE, _render

    reports = built["root"] / "reports"
    page = (reports / "index.html").read_text()
    assert not re.search(r'\bsrc="(?!data:)', page), "every src is a data URI"
    assert "http" not in " ".join(re.findall(r'\bsrc="[^"]{0,40}', page))
    images = sum(len(re.findall(r"!\[", (reports / f).read_text())) for f in ("index.md", *(f"{x}.md" for x in FAMILIES)))
    out = tmp_path / "index.html"
    out.write_text(page.replace("</body>", PROBE + "</body>"))
    probe = _render(out, tmp_path)
    assert len(probe["widths"]) == images and all(w > 0 for w in probe["widths"]), probe["widths"]
    assert {"anchornoise", "glossary", "scoreshield-details", "cross-family-view"} <= set(probe["ids"])
