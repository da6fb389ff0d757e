"""A family's detail page ``reports/<family>.md`` and the files it links: the summary, the Pareto
figure, one table per sweep with the reader's columns, the configured frontier figures with their
plotted points, the cells that do not beat a data-free reference, a glossary; and the full table of
the family's cells (``tables/<family>.md`` and ``.csv``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tasks.report.data_free import data_free_section
from tasks.report.draw import draw_frontier, draw_pareto
from tasks.report.frontier import frontier_figure, frontier_points, frontier_summary
from tasks.report.glossary import glossary
from tasks.report.layout import save_figure
from tasks.report.pareto import pareto_figure
from tasks.report.references import frontier_reference_lines, metric_references, reference_notes, with_companions
from tasks.report.rows import Row
from tasks.report.summary import summary_section
from tasks.report.tables import family_table, markdown_table, write_csv
from veilbench.config import Config
from veilbench.io import atomic_write_text, write_json


def sweep_tables(cfg: Config, family: str, fam_rows: list[Row]) -> tuple[list[str], set[str]]:
    """Markdown of one table per sweep of a family (the options that vary inside the sweep and the
    reader's metrics: ``report.columns[family]``, default all) and the metric names shown. Each
    table shows the sweep's data-free references: data-free cells are marked ``(data-free)``, each
    shown metric's companion reference metric is a column beside it, and a line under the table
    names every metric's reference (:mod:`tasks.report.references`)."""
    lines: list[str] = []
    shown: set[str] = set()
    for sweep in dict.fromkeys(r["sweep"] for r in fam_rows):
        srows = [r for r in fam_rows if r["sweep"] == sweep]
        refs = metric_references(cfg, family, [sweep])
        present = {m for r in srows for m in r["summary"]}
        only = cfg.report.columns.get(family)
        header, md, _ = family_table(srows, with_companions(only, present, refs) if only else None)
        keep = [i for i, h in enumerate(header) if h not in ("sweep", "dataset")]
        metrics = [h for h in header if h in present]
        note = reference_notes(srows, metrics, refs)
        lines += [f"### {sweep}", "", f"Data set `{srows[0]['dataset']}`, {len(srows)} cell(s).", "",
                  markdown_table([header[i] for i in keep], [[row[i] for i in keep] for row in md]),
                  *([note, ""] if note else [])]
        shown |= set(metrics)
    return lines, shown


def frontier_section(cfg: Config, family: str, rows: list[Row], reports: Path) -> list[str]:
    """Each configured frontier of ``family``: its points (``plots/<name>.json``), its figure
    (``figures/<name>.png``) and what is said under it."""
    lines: list[str] = []
    for fr in (f for f in cfg.report.frontiers if f.family == family):
        pts = frontier_points(rows, fr)
        write_json(reports / "plots" / f"{fr.name}.json", pts)
        ref_lines = frontier_reference_lines(rows, fr, metric_references(cfg, family, fr.sweeps))
        save_figure(draw_frontier(frontier_figure(pts, fr, ref_lines)), reports / "figures" / f"{fr.name}.png")
        lines += [f"## {fr.name}", "", f"![{fr.name}](figures/{fr.name}.png)", "", *frontier_summary(pts, fr)]
    return lines


def family_page(cfg: Config, family: str, rows: list[Row], claim_records: list[dict[str, Any]],
                reports: Path) -> list[str]:
    """The detail page ``reports/<family>.md`` up to its glossary (module docstring), writing its figures."""
    fam_rows = [r for r in rows if r["family"] == family]
    lines = [f"# {family}: details", "", f"[Back to the summary](index.md). All metrics of every cell: "
             f"`tables/{family}.md`, `tables/{family}.csv`.", ""]
    if not fam_rows:
        return [*lines, "No evaluated sweep of this family in `params.yaml`.", ""]
    lines += summary_section(cfg, family, rows, claim_records, level=2)
    pareto = pareto_figure(cfg, family, rows)
    if pareto is not None:
        save_figure(draw_pareto(pareto), reports / "figures" / f"{family}-pareto.png")
        lines += [f"![{family}: utility vs attacker](figures/{family}-pareto.png)", ""]
    tables, shown = sweep_tables(cfg, family, fam_rows)
    return [*lines, "## Cells", "", *tables, *frontier_section(cfg, family, rows, reports), *glossary(sorted(shown))]


def write_family_files(cfg: Config, family: str, rows: list[Row], claim_records: list[dict[str, Any]], reports: Path,
                       sweep_family: Mapping[str, str]) -> None:
    """Write ``<family>.md`` (:func:`family_page` and the cells that do not beat a data-free
    reference, :func:`tasks.report.data_free.data_free_section`) and, when the family has evaluated
    cells, ``tables/<family>.md`` and ``.csv``."""
    fam_rows = [r for r in rows if r["family"] == family]
    if fam_rows:
        header, md, csv = family_table(fam_rows)
        atomic_write_text(reports / "tables" / f"{family}.md", markdown_table(header, md))
        write_csv(csv, reports / "tables" / f"{family}.csv")
    page = family_page(cfg, family, rows, claim_records, reports)
    page += ["", *data_free_section(family, rows, cfg.report.data_free, sweep_family)]
    atomic_write_text(reports / f"{family}.md", "\n".join(page) + "\n")
